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

mod cdf;
mod check;
mod rate;
mod saved;
pub use cdf::{CdfTable, GAP_BUCKETS, TAIL_MODE_SHARE};
pub use rate::DecayedRate;
use saved::{all_zero, is_zero, sparse, sparse_opt, zero_buckets};

/// Smallest distinguished value, s; smaller values share bucket 0.
pub const MIN_S: f64 = 1e-3;
/// Largest distinguished value, s; larger values share the last bucket.
pub const MAX_S: f64 = 1e4;
/// Bucket growth factor: ±2 % relative accuracy.
pub const GAMMA: f64 = 1.04;

fn ln_gamma() -> f64 {
    GAMMA.ln()
}

/// Number of buckets (computed once: every insert asks).
pub fn bucket_count() -> usize {
    static COUNT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *COUNT.get_or_init(|| ((MAX_S / MIN_S).ln() / ln_gamma()).ceil() as usize + 2)
}

/// Bucket of a value (0 for values below [`MIN_S`]).
pub fn bucket_of(x: f64) -> usize {
    if x.is_nan() || x < MIN_S {
        return 0;
    }
    let k = ((x / MIN_S).ln() / ln_gamma()).floor() as usize + 1;
    k.min(bucket_count() - 1)
}

/// Representative value of bucket `k` (geometric middle; from a table built once: a
/// quantile walk asks for middles per bucket, and a power per call was most of a live
/// decision's sketch work).
pub fn bucket_value(k: usize) -> f64 {
    static MIDDLES: std::sync::OnceLock<Vec<f64>> = std::sync::OnceLock::new();
    let middle = |k: usize| if k == 0 { MIN_S * 0.5 } else { MIN_S * GAMMA.powf(k as f64 - 0.5) };
    let middles = MIDDLES.get_or_init(|| (0..bucket_count()).map(middle).collect());
    middles.get(k).copied().unwrap_or_else(|| middle(k))
}

/// Upper edge of bucket `k` (from a table built once: the fits ask for edges in loops).
pub fn bucket_upper(k: usize) -> f64 {
    static EDGES: std::sync::OnceLock<Vec<f64>> = std::sync::OnceLock::new();
    let edges = EDGES.get_or_init(|| (0..bucket_count()).map(|k| MIN_S * GAMMA.powf(k as f64)).collect());
    edges.get(k).copied().unwrap_or_else(|| MIN_S * GAMMA.powf(k as f64))
}

/// Lower edge of bucket `k`.
pub(crate) fn bucket_lower(k: usize) -> f64 {
    if k == 0 {
        0.0
    } else {
        bucket_upper(k - 1)
    }
}

/// Smallest factor [`DecayedSketch::age`] and [`DecayedRate::age`] apply (older evidence
/// than that weighs nothing that matters beside one new observation).
pub const MIN_AGE: f64 = 1e-12;

/// `factor` clamped to [[`MIN_AGE`], 1] (NaN: 1).
pub(crate) fn age_factor(factor: f64) -> f64 {
    if factor.is_nan() {
        1.0
    } else {
        factor.clamp(MIN_AGE, 1.0)
    }
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
    /// Per bucket, the largest value inserted in it (0: none), so a mode that ends inside
    /// a bucket ends at its largest value seen ([`CdfTable`]), not at an estimate from
    /// the mean that is a few milliseconds off either way. Not decayed: a stale maximum
    /// is off by at most its bucket's width (4 %). Absent in files saved before it
    /// existed: then the range is estimated from the mean alone.
    #[serde(default, with = "sparse_opt", skip_serializing_if = "Vec::is_empty")]
    maxes: Vec<f64>,
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
            maxes: vec![0.0; bucket_count()],
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
    fn scan_masses(&self, f: impl FnMut(usize, f64) -> bool) -> bool {
        self.scan_masses_with(true, f)
    }

    /// [`Self::scan_masses`]; without `residual`, the survival left beyond the last
    /// observation (placed by convention at twice the last censored value) is not visited.
    fn scan_masses_with(&self, residual: bool, mut f: impl FnMut(usize, f64) -> bool) -> bool {
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
        if residual && surv > 1e-12 {
            return f(residual_bucket(last_censored), surv);
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
    pub(crate) fn bucket_mean(&self, k: usize) -> f64 {
        let (lo, hi) = (bucket_lower(k), bucket_upper(k));
        match (self.buckets.get(k), self.sums.get(k)) {
            (Some(w), Some(s)) if *w > 0.0 => (s / w).clamp(lo, hi),
            _ => bucket_value(k).clamp(lo, hi),
        }
    }

    /// The largest value inserted in bucket `k`, when known.
    pub(crate) fn bucket_max(&self, k: usize) -> Option<f64> {
        let (lo, hi) = (bucket_lower(k), bucket_upper(k));
        self.maxes.get(k).copied().filter(|m| *m > 0.0 && self.buckets.get(k).is_some_and(|w| *w > 0.0)).map(|m| m.clamp(lo, hi))
    }

    fn advance(&mut self, event: bool) {
        if event {
            self.total += self.scale;
        } else {
            self.censored_total += self.scale;
        }
        self.n += 1;
        self.scale *= 2f64.powf(1.0 / self.half_life);
        self.renormalise();
    }

    fn renormalise(&mut self) {
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

    /// Ages everything inserted so far: it weighs `factor` (clamped to [[`MIN_AGE`], 1])
    /// of what it weighed against the next insert. The distribution read back is
    /// unchanged until something new is inserted, which then counts for more.
    pub fn age(&mut self, factor: f64) {
        self.scale /= age_factor(factor);
        self.renormalise();
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
        if self.maxes.len() != self.buckets.len() {
            self.maxes = vec![0.0; self.buckets.len()];
        }
        self.maxes[k] = self.maxes[k].max(x.min(MAX_S));
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

    /// [`DecayedSketch::masses`] for planning, and the share it leaves unplaced: the
    /// survival left beyond the last event (observations known only to exceed values
    /// past every value seen: attempts cancelled after running longer than any that
    /// finished) when the last censoring lies more than [`UNPLACED_BEYOND`] times past
    /// the largest finished value. Such an attempt may take any time past its
    /// cancellation, so a plan that waits on it alone is not credited with an end. Nearer
    /// than that (a loser cancelled just as a partner won, a little past its own fastest
    /// answers) the share is placed as in [`DecayedSketch::masses`].
    pub fn masses_known(&self) -> (Vec<f64>, f64) {
        if self.is_empty() {
            return (Vec::new(), 0.0);
        }
        let mut out = vec![0.0; self.buckets.len()];
        let (mut known, mut last_event) = (0.0, None);
        self.scan_masses_with(false, |k, m| {
            out[k] += m;
            known += m;
            last_event = Some(k);
            false
        });
        let residual = (1.0 - known).clamp(0.0, 1.0);
        if residual <= 1e-12 {
            return (out, 0.0);
        }
        let last_censored = self.censored.iter().rposition(|c| *c > 0.0);
        let far = match (last_event, last_censored) {
            (Some(e), Some(c)) => bucket_value(c) > UNPLACED_BEYOND * bucket_value(e),
            _ => true,
        };
        if far {
            (out, residual)
        } else {
            out[residual_bucket(last_censored)] += residual;
            (out, 0.0)
        }
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

    /// The q-quantile as a report states it: `None` when empty, and `None` when the
    /// estimated mass never reaches `q` — the rest lies beyond every value observed,
    /// known only as censored (a provider that always loses its races), so the
    /// quantile is unknown, not the largest value seen ([`DecayedSketch::quantile`]).
    pub fn quantile_reached(&self, q: f64) -> Option<f64> {
        let [x] = self.quantiles_reached([q]);
        x
    }

    /// [`DecayedSketch::quantile_reached`] of each of `qs` (ascending) in one walk of the
    /// buckets.
    pub fn quantiles_reached<const N: usize>(&self, qs: [f64; N]) -> [Option<f64>; N] {
        let mut out = [None; N];
        if self.is_empty() || N == 0 {
            return out;
        }
        let targets = qs.map(|q| q.clamp(0.0, 1.0) - 1e-9);
        let (mut acc, mut next) = (0.0, 0);
        self.scan_masses_with(false, |k, m| {
            acc += m;
            while next < N && acc >= targets[next] {
                out[next] = Some(bucket_value(k));
                next += 1;
            }
            next == N
        });
        out
    }

    /// The q-quantile (`None` when empty); when the mass never reaches `q` (censored
    /// beyond everything seen), the largest value seen — a lower bound, which planning
    /// uses as such. Reports use [`DecayedSketch::quantile_reached`].
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

/// The bucket the survival left beyond the last event is placed in: twice the value of
/// the highest bucket with a censoring (`None`: the top of the range).
fn residual_bucket(last_censored: Option<usize>) -> usize {
    bucket_of(last_censored.map_or(MAX_S, |k| (2.0 * bucket_value(k)).min(MAX_S)))
}

/// How far past the largest finished value the last censoring must lie for
/// [`DecayedSketch::masses_known`] to leave the survival beyond it unplaced.
pub const UNPLACED_BEYOND: f64 = 2.0;

#[cfg(test)]
mod tests;
