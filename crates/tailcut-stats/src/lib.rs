//! # tailcut-stats
//!
//! The statistics every tailcut table uses, in one place so that demo, replay, report
//! and contention numbers agree:
//!
//! - [`quantile_nearest`]: the reference tool's order statistic, `sorted[round_half_even(q·(n−1))]`,
//!   with +∞ standing for "no valid result" (sorted last);
//! - [`quantile_linear`]: linear interpolation between the neighbouring order statistics
//!   (+∞ if either neighbour is +∞);
//! - [`wilson`]: the Wilson score interval for a binomial proportion (z = 1.96);
//! - [`bootstrap_ratio_ci`]: a seeded percentile-bootstrap interval for a ratio of
//!   quantiles (used for degradation factors);
//! - [`reliability`]: how predicted miss probabilities and costs compare with what
//!   happened (deciles, Wilson intervals, Brier score, expected calibration error).

#![warn(missing_docs)]
// Unit tests spawn and read the wall clock freely (clippy.toml).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod reliability;

/// Rounds half to even, as Python's `round` does on binary doubles.
pub fn round_half_even(x: f64) -> f64 {
    let r = x.round();
    if (x - x.trunc()).abs() == 0.5 {
        2.0 * (x / 2.0).round()
    } else {
        r
    }
}

/// Sorts in place with +∞ (and NaN, treated as +∞) last.
pub fn sort_latencies(values: &mut [f64]) {
    values.sort_by(|a, b| {
        let a = if a.is_nan() { f64::INFINITY } else { *a };
        let b = if b.is_nan() { f64::INFINITY } else { *b };
        a.total_cmp(&b)
    });
}

/// The order statistic at index `round_half_even(q·(n−1))`, clamped to `[0, n−1]`, of
/// already **sorted** values. Returns +∞ for an empty slice.
pub fn quantile_nearest(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::INFINITY;
    }
    let n = sorted.len();
    let idx = round_half_even(q * (n as f64 - 1.0));
    let idx = (idx.max(0.0) as usize).min(n - 1);
    sorted[idx]
}

/// Linear interpolation at `h = q·(n−1)` between `sorted[floor h]` and the next value, of
/// already **sorted** values; +∞ if either neighbour is +∞ or the slice is empty.
pub fn quantile_linear(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::INFINITY;
    }
    let n = sorted.len();
    let h = q * (n as f64 - 1.0);
    let lo = (h.floor().max(0.0) as usize).min(n - 1);
    let hi = (lo + 1).min(n - 1);
    let (a, b) = (sorted[lo], sorted[hi]);
    if a.is_infinite() || b.is_infinite() {
        return f64::INFINITY;
    }
    a + (h - lo as f64) * (b - a)
}

/// Which quantile estimator a table uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Estimator {
    /// The reference tool's order statistic (the default; matches its tables).
    #[default]
    Nearest,
    /// Linear interpolation.
    Linear,
}

impl Estimator {
    /// The quantile of sorted values under this estimator.
    pub fn quantile(self, sorted: &[f64], q: f64) -> f64 {
        match self {
            Estimator::Nearest => quantile_nearest(sorted, q),
            Estimator::Linear => quantile_linear(sorted, q),
        }
    }
}

/// Largest finite value, or +∞ when there is none.
pub fn max_finite(values: &[f64]) -> f64 {
    values
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
        .unwrap_or(f64::INFINITY)
}

/// Wilson score interval for `k` successes out of `n` at z = 1.96; `[0, 1]` when n = 0.
pub fn wilson(k: u64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let z = 1.96f64;
    let nf = n as f64;
    let p = k as f64 / nf;
    let den = 1.0 + z * z / nf;
    let centre = (p + z * z / (2.0 * nf)) / den;
    let half = (z / den) * (p * (1.0 - p) / nf + z * z / (4.0 * nf * nf)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// A small, fast, seeded PRNG (SplitMix64) for resampling; deterministic across platforms.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// Seeds the generator.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform index below `n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

/// Percentile-bootstrap 95% interval for `quantile(b, q) / quantile(a, q)`, resampling each
/// sample independently `rounds` times with a seeded generator. Returns `(lo, hi)`;
/// NaN bounds when either sample is empty.
pub fn bootstrap_ratio_ci(a: &[f64], b: &[f64], q: f64, rounds: usize, seed: u64) -> (f64, f64) {
    if a.is_empty() || b.is_empty() || rounds == 0 {
        return (f64::NAN, f64::NAN);
    }
    let mut rng = SplitMix64::new(seed);
    let mut ratios = Vec::with_capacity(rounds);
    let mut ra = vec![0.0; a.len()];
    let mut rb = vec![0.0; b.len()];
    for _ in 0..rounds {
        for x in ra.iter_mut() {
            *x = a[rng.below(a.len())];
        }
        for x in rb.iter_mut() {
            *x = b[rng.below(b.len())];
        }
        sort_latencies(&mut ra);
        sort_latencies(&mut rb);
        ratios.push(quantile_linear(&rb, q) / quantile_linear(&ra, q));
    }
    sort_latencies(&mut ratios);
    (quantile_linear(&ratios, 0.025), quantile_linear(&ratios, 0.975))
}

/// Linear-interpolation quantile of **unsorted** values, by selection (reorders `values`).
pub fn quantile_linear_select(values: &mut [f64], q: f64) -> f64 {
    let n = values.len();
    if n == 0 {
        return f64::INFINITY;
    }
    let h = q * (n as f64 - 1.0);
    let lo = (h.floor().max(0.0) as usize).min(n - 1);
    let (_, a, right) = values.select_nth_unstable_by(lo, f64::total_cmp);
    let a = *a;
    let b = if lo + 1 < n { right.iter().copied().fold(f64::INFINITY, f64::min) } else { a };
    if a.is_infinite() || b.is_infinite() {
        return f64::INFINITY;
    }
    a + (h - lo as f64) * (b - a)
}

/// Percentile-bootstrap 95% intervals for `quantile(b, q) / quantile(a, q)` at several
/// quantiles from the same resamples (linear estimator, seeded, selection-based so large
/// samples stay fast). One `(lo, hi)` per entry of `qs`; NaN bounds for empty inputs.
pub fn bootstrap_ratio_cis(a: &[f64], b: &[f64], qs: &[f64], rounds: usize, seed: u64) -> Vec<(f64, f64)> {
    if a.is_empty() || b.is_empty() || rounds == 0 {
        return vec![(f64::NAN, f64::NAN); qs.len()];
    }
    let mut rng = SplitMix64::new(seed);
    let mut ratios: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); qs.len()];
    let mut ra = vec![0.0; a.len()];
    let mut rb = vec![0.0; b.len()];
    for _ in 0..rounds {
        for x in ra.iter_mut() {
            *x = a[rng.below(a.len())];
        }
        for x in rb.iter_mut() {
            *x = b[rng.below(b.len())];
        }
        for (k, q) in qs.iter().enumerate() {
            let qa = quantile_linear_select(&mut ra, *q);
            let qb = quantile_linear_select(&mut rb, *q);
            ratios[k].push(qb / qa);
        }
    }
    ratios
        .into_iter()
        .map(|mut r| {
            sort_latencies(&mut r);
            (quantile_linear(&r, 0.025), quantile_linear(&r, 0.975))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn select_quantile_matches_sorted() {
        use super::*;
        let base: Vec<f64> = (0..101).map(|i| ((i * 37) % 101) as f64).collect();
        let mut sorted = base.clone();
        sort_latencies(&mut sorted);
        for q in [0.0, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0] {
            let mut v = base.clone();
            assert_eq!(quantile_linear_select(&mut v, q), quantile_linear(&sorted, q), "q={q}");
        }
    }

    #[test]
    fn multi_bootstrap_brackets_the_ratio() {
        use super::*;
        let a: Vec<f64> = (1..=300).map(f64::from).collect();
        let b: Vec<f64> = a.iter().map(|x| x * 3.0).collect();
        let cis = bootstrap_ratio_cis(&a, &b, &[0.5, 0.99], 200, 3);
        for (lo, hi) in cis {
            assert!(lo <= 3.0 + 1e-9 && hi >= 3.0 - 1e-9, "({lo},{hi})");
        }
    }

    use super::*;

    #[test]
    fn half_even_matches_python_round() {
        assert_eq!(round_half_even(26.5), 26.0);
        assert_eq!(round_half_even(8.5), 8.0);
        assert_eq!(round_half_even(17.5), 18.0);
        assert_eq!(round_half_even(33.25), 33.0);
        assert_eq!(round_half_even(2.5), 2.0);
        assert_eq!(round_half_even(3.5), 4.0);
        assert_eq!(round_half_even(18.05), 18.0);
    }

    #[test]
    fn nearest_uses_half_even_index_and_sorts_infinity_last() {
        let mut v = vec![3.0, f64::INFINITY, 1.0, 2.0];
        sort_latencies(&mut v);
        assert_eq!(v, vec![1.0, 2.0, 3.0, f64::INFINITY]);
        // q(n-1) = 1.5 → round half even → 2.
        assert_eq!(quantile_nearest(&v, 0.5), 3.0);
        assert_eq!(quantile_nearest(&v, 1.0), f64::INFINITY);
        assert_eq!(quantile_nearest(&[], 0.5), f64::INFINITY);
    }

    #[test]
    fn linear_interpolates_and_propagates_infinity() {
        let v: Vec<f64> = (0..20).map(f64::from).collect();
        // h = 0.95 × 19 = 18.05 → 18 + 0.05.
        assert!((quantile_linear(&v, 0.95) - 18.05).abs() < 1e-12);
        let w = vec![1.0, 2.0, f64::INFINITY];
        assert_eq!(quantile_linear(&w, 0.75), f64::INFINITY);
        assert_eq!(quantile_linear(&w, 0.25), 1.5);
    }

    #[test]
    fn wilson_matches_reference_values() {
        let cases = [
            ((0, 36), (0.0, 0.0964)),
            ((1, 36), (0.00492, 0.1417)),
            ((5, 36), (0.0608, 0.2866)),
            ((11, 36), (0.1800, 0.4686)),
            ((0, 20), (0.0, 0.161)),
            ((1, 20), (0.0089, 0.2361)),
            ((7, 20), (0.1812, 0.5671)),
        ];
        for ((k, n), (lo, hi)) in cases {
            let (a, b) = wilson(k, n);
            let tol = |x: f64| 0.5 * 10f64.powi(-(format!("{x}").split('.').nth(1).map_or(0, str::len) as i32));
            assert!((a - lo).abs() <= tol(lo), "({k},{n}) lo {a} vs {lo}");
            assert!((b - hi).abs() <= tol(hi), "({k},{n}) hi {b} vs {hi}");
        }
        assert_eq!(wilson(0, 0), (0.0, 1.0));
    }

    #[test]
    fn max_finite_skips_infinity() {
        assert_eq!(max_finite(&[1.0, f64::INFINITY, 5.0]), 5.0);
        assert_eq!(max_finite(&[f64::INFINITY]), f64::INFINITY);
    }

    #[test]
    fn bootstrap_is_deterministic_and_brackets_the_ratio() {
        let a: Vec<f64> = (1..=200).map(|i| f64::from(i) / 100.0).collect();
        let b: Vec<f64> = a.iter().map(|x| x * 2.0).collect();
        let (lo, hi) = bootstrap_ratio_ci(&a, &b, 0.5, 500, 7);
        assert_eq!((lo, hi), bootstrap_ratio_ci(&a, &b, 0.5, 500, 7));
        assert!(lo <= 2.0 && hi >= 2.0 && lo > 1.5 && hi < 2.5, "({lo}, {hi})");
    }
}
