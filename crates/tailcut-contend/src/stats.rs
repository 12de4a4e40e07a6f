//! Statistics of one agent's samples and the damage sharing did to them.
//!
//! Quantiles use linear interpolation. A p99 is reported only from 100 samples and a
//! p99.9 only from 1,000 (a tail quantile of fewer samples is just the maximum). The
//! degradation factor at a quantile is `shared / solo`; its 95% interval comes from a
//! seeded percentile bootstrap that resamples both arms.

use serde::{Deserialize, Serialize};
use tailcut_stats::{bootstrap_ratio_cis, quantile_linear, sort_latencies, SplitMix64};

/// One arm (solo or shared) of one agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArmStats {
    /// Iterations measured.
    pub samples: usize,
    /// Median iteration, ms.
    pub p50_ms: f64,
    /// 95th percentile, ms.
    pub p95_ms: f64,
    /// 99th percentile, ms (null under 100 samples).
    pub p99_ms: Option<f64>,
    /// 99.9th percentile, ms (null under 1,000 samples).
    pub p999_ms: Option<f64>,
    /// Slowest iteration, ms.
    pub max_ms: f64,
    /// Mean iteration, ms.
    pub mean_ms: f64,
    /// p99 / p50 (p95 / p50 under 100 samples).
    pub jitter: f64,
    /// Iterations per second of measurement window.
    pub throughput_per_s: f64,
    /// p99 of each trial, ms, to show trial-to-trial spread.
    pub trial_p99_ms: Vec<f64>,
}

/// Quantiles and counts of an arm.
pub fn arm_stats(samples_ms: &[f64], window_s: f64, trial_p99_ms: Vec<f64>) -> ArmStats {
    let mut v = samples_ms.to_vec();
    sort_latencies(&mut v);
    let n = v.len();
    let q = |q: f64| quantile_linear(&v, q);
    let p50 = q(0.5);
    let p99 = (n >= 100).then(|| q(0.99));
    ArmStats {
        samples: n,
        p50_ms: p50,
        p95_ms: q(0.95),
        p99_ms: p99,
        p999_ms: (n >= 1000).then(|| q(0.999)),
        max_ms: v.last().copied().unwrap_or(f64::NAN),
        mean_ms: if n == 0 { f64::NAN } else { v.iter().sum::<f64>() / n as f64 },
        jitter: p99.unwrap_or_else(|| q(0.95)) / p50,
        throughput_per_s: if window_s > 0.0 { n as f64 / window_s } else { f64::NAN },
        trial_p99_ms,
    }
}

/// Shared-over-solo factors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Degradation {
    /// p50 factor.
    pub p50: f64,
    /// p95 factor.
    pub p95: f64,
    /// p99 factor (null when either arm has under 100 samples).
    pub p99: Option<f64>,
    /// p99.9 factor (null when either arm has under 1,000 samples).
    pub p999: Option<f64>,
    /// Throughput factor (shared / solo; below 1 means slower).
    pub throughput: f64,
    /// Jitter factor.
    pub jitter: f64,
    /// Bootstrap 95% intervals keyed `p50`, `p95`, `p99`, `p999`.
    pub ci95: std::collections::BTreeMap<String, [f64; 2]>,
}

/// Factors and bootstrap intervals between two arms' samples.
pub fn degradation(solo_ms: &[f64], shared_ms: &[f64], solo: &ArmStats, shared: &ArmStats, rounds: usize, seed: u64) -> Degradation {
    let mut qs = vec![("p50", 0.5), ("p95", 0.95)];
    if solo.p99_ms.is_some() && shared.p99_ms.is_some() {
        qs.push(("p99", 0.99));
    }
    if solo.p999_ms.is_some() && shared.p999_ms.is_some() {
        qs.push(("p999", 0.999));
    }
    let cis = bootstrap_ratio_cis(solo_ms, shared_ms, &qs.iter().map(|(_, q)| *q).collect::<Vec<_>>(), rounds, seed);
    Degradation {
        p50: shared.p50_ms / solo.p50_ms,
        p95: shared.p95_ms / solo.p95_ms,
        p99: solo.p99_ms.zip(shared.p99_ms).map(|(a, b)| b / a),
        p999: solo.p999_ms.zip(shared.p999_ms).map(|(a, b)| b / a),
        throughput: shared.throughput_per_s / solo.throughput_per_s,
        jitter: shared.jitter / solo.jitter,
        ci95: qs.iter().zip(cis).map(|((name, _), (lo, hi))| (name.to_string(), [lo, hi])).collect(),
    }
}

/// The median of `values` and its percentile-bootstrap 95% interval over the values
/// themselves (resampled with replacement, `rounds` times, seeded). With one value the
/// interval is that value; NaN for none.
pub fn median_with_ci(values: &[f64], rounds: usize, seed: u64) -> (f64, [f64; 2]) {
    let mut v: Vec<f64> = values.to_vec();
    sort_latencies(&mut v);
    if v.is_empty() {
        return (f64::NAN, [f64::NAN, f64::NAN]);
    }
    let median = quantile_linear(&v, 0.5);
    if v.len() == 1 || rounds == 0 {
        return (median, [median, median]);
    }
    let mut rng = SplitMix64::new(seed);
    let mut medians = Vec::with_capacity(rounds);
    let mut r = vec![0.0; v.len()];
    for _ in 0..rounds {
        for x in r.iter_mut() {
            *x = v[rng.below(v.len())];
        }
        sort_latencies(&mut r);
        medians.push(quantile_linear(&r, 0.5));
    }
    sort_latencies(&mut medians);
    (median, [quantile_linear(&medians, 0.025), quantile_linear(&medians, 0.975)])
}

/// Shared-over-solo factors from trials whose solo and shared arms ran back to back: each
/// factor is the **median across trials of each trial's own ratio**, and each interval a
/// bootstrap over trials. A load burst that spoils one trial's solo (or shared) arm
/// spoils that trial's ratio only, which the median ignores when there are three trials
/// or more (pooling the trials' samples instead lets one burst own the pooled p99).
/// `trials` holds `(solo, shared)` per trial; p99 (p99.9) factors only when every arm has
/// 100 (1,000) samples.
pub fn trial_degradation(trials: &[(ArmStats, ArmStats)], rounds: usize, seed: u64) -> Degradation {
    let mut ci95 = std::collections::BTreeMap::new();
    let mut factor = |name: &str, pick: &dyn Fn(&ArmStats) -> Option<f64>, k: u64| -> Option<f64> {
        let ratios: Option<Vec<f64>> = trials.iter().map(|(a, b)| Some(pick(b)? / pick(a)?)).collect();
        let ratios = ratios.filter(|r| !r.is_empty())?;
        let (m, ci) = median_with_ci(&ratios, rounds, seed ^ k.wrapping_mul(0x9E37_79B9));
        if !name.is_empty() {
            ci95.insert(name.to_string(), ci);
        }
        Some(m)
    };
    let p50 = factor("p50", &|s| Some(s.p50_ms), 1).unwrap_or(f64::NAN);
    let p95 = factor("p95", &|s| Some(s.p95_ms), 2).unwrap_or(f64::NAN);
    let p99 = factor("p99", &|s| s.p99_ms, 3);
    let p999 = factor("p999", &|s| s.p999_ms, 4);
    let throughput = factor("", &|s| Some(s.throughput_per_s), 5).unwrap_or(f64::NAN);
    let jitter = factor("", &|s| Some(s.jitter), 6).unwrap_or(f64::NAN);
    Degradation { p50, p95, p99, p999, throughput, jitter, ci95 }
}

/// Thresholds of the "hidden tail damage" verdict.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct VerdictThresholds {
    /// The median "barely moves" when its factor is at most 1 + this (a median that got
    /// faster hides the damage just as well).
    pub median_tolerance: f64,
    /// The tail "moves" when its p99 factor (p95 if no p99) is at least this.
    pub tail_factor: f64,
}

impl Default for VerdictThresholds {
    fn default() -> Self {
        VerdictThresholds { median_tolerance: 0.10, tail_factor: 1.25 }
    }
}

/// A one-line reading of the factors.
pub fn verdict(d: &Degradation, t: &VerdictThresholds) -> String {
    let (tail_name, tail) = match d.p99 {
        Some(f) => ("p99", f),
        None => ("p95", d.p95),
    };
    let median_flat = d.p50 <= 1.0 + t.median_tolerance;
    let tail_moved = tail >= t.tail_factor;
    match (median_flat, tail_moved) {
        (true, true) => format!(
            "hidden tail damage: median ×{:.2} (no more than +{:.0}%) but {tail_name} ×{:.2} — medians and averages would call this healthy",
            d.p50,
            t.median_tolerance * 100.0,
            tail
        ),
        (false, true) => format!("median and tail both degraded: p50 ×{:.2}, {tail_name} ×{:.2}", d.p50, tail),
        (false, false) => format!("median moved (×{:.2}) but the tail did not ({tail_name} ×{:.2})", d.p50, tail),
        (true, false) => format!("no material damage: p50 ×{:.2}, {tail_name} ×{:.2}", d.p50, tail),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp(n: usize, base: f64) -> Vec<f64> {
        (0..n).map(|i| base + i as f64 / n as f64).collect()
    }

    #[test]
    fn arm_stats_on_fixed_samples() {
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        let s = arm_stats(&v, 2.0, vec![]);
        assert_eq!(s.samples, 1000);
        assert!((s.p50_ms - 500.5).abs() < 1e-9);
        assert!((s.p95_ms - 950.05).abs() < 1e-9);
        assert!((s.p99_ms.unwrap() - 990.01).abs() < 1e-9);
        assert!((s.p999_ms.unwrap() - 999.001).abs() < 1e-9);
        assert_eq!(s.max_ms, 1000.0);
        assert!((s.jitter - 990.01 / 500.5).abs() < 1e-12);
        assert_eq!(s.throughput_per_s, 500.0);
        let few = arm_stats(&v[..50], 1.0, vec![]);
        assert_eq!(few.p99_ms, None);
        assert_eq!(few.p999_ms, None);
    }

    #[test]
    fn degradation_and_verdict_on_fixed_samples() {
        // Same median, a fat tail in the shared arm: the published pattern.
        let solo = ramp(2000, 3.6);
        let mut shared = solo.clone();
        for x in shared.iter_mut().rev().take(40) {
            *x *= 1.8;
        }
        let (a, b) = (arm_stats(&solo, 1.0, vec![]), arm_stats(&shared, 1.0, vec![]));
        let d = degradation(&solo, &shared, &a, &b, 200, 1);
        assert!((d.p50 - 1.0).abs() < 1e-9);
        assert!(d.p99.unwrap() > 1.5);
        let ci = d.ci95["p99"];
        assert!(ci[0] <= d.p99.unwrap() && d.p99.unwrap() <= ci[1] + 1e-9, "{ci:?}");
        assert_eq!(d, degradation(&solo, &shared, &a, &b, 200, 1), "seeded bootstrap is deterministic");
        let v = verdict(&d, &VerdictThresholds::default());
        assert!(v.starts_with("hidden tail damage"), "{v}");
        let none = degradation(&solo, &solo, &a, &a, 50, 1);
        assert!(verdict(&none, &VerdictThresholds::default()).starts_with("no material damage"));
    }

    #[test]
    fn published_numbers_read_as_hidden_damage() {
        // FFT agent: p99 3.68 → 6.10 ms with a flat median (≈3.61 → 3.59).
        let d = Degradation {
            p50: 3.59 / 3.61,
            p95: 1.2,
            p99: Some(6.10 / 3.68),
            p999: None,
            throughput: 0.927,
            jitter: 1.70 / 1.02,
            ci95: Default::default(),
        };
        let v = verdict(&d, &VerdictThresholds::default());
        assert!(v.starts_with("hidden tail damage") && v.contains("×1.66"), "{v}");
    }
}
