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
    /// Per bucket, the decayed sum of the values in it (weight × value), so a bucket
    /// knows where inside it its mass sits ([`CdfTable`] spreads the mass over a range
    /// with that mean). Absent in files saved before it existed: then every bucket's
    /// values are taken to sit at its middle.
    #[serde(default, with = "sparse_opt", skip_serializing_if = "Vec::is_empty")]
    sums: Vec<f64>,
    /// Per bucket, the decayed weight of the observations censored there (known only to
    /// exceed a value in the bucket). The distribution is their Kaplan–Meier estimate,
    /// computed when read ([`DecayedSketch::masses`]). Absent in files saved before it
    /// existed, whose censored weight was already spread into `buckets`.
    #[serde(default = "zero_buckets", with = "sparse_opt", skip_serializing_if = "all_zero")]
    censored: Vec<f64>,
    /// Sum of `censored`.
    #[serde(default, skip_serializing_if = "is_zero")]
    censored_total: f64,
}

fn zero_buckets() -> Vec<f64> {
    vec![0.0; bucket_count()]
}

fn all_zero(v: &[f64]) -> bool {
    v.iter().all(|w| *w == 0.0)
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

mod sparse_opt {
    //! The value sums, sparse like the weights; an absent field stays empty.
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
        super::sparse::serialize(v, s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        super::sparse::deserialize(d)
    }
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
        DecayedSketch {
            half_life: half_life.max(1.0),
            scale: 1.0,
            total: 0.0,
            n: 0,
            buckets: vec![0.0; bucket_count()],
            sums: vec![0.0; bucket_count()],
            censored: vec![0.0; bucket_count()],
            censored_total: 0.0,
        }
    }

    /// The probability mass of each bucket: the events' weights over their total when
    /// nothing was censored, else the Kaplan–Meier product-limit estimate over the
    /// decayed event and censoring weights (an observation censored in a bucket is at
    /// risk through that bucket), with the survival left after the last event (the
    /// censored observations beyond every event) placed at twice the highest censoring
    /// bucket's value: pessimistic on purpose, since a tail seen only through
    /// cancellations would otherwise end where the policy cancels. Sums to 1 (empty when
    /// nothing was observed).
    ///
    /// Read-time, not insert-time: spreading each censored weight over the buckets above
    /// it as it arrives gave the values seen *first* a share compounded by every later
    /// cancellation (weight ∝ (n/i)^(censored share) for the i-th of n values), so a
    /// hedge target cancelled at a few milliseconds in 5 of 6 requests was learned as
    /// its first few latencies (a uniform 0.8–1.2 s read as S(1.0 s) = 0.23).
    pub fn masses(&self) -> Vec<f64> {
        if self.is_empty() {
            return Vec::new();
        }
        let mut out = vec![0.0; self.buckets.len()];
        self.scan_masses(|k, m| {
            out[k] += m;
            false
        });
        out
    }

    /// Streams `(bucket, mass)` of [`DecayedSketch::masses`] in ascending order, without
    /// allocating, until `f` returns true (the final mass beyond the last event comes
    /// last). Returns whether `f` stopped it.
    fn scan_masses(&self, mut f: impl FnMut(usize, f64) -> bool) -> bool {
        if self.is_empty() {
            return false;
        }
        if self.censored_total <= 0.0 || self.censored.len() != self.buckets.len() {
            let t = self.total;
            return self.buckets.iter().enumerate().any(|(k, w)| *w > 0.0 && f(k, w / t));
        }
        let mut at_risk: f64 = self.total + self.censored_total;
        let mut surv = 1.0;
        let mut last_censored = None;
        for (k, (&e, &c)) in self.buckets.iter().zip(&self.censored).enumerate() {
            if c > 0.0 {
                last_censored = Some(k);
            }
            if e > 0.0 && at_risk > 0.0 {
                let h = (e / at_risk).min(1.0);
                let m = surv * h;
                surv *= 1.0 - h;
                if f(k, m) {
                    return true;
                }
            }
            at_risk -= e + c;
        }
        if surv > 1e-12 {
            let at = last_censored.map_or(MAX_S, |k| (2.0 * bucket_value(k)).min(MAX_S));
            return f(bucket_of(at), surv);
        }
        false
    }

    /// The value sums, filled from the bucket middles when a file saved without them
    /// was loaded.
    fn sums_mut(&mut self) -> &mut Vec<f64> {
        if self.sums.len() != self.buckets.len() {
            self.sums = self.buckets.iter().enumerate().map(|(k, w)| w * bucket_value(k)).collect();
        }
        &mut self.sums
    }

    /// Mean of the values in bucket `k` (its middle when unknown), clamped to the bucket.
    fn bucket_mean(&self, k: usize) -> f64 {
        let (lo, hi) = (bucket_lower(k), bucket_upper(k));
        match (self.buckets.get(k), self.sums.get(k)) {
            (Some(w), Some(s)) if *w > 0.0 => (s / w).clamp(lo, hi),
            _ => bucket_value(k).clamp(lo, hi),
        }
    }

    fn advance(&mut self, event: bool) {
        if event {
            self.total += self.scale;
        } else {
            self.censored_total += self.scale;
        }
        self.n += 1;
        self.scale *= 2f64.powf(1.0 / self.half_life);
        if self.scale > 1e100 {
            let inv = 1.0 / self.scale;
            self.buckets.iter_mut().for_each(|w| *w *= inv);
            self.sums.iter_mut().for_each(|w| *w *= inv);
            self.censored.iter_mut().for_each(|w| *w *= inv);
            self.total *= inv;
            self.censored_total *= inv;
            self.scale = 1.0;
        }
    }

    /// Inserts a value (finite, ≥ 0; others are ignored).
    pub fn insert(&mut self, x: f64) {
        if !(x.is_finite() && x >= 0.0) {
            return;
        }
        let k = bucket_of(x);
        let w = self.scale;
        self.buckets[k] += w;
        self.sums_mut()[k] += w * x.min(MAX_S);
        self.advance(true);
    }

    /// Inserts ever made.
    pub fn samples(&self) -> u64 {
        self.n
    }

    /// Effective (decayed) sample count: total weight relative to the newest insert.
    pub fn effective(&self) -> f64 {
        (self.total + self.censored_total) / self.scale * 2f64.powf(1.0 / self.half_life)
    }

    /// Whether nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.total + self.censored_total <= 0.0
    }

    /// P(X ≤ x) under the decayed weights (0 when empty).
    pub fn cdf(&self, x: f64) -> f64 {
        if self.is_empty() {
            return 0.0;
        }
        let k = bucket_of(x);
        if self.censored_total <= 0.0 {
            let below: f64 = self.buckets[..=k].iter().sum();
            return (below / self.total).min(1.0);
        }
        let mut acc = 0.0;
        self.scan_masses(|j, m| {
            if j > k {
                return true;
            }
            acc += m;
            false
        });
        acc.min(1.0)
    }

    /// Fills `out[i] = P(X ≤ grid[i])` for an ascending grid in one pass.
    pub fn cdf_on(&self, grid: &[f64], out: &mut [f64]) {
        if self.is_empty() {
            out.iter_mut().for_each(|v| *v = 0.0);
            return;
        }
        let m = self.masses();
        let mut acc = 0.0;
        let mut k = 0usize;
        for (t, o) in grid.iter().zip(out.iter_mut()) {
            let last = bucket_of(*t);
            while k <= last && k < m.len() {
                acc += m[k];
                k += 1;
            }
            *o = acc.min(1.0);
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
        if self.censored.len() != self.buckets.len() {
            self.censored = vec![0.0; self.buckets.len()];
        }
        self.censored[bucket_of(c.min(MAX_S))] += self.scale;
        self.advance(false);
    }

    /// Records an observation known only to exceed `c`, distributing its weight like
    /// `shape`'s values above `c` (the latencies of comparable attempts that finished),
    /// or like [`DecayedSketch::insert_censored`] when `shape` has none above `c`.
    pub fn insert_censored_like(&mut self, c: f64, shape: &DecayedSketch) {
        if !(c.is_finite() && c >= 0.0) {
            return;
        }
        let k = bucket_of(c);
        let m = shape.masses();
        let above: f64 = m.get(k + 1..).map_or(0.0, |v| v.iter().sum());
        if above <= 0.0 {
            self.insert_censored(c);
            return;
        }
        let f = self.scale / above;
        self.sums_mut();
        for (j, (w, s)) in self.buckets[k + 1..].iter_mut().zip(&m[k + 1..]).enumerate() {
            if *s > 0.0 {
                *w += s * f;
                // Placed at the mean of `shape`'s values in the bucket.
                self.sums[k + 1 + j] += s * f * shape.bucket_mean(k + 1 + j);
            }
        }
        self.advance(true);
    }

    /// Mean of `min(X, cap) − h` over the values above `h`, and the share of weight above
    /// `h` (None when nothing is above), in one pass over the buckets.
    pub fn mean_excess(&self, h: f64, cap: f64) -> Option<(f64, f64)> {
        if self.is_empty() {
            return None;
        }
        let k0 = bucket_of(h) + 1;
        let m = self.masses();
        let (mut w, mut acc) = (0.0, 0.0);
        for (k, b) in m.iter().enumerate().skip(k0) {
            if *b > 0.0 {
                w += b;
                acc += b * (bucket_value(k).min(cap) - h).max(0.0);
            }
        }
        (w > 0.0).then(|| (acc / w, w))
    }

    /// The q-quantile (`None` when empty).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.is_empty() {
            return None;
        }
        let target = q.clamp(0.0, 1.0) - 1e-12;
        let (mut acc, mut last, mut hit) = (0.0, None, None);
        self.scan_masses(|k, m| {
            last = Some(k);
            acc += m;
            if acc >= target {
                hit = Some(k);
                return true;
            }
            false
        });
        hit.or(last).map(bucket_value)
    }
}

/// A snapshot of a sketch's CDF for fits that need more than the ±2 % buckets (the
/// SingleR fit and the adaptive delay). Inside each bucket the mass is spread evenly over
/// the widest range within the bucket whose middle is the mean of the values that fell
/// in it: the whole bucket when they sat evenly in it, `[lower edge, 2·mean − lower
/// edge]` when they sat low (the top bucket of a mode that ends inside it). So the upper
/// edge of a mode is found to within the spread of its values, not the 4 % bucket: a
/// fast mode that ends at 1.2 s reads 1.2 s, not the bucket's 1.211 s. Built once per
/// refresh, each lookup is O(1).
#[derive(Debug, Clone)]
pub struct CdfTable {
    /// cum[k] = weight of buckets 0..=k over the total.
    cum: Vec<f64>,
    /// Per bucket, the range its mass is spread over.
    span: Vec<(f64, f64)>,
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
        let m = s.masses();
        let mut acc = 0.0;
        let cum = m
            .iter()
            .map(|w| {
                acc += w;
                acc.min(1.0)
            })
            .collect();
        let span = (0..m.len())
            .map(|k| {
                let (lo, hi) = (bucket_lower(k), bucket_upper(k));
                if m[k] <= 0.0 {
                    return (lo, hi);
                }
                let m = s.bucket_mean(k);
                if m <= 0.5 * (lo + hi) {
                    (lo, (2.0 * m - lo).max(lo))
                } else {
                    ((2.0 * m - hi).min(hi), hi)
                }
            })
            .collect();
        Some(CdfTable { cum, span })
    }

    fn below(&self, k: usize) -> f64 {
        if k == 0 {
            0.0
        } else {
            self.cum[k - 1]
        }
    }

    /// P(X ≤ x), linear over the spread of the bucket of `x`.
    pub fn cdf(&self, x: f64) -> f64 {
        if x.is_nan() || x < 0.0 {
            return 0.0;
        }
        let k = bucket_of(x);
        let (lo, hi) = self.span[k];
        let f = if x >= hi {
            1.0
        } else if x < lo {
            0.0
        } else {
            ((x - lo) / (hi - lo)).clamp(0.0, 1.0)
        };
        self.below(k) + f * (self.cum[k] - self.below(k))
    }

    /// The q-quantile, linear over the spread of its bucket.
    pub fn quantile(&self, q: f64) -> f64 {
        let q = q.clamp(0.0, 1.0);
        let k = self.cum.partition_point(|c| *c < q - 1e-12).min(self.cum.len() - 1);
        let (b, w) = (self.below(k), self.cum[k] - self.below(k));
        let f = if w > 0.0 { ((q - b) / w).clamp(0.0, 1.0) } else { 1.0 };
        let (lo, hi) = self.span[k];
        lo + f * (hi - lo)
    }

    /// Where to hedge for the q-quantile `x`: `x`, or, when `x` sits in a tail mode above
    /// a gap (at least [`GAP_BUCKETS`] empty buckets, ~8 %, below it), the top of the
    /// spread of the last non-empty bucket below the gap, i.e. where the mode below
    /// ends. Waiting inside the gap sees no more answers than waiting until its start, so
    /// a hedge there is sooner for the slow requests. The tail mode may be sparse (2 %
    /// stragglers spread over 8–24 s are a few isolated buckets, with gaps of their
    /// own), so the gap is the lowest one below `x`, and it is taken only when `x` sits
    /// in a *tail* mode: the mass
    /// between the gap and `x` is at most [`TAIL_MODE_SHARE`] times the mass above `x`
    /// (the hedge then launches at most that many times + 1 as often as at `x`, and only
    /// for requests of the tail mode, the ones a hedge is for). A bar close to the tail
    /// mode's own share (at 1× and 2×, p99 and p99.5 of a 2 % straggler mode sat on it)
    /// flips between the gap and the late quantile from one refresh to the next, and the
    /// mix of early and late hedges has the load of the early ones and the tail of the
    /// late ones.
    pub fn hedge_point(&self, q: f64) -> f64 {
        let x = self.quantile(q);
        let k = bucket_of(x);
        let fx = self.cdf(x);
        let bar = TAIL_MODE_SHARE * (1.0 - fx) + 1e-12;
        // Scan down while the mass between stays under the bar; a sparse tail mode has
        // gaps of its own, so the hedge point is the *lowest* gap found, where the
        // tail mode starts.
        let mut best = x;
        let mut empty = 0usize;
        let mut j = k;
        while j > 0 {
            j -= 1;
            if self.cum[j] - self.below(j) <= 0.0 {
                empty += 1;
                continue;
            }
            if fx - self.cum[j] > bar {
                break;
            }
            if empty >= GAP_BUCKETS {
                // Bucket j ends a mode below a gap: a hedge point where its values end.
                best = self.span[j].1.min(x);
            }
            empty = 0;
        }
        best
    }
}

/// Empty buckets (4 % each) that make a gap for [`CdfTable::hedge_point`].
pub const GAP_BUCKETS: usize = 2;

/// Most mass between a gap and the quantile, in units of the mass above the quantile,
/// for [`CdfTable::hedge_point`] to hedge at the gap.
pub const TAIL_MODE_SHARE: f64 = 5.0;

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
    fn a_mode_ending_inside_a_bucket_ends_where_its_values_do() {
        // Uniform on [0.8, 1.2] and 2 % at 10-20x: the fast mode ends at 1.2 s, inside the
        // bucket [1.165, 1.211].
        let mut s = DecayedSketch::new(1e9);
        for i in 0..4900 {
            s.insert(0.8 + 0.4 * (f64::from(i) + 0.5) / 4900.0);
        }
        for i in 0..100 {
            s.insert(12.0 + 0.1 * f64::from(i));
        }
        let t = CdfTable::new(&s).unwrap();
        let edge = t.hedge_point(0.99);
        assert!((edge - 1.2).abs() < 0.002, "{edge}");
        for q in [0.5, 0.9, 0.97] {
            let want = 0.8 + 0.4 * q / 0.98;
            assert!((t.quantile(q) - want).abs() < 0.004, "q{q}: {} vs {want}", t.quantile(q));
        }
        assert!((t.cdf(1.2) - 0.98).abs() < 1e-3 && (t.cdf(1.205) - 0.98).abs() < 1e-6, "{}", t.cdf(1.205));
    }

    #[test]
    fn a_sketch_saved_without_value_sums_reads_bucket_middles() {
        let mut s = DecayedSketch::new(50.0);
        s.insert(6.0);
        let j = serde_json::to_string(&s).unwrap().replace(&format!(",\"sums\":[[{},6.0]]", bucket_of(6.0)), "");
        assert!(!j.contains("sums"), "{j}");
        let mut back: DecayedSketch = serde_json::from_str(&j).unwrap();
        let mid = CdfTable::new(&back).unwrap().quantile(0.5);
        assert!((mid / 6.0 - 1.0).abs() < 0.03, "{mid}");
        back.insert(6.0);
        assert!(back.quantile(0.5).is_some());
    }

    #[test]
    fn early_cancels_do_not_weigh_the_first_values_more() {
        // A hedge target cancelled within 40 ms in 5 requests of 6 and finishing in
        // 0.8-1.2 s in the sixth: the cancels say nothing about its latency, which stays
        // uniform (S(1.0 s) = 0.5). Spreading each cancel over the values seen so far gave
        // the first values a compounded share (S(1.0 s) read 0.23).
        let mut s = DecayedSketch::new(1024.0);
        let mut x: u64 = 7;
        let mut u = || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        for i in 0..3000 {
            if i % 6 == 0 {
                s.insert(0.8 + 0.4 * u());
            } else {
                s.insert_censored(0.04 * u());
            }
        }
        let t = CdfTable::new(&s).unwrap();
        for (v, want) in [(0.9, 0.75), (1.0, 0.5), (1.1, 0.25)] {
            assert!((1.0 - t.cdf(v) - want).abs() < 0.06, "S({v}) = {}", 1.0 - t.cdf(v));
            // The sketch's own cdf counts the whole bucket of `v` (up to 4 % above it).
            assert!((1.0 - s.cdf(v) - want).abs() < 0.12, "sketch S({v}) = {}", 1.0 - s.cdf(v));
        }
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
