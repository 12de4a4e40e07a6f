//! `auto` against the fixed plans it must not lose to, on one split of a replay (issue
//! 28's must-show): the plan a user freezes from the calibration split without
//! hindsight (the fewest misses past `auto`'s deadline, then the cheapest active cost)
//! and the hindsight-best fixed plan (the least mean loss on the split itself), with
//! each one's p95 × active cost and whether the frozen plan dominates `auto`.

use crate::summary::PolicySummary;
use serde::Serialize;

/// Whether a plan at (`p95_b`, `cost_b`) dominates one at (`p95_a`, `cost_a`): within
/// 2 % or better on both, and more than 5 % better on at least one (`None` = no valid
/// result at that rank, worse than any latency).
pub fn dominates(p95_b: Option<f64>, cost_b: f64, p95_a: Option<f64>, cost_a: f64) -> bool {
    let (pb, pa) = (p95_b.unwrap_or(f64::INFINITY), p95_a.unwrap_or(f64::INFINITY));
    let within = |x: f64, y: f64| x <= y * 1.02 || (x.is_infinite() && y.is_infinite());
    let better = |x: f64, y: f64| x < y * 0.95;
    within(pb, pa) && within(cost_b, cost_a) && (better(pb, pa) || better(cost_b, cost_a))
}

/// One policy's figures in the verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    /// Row label.
    pub policy: String,
    /// p95, s (None = no valid result at that rank).
    pub p95_s: Option<f64>,
    /// Mean active cost per request, $.
    pub active_usd_per_req: f64,
    /// Miss rate past `auto`'s deadline.
    pub miss_rate: f64,
    /// p95 × active cost (None with no p95).
    pub p95_x_cost: Option<f64>,
    /// Mean loss per request: `(miss rate + min(active $ / cost_ref, 1)) / 2` (the
    /// experts' loss at its base miss price, from the row's means).
    pub loss: f64,
}

/// `auto` against the frozen and the hindsight-best fixed plans on one split.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// `auto`'s deadline, s (the miss counted).
    pub deadline_s: f64,
    /// `auto`.
    pub auto: Point,
    /// The plan frozen from the calibration split (None without one).
    pub frozen: Option<Point>,
    /// The fixed plan with the least mean loss on this split (hindsight).
    pub best: Point,
    /// The frozen plan dominates `auto` ([`dominates`]).
    pub dominated_by_frozen: Option<bool>,
    /// `auto`'s p95 × cost over the hindsight-best's.
    pub product_vs_best: Option<f64>,
}

fn miss_rate(s: &PolicySummary, deadline_s: f64) -> Option<f64> {
    s.miss_rates.get(&crate::fmt_g(deadline_s)).copied()
}

fn point(s: &PolicySummary, deadline_s: f64, cost_ref: f64) -> Option<Point> {
    let miss = miss_rate(s, deadline_s)?;
    let p95 = s.p95_s.is_finite().then_some(s.p95_s);
    let c = if cost_ref > 0.0 { (s.active_usd_per_req / cost_ref).min(1.0) } else { 0.0 };
    Some(Point {
        policy: s.policy.clone(),
        p95_s: p95,
        active_usd_per_req: s.active_usd_per_req,
        miss_rate: miss,
        p95_x_cost: p95.map(|p| p * s.active_usd_per_req),
        loss: (miss + c) / 2.0,
    })
}

/// The plan a user freezes from `calibration` without hindsight: the fewest misses past
/// `deadline_s`, then the cheapest active cost (the first of equals).
pub fn frozen_plan<'a>(calibration: impl IntoIterator<Item = &'a PolicySummary>, deadline_s: f64) -> Option<String> {
    let mut best: Option<(f64, f64, &PolicySummary)> = None;
    for s in calibration {
        let Some(m) = miss_rate(s, deadline_s) else { continue };
        if best.is_none_or(|(bm, bc, _)| m < bm || (m == bm && s.active_usd_per_req < bc)) {
            best = Some((m, s.active_usd_per_req, s));
        }
    }
    best.map(|(_, _, s)| s.policy.clone())
}

/// `auto` against the fixed `rows` of a split; `frozen` names the calibration-frozen plan.
/// None when the rows do not count misses at `deadline_s`.
pub fn verdict<'a>(
    rows: impl IntoIterator<Item = &'a PolicySummary>,
    auto: &PolicySummary,
    frozen: Option<&str>,
    deadline_s: f64,
    cost_ref: f64,
) -> Option<Verdict> {
    let auto = point(auto, deadline_s, cost_ref)?;
    let mut best: Option<Point> = None;
    let mut frozen_point = None;
    for s in rows {
        let Some(p) = point(s, deadline_s, cost_ref) else { continue };
        if frozen == Some(s.policy.as_str()) {
            frozen_point = Some(p.clone());
        }
        if best.as_ref().is_none_or(|b| p.loss < b.loss) {
            best = Some(p);
        }
    }
    let best = best?;
    let dominated = frozen_point.as_ref().map(|f| dominates(f.p95_s, f.active_usd_per_req, auto.p95_s, auto.active_usd_per_req));
    let product_vs_best = match (auto.p95_x_cost, best.p95_x_cost) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    Some(Verdict { deadline_s, auto, frozen: frozen_point, best, dominated_by_frozen: dominated, product_vs_best })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domination_needs_both_axes_and_a_clear_gain() {
        assert!(dominates(Some(42.1), 0.0090, Some(59.9), 0.0095));
        assert!(!dominates(Some(42.1), 0.0090, Some(42.1), 0.0090));
        assert!(!dominates(Some(42.1), 0.0090, Some(40.0), 0.0100));
        assert!(dominates(Some(42.1), 0.0090, Some(42.0), 0.0100));
        assert!(dominates(Some(42.1), 0.0090, None, 0.0090));
    }
}
