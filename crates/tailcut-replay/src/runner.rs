//! Runs a sweep over a split on several threads and picks rows for display.

use crate::rounds::RoundSet;
use crate::summary::PolicySummary;
use crate::sweep::{evaluate, standard_sweep_scaled, Family, PolicyDef, ProviderRates};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use tailcut_stats::Estimator;

/// Settings of one sweep.
#[derive(Debug, Clone)]
pub struct SweepSettings {
    /// Provider prices, in configuration order.
    pub rates: Vec<ProviderRates>,
    /// Fixed-hedge delay grid, s.
    pub delays: Vec<f64>,
    /// Miss deadlines, s.
    pub deadlines: Vec<u32>,
    /// Quantile estimator.
    pub estimator: Estimator,
    /// Billed seconds assumed for a provider absent from a round.
    pub cap_s: f64,
    /// Worker threads (0 = one per core).
    pub threads: usize,
    /// Multiplies the queue-state families' timers (see [`standard_sweep_scaled`]).
    pub timer_scale: f64,
}

/// Evaluates the standard sweep over `set`; results keep sweep order.
pub fn run_sweep(set: &RoundSet, s: &SweepSettings) -> Vec<(PolicyDef, PolicySummary)> {
    let defs = standard_sweep_scaled(set, &s.rates, &s.delays, s.timer_scale);
    let threads =
        if s.threads == 0 { std::thread::available_parallelism().map_or(2, |n| n.get()) } else { s.threads }.min(defs.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<PolicySummary>>> = Mutex::new(vec![None; defs.len()]);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(def) = defs.get(i) else { return };
                let ev = evaluate(set, &s.rates, &def.family, s.cap_s);
                let summary = PolicySummary::new(def.label.clone(), &ev, &s.deadlines, s.estimator);
                if let Ok(mut r) = results.lock() {
                    r[i] = Some(summary);
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_default();
    defs.into_iter().zip(results).filter_map(|(d, s)| s.map(|s| (d, s))).collect()
}

/// How to rank rows for `--top`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    /// p95 latency, then active cost.
    P95,
    /// p50 latency, then active cost.
    P50,
    /// Active cost, then miss rate at 60 s.
    Cost,
    /// Billed cost, then miss rate at 60 s.
    Billed,
    /// Miss rate at 60 s, then active cost (the reference's key).
    Miss60,
}

fn key(s: &PolicySummary, by: SortKey) -> (f64, f64) {
    match by {
        SortKey::P95 => (s.p95_s, s.active_usd_per_req),
        SortKey::P50 => (s.p50_s, s.active_usd_per_req),
        SortKey::Cost => (s.active_usd_per_req, s.miss_rate(60)),
        SortKey::Billed => (s.billed_usd_per_req, s.miss_rate(60)),
        SortKey::Miss60 => (s.miss_rate(60), s.active_usd_per_req),
    }
}

/// The `top` best rows by `by` (stable: ties keep sweep order).
pub fn top(rows: &[(PolicyDef, PolicySummary)], by: SortKey, top: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..rows.len()).collect();
    idx.sort_by(|&a, &b| {
        let (ka, kb) = (key(&rows[a].1, by), key(&rows[b].1, by));
        ka.0.total_cmp(&kb.0).then(ka.1.total_cmp(&kb.1))
    });
    idx.truncate(top);
    idx
}

/// The reference report's selection: singles, immediate races (`@0s`), the 6 best other
/// fixed hedges and the 3 best cutovers by (miss rate at 60 s, active cost).
pub fn reference_selection(rows: &[(PolicyDef, PolicySummary)]) -> Vec<usize> {
    let pick = |pred: &dyn Fn(&Family) -> bool| -> Vec<usize> { (0..rows.len()).filter(|&i| pred(&rows[i].0.family)).collect() };
    let ranked = |mut v: Vec<usize>, n: usize| {
        v.sort_by(|&a, &b| {
            let (ka, kb) = (key(&rows[a].1, SortKey::Miss60), key(&rows[b].1, SortKey::Miss60));
            ka.0.total_cmp(&kb.0).then(ka.1.total_cmp(&kb.1))
        });
        v.truncate(n);
        v
    };
    let mut out = pick(&|f| matches!(f, Family::Single { .. }));
    out.extend(pick(&|f| matches!(f, Family::Hedge { delay, .. } if *delay == 0.0)));
    out.extend(ranked(pick(&|f| matches!(f, Family::Hedge { delay, .. } if *delay != 0.0)), 6));
    out.extend(ranked(pick(&|f| matches!(f, Family::Cutover { .. })), 3));
    out
}
