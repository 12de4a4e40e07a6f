//! What a scenario run measures: a policy's per-request results over the stream and
//! the table rows summarising the evaluated half.

use crate::summary::quantiles;
use serde::Serialize;
use tailcut_core::PolicyKind;
use tailcut_stats::Estimator;

/// A policy's results over the stream: per request latency, costs, hedged flag, extra.
#[derive(Debug, Clone, Default)]
pub struct StreamRun {
    /// Latency per request.
    pub lats: Vec<f64>,
    /// Active $ per request.
    pub active: Vec<f64>,
    /// Billed $ per request.
    pub billed: Vec<f64>,
    /// Counted as hedged.
    pub hedged: Vec<bool>,
    /// Extra attempts launched.
    pub extra: Vec<u8>,
    /// A learned policy's plan per request, as decided (empty for a fixed policy).
    pub plans: Vec<tailcut_model::Plan>,
}

/// One row of a scenario table.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioRow {
    /// Policy label.
    pub policy: String,
    /// The policy's kind (for `tuned:`, the kind of the fixed policy it repeats).
    pub kind: PolicyKind,
    /// The fixed policy the reference's ranking picks on the first half (`tuned:`).
    pub tuned: bool,
    /// Requests evaluated (the second half).
    pub n: usize,
    /// Median latency, s (null = no valid result at that rank).
    pub p50_s: Option<f64>,
    /// p95, s.
    pub p95_s: Option<f64>,
    /// p99, s.
    pub p99_s: Option<f64>,
    /// Share over the scenario's deadline (no valid result included).
    pub miss_rate: f64,
    /// Share of requests that launched a second provider.
    pub hedge_rate: f64,
    /// Extra attempts per request.
    pub extra_per_req: f64,
    /// Mean active $ per request.
    pub active_usd_per_req: f64,
    /// Mean billed $ per request.
    pub billed_usd_per_req: f64,
}

fn fin(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

pub(crate) fn row(policy: String, kind: PolicyKind, run: &StreamRun, range: std::ops::Range<usize>, deadline: f64) -> ScenarioRow {
    let n = range.len();
    let mut lats = run.lats[range.clone()].to_vec();
    let miss = lats.iter().filter(|l| **l > deadline).count() as f64 / n.max(1) as f64;
    let q = quantiles(&mut lats, &[0.5, 0.95, 0.99], Estimator::Nearest);
    let mean = |v: &[f64]| v[range.clone()].iter().sum::<f64>() / n.max(1) as f64;
    ScenarioRow {
        policy,
        kind,
        tuned: false,
        n,
        p50_s: fin(q[0]),
        p95_s: fin(q[1]),
        p99_s: fin(q[2]),
        miss_rate: miss,
        hedge_rate: run.hedged[range.clone()].iter().filter(|h| **h).count() as f64 / n.max(1) as f64,
        extra_per_req: run.extra[range.clone()].iter().map(|x| f64::from(*x)).sum::<f64>() / n.max(1) as f64,
        active_usd_per_req: mean(&run.active),
        billed_usd_per_req: mean(&run.billed),
    }
}

/// The fixed plan the reference's ranking freezes from the requests `range`: the fewest
/// misses past `deadline`, then the cheapest active cost, then the first listed (`tuned:`
/// in the named families, the frozen plan of `scenario sweep`).
pub(crate) fn frozen_index(runs: &[StreamRun], range: std::ops::Range<usize>, deadline: f64) -> usize {
    let key = |run: &StreamRun| {
        let misses = run.lats[range.clone()].iter().filter(|l| **l > deadline).count();
        // The mean, as the rows report it (a sum compares differently in the last bit).
        (misses, run.active[range.clone()].iter().sum::<f64>() / range.len().max(1) as f64)
    };
    (0..runs.len())
        .map(|i| (i, key(&runs[i])))
        .min_by(|(i, a), (j, b)| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).then(i.cmp(j)))
        .map_or(0, |(i, _)| i)
}
