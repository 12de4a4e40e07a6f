//! SingleR's fit: the reissue delay `d` and probability `q` under an extra-load budget
//! (Kaler, He and Elnikety), the margins it keeps, and the delay it falls back to while
//! the budget's bucket is low.

use super::SingleRSettings;
use crate::model::Model;
use crate::sketch::CdfTable;
use serde::Serialize;

/// A fitted SingleR reissue.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SingleRFit {
    /// Reissue delay, s.
    pub delay_s: f64,
    /// Reissue probability.
    pub q: f64,
    /// Predicted tail at the level, s.
    pub tail_s: f64,
    /// Predicted extra attempts per request.
    pub extra: f64,
    /// Reissue delay used while the budget's bucket is low ([`SINGLER_RESERVE`]
    /// tokens or fewer), s: where the primary's tail mode starts (the gap below its
    /// `level`-quantile), so that a reissue there is spent only on a tail request; never
    /// below `delay_s`.
    #[serde(default)]
    pub reserve_delay_s: f64,
}

/// Fits SingleR's (d, q) to the model: for each candidate d, the largest q within the
/// budget, `q = min(1, h·B / P(L_p > d))` with the headroom `h` = [`SINGLER_HEADROOM`];
/// keeps the (d, q) whose predicted tail at `level`
/// is smallest, with
/// `P(L > t) = (1 − q)·S_p(t) + q·J(S_p(t), S_h(t − d))` for t ≥ d, where `J` is the
/// pair's joint survival ([`crate::model::joint_survival`]; independence for a reissue
/// to the same provider).
///
/// The CDFs are the sketches' with each bucket's mass spread evenly over it
/// ([`CdfTable`]), the candidate delays are the primary's quantiles on a fine grid of
/// levels plus the starts of gaps in its distribution (the upper edge of a fast mode),
/// and the tail is found by bisection, so the fit is not bound to a coarse time grid.
pub fn fit_singler(model: &Model, s: &SingleRSettings) -> Option<SingleRFit> {
    let pm = model.providers.get(s.primary)?;
    let mut hm = model.providers.get(s.hedge)?;
    if pm.latency.samples() < s.min_samples.max(1) {
        return None;
    }
    // A reissue target never launched yet has no data of its own: until it has, assume it
    // behaves like the primary (the SingleR setting: a copy of the same request).
    if hm.latency.samples() < s.min_samples.max(1) {
        hm = pm;
    }
    let (tp, th) = (CdfTable::new(pm.tail_latency())?, CdfTable::new(hm.tail_latency())?);
    let (bp, bh) = (pm.p_bad(), hm.p_bad());
    let sp = |t: f64| bp + (1.0 - bp) * (1.0 - tp.cdf(t));
    let sh = |t: f64| if t < 0.0 { 1.0 } else { bh + (1.0 - bh) * (1.0 - th.cdf(t)) };
    let dep = if std::ptr::eq(pm, hm) { 0.0 } else { model.dependence(s.primary, s.hedge) };
    // The tail is fitted at a level with a margin ([`SINGLER_TAIL_MARGIN`]).
    let target = (1.0 - s.level) * SINGLER_TAIL_MARGIN;
    let top = tp.quantile(1.0).max(th.quantile(1.0)) * 2.5 + 1.0;
    // Smallest t in [lo, top] with f(t) ≤ target (f non-increasing), or +∞.
    let first_below = |f: &dyn Fn(f64) -> f64, lo: f64| -> f64 {
        if f(top) > target {
            return f64::INFINITY;
        }
        if f(lo) <= target {
            return lo;
        }
        let (mut a, mut b) = (lo, top);
        for _ in 0..24 {
            let m = 0.5 * (a + b);
            if f(m) <= target {
                b = m;
            } else {
                a = m;
            }
        }
        b
    };
    let plain = first_below(&sp, 0.0);
    let mut best = SingleRFit { delay_s: 0.0, q: 0.0, tail_s: plain, extra: 0.0, reserve_delay_s: 0.0 };
    let mut delays: Vec<f64> = (0..=64).map(|i| tp.quantile(0.5 + 0.5 * f64::from(i) / 64.0)).collect();
    delays.extend((0..=64).map(|i| tp.hedge_point(0.5 + 0.5 * f64::from(i) / 64.0)));
    delays.sort_by(f64::total_cmp);
    delays.dedup_by(|a, b| (*a - *b).abs() < 1e-6);
    for d in delays {
        let above = sp(d);
        if above <= 0.0 || d >= plain {
            continue;
        }
        let q = (s.budget * SINGLER_HEADROOM / above).min(1.0);
        let f = |t: f64| if t < d { sp(t) } else { (1.0 - q) * sp(t) + q * crate::model::joint_survival(sp(t), sh(t - d), dep) };
        // A candidate whose tail is not reached by the best one's cannot win: one look
        // instead of a bisection.
        if best.tail_s.is_finite() && f(best.tail_s) > target {
            continue;
        }
        let tail = first_below(&f, d);
        let extra = q * above;
        if tail < best.tail_s - 1e-9 || (tail <= best.tail_s + 1e-9 && extra < best.extra) {
            best = SingleRFit { delay_s: d, q, tail_s: tail, extra, reserve_delay_s: d };
        }
    }
    best.reserve_delay_s = tp.hedge_point(s.level).max(best.delay_s);
    Some(best)
}

/// Share of the extra-load budget the SingleR fit plans to use. The budget's bucket
/// starts empty and holds 5 tokens, so a fit that expects to launch at exactly the
/// budget rate runs the bucket dry at every random run of launches above the mean, and
/// the refused reissues are as likely to be the stragglers the reissue is for: at 20 %
/// in `straggler` that put p99 back at 10 s. The fill level of the bucket is a random
/// walk that drifts up by `B − launches` per request; at 80 % the drift was small
/// enough that the bucket was often below one token (B = 3 %, seed 2: 4 of ~40
/// stragglers refused, p99 +0.04 s above the fixed hedge at 1.2 s, which has no
/// bucket). At 60 % the drift is twice that, and with [`SINGLER_RESERVE`] refusals are
/// rare. (Tried at 0.8, 0.6 and 0.5 on straggler seeds 1–10, chosen on 1–5: 0.8 and
/// 0.5 were worse.)
pub const SINGLER_HEADROOM: f64 = 0.6;

/// Share of the tail mass `1 − level` the SingleR fit lets a plan leave above its
/// predicted tail. A randomised reissue leaves `(1 − q)·P(L_p > t)` unrescued; the fit
/// pushes that to just under `1 − level` (in `straggler`, 0.94 % unhedged stragglers
/// against a 1 % level), where the realised straggler share of a run, a few tens of
/// requests, decides whether p99 is 2.3 s or 10 s. Fitting at 80 % of the tail mass
/// keeps a margin for that noise.
pub const SINGLER_TAIL_MARGIN: f64 = 0.8;

/// Tokens under which SingleR reissues at its fit's `reserve_delay_s` (the start of the
/// primary's tail mode) instead of its delay. A reissue before the tail mode starts
/// also fires for requests of the fast mode that would have answered moments later;
/// when the budget's bucket (5 tokens) is nearly empty, those launches take the token
/// that the next straggler needs, and a refused straggler is a 10 s answer. In
/// `straggler` that is what put SingleR above the fixed-delay curve: 4 of ~40
/// stragglers refused at B = 3 % (seed 2), while the fixed hedge at 1.2 s, which has
/// no bucket, rescued them all.
pub const SINGLER_RESERVE: f64 = 2.0;
