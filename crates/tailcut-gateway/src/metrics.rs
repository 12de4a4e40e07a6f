//! A small Prometheus registry: labelled counters and fixed-bucket histograms, rendered
//! in the text exposition format at `/metrics`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

const BUCKETS: [f64; 16] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0];

type Key = (&'static str, String);

#[derive(Debug, Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

/// Counters and histograms by name and label set.
#[derive(Debug, Default)]
pub struct Metrics {
    counters: Mutex<BTreeMap<Key, f64>>,
    histograms: Mutex<BTreeMap<Key, Histogram>>,
}

fn labels(pairs: &[(&str, &str)]) -> String {
    pairs.iter().map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))).collect::<Vec<_>>().join(",")
}

impl Metrics {
    /// Adds to a counter.
    pub fn add(&self, name: &'static str, pairs: &[(&str, &str)], v: f64) {
        if let Ok(mut c) = self.counters.lock() {
            *c.entry((name, labels(pairs))).or_insert(0.0) += v;
        }
    }

    /// Adds one.
    pub fn inc(&self, name: &'static str, pairs: &[(&str, &str)]) {
        self.add(name, pairs, 1.0);
    }

    /// Records an observation in seconds.
    pub fn observe(&self, name: &'static str, pairs: &[(&str, &str)], seconds: f64) {
        if let Ok(mut h) = self.histograms.lock() {
            let e = h.entry((name, labels(pairs))).or_default();
            for (i, b) in BUCKETS.iter().enumerate() {
                if seconds <= *b {
                    e.counts[i] += 1;
                }
            }
            e.sum += seconds;
            e.count += 1;
        }
    }

    /// A counter's value (tests).
    pub fn get(&self, name: &'static str, pairs: &[(&str, &str)]) -> f64 {
        self.counters.lock().ok().and_then(|c| c.get(&(name, labels(pairs))).copied()).unwrap_or(0.0)
    }

    /// Prometheus text format.
    pub fn render(&self) -> String {
        let mut s = String::new();
        if let Ok(c) = self.counters.lock() {
            let mut last = "";
            for ((name, l), v) in c.iter() {
                if *name != last {
                    let _ = writeln!(s, "# TYPE {name} counter");
                    last = name;
                }
                let _ = writeln!(s, "{name}{{{l}}} {v}");
            }
        }
        if let Ok(h) = self.histograms.lock() {
            let mut last = "";
            for ((name, l), hist) in h.iter() {
                if *name != last {
                    let _ = writeln!(s, "# TYPE {name} histogram");
                    last = name;
                }
                let sep = if l.is_empty() { "" } else { "," };
                for (i, b) in BUCKETS.iter().enumerate() {
                    let _ = writeln!(s, "{name}_bucket{{{l}{sep}le=\"{b}\"}} {}", hist.counts[i]);
                }
                let _ = writeln!(s, "{name}_bucket{{{l}{sep}le=\"+Inf\"}} {}", hist.count);
                let _ = writeln!(s, "{name}_sum{{{l}}} {}", hist.sum);
                let _ = writeln!(s, "{name}_count{{{l}}} {}", hist.count);
            }
        }
        s
    }
}
