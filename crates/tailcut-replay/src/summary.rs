//! Per-policy statistics over one split: quantiles (either estimator, +∞ included),
//! misses per deadline with Wilson intervals, mean active and billed cost, hedge rate.
//! Quantiles use selection, not a full sort, so a million-round policy costs O(n).

use crate::sweep::Evaluated;
use serde::Serialize;
use std::collections::BTreeMap;
use tailcut_stats::{round_half_even, wilson, Estimator};

/// One policy's row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicySummary {
    /// Label.
    pub policy: String,
    /// Rounds.
    pub n: usize,
    /// Median latency (null = no valid result at that rank).
    #[serde(serialize_with = "inf_null")]
    pub p50_s: f64,
    /// 95th percentile.
    #[serde(serialize_with = "inf_null")]
    pub p95_s: f64,
    /// 99th percentile, only when n ≥ 100.
    #[serde(serialize_with = "opt_inf_null")]
    pub p99_s: Option<f64>,
    /// Largest finite latency.
    #[serde(serialize_with = "inf_null")]
    pub max_s: f64,
    /// Misses (latency > deadline, +∞ included) keyed by deadline seconds.
    pub miss_counts: BTreeMap<String, u64>,
    /// Miss rates keyed by deadline seconds.
    pub miss_rates: BTreeMap<String, f64>,
    /// Wilson 95% interval of each miss rate.
    pub miss_ci95: BTreeMap<String, [f64; 2]>,
    /// Mean active-compute cost per request, $.
    pub active_usd_per_req: f64,
    /// Mean billed cost per request, $.
    pub billed_usd_per_req: f64,
    /// Share of rounds that launched a second provider.
    pub hedge_rate: f64,
    /// Rounds that launched a second provider.
    pub hedged: u64,
    /// Quantile estimator used.
    pub estimator: Estimator,
    #[serde(skip)]
    deadlines: Vec<u32>,
}

fn inf_null<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.is_finite() {
        s.serialize_f64(*v)
    } else {
        s.serialize_none()
    }
}

fn opt_inf_null<S: serde::Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(x) if x.is_finite() => s.serialize_f64(*x),
        _ => s.serialize_none(),
    }
}

/// Values at the given ranks (ascending, +∞ last), selecting in place.
pub fn order_stats(values: &mut [f64], ranks: &[usize]) -> Vec<f64> {
    let mut sorted_ranks: Vec<(usize, usize)> = ranks.iter().copied().enumerate().map(|(i, r)| (r, i)).collect();
    sorted_ranks.sort_unstable();
    let mut out = vec![f64::INFINITY; ranks.len()];
    let mut lo = 0usize;
    for (rank, slot) in sorted_ranks {
        if rank >= values.len() {
            continue;
        }
        if rank >= lo {
            let (_, v, _) = values[lo..].select_nth_unstable_by(rank - lo, f64::total_cmp);
            out[slot] = *v;
            lo = rank;
        } else {
            out[slot] = values[rank];
        }
    }
    out
}

/// Quantiles of `values` (consumed as scratch) under `estimator`.
pub fn quantiles(values: &mut [f64], qs: &[f64], estimator: Estimator) -> Vec<f64> {
    let n = values.len();
    if n == 0 {
        return vec![f64::INFINITY; qs.len()];
    }
    match estimator {
        Estimator::Nearest => {
            let ranks: Vec<usize> = qs.iter().map(|q| (round_half_even(q * (n as f64 - 1.0)).max(0.0) as usize).min(n - 1)).collect();
            order_stats(values, &ranks)
        }
        Estimator::Linear => {
            let hs: Vec<f64> = qs.iter().map(|q| q * (n as f64 - 1.0)).collect();
            let mut ranks = Vec::new();
            for h in &hs {
                let lo = (h.floor().max(0.0) as usize).min(n - 1);
                ranks.push(lo);
                ranks.push((lo + 1).min(n - 1));
            }
            let v = order_stats(values, &ranks);
            hs.iter()
                .enumerate()
                .map(|(i, h)| {
                    let (a, b) = (v[2 * i], v[2 * i + 1]);
                    if a.is_infinite() || b.is_infinite() {
                        f64::INFINITY
                    } else {
                        a + (h - h.floor()) * (b - a)
                    }
                })
                .collect()
        }
    }
}

impl PolicySummary {
    /// Summarises an evaluated policy.
    pub fn new(policy: String, ev: &Evaluated, deadlines: &[u32], estimator: Estimator) -> PolicySummary {
        let n = ev.lats.len();
        let mut miss = vec![0u64; deadlines.len()];
        let mut max_finite = f64::NEG_INFINITY;
        for &l in &ev.lats {
            if l.is_finite() && l > max_finite {
                max_finite = l;
            }
            for (k, &d) in deadlines.iter().enumerate() {
                if l > f64::from(d) {
                    miss[k] += 1;
                }
            }
        }
        let mut scratch = ev.lats.clone();
        let q = quantiles(&mut scratch, &[0.5, 0.95, 0.99], estimator);
        let nn = n as u64;
        PolicySummary {
            policy,
            n,
            p50_s: q[0],
            p95_s: q[1],
            p99_s: (n >= 100).then_some(q[2]),
            max_s: if max_finite.is_finite() { max_finite } else { f64::INFINITY },
            miss_counts: deadlines.iter().zip(&miss).map(|(d, k)| (d.to_string(), *k)).collect(),
            miss_rates: deadlines
                .iter()
                .zip(&miss)
                .map(|(d, k)| (d.to_string(), if n == 0 { 1.0 } else { *k as f64 / n as f64 }))
                .collect(),
            miss_ci95: deadlines
                .iter()
                .zip(&miss)
                .map(|(d, k)| {
                    let (lo, hi) = wilson(*k, nn);
                    (d.to_string(), [lo, hi])
                })
                .collect(),
            active_usd_per_req: if n == 0 { 0.0 } else { ev.active_sum / n as f64 },
            billed_usd_per_req: if n == 0 { 0.0 } else { ev.billed_sum / n as f64 },
            hedge_rate: if n == 0 { 0.0 } else { ev.hedged as f64 / n as f64 },
            hedged: ev.hedged,
            estimator,
            deadlines: deadlines.to_vec(),
        }
    }

    /// Misses over `deadline` seconds (0 when that deadline was not evaluated).
    pub fn misses(&self, deadline: u32) -> u64 {
        self.miss_counts.get(&deadline.to_string()).copied().unwrap_or(0)
    }

    /// Miss rate at `deadline`, 1.0 when that deadline was not evaluated (the reference's sort key).
    pub fn miss_rate(&self, deadline: u32) -> f64 {
        self.miss_rates.get(&deadline.to_string()).copied().unwrap_or(1.0)
    }

    /// The deadlines evaluated.
    pub fn deadlines(&self) -> &[u32] {
        &self.deadlines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_stats_match_a_full_sort() {
        let mut v: Vec<f64> = (0..1000).map(|i| ((i * 7919) % 1000) as f64).collect();
        v[3] = f64::INFINITY;
        let mut sorted = v.clone();
        sorted.sort_by(f64::total_cmp);
        let ranks = [999, 0, 500, 950, 990, 500];
        let got = order_stats(&mut v, &ranks);
        for (g, r) in got.iter().zip(ranks) {
            assert_eq!(*g, sorted[r]);
        }
    }

    #[test]
    fn quantiles_agree_with_stats_crate() {
        let base: Vec<f64> = (0..37).map(|i| ((i * 13) % 37) as f64 * 1.5).collect();
        let mut sorted = base.clone();
        tailcut_stats::sort_latencies(&mut sorted);
        for est in [Estimator::Nearest, Estimator::Linear] {
            let mut scratch = base.clone();
            let q = quantiles(&mut scratch, &[0.5, 0.95, 0.99], est);
            assert_eq!(q, vec![est.quantile(&sorted, 0.5), est.quantile(&sorted, 0.95), est.quantile(&sorted, 0.99)]);
        }
    }
}
