//! A small Prometheus registry: labelled counters and fixed-bucket histograms, rendered
//! in the text exposition format at `/metrics`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

const BUCKETS: [f64; 16] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0];

/// A series key: the metric name, a NUL, then the rendered label set. NUL sorts first,
/// so one metric's series stay together in the map's order.
type Key = String;

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

/// Writes a series key into `buf` (reused, so a known series costs no allocation).
fn write_key(buf: &mut String, name: &str, pairs: &[(&str, &str)]) {
    buf.clear();
    buf.push_str(name);
    buf.push('\0');
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            buf.push(',');
        }
        buf.push_str(k);
        buf.push_str("=\"");
        if v.bytes().any(|b| matches!(b, b'\\' | b'"' | b'\n')) {
            for c in v.chars() {
                match c {
                    '\\' => buf.push_str("\\\\"),
                    '"' => buf.push_str("\\\""),
                    '\n' => buf.push_str("\\n"),
                    c => buf.push(c),
                }
            }
        } else {
            buf.push_str(v);
        }
        buf.push('"');
    }
}

/// Runs `f` with the series key in a per-thread buffer.
fn with_key<R>(name: &str, pairs: &[(&str, &str)], f: impl FnOnce(&str) -> R) -> R {
    thread_local! {
        static BUF: std::cell::RefCell<String> = std::cell::RefCell::new(String::with_capacity(128));
    }
    BUF.with(|b| match b.try_borrow_mut() {
        Ok(mut buf) => {
            write_key(&mut buf, name, pairs);
            f(&buf)
        }
        Err(_) => {
            let mut own = String::new();
            write_key(&mut own, name, pairs);
            f(&own)
        }
    })
}

/// A series key's metric name and rendered labels.
fn split(key: &str) -> (&str, &str) {
    key.split_once('\0').unwrap_or((key, ""))
}

impl Metrics {
    /// Adds to a counter.
    pub fn add(&self, name: &'static str, pairs: &[(&str, &str)], v: f64) {
        with_key(name, pairs, |key| {
            if let Ok(mut c) = self.counters.lock() {
                match c.get_mut(key) {
                    Some(x) => *x += v,
                    None => {
                        c.insert(key.to_string(), v);
                    }
                }
            }
        });
    }

    /// Adds one.
    pub fn inc(&self, name: &'static str, pairs: &[(&str, &str)]) {
        self.add(name, pairs, 1.0);
    }

    /// Records an observation in seconds.
    pub fn observe(&self, name: &'static str, pairs: &[(&str, &str)], seconds: f64) {
        with_key(name, pairs, |key| {
            if let Ok(mut h) = self.histograms.lock() {
                if !h.contains_key(key) {
                    h.insert(key.to_string(), Histogram::default());
                }
                if let Some(e) = h.get_mut(key) {
                    for (i, b) in BUCKETS.iter().enumerate() {
                        if seconds <= *b {
                            e.counts[i] += 1;
                        }
                    }
                    e.sum += seconds;
                    e.count += 1;
                }
            }
        });
    }

    /// A counter's value (tests).
    pub fn get(&self, name: &'static str, pairs: &[(&str, &str)]) -> f64 {
        with_key(name, pairs, |key| self.counters.lock().ok().and_then(|c| c.get(key).copied())).unwrap_or(0.0)
    }

    /// Prometheus text format.
    pub fn render(&self) -> String {
        let mut s = String::new();
        if let Ok(c) = self.counters.lock() {
            let mut last = "";
            for (key, v) in c.iter() {
                let (name, l) = split(key);
                if name != last {
                    let _ = writeln!(s, "# TYPE {name} counter");
                    last = name;
                }
                let _ = writeln!(s, "{name}{{{l}}} {v}");
            }
        }
        if let Ok(h) = self.histograms.lock() {
            let mut last = "";
            for (key, hist) in h.iter() {
                let (name, l) = split(key);
                if name != last {
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
