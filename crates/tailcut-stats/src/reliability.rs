//! Reliability of forecasts: how a learned policy's predicted miss probability and
//! predicted cost compare with what happened.
//!
//! Decisions are grouped by their prediction into **deciles**: ten groups of (nearly)
//! equal count, in order of the predicted value, with equal predictions always kept in
//! one group (so a policy that repeats a few predictions gets fewer groups). Fixed-width
//! bins would put nearly every decision of a 5 % miss target into the first bin; groups
//! of equal count show where the predictions actually lie. Per group: the count, the
//! mean prediction, the realized rate with its Wilson interval (z = 1.96); overall: the
//! Brier score (mean squared error of the probability), the Brier score of always
//! forecasting the realized base rate (a forecast with no skill scores that), and the
//! expected calibration error (ECE: the count-weighted mean of |mean prediction −
//! realized rate| over the groups). Costs are grouped the same way by predicted cost,
//! with the mean predicted and mean realized cost per group.

use serde::Serialize;
use std::ops::Range;

/// Groups [`reliability`] makes (deciles).
pub const GROUPS: usize = 10;

/// One decision's forecast and what happened.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Forecast {
    /// Predicted probability of a miss, in [0, 1].
    pub p: f64,
    /// Whether it missed.
    pub missed: bool,
    /// Predicted cost, $, when there is one.
    pub cost_predicted: Option<f64>,
    /// Realized cost, $, when known.
    pub cost_realized: Option<f64>,
}

/// One group of decisions by predicted miss.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MissGroup {
    /// Smallest prediction in the group.
    pub predicted_min: f64,
    /// Largest prediction in the group.
    pub predicted_max: f64,
    /// Decisions.
    pub n: u64,
    /// Mean predicted miss.
    pub predicted: f64,
    /// Decisions that missed.
    pub misses: u64,
    /// Realized miss rate.
    pub realized: f64,
    /// Wilson 95 % interval of the realized rate.
    pub realized_ci95: [f64; 2],
}

/// One group of decisions by predicted cost.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CostGroup {
    /// Smallest prediction in the group, $.
    pub predicted_min: f64,
    /// Largest prediction in the group, $.
    pub predicted_max: f64,
    /// Decisions.
    pub n: u64,
    /// Mean predicted cost, $.
    pub predicted: f64,
    /// Mean realized cost, $.
    pub realized: f64,
}

/// Predicted against realized cost.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CostReliability {
    /// Decisions with both a predicted and a realized cost.
    pub n: u64,
    /// Mean predicted cost, $.
    pub predicted: f64,
    /// Mean realized cost, $.
    pub realized: f64,
    /// Realized / predicted (of the means); +∞ when nothing was predicted.
    pub ratio: f64,
    /// Mean |predicted − realized| per decision, $.
    pub mean_abs_error: f64,
    /// Count-weighted mean of |mean predicted − mean realized| over the groups, $.
    pub group_error: f64,
    /// Groups by predicted cost, cheapest first.
    pub groups: Vec<CostGroup>,
}

/// A reliability table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Reliability {
    /// Decisions with a predicted miss.
    pub n: u64,
    /// Decisions that missed.
    pub misses: u64,
    /// Mean predicted miss.
    pub predicted: f64,
    /// Realized miss rate.
    pub realized: f64,
    /// Wilson 95 % interval of the realized rate.
    pub realized_ci95: [f64; 2],
    /// Brier score: mean of (predicted − missed)².
    pub brier: f64,
    /// Brier score of always forecasting the realized rate, r·(1 − r).
    pub brier_base_rate: f64,
    /// Expected calibration error over the groups.
    pub ece: f64,
    /// Groups by predicted miss, lowest first.
    pub groups: Vec<MissGroup>,
    /// Predicted against realized cost (None when no decision has both).
    pub cost: Option<CostReliability>,
}

/// Splits `sorted` (ascending) into up to `k` ranges of nearly equal length, never
/// between two equal values. Empty input gives no range.
pub fn equal_count_groups(sorted: &[f64], k: usize) -> Vec<Range<usize>> {
    let n = sorted.len();
    let mut out = Vec::new();
    if n == 0 || k == 0 {
        return out;
    }
    let mut start = 0;
    for g in 1..k {
        let mut cut = (g * n + k / 2) / k;
        while cut < n && cut > 0 && sorted[cut] == sorted[cut - 1] {
            cut += 1;
        }
        if cut > start && cut < n {
            out.push(start..cut);
            start = cut;
        }
    }
    out.push(start..n);
    out
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let (s, k) = xs.fold((0.0, 0u64), |(s, k), x| (s + x, k + 1));
    if k == 0 {
        0.0
    } else {
        s / k as f64
    }
}

/// The reliability table of `forecasts` over [`GROUPS`] groups. Forecasts whose
/// probability is not a number in [0, 1] are left out (callers range-check their input
/// and say so); costs that are not finite and non-negative are left out of the cost part.
pub fn reliability(forecasts: &[Forecast]) -> Reliability {
    reliability_in(forecasts, GROUPS)
}

/// [`reliability`] with `k` groups.
pub fn reliability_in(forecasts: &[Forecast], k: usize) -> Reliability {
    let mut f: Vec<Forecast> = forecasts.iter().copied().filter(|f| (0.0..=1.0).contains(&f.p)).collect();
    f.sort_by(|a, b| a.p.total_cmp(&b.p));
    let n = f.len() as u64;
    let misses = f.iter().filter(|x| x.missed).count() as u64;
    let y = |x: &Forecast| if x.missed { 1.0 } else { 0.0 };
    let realized = if n == 0 { 0.0 } else { misses as f64 / n as f64 };
    let ps: Vec<f64> = f.iter().map(|x| x.p).collect();
    let groups: Vec<MissGroup> = equal_count_groups(&ps, k)
        .into_iter()
        .map(|r| {
            let g = &f[r];
            let m = g.iter().filter(|x| x.missed).count() as u64;
            let gn = g.len() as u64;
            let ci = crate::wilson(m, gn);
            MissGroup {
                predicted_min: g[0].p,
                predicted_max: g[g.len() - 1].p,
                n: gn,
                predicted: mean(g.iter().map(|x| x.p)),
                misses: m,
                realized: m as f64 / gn as f64,
                realized_ci95: [ci.0, ci.1],
            }
        })
        .collect();
    let ece = if n == 0 { 0.0 } else { groups.iter().map(|g| g.n as f64 * (g.predicted - g.realized).abs()).sum::<f64>() / n as f64 };
    let ci = crate::wilson(misses, n);
    Reliability {
        n,
        misses,
        predicted: mean(f.iter().map(|x| x.p)),
        realized,
        realized_ci95: [ci.0, ci.1],
        brier: mean(f.iter().map(|x| (x.p - y(x)).powi(2))),
        brier_base_rate: realized * (1.0 - realized),
        ece,
        groups,
        cost: cost_reliability(forecasts, k),
    }
}

fn cost_reliability(forecasts: &[Forecast], k: usize) -> Option<CostReliability> {
    let ok = |x: f64| x.is_finite() && x >= 0.0;
    let mut c: Vec<(f64, f64)> = forecasts
        .iter()
        .filter(|f| (0.0..=1.0).contains(&f.p))
        .filter_map(|f| f.cost_predicted.zip(f.cost_realized))
        .filter(|(p, r)| ok(*p) && ok(*r))
        .collect();
    if c.is_empty() {
        return None;
    }
    c.sort_by(|a, b| a.0.total_cmp(&b.0));
    let ps: Vec<f64> = c.iter().map(|x| x.0).collect();
    let n = c.len() as u64;
    let groups: Vec<CostGroup> = equal_count_groups(&ps, k)
        .into_iter()
        .map(|r| {
            let g = &c[r];
            CostGroup {
                predicted_min: g[0].0,
                predicted_max: g[g.len() - 1].0,
                n: g.len() as u64,
                predicted: mean(g.iter().map(|x| x.0)),
                realized: mean(g.iter().map(|x| x.1)),
            }
        })
        .collect();
    let predicted = mean(c.iter().map(|x| x.0));
    let realized = mean(c.iter().map(|x| x.1));
    Some(CostReliability {
        n,
        predicted,
        realized,
        ratio: if predicted > 0.0 { realized / predicted } else { f64::INFINITY },
        mean_abs_error: mean(c.iter().map(|x| (x.0 - x.1).abs())),
        group_error: groups.iter().map(|g| g.n as f64 * (g.predicted - g.realized).abs()).sum::<f64>() / n as f64,
        groups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fc(p: f64, missed: bool) -> Forecast {
        Forecast { p, missed, cost_predicted: None, cost_realized: None }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn groups_have_equal_counts_and_keep_ties_together() {
        let v: Vec<f64> = (0..20).map(f64::from).collect();
        let g = equal_count_groups(&v, 10);
        assert_eq!(g.len(), 10);
        assert!(g.iter().all(|r| r.len() == 2), "{g:?}");
        // 25 values: lengths 2 or 3, covering everything in order.
        let v: Vec<f64> = (0..25).map(f64::from).collect();
        let g = equal_count_groups(&v, 10);
        assert_eq!(g.first().unwrap().start, 0);
        assert_eq!(g.last().unwrap().end, 25);
        assert!(g.windows(2).all(|w| w[0].end == w[1].start));
        assert!(g.iter().all(|r| (2..=3).contains(&r.len())), "{g:?}");
        // Ties: six equal values then four distinct: the six stay together.
        let v = [0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.2, 0.3, 0.4, 0.5];
        let g = equal_count_groups(&v, 5);
        assert_eq!(g, vec![0..6, 6..8, 8..10]);
        // All equal: one group.
        assert_eq!(equal_count_groups(&[0.05; 7], 10), vec![0..7]);
        // Fewer values than groups: one per value.
        assert_eq!(equal_count_groups(&[0.1, 0.2, 0.3], 10), vec![0..1, 1..2, 2..3]);
        assert!(equal_count_groups(&[], 10).is_empty());
    }

    #[test]
    fn brier_and_ece_match_a_hand_computed_case() {
        // Two groups (k = 2): {0.1, 0.1, 0.1, 0.1} with one miss, {0.5, 0.5, 0.5, 0.5} with
        // three misses.
        let mut f = vec![fc(0.1, true), fc(0.1, false), fc(0.1, false), fc(0.1, false)];
        f.extend([fc(0.5, true), fc(0.5, true), fc(0.5, true), fc(0.5, false)]);
        let r = reliability_in(&f, 2);
        assert_eq!((r.n, r.misses), (8, 4));
        assert!(close(r.realized, 0.5));
        assert!(close(r.predicted, 0.3));
        // Brier: (0.9² + 3·0.1² + 3·0.5² + 0.5²) / 8 = (0.81 + 0.03 + 1.0) / 8 = 0.23.
        assert!(close(r.brier, 0.23), "{}", r.brier);
        assert!(close(r.brier_base_rate, 0.25));
        // Groups: realized 0.25 against 0.1, and 0.75 against 0.5: ECE = (4·0.15 + 4·0.25) / 8.
        assert_eq!(r.groups.len(), 2);
        assert!(close(r.groups[0].realized, 0.25) && close(r.groups[0].predicted, 0.1));
        assert!(close(r.groups[1].realized, 0.75) && close(r.groups[1].predicted, 0.5));
        assert!(close(r.ece, 0.2), "{}", r.ece);
        let w = crate::wilson(1, 4);
        assert_eq!(r.groups[0].realized_ci95, [w.0, w.1]);
        assert!(r.cost.is_none());
    }

    #[test]
    fn a_perfectly_calibrated_forecast_has_zero_ece() {
        // p = 0.2 with exactly 1 miss in 5, p = 0.6 with 3 in 5.
        let mut f: Vec<Forecast> = (0..5).map(|i| fc(0.2, i == 0)).collect();
        f.extend((0..5).map(|i| fc(0.6, i < 3)));
        let r = reliability(&f);
        assert_eq!(r.groups.len(), 2);
        assert!(close(r.ece, 0.0));
        // Brier = (0.8² + 4·0.2² + 3·0.4² + 2·0.6²) / 10 = (0.64 + 0.16 + 0.48 + 0.72) / 10.
        assert!(close(r.brier, 0.2), "{}", r.brier);
    }

    #[test]
    fn costs_are_grouped_by_prediction_with_means() {
        let mk = |p: f64, r: f64| Forecast { p: 0.0, missed: false, cost_predicted: Some(p), cost_realized: Some(r) };
        let f = [mk(1.0, 2.0), mk(1.0, 1.0), mk(3.0, 3.0), mk(3.0, 5.0), Forecast { cost_realized: None, ..mk(9.0, 0.0) }];
        let c = reliability_in(&f, 2).cost.unwrap();
        assert_eq!(c.n, 4);
        assert!(close(c.predicted, 2.0) && close(c.realized, 2.75) && close(c.ratio, 1.375));
        // |1−2| + 0 + 0 + |3−5| = 3 over 4.
        assert!(close(c.mean_abs_error, 0.75));
        assert_eq!(c.groups.len(), 2);
        assert!(close(c.groups[0].realized, 1.5) && close(c.groups[1].realized, 4.0));
        // (2·0.5 + 2·1.0) / 4.
        assert!(close(c.group_error, 0.75));
    }

    #[test]
    fn out_of_range_probabilities_are_left_out_and_empty_input_is_empty() {
        let r = reliability(&[fc(f64::NAN, true), fc(1.5, false), fc(0.3, false)]);
        assert_eq!(r.n, 1);
        let r = reliability(&[]);
        assert_eq!((r.n, r.groups.len()), (0, 0));
        assert!(close(r.brier, 0.0) && close(r.ece, 0.0));
    }
}
