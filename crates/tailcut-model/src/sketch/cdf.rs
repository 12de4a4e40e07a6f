//! [`CdfTable`]: a sketch's CDF read between bucket edges (each bucket's mass spread
//! over the range its values' mean allows), and the hedge point below a tail mode, for
//! the fits that need more than the ±2 % buckets (the SingleR fit, the adaptive delay).

use super::{bucket_lower, bucket_of, bucket_upper, DecayedSketch};

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
                if let Some(top) = s.bucket_max(k) {
                    // The values end at the largest one seen; the range below it keeps
                    // their mean where it can.
                    return ((2.0 * m - top).clamp(lo, top), top);
                }
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
