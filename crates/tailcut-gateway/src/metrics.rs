//! A small Prometheus registry: labelled counters and fixed-bucket histograms, rendered
//! in the text exposition format at `/metrics`. Each thread records into its own shard,
//! so serving threads never contend for a lock or pass a cache line back and forth on
//! the request path; a scrape sums the shards. A series recorded on every request is
//! built once ([`Series`]) and gets a process-wide index, so recording it is an index into
//! the thread's shard, not a hash of its key.

use rustc_hash::FxHashMap;
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

impl Histogram {
    fn record(&mut self, seconds: f64) {
        for (count, bound) in self.counts.iter_mut().zip(BUCKETS) {
            if seconds <= bound {
                *count += 1;
            }
        }
        self.sum += seconds;
        self.count += 1;
    }
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
/// Its maps hash with FxHash: keys are short, trusted (built here from route and provider
/// names) and looked up several times per request; a scrape sorts them.
#[derive(Debug, Default)]
struct Shard {
    counters: Mutex<FxHashMap<Key, f64>>,
    histograms: Mutex<FxHashMap<Key, Histogram>>,
    /// The prebuilt series, by [`Series`] index (`None`: never recorded here).
    indexed: Mutex<Indexed>,
}

#[derive(Debug, Default)]
struct Indexed {
    counters: Vec<Option<f64>>,
    histograms: Vec<Option<Histogram>>,
}

/// The slot of series `i` in `v`, grown to hold it.
fn slot<T>(v: &mut Vec<Option<T>>, i: usize) -> &mut Option<T> {
    if v.len() <= i {
        v.resize_with(i + 1, || None);
    }
    &mut v[i]
}

impl Indexed {
    fn add(&mut self, i: usize, v: f64) {
        *slot(&mut self.counters, i).get_or_insert(0.0) += v;
    }

    fn observe(&mut self, i: usize, seconds: f64) {
        slot(&mut self.histograms, i).get_or_insert_with(Histogram::default).record(seconds);
    }
}

/// Every prebuilt series key of the process, by index: a [`Series`] has the same index in
/// every registry, and a scrape names a shard's indexed values from here.
#[derive(Debug, Default)]
struct Interner {
    keys: Vec<Arc<str>>,
    index: FxHashMap<Arc<str>, usize>,
}

static INTERNED: std::sync::LazyLock<Mutex<Interner>> = std::sync::LazyLock::new(Mutex::default);

fn intern(key: &str) -> usize {
    let mut t = INTERNED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(i) = t.index.get(key) {
        return *i;
    }
    let k: Arc<str> = Arc::from(key);
    let i = t.keys.len();
    t.keys.push(k.clone());
    t.index.insert(k, i);
    i
}

impl Shard {
    fn add(&self, key: &str, v: f64) {
        if let Ok(mut c) = self.counters.lock() {
            match c.get_mut(key) {
                Some(x) => *x += v,
                None => {
                    c.insert(key.to_string(), v);
                }
            }
        }
    }

    fn observe(&self, key: &str, seconds: f64) {
        if let Ok(mut h) = self.histograms.lock() {
            match h.get_mut(key) {
                Some(e) => e.record(seconds),
                None => {
                    let mut e = Histogram::default();
                    e.record(seconds);
                    h.insert(key.to_string(), e);
                }
            }
        }
    }
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

/// Adds `v`'s counts into `sum`.
fn merge(sum: &mut Histogram, v: &Histogram) {
    for (total, n) in sum.counts.iter_mut().zip(v.counts) {
        *total += n;
    }
    sum.sum += v.sum;
    sum.count += v.count;
}

/// A series key's metric name and rendered labels.
fn split(key: &str) -> (&str, &str) {
    key.split_once('\0').unwrap_or((key, ""))
}

/// A series key rendered once and given a process-wide index, for series recorded on
/// every request (rendering or hashing a key costs more than counting into it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Series {
    index: usize,
}

impl Series {
    /// The series of `name` with these labels.
    pub fn new(name: &str, pairs: &[(&str, &str)]) -> Series {
        let mut key = String::new();
        write_key(&mut key, name, pairs);
        Series { index: intern(&key) }
    }
}

/// One provider's per-request series within a route (labelled `provider`, as the
/// dashboard and alert rules in `deploy/` read it).
#[derive(Debug)]
pub struct ProviderSeries {
    name: String,
    /// `tailcut_attempts_total{route, provider}`.
    pub attempts: Series,
    /// `tailcut_spend_micro_usd_total{route, provider}`.
    pub spend: Series,
    /// `tailcut_wins_total{route, provider}`.
    pub wins: Series,
    /// `tailcut_attempt_results_total{route, provider, result}`, in [`ATTEMPT_RESULTS`] order.
    pub results: [Series; ATTEMPT_RESULTS.len()],
}

/// The series a route records on every request, keyed when the route is built.
#[derive(Debug)]
pub struct RouteSeries {
    route: String,
    /// `tailcut_requests_total{route, status="200"}`.
    pub ok: Series,
    /// `tailcut_request_seconds{route}`.
    pub seconds: Series,
    providers: Vec<ProviderSeries>,
}

impl RouteSeries {
    /// The series of route `route` and its providers.
    pub fn new<'a>(route: &str, providers: impl IntoIterator<Item = &'a str>) -> RouteSeries {
        let providers = providers
            .into_iter()
            .map(|u| ProviderSeries {
                name: u.to_string(),
                attempts: Series::new("tailcut_attempts_total", &[("route", route), ("provider", u)]),
                spend: Series::new("tailcut_spend_micro_usd_total", &[("route", route), ("provider", u)]),
                wins: Series::new("tailcut_wins_total", &[("route", route), ("provider", u)]),
                results: ATTEMPT_RESULTS
                    .map(|result| Series::new("tailcut_attempt_results_total", &[("route", route), ("provider", u), ("result", result)])),
            })
            .collect();
        RouteSeries {
            route: route.to_string(),
            ok: Series::new("tailcut_requests_total", &[("route", route), ("status", "200")]),
            seconds: Series::new("tailcut_request_seconds", &[("route", route)]),
            providers,
        }
    }

    /// The route's name.
    pub fn route(&self) -> &str {
        &self.route
    }

    /// A provider's series; `None` for a name the route was not built with.
    pub fn provider(&self, name: &str) -> Option<&ProviderSeries> {
        self.providers.iter().find(|u| u.name == name)
    }

    /// Creates, at zero, the route's series that alert rules and the dashboard divide by
    /// or watch for a first increase (leaks, refusals, failed attempts): a counter that
    /// appears only with its first event has no earlier sample for `rate()` or
    /// `increase()` to start from, so that first event would go unseen.
    pub fn zero(&self, m: &Metrics) {
        let route = self.route.as_str();
        m.add("tailcut_leaks_total", &[("route", route)], 0.0);
        m.add("tailcut_hedges_denied_total", &[("route", route)], 0.0);
        for limit in REFUSAL_LIMITS {
            m.add("tailcut_budget_refusals_total", &[("route", route), ("limit", limit)], 0.0);
        }
        for u in &self.providers {
            m.add_series(&u.attempts, 0.0);
            m.add_series(&u.wins, 0.0);
            m.add_series(&u.spend, 0.0);
            for r in &u.results {
                m.add_series(r, 0.0);
            }
        }
    }
}

/// The `result` label of `tailcut_attempt_results_total`: how an attempt ended, indexed
/// by the constants of [`result`].
pub const ATTEMPT_RESULTS: [&str; 5] = ["valid", "invalid", "failed", "cancelled", "unresolved"];

/// Indices into [`ATTEMPT_RESULTS`].
pub mod result {
    /// A result that passed validation.
    pub const VALID: usize = 0;
    /// A completed job whose result failed validation.
    pub const INVALID: usize = 1;
    /// A submit error or a failed job.
    pub const FAILED: usize = 2;
    /// Cancelled.
    pub const CANCELLED: usize = 3;
    /// Still unresolved when the race ended.
    pub const UNRESOLVED: usize = 4;
}

/// The `limit` label of `tailcut_budget_refusals_total`: the global soft or hard stop, or
/// the calling key's own budget.
pub const REFUSAL_LIMITS: [&str; 3] = ["soft_stop", "hard_stop", "key_budget"];

/// Appends a gauge family in the text exposition format (gauges are read at scrape time,
/// not recorded).
pub fn write_gauge(out: &mut String, name: &str, samples: &[(&[(&str, &str)], f64)]) {
    let _ = writeln!(out, "# TYPE {name} gauge");
    let mut key = String::new();
    for (pairs, v) in samples {
        write_key(&mut key, name, pairs);
        let (_, labels) = split(&key);
        if labels.is_empty() {
            let _ = writeln!(out, "{name} {v}");
        } else {
            let _ = writeln!(out, "{name}{{{labels}}} {v}");
        }
    }
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
            f(self.local_shard(shards), key);
        });
    }

    /// Runs `f` on this thread's indexed series.
    fn record_series(&self, f: impl FnOnce(&mut Indexed)) {
        let run = |shard: &Shard| {
            let mut ix = shard.indexed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            f(&mut ix);
        };
        LOCAL.with(|local| match local.try_borrow_mut() {
            Ok(mut local) => run(self.local_shard(&mut local.shards)),
            Err(_) => run(&self.new_shard()),
        });
    }

    /// This registry's shard in a thread's list, made on first use.
    fn local_shard<'s>(&self, shards: &'s mut Vec<(u64, Arc<Shard>)>) -> &'s Shard {
        let at = match shards.iter().position(|(id, _)| *id == self.id) {
            Some(i) => i,
            None => {
                shards.push((self.id, self.new_shard()));
                shards.len() - 1
            }
        };
        &shards[at].1
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
        self.record(name, pairs, |shard, key| shard.add(key, v));
    }

    /// Adds to a counter by its prebuilt key.
    pub fn add_series(&self, series: &Series, v: f64) {
        self.record_series(|ix| ix.add(series.index, v));
    }

    /// Records an observation in seconds by its prebuilt key.
    pub fn observe_series(&self, series: &Series, seconds: f64) {
        self.record_series(|ix| ix.observe(series.index, seconds));
    }

    /// Adds one.
    pub fn inc(&self, name: &'static str, pairs: &[(&str, &str)]) {
        self.add(name, pairs, 1.0);
    }

    /// Records an observation in seconds.
    pub fn observe(&self, name: &'static str, pairs: &[(&str, &str)], seconds: f64) {
        self.record(name, pairs, |shard, key| shard.observe(key, seconds));
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
        let keys = INTERNED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for shard in shards {
            if let Ok(c) = shard.counters.lock() {
                for (k, v) in c.iter() {
                    *counters.entry(k.clone()).or_default() += v;
                }
            }
            if let Ok(h) = shard.histograms.lock() {
                for (k, v) in h.iter() {
                    merge(histograms.entry(k.clone()).or_default(), v);
                }
            }
            let ix = shard.indexed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            for (i, v) in ix.counters.iter().enumerate() {
                if let (Some(v), Some(k)) = (v, keys.keys.get(i)) {
                    *counters.entry(k.to_string()).or_default() += v;
                }
            }
            for (i, v) in ix.histograms.iter().enumerate() {
                if let (Some(v), Some(k)) = (v, keys.keys.get(i)) {
                    merge(histograms.entry(k.to_string()).or_default(), v);
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

    #[test]
    fn prebuilt_series_are_summed_over_threads_and_kept_per_registry() {
        let m = Arc::new(Metrics::default());
        let other = Metrics::default();
        let r = Arc::new(RouteSeries::new("per-thread", ["a"]));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (m, r) = (m.clone(), r.clone());
                std::thread::spawn(move || {
                    for _ in 0..250 {
                        m.add_series(&r.ok, 1.0);
                        m.observe_series(&r.seconds, 0.003);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        other.add_series(&r.ok, 1.0);
        assert_eq!(m.get("tailcut_requests_total", &[("route", "per-thread"), ("status", "200")]), 1000.0);
        assert_eq!(other.get("tailcut_requests_total", &[("route", "per-thread"), ("status", "200")]), 1.0);
        assert!(m.render().contains("tailcut_request_seconds_count{route=\"per-thread\"} 1000\n"));
        // A series built but never recorded is not exported.
        assert!(!other.render().contains("tailcut_request_seconds"), "{}", other.render());
    }

    #[test]
    fn prebuilt_series_count_into_the_same_series_as_named_ones() {
        let m = Metrics::default();
        let r = RouteSeries::new("chat", ["a", "b\"c"]);
        assert_eq!(r.route(), "chat");
        m.inc("tailcut_attempts_total", &[("route", "chat"), ("provider", "a")]);
        m.add_series(&r.provider("a").unwrap().attempts, 1.0);
        m.add_series(&r.provider("b\"c").unwrap().wins, 2.0);
        m.add_series(&r.ok, 1.0);
        m.observe_series(&r.seconds, 0.004);
        m.observe("tailcut_request_seconds", &[("route", "chat")], 0.5);
        assert!(r.provider("z").is_none());
        assert_eq!(m.get("tailcut_attempts_total", &[("route", "chat"), ("provider", "a")]), 2.0);
        assert_eq!(m.get("tailcut_wins_total", &[("route", "chat"), ("provider", "b\"c")]), 2.0);
        assert_eq!(m.get("tailcut_requests_total", &[("route", "chat"), ("status", "200")]), 1.0);
        let text = m.render();
        assert!(text.contains("tailcut_request_seconds_count{route=\"chat\"} 2\n"), "{text}");
        assert!(text.contains("tailcut_request_seconds_bucket{route=\"chat\",le=\"0.005\"} 1\n"), "{text}");
        assert!(text.contains("tailcut_wins_total{route=\"chat\",provider=\"b\\\"c\"} 2\n"), "{text}");
    }

    #[test]
    fn a_zeroed_route_exports_its_alerting_series_before_any_event() {
        let m = Metrics::default();
        RouteSeries::new("chat", ["a"]).zero(&m);
        let text = m.render();
        for line in [
            "tailcut_leaks_total{route=\"chat\"} 0\n",
            "tailcut_hedges_denied_total{route=\"chat\"} 0\n",
            "tailcut_budget_refusals_total{route=\"chat\",limit=\"soft_stop\"} 0\n",
            "tailcut_attempt_results_total{route=\"chat\",provider=\"a\",result=\"failed\"} 0\n",
            "tailcut_wins_total{route=\"chat\",provider=\"a\"} 0\n",
        ] {
            assert!(text.contains(line), "{line} missing from {text}");
        }
    }

    #[test]
    fn result_indices_name_their_labels() {
        assert_eq!(
            [result::VALID, result::INVALID, result::FAILED, result::CANCELLED, result::UNRESOLVED].map(|i| ATTEMPT_RESULTS[i]),
            ["valid", "invalid", "failed", "cancelled", "unresolved"]
        );
    }

    #[test]
    fn gauges_render_with_and_without_labels() {
        let mut out = String::new();
        write_gauge(&mut out, "g", &[(&[], 1.0), (&[("account", "a\"b"), ("limit", "hard_stop")], 2.5)]);
        assert_eq!(out, "# TYPE g gauge\ng 1\ng{account=\"a\\\"b\",limit=\"hard_stop\"} 2.5\n");
    }
}
