//! A small Prometheus registry: labelled counters and fixed-bucket histograms, rendered
//! in the text exposition format at `/metrics`. Each thread records into its own shard,
//! so serving threads never contend for a lock or pass a cache line back and forth on
//! the request path; a scrape sums the shards.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

const BUCKETS: [f64; 16] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0];

/// A series key: the metric name, a NUL, then the rendered label set. NUL sorts first,
/// so one metric's series stay together in the map's order.
type Key = String;

#[derive(Debug, Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

/// Counters and histograms by name and label set.
#[derive(Debug)]
pub struct Metrics {
    /// Tells this registry's shards apart in the threads' shard lists.
    id: u64,
    /// Every thread's shard, for scrapes (a thread's counts outlive the thread).
    shards: Mutex<Vec<Arc<Shard>>>,
}

impl Default for Metrics {
    fn default() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Metrics { id: NEXT.fetch_add(1, Ordering::Relaxed), shards: Mutex::new(Vec::new()) }
    }
}

/// One thread's series. Its locks are taken by that thread and, rarely, a scrape.
#[derive(Debug, Default)]
struct Shard {
    counters: Mutex<BTreeMap<Key, f64>>,
    histograms: Mutex<BTreeMap<Key, Histogram>>,
}

/// A thread's key buffer (reused, so a known series costs no allocation) and its shard
/// of each registry it has recorded into.
struct Local {
    key: String,
    shards: Vec<(u64, Arc<Shard>)>,
}

thread_local! {
    static LOCAL: RefCell<Local> = RefCell::new(Local { key: String::with_capacity(128), shards: Vec::new() });
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

/// A series key's metric name and rendered labels.
fn split(key: &str) -> (&str, &str) {
    key.split_once('\0').unwrap_or((key, ""))
}

impl Metrics {
    /// Runs `f` on this thread's shard with the series key.
    fn record(&self, name: &str, pairs: &[(&str, &str)], f: impl FnOnce(&Shard, &str)) {
        LOCAL.with(|local| {
            let Ok(mut local) = local.try_borrow_mut() else {
                // Re-entered from inside `f` (never done): a shard of its own, still counted.
                let mut key = String::new();
                write_key(&mut key, name, pairs);
                return f(&self.new_shard(), &key);
            };
            let Local { key, shards } = &mut *local;
            write_key(key, name, pairs);
            let at = match shards.iter().position(|(id, _)| *id == self.id) {
                Some(i) => i,
                None => {
                    shards.push((self.id, self.new_shard()));
                    shards.len() - 1
                }
            };
            f(&shards[at].1, key);
        });
    }

    fn new_shard(&self) -> Arc<Shard> {
        let shard = Arc::new(Shard::default());
        if let Ok(mut all) = self.shards.lock() {
            all.push(shard.clone());
        }
        shard
    }

    /// Adds to a counter.
    pub fn add(&self, name: &'static str, pairs: &[(&str, &str)], v: f64) {
        self.record(name, pairs, |shard, key| {
            if let Ok(mut c) = shard.counters.lock() {
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
        self.record(name, pairs, |shard, key| {
            if let Ok(mut h) = shard.histograms.lock() {
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

    /// A counter's value, summed over threads (tests).
    pub fn get(&self, name: &'static str, pairs: &[(&str, &str)]) -> f64 {
        let mut key = String::new();
        write_key(&mut key, name, pairs);
        self.merged().0.get(&key).copied().unwrap_or(0.0)
    }

    /// Every thread's series, summed.
    fn merged(&self) -> (BTreeMap<Key, f64>, BTreeMap<Key, Histogram>) {
        let shards: Vec<Arc<Shard>> = self.shards.lock().map(|s| s.clone()).unwrap_or_default();
        let (mut counters, mut histograms) = (BTreeMap::<Key, f64>::new(), BTreeMap::<Key, Histogram>::new());
        for shard in shards {
            if let Ok(c) = shard.counters.lock() {
                for (k, v) in c.iter() {
                    *counters.entry(k.clone()).or_default() += v;
                }
            }
            if let Ok(h) = shard.histograms.lock() {
                for (k, v) in h.iter() {
                    let sum = histograms.entry(k.clone()).or_default();
                    for (total, n) in sum.counts.iter_mut().zip(v.counts) {
                        *total += n;
                    }
                    sum.sum += v.sum;
                    sum.count += v.count;
                }
            }
        }
        (counters, histograms)
    }

    /// Prometheus text format.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let (c, h) = self.merged();
        {
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
        {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_recorded_on_many_threads_are_summed_in_a_scrape() {
        let m = Arc::new(Metrics::default());
        let other = Metrics::default();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for _ in 0..250 {
                        m.inc("t_requests_total", &[("route", "a\"b")]);
                        m.observe("t_seconds", &[("route", "a")], 0.003);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        other.inc("t_requests_total", &[("route", "a\"b")]);
        assert_eq!(m.get("t_requests_total", &[("route", "a\"b")]), 1000.0);
        assert_eq!(other.get("t_requests_total", &[("route", "a\"b")]), 1.0, "registries do not share shards");
        let text = m.render();
        assert!(text.contains("t_requests_total{route=\"a\\\"b\"} 1000\n"), "{text}");
        assert!(text.contains("t_seconds_bucket{route=\"a\",le=\"0.0025\"} 0\n"), "{text}");
        assert!(text.contains("t_seconds_bucket{route=\"a\",le=\"0.005\"} 1000\n"), "{text}");
        assert!(text.contains("t_seconds_count{route=\"a\"} 1000\n"), "{text}");
        assert_eq!(text.matches("# TYPE t_requests_total counter").count(), 1);
    }
}
