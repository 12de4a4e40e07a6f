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

/// The standard normal distribution function Φ(x) (Abramowitz and Stegun 7.1.26 for erf,
/// absolute error under 1.5 × 10⁻⁷: ample for a probability stated to the percent). Two
/// functions do not justify a numerics crate.
pub fn normal_cdf(x: f64) -> f64 {
    let z = x.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * z);
    let poly = t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-z * z).exp();
    if x >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

/// The standard normal quantile Φ⁻¹(p) for 0 < p < 1 (Acklam's rational approximation,
/// relative error under 1.2 × 10⁻⁹); −∞ at 0 and +∞ at 1.
pub fn normal_quantile(p: f64) -> f64 {
    if p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    const A: [f64; 6] =
        [-3.969683028665376e1, 2.209460984245205e2, -2.759285104469687e2, 1.383_577_518_672_69e2, -3.066479806614716e1, 2.506628277459239];
    const B: [f64; 5] = [-5.447609879822406e1, 1.615858368580409e2, -1.556989798598866e2, 6.680131188771972e1, -1.328068155288572e1];
    const C: [f64; 6] =
        [-7.784894002430293e-3, -3.223964580411365e-1, -2.400758277161838, -2.549732539343734, 4.374664141464968, 2.938163982698783];
    const D: [f64; 4] = [7.784695709041462e-3, 3.224671290700398e-1, 2.445134137142996, 3.754408661907416];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5]) / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

/// Student's t quantile at 0.975 for `df` degrees of freedom (table to 30, then
/// 1.96 + 2.4 / df, within 0.3% of the exact value).
pub fn t975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101,
        2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df - 1],
        _ => 1.96 + 2.4 / df as f64,
    }
}

/// Widens each interval of a [`trial_degradation`] to hold the Student t 95% interval of
/// the trials' log ratios as well, exp(mean ± t₀.₉₇₅(n−1) · sd / √n). With few trials a
/// percentile bootstrap over them is no wider than their range — with 3 trials it *is*
/// [min, max], which the median of the next run's trials misses about half the time — so
/// the interval would promise a run-to-run agreement the trials cannot show. The point
/// values stay the medians.
pub fn widen_over_trials(d: &mut Degradation, trials: &[(ArmStats, ArmStats)]) {
    type Pick = fn(&ArmStats) -> Option<f64>;
    let picks: [(&str, Pick); 4] =
        [("p50", |s| Some(s.p50_ms)), ("p95", |s| Some(s.p95_ms)), ("p99", |s| s.p99_ms), ("p999", |s| s.p999_ms)];
    for (name, pick) in picks {
        let Some(ci) = d.ci95.get_mut(name) else { continue };
        let logs: Option<Vec<f64>> = trials.iter().map(|(a, b)| Some((pick(b)? / pick(a)?).ln())).collect();
        let Some(logs) = logs.filter(|l| l.len() >= 2 && l.iter().all(|x| x.is_finite())) else { continue };
        let n = logs.len() as f64;
        let mean = logs.iter().sum::<f64>() / n;
        let sd = (logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        let half = t975(logs.len() - 1) * sd / n.sqrt();
        ci[0] = ci[0].min((mean - half).exp());
        ci[1] = ci[1].max((mean + half).exp());
    }
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

/// The four readings of a (median, tail) pair of factors.
fn reading(median_flat: bool, tail_moved: bool) -> &'static str {
    match (median_flat, tail_moved) {
        (true, true) => "hidden tail damage",
        (false, true) => "median and tail both degraded",
        (false, false) => "median moved but the tail did not",
        (true, false) => "no material damage",
    }
}

/// Which side of a threshold an interval lies on: `Some(true)` wholly at or below
/// `limit` (`below_inclusive`) or at or above it, `Some(false)` wholly on the other side,
/// `None` when it straddles the threshold. Without an interval the point decides.
fn side(point: f64, ci: Option<&[f64; 2]>, limit: f64, at_or_below: bool) -> Option<bool> {
    let [lo, hi] = match ci {
        Some(ci) if ci[0].is_finite() && ci[1].is_finite() => *ci,
        _ => [point, point],
    };
    if at_or_below {
        if hi <= limit {
            Some(true)
        } else if lo > limit {
            Some(false)
        } else {
            None
        }
    } else if lo >= limit {
        Some(true)
    } else if hi < limit {
        Some(false)
    } else {
        None
    }
}

/// The verdict read from the factors' 95% intervals, not their point values: a condition
/// ("the median barely moves", "the tail moves") holds only when its whole interval is on
/// one side of its threshold. When an interval straddles a threshold the verdict says
/// **unstable**, names the readings it lies between and the factor that decides; the
/// second value is false then. Without intervals the point values decide (as [`verdict`]).
pub fn verdict_from_intervals(d: &Degradation, t: &VerdictThresholds) -> (String, bool) {
    let (tail_name, tail) = match d.p99 {
        Some(f) => ("p99", f),
        None => ("p95", d.p95),
    };
    let fmt = |name: &str, v: f64| match d.ci95.get(name) {
        Some(ci) => format!("{name} ×{v:.2} ({:.2}–{:.2})", ci[0], ci[1]),
        None => format!("{name} ×{v:.2}"),
    };
    let median_limit = 1.0 + t.median_tolerance;
    let flat = side(d.p50, d.ci95.get("p50"), median_limit, true);
    let moved = side(tail, d.ci95.get(tail_name), t.tail_factor, false);
    match (flat, moved) {
        (Some(_), Some(_)) => (verdict(d, t), true),
        _ => {
            let options = |f: Option<bool>| f.map_or(vec![true, false], |x| vec![x]);
            let mut readings: Vec<&str> = Vec::new();
            for f in options(flat) {
                for m in options(moved) {
                    readings.push(reading(f, m));
                }
            }
            let mut straddling = Vec::new();
            if flat.is_none() {
                straddling.push(format!("{} straddles the ×{median_limit:.2} median threshold", fmt("p50", d.p50)));
            }
            if moved.is_none() {
                straddling.push(format!("{} straddles the ×{:.2} tail threshold", fmt(tail_name, tail), t.tail_factor));
            }
            let between =
                if readings.len() == 4 { "any of the four readings".to_string() } else { format!("\"{}\"", readings.join("\" and \"")) };
            (
                format!(
                    "unstable — between {between}: {}; the trials disagree, so more trials (or a quieter machine) would decide it",
                    straddling.join("; ")
                ),
                false,
            )
        }
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
    fn normal_functions_match_tables() {
        for (x, p) in [(0.0, 0.5), (1.0, 0.841_344_7), (-1.281_551_6, 0.1), (1.644_853_6, 0.95), (2.326_347_9, 0.99)] {
            assert!((normal_cdf(x) - p).abs() < 2e-7, "Φ({x}) = {} ≠ {p}", normal_cdf(x));
            assert!((normal_quantile(p) - x).abs() < 1e-6, "Φ⁻¹({p}) = {} ≠ {x}", normal_quantile(p));
        }
        assert!((normal_quantile(0.001) + 3.090_232_3).abs() < 1e-6);
        assert_eq!(normal_quantile(0.0), f64::NEG_INFINITY);
    }

    fn with_cis(p50: f64, p50_ci: [f64; 2], p99: f64, p99_ci: [f64; 2]) -> Degradation {
        let mut ci95 = std::collections::BTreeMap::new();
        ci95.insert("p50".to_string(), p50_ci);
        ci95.insert("p99".to_string(), p99_ci);
        Degradation { p50, p95: p99, p99: Some(p99), p999: None, throughput: 0.5, jitter: 1.0, ci95 }
    }

    /// The two runs of issue 32: p50 ×1.32 (1.31–1.33) read "both degraded", p50 ×1.00
    /// read "hidden tail damage". With intervals over trials, a p50 interval that spans
    /// the ×1.10 threshold reads "unstable" and names both readings; an interval wholly on
    /// one side reads as before.
    #[test]
    fn the_verdict_follows_the_intervals_and_says_when_it_is_unstable() {
        let t = VerdictThresholds::default();
        let (v, stable) = verdict_from_intervals(&with_cis(1.00, [0.98, 1.32], 8.0, [7.5, 9.4]), &t);
        assert!(!stable && v.starts_with("unstable"), "{v}");
        assert!(v.contains("hidden tail damage") && v.contains("median and tail both degraded"), "{v}");
        assert!(v.contains("p50 ×1.00 (0.98–1.32) straddles the ×1.10 median threshold"), "{v}");
        let (v2, _) = verdict_from_intervals(&with_cis(1.32, [0.98, 1.33], 9.3, [7.9, 9.5]), &t);
        assert_eq!(v2.split(':').next(), v.split(':').next(), "both runs give the same (unstable) verdict");
        let (v, stable) = verdict_from_intervals(&with_cis(1.00, [0.97, 1.04], 8.0, [7.5, 9.4]), &t);
        assert!(stable && v.starts_with("hidden tail damage"), "{v}");
        let (v, stable) = verdict_from_intervals(&with_cis(1.32, [1.31, 1.33], 9.3, [9.0, 9.6]), &t);
        assert!(stable && v.starts_with("median and tail both degraded"), "{v}");
        let (v, stable) = verdict_from_intervals(&with_cis(1.0, [0.99, 1.01], 1.3, [1.1, 1.5]), &t);
        assert!(!stable && v.contains("p99 ×1.30 (1.10–1.50) straddles the ×1.25 tail threshold"), "{v}");
        assert!(v.contains("hidden tail damage") && v.contains("no material damage"), "{v}");
    }

    /// Three trials whose p50 ratios are 0.90, 0.95, 1.00: the bootstrap over trials gives
    /// their range; the t interval is wider (0.83–1.08), and the median stays.
    #[test]
    fn the_interval_over_few_trials_is_widened_to_the_t_interval() {
        let arm = |p50: f64| arm_stats(&vec![p50; 200], 1.0, vec![]);
        let trials: Vec<(ArmStats, ArmStats)> = [0.90, 0.95, 1.00].iter().map(|r| (arm(1.0), arm(*r))).collect();
        let mut d = trial_degradation(&trials, 500, 3);
        let [lo, hi] = d.ci95["p50"];
        assert!((lo - 0.90).abs() < 1e-9 && (hi - 1.00).abs() < 1e-9, "bootstrap of 3 = their range: {lo} {hi}");
        widen_over_trials(&mut d, &trials);
        let [lo, hi] = d.ci95["p50"];
        assert!(lo < 0.85 && hi > 1.08, "t interval with 2 degrees of freedom: {lo}–{hi}");
        assert!((d.p50 - 0.95).abs() < 1e-9);
        assert!((t975(2) - 4.303).abs() < 1e-9 && (t975(100) - 1.984).abs() < 0.002);
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
