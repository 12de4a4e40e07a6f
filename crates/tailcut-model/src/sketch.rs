//! A decayed log-bucket quantile sketch (DDSketch-style relative-error buckets with
//! forward exponential decay).
//!
//! Why not a crate: `hdrhistogram` counts in integers (no fractional weights, so no decay
//! short of rotating whole histograms) and `sketches-ddsketch` has neither weights nor
//! decay; both would still need our own CDF table build for the decision path. This one
//! is ~150 lines: values in `[MIN_S, MAX_S]` fall in buckets `gamma^k`, so a quantile is
//! within ±2 % of the true value; each insert weighs `g^n` (forward decay: the n-th
//! insert, `g = 2^(1/half_life)`), so an observation `half_life` inserts old counts half
//! as much as the newest, and an insert is O(1).

use serde::{Deserialize, Serialize};

/// Smallest distinguished value, s; smaller values share bucket 0.
pub const MIN_S: f64 = 1e-3;
/// Largest distinguished value, s; larger values share the last bucket.
pub const MAX_S: f64 = 1e4;
/// Bucket growth factor: ±2 % relative accuracy.
pub const GAMMA: f64 = 1.04;

fn ln_gamma() -> f64 {
    GAMMA.ln()
}

/// Number of buckets.
pub fn bucket_count() -> usize {
    ((MAX_S / MIN_S).ln() / ln_gamma()).ceil() as usize + 2
}

/// Bucket of a value (0 for values below [`MIN_S`]).
pub fn bucket_of(x: f64) -> usize {
    if x.is_nan() || x < MIN_S {
        return 0;
    }
    let k = ((x / MIN_S).ln() / ln_gamma()).floor() as usize + 1;
    k.min(bucket_count() - 1)
}

/// Representative value of bucket `k` (geometric middle).
pub fn bucket_value(k: usize) -> f64 {
    if k == 0 {
        return MIN_S * 0.5;
    }
    MIN_S * GAMMA.powf(k as f64 - 0.5)
}

/// Upper edge of bucket `k` (from a table built once: the fits ask for edges in loops).
pub fn bucket_upper(k: usize) -> f64 {
    static EDGES: std::sync::OnceLock<Vec<f64>> = std::sync::OnceLock::new();
    let edges = EDGES.get_or_init(|| (0..bucket_count()).map(|k| MIN_S * GAMMA.powf(k as f64)).collect());
    edges.get(k).copied().unwrap_or_else(|| MIN_S * GAMMA.powf(k as f64))
}

/// A decayed sketch of non-negative values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecayedSketch {
    /// Half-life in inserts.
    half_life: f64,
    /// Weight of the next insert (grows by `g` per insert; renormalised when large).
    scale: f64,
    /// Sum of bucket weights.
    total: f64,
    /// Inserts ever made.
    n: u64,
    /// Sparse-in-practice bucket weights (index → weight), stored dense.
    #[serde(with = "sparse")]
    buckets: Vec<f64>,
}

mod sparse {
    //! Buckets are written as `[[index, weight], ...]` for the non-empty ones, so a saved
    //! model stays small.
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
        let pairs: Vec<(usize, f64)> = v.iter().copied().enumerate().filter(|(_, w)| *w > 0.0).collect();
        pairs.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        let pairs: Vec<(usize, f64)> = Vec::deserialize(d)?;
        let mut v = vec![0.0; super::bucket_count()];
        for (k, w) in pairs {
            let slot = v.get_mut(k).ok_or_else(|| serde::de::Error::custom(format!("bucket index {k} out of range")))?;
            if !(w.is_finite() && w >= 0.0) {
                return Err(serde::de::Error::custom(format!("bucket {k}: weight {w} is not a finite non-negative number")));
            }
            *slot = w;
        }
        Ok(v)
    }
}

impl DecayedSketch {
    /// An empty sketch whose weights halve every `half_life` inserts (≥ 1).
    pub fn new(half_life: f64) -> DecayedSketch {
        DecayedSketch { half_life: half_life.max(1.0), scale: 1.0, total: 0.0, n: 0, buckets: vec![0.0; bucket_count()] }
    }

    /// Inserts a value (finite, ≥ 0; others are ignored).
    pub fn insert(&mut self, x: f64) {
        if !(x.is_finite() && x >= 0.0) {
            return;
        }
        let k = bucket_of(x);
        self.buckets[k] += self.scale;
        self.total += self.scale;
        self.n += 1;
        self.scale *= 2f64.powf(1.0 / self.half_life);
        if self.scale > 1e100 {
            let inv = 1.0 / self.scale;
            self.buckets.iter_mut().for_each(|w| *w *= inv);
            self.total *= inv;
            self.scale = 1.0;
        }
    }

    /// Inserts ever made.
    pub fn samples(&self) -> u64 {
        self.n
    }

    /// Effective (decayed) sample count: total weight relative to the newest insert.
    pub fn effective(&self) -> f64 {
        self.total / self.scale * 2f64.powf(1.0 / self.half_life)
    }

    /// Whether nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.total <= 0.0
    }

    /// P(X ≤ x) under the decayed weights (0 when empty).
    pub fn cdf(&self, x: f64) -> f64 {
        if self.is_empty() {
            return 0.0;
        }
        let k = bucket_of(x);
        let below: f64 = self.buckets[..=k].iter().sum();
        (below / self.total).min(1.0)
    }

    /// Fills `out[i] = P(X ≤ grid[i])` for an ascending grid in one pass.
    pub fn cdf_on(&self, grid: &[f64], out: &mut [f64]) {
        if self.is_empty() {
            out.iter_mut().for_each(|v| *v = 0.0);
            return;
        }
        let mut acc = 0.0;
        let mut k = 0usize;
        for (t, o) in grid.iter().zip(out.iter_mut()) {
            let last = bucket_of(*t);
            while k <= last && k < self.buckets.len() {
                acc += self.buckets[k];
                k += 1;
            }
            *o = (acc / self.total).min(1.0);
        }
    }

    /// Records an observation known only to exceed `c` (a loser cancelled at `c`): its
    /// weight is spread over the buckets above `c` in proportion to their current weight
    /// (Efron's redistribute-to-the-right, the Kaplan–Meier step). When nothing above `c`
    /// is known it goes to `2c`: pessimistic on purpose, because a tail seen only through
    /// cancellations would otherwise end exactly where the policy cancels. Without this, a policy that cancels slow attempts
    /// would only ever see fast ones and learn a tail that is too short.
    pub fn insert_censored(&mut self, c: f64) {
        if !(c.is_finite() && c >= 0.0) {
            return;
        }
        let k = bucket_of(c);
        let above: f64 = self.buckets[k + 1..].iter().sum();
        if above > 0.0 {
            let f = self.scale / above;
            self.buckets[k + 1..].iter_mut().for_each(|w| *w += *w * f);
        } else {
            self.buckets[bucket_of(2.0 * c)] += self.scale;
        }
        self.total += self.scale;
        self.n += 1;
        self.scale *= 2f64.powf(1.0 / self.half_life);
        if self.scale > 1e100 {
            let inv = 1.0 / self.scale;
            self.buckets.iter_mut().for_each(|w| *w *= inv);
            self.total *= inv;
            self.scale = 1.0;
        }
    }

    /// Records an observation known only to exceed `c`, distributing its weight like
    /// `shape`'s values above `c` (the latencies of comparable attempts that finished),
    /// or like [`DecayedSketch::insert_censored`] when `shape` has none above `c`.
    pub fn insert_censored_like(&mut self, c: f64, shape: &DecayedSketch) {
        if !(c.is_finite() && c >= 0.0) {
            return;
        }
        let k = bucket_of(c);
        let above: f64 = shape.buckets[k + 1..].iter().sum();
        if above <= 0.0 {
            self.insert_censored(c);
            return;
        }
        let f = self.scale / above;
        for (w, s) in self.buckets[k + 1..].iter_mut().zip(&shape.buckets[k + 1..]) {
            *w += s * f;
        }
        self.total += self.scale;
        self.n += 1;
        self.scale *= 2f64.powf(1.0 / self.half_life);
        if self.scale > 1e100 {
            let inv = 1.0 / self.scale;
            self.buckets.iter_mut().for_each(|w| *w *= inv);
            self.total *= inv;
            self.scale = 1.0;
        }
    }

    /// Mean of `min(X, cap) − h` over the values above `h`, and the share of weight above
    /// `h` (None when nothing is above), in one pass over the buckets.
    pub fn mean_excess(&self, h: f64, cap: f64) -> Option<(f64, f64)> {
        if self.is_empty() {
            return None;
        }
        let k0 = bucket_of(h) + 1;
        let (mut w, mut acc) = (0.0, 0.0);
        for (k, b) in self.buckets.iter().enumerate().skip(k0) {
            if *b > 0.0 {
                w += b;
                acc += b * (bucket_value(k).min(cap) - h).max(0.0);
            }
        }
        (w > 0.0).then(|| (acc / w, w / self.total))
    }

    /// The q-quantile (`None` when empty).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.is_empty() {
            return None;
        }
        let target = q.clamp(0.0, 1.0) * self.total;
        let mut acc = 0.0;
        for (k, w) in self.buckets.iter().enumerate() {
            acc += w;
            if acc >= target && *w > 0.0 {
                return Some(bucket_value(k));
            }
        }
        self.buckets.iter().rposition(|w| *w > 0.0).map(bucket_value)
    }
}

/// A snapshot of a sketch's CDF with the mass of each bucket spread evenly over the
/// bucket (linear inside a bucket), for fits that need more than the ±2 % buckets: the
/// SingleR fit and the adaptive delay. Built once per refresh, each lookup is O(1).
#[derive(Debug, Clone)]
pub struct CdfTable {
    /// cum[k] = weight of buckets 0..=k over the total.
    cum: Vec<f64>,
}

/// Lower edge of bucket `k`.
fn bucket_lower(k: usize) -> f64 {
    if k == 0 {
        0.0
    } else {
        bucket_upper(k - 1)
    }
}

impl CdfTable {
    /// The table of `s` (None when empty).
    pub fn new(s: &DecayedSketch) -> Option<CdfTable> {
        if s.is_empty() {
            return None;
        }
        let mut acc = 0.0;
        let cum = s
            .buckets
            .iter()
            .map(|w| {
                acc += w;
                (acc / s.total).min(1.0)
            })
            .collect();
        Some(CdfTable { cum })
    }

    fn below(&self, k: usize) -> f64 {
        if k == 0 {
            0.0
        } else {
            self.cum[k - 1]
        }
    }

    /// P(X ≤ x), linear inside the bucket of `x`.
    pub fn cdf(&self, x: f64) -> f64 {
        if x.is_nan() || x < 0.0 {
            return 0.0;
        }
        let k = bucket_of(x);
        let (lo, hi) = (bucket_lower(k), bucket_upper(k));
        let f = if hi > lo { ((x - lo) / (hi - lo)).clamp(0.0, 1.0) } else { 1.0 };
        self.below(k) + f * (self.cum[k] - self.below(k))
    }

    /// The q-quantile, linear inside its bucket.
    pub fn quantile(&self, q: f64) -> f64 {
        let q = q.clamp(0.0, 1.0);
        let k = self.cum.partition_point(|c| *c < q - 1e-12).min(self.cum.len() - 1);
        let (b, w) = (self.below(k), self.cum[k] - self.below(k));
        let f = if w > 0.0 { ((q - b) / w).clamp(0.0, 1.0) } else { 1.0 };
        bucket_lower(k) + f * (bucket_upper(k) - bucket_lower(k))
    }

    /// The earliest time with the same survival as the q-quantile's bucket when the
    /// quantile sits above a gap (empty buckets just below its bucket): the upper edge of
    /// the last non-empty bucket below the gap. Waiting anywhere inside the gap sees no
    /// more answers than waiting until its start, so a hedge at the start launches as
    /// often and sooner. Without a gap, the quantile itself.
    pub fn hedge_point(&self, q: f64) -> f64 {
        let x = self.quantile(q);
        let k = bucket_of(x);
        if k == 0 || self.below(k) <= 0.0 || self.cum[k - 1] - self.below(k - 1) > 0.0 {
            return x;
        }
        // Buckets just below k are empty: find the last non-empty one.
        let mut j = k - 1;
        while j > 0 && self.cum[j] - self.below(j) <= 0.0 {
            j -= 1;
        }
        bucket_upper(j).min(x)
    }
}

/// A decayed success/trial counter: `P(event)` with the same forward decay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecayedRate {
    half_life: f64,
    scale: f64,
    hits: f64,
    trials: f64,
    n: u64,
}

impl DecayedRate {
    /// An empty counter.
    pub fn new(half_life: f64) -> DecayedRate {
        DecayedRate { half_life: half_life.max(1.0), scale: 1.0, hits: 0.0, trials: 0.0, n: 0 }
    }

    /// Records one trial.
    pub fn record(&mut self, hit: bool) {
        self.trials += self.scale;
        if hit {
            self.hits += self.scale;
        }
        self.n += 1;
        self.scale *= 2f64.powf(1.0 / self.half_life);
        if self.scale > 1e100 {
            let inv = 1.0 / self.scale;
            self.hits *= inv;
            self.trials *= inv;
            self.scale = 1.0;
        }
    }

    /// Trials ever recorded.
    pub fn samples(&self) -> u64 {
        self.n
    }

    /// Decayed (hits, trials), relative to the newest trial's weight.
    pub fn weights(&self) -> (f64, f64) {
        (self.hits / self.scale, self.trials / self.scale)
    }

    /// The decayed rate, shrunk toward `prior` with `prior_weight` pseudo-trials.
    pub fn rate(&self, prior: f64, prior_weight: f64) -> f64 {
        let eff = self.trials / self.scale;
        let hits = self.hits / self.scale;
        (hits + prior * prior_weight) / (eff + prior_weight).max(f64::MIN_POSITIVE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_within_relative_accuracy() {
        let mut s = DecayedSketch::new(1e9);
        for i in 1..=1000 {
            s.insert(i as f64 * 0.1);
        }
        for (q, want) in [(0.5, 50.0), (0.9, 90.0), (0.99, 99.0)] {
            let got = s.quantile(q).unwrap();
            assert!((got / want - 1.0).abs() < 0.03, "q{q}: {got} vs {want}");
        }
        assert!((s.cdf(50.0) - 0.5).abs() < 0.03);
        let grid = [10.0, 50.0, 90.0];
        let mut out = [0.0; 3];
        s.cdf_on(&grid, &mut out);
        for (g, o) in grid.iter().zip(out) {
            assert!((o - s.cdf(*g)).abs() < 1e-12);
        }
    }

    #[test]
    fn decay_forgets_old_regime() {
        let mut s = DecayedSketch::new(20.0);
        for _ in 0..200 {
            s.insert(100.0);
        }
        for _ in 0..100 {
            s.insert(5.0);
        }
        // The old regime weighs 2^-5 of a fresh one: well under 5 %.
        assert!(s.cdf(10.0) > 0.95, "{}", s.cdf(10.0));
        assert!(s.effective() < 40.0 && s.effective() > 20.0, "{}", s.effective());
    }

    #[test]
    fn renormalisation_keeps_the_distribution() {
        let mut s = DecayedSketch::new(1.0);
        for i in 0..2000 {
            s.insert(if i % 2 == 0 { 1.0 } else { 2.0 });
        }
        // Half-life of one insert: the last value dominates.
        assert!(s.cdf(1.5) < 0.4);
        assert!(s.total.is_finite() && s.scale <= 1e100);
    }

    #[test]
    fn serde_round_trip_is_sparse() {
        let mut s = DecayedSketch::new(50.0);
        s.insert(6.0);
        s.insert(120.0);
        let j = serde_json::to_string(&s).unwrap();
        assert!(j.len() < 200, "{j}");
        let back: DecayedSketch = serde_json::from_str(&j).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn censored_weight_goes_to_the_right() {
        let mut s = DecayedSketch::new(1e9);
        for _ in 0..50 {
            s.insert(1.0);
        }
        for _ in 0..50 {
            s.insert(10.0);
        }
        for _ in 0..100 {
            s.insert_censored(5.0);
        }
        // Every censored sample is above 5 s, so 3/4 of the mass is at 10 s.
        assert!((s.cdf(5.0) - 0.25).abs() < 0.01, "{}", s.cdf(5.0));
    }

    #[test]
    fn rate_shrinks_to_prior() {
        let mut r = DecayedRate::new(100.0);
        assert_eq!(r.rate(0.1, 2.0), 0.1);
        for _ in 0..98 {
            r.record(false);
        }
        r.record(true);
        r.record(true);
        assert!((r.rate(0.0, 0.0) - 0.02).abs() < 0.01);
    }
}
