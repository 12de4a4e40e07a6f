//! What each provider's recent attempts say about its miss rate, read with censoring
//! (issue 28 item 1, live): the last [`HISTORY_LEN`] attempts of a provider, launched ones
//! exact (a failed or invalid one never delivers: +∞), cancelled ones right-censored at
//! their cancel — never "cancelled = fast". From them:
//!
//! - [`kaplan_meier`]: the product-limit estimate `S(t) = Π_{t_i ≤ t} (1 − d_i/n_i)` of
//!   `P(L > t)` with Greenwood's variance `S²·Σ d_i/(n_i(n_i − d_i))`;
//! - [`KmEstimate::upper`]: a pessimistic bound on `P(L > t)`, Wilson's at the estimate's
//!   effective sample size `S(1 − S)/Var` (the size of an uncensored sample as precise);
//! - [`Censored`]: a provider's estimate at the deadline blended with the model's
//!   prediction where history is thin, `(32·model + n·history)/(32 + n)`
//!   ([`HISTORY_PRIOR`]), and the same blend of the upper bound, which a single-provider
//!   plan must bring within the working level to qualify for the miss target.
//!
//! A provider's history is cleared when its shift detector fires
//! ([`crate::model::ShiftDetector`]): attempts from before a detected change say nothing
//! about the world after it.

use super::wilson_upper;
use crate::model::{Model, Observation, Outcome};
use std::collections::VecDeque;

/// Attempts kept per provider.
pub const HISTORY_LEN: usize = 64;
/// The model's prediction counts as this many attempts in the blend.
pub const HISTORY_PRIOR: f64 = 32.0;

/// One attempt: its latency, or the time it ran before it was cancelled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Latency (exact), or the time it ran (censored), s; +∞ for a result that never came.
    pub value_s: f64,
    /// Cancelled: only known to take longer than `value_s`.
    pub censored: bool,
}

impl Sample {
    /// The sample an observation gives.
    pub fn of(o: &Observation) -> Sample {
        match o.outcome {
            Outcome::Valid { latency_s } => Sample { value_s: latency_s, censored: false },
            Outcome::Invalid { .. } | Outcome::Failed { .. } => Sample { value_s: f64::INFINITY, censored: false },
            Outcome::Censored { after_s } => Sample { value_s: after_s, censored: true },
        }
    }
}

/// The Kaplan–Meier estimate of `P(L > t)` at one `t`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KmEstimate {
    /// `S(t)`.
    pub survival: f64,
    /// Greenwood's variance of `S(t)`.
    pub variance: f64,
    /// The effective sample size: `S(1 − S)/Var`, or, where that is 0/0 (no event up to
    /// `t`, or none left at risk), the attempts whose side of `t` is known.
    pub n_eff: f64,
}

impl KmEstimate {
    /// Wilson's upper bound on `P(L > t)` at `n_eff` and `z` standard errors.
    pub fn upper(&self, z: f64) -> f64 {
        wilson_upper(self.survival * self.n_eff, self.n_eff, z)
    }
}

/// Kaplan–Meier at `t` over `samples` (any order). Ties: events before censorings.
pub fn kaplan_meier(samples: &[Sample], t: f64) -> KmEstimate {
    let mut v: Vec<Sample> = samples.to_vec();
    v.sort_unstable_by(order);
    km_sorted(&v, t)
}

/// The order Kaplan–Meier reads samples in: by value, events before censorings at a tie.
/// It is total (`total_cmp`) and samples equal under it are interchangeable.
fn order(a: &Sample, b: &Sample) -> std::cmp::Ordering {
    a.value_s.total_cmp(&b.value_s).then(a.censored.cmp(&b.censored))
}

/// [`kaplan_meier`] over samples already in [`order`]; NaN values (which that order puts
/// at either end) are skipped.
fn km_sorted(sorted: &[Sample], t: f64) -> KmEstimate {
    let lo = sorted.iter().take_while(|s| s.value_s.is_nan()).count();
    let hi = sorted.len() - sorted[lo..].iter().rev().take_while(|s| s.value_s.is_nan()).count();
    let v = &sorted[lo..hi];
    let known = v.iter().filter(|s| !s.censored || s.value_s > t).count() as f64;
    let (mut s, mut green) = (1.0f64, 0.0f64);
    let mut at_risk = v.len() as f64;
    let mut i = 0;
    while i < v.len() && v[i].value_s <= t {
        let x = v[i].value_s;
        let (mut d, mut c) = (0.0, 0.0);
        while i < v.len() && v[i].value_s == x {
            if v[i].censored {
                c += 1.0;
            } else {
                d += 1.0;
            }
            i += 1;
        }
        if d > 0.0 {
            s *= 1.0 - d / at_risk;
            if at_risk > d {
                green += d / (at_risk * (at_risk - d));
            }
        }
        at_risk -= d + c;
    }
    let variance = s * s * green;
    let n_eff = if variance > 0.0 && s > 0.0 && s < 1.0 { (s * (1.0 - s) / variance).min(known) } else { known };
    KmEstimate { survival: s.clamp(0.0, 1.0), variance, n_eff }
}

/// A provider's recent attempts.
#[derive(Debug, Clone, Default)]
pub struct CensoredHistory {
    ring: VecDeque<Sample>,
    /// The same attempts in Kaplan–Meier's [`order`], kept sorted as they come and go
    /// (an insertion into at most [`HISTORY_LEN`]): reading the estimate at every settle
    /// then sorts nothing (sorting 64 samples per settle was a quarter of a live `auto`
    /// request's instructions, `scripts/instructions-per-request.sh`).
    sorted: Vec<Sample>,
    /// The provider's shift alarms as of the last attempt kept.
    shifts_seen: u64,
}

impl CensoredHistory {
    /// Keeps `s`, dropping the oldest beyond [`HISTORY_LEN`].
    pub fn push(&mut self, s: Sample) {
        if self.ring.len() >= HISTORY_LEN {
            if let Some(old) = self.ring.pop_front() {
                if let Ok(i) = self.sorted.binary_search_by(|x| order(x, &old)) {
                    self.sorted.remove(i);
                }
            }
        }
        self.ring.push_back(s);
        let at = self.sorted.partition_point(|x| order(x, &s).is_lt());
        self.sorted.insert(at, s);
    }

    /// Forgets every attempt.
    pub fn clear(&mut self) {
        self.ring.clear();
        self.sorted.clear();
    }

    /// Attempts kept.
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// No attempt kept.
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// Kaplan–Meier at `t` over the attempts kept.
    pub fn at(&self, t: f64) -> KmEstimate {
        km_sorted(&self.sorted, t)
    }
}

/// A provider's miss at the deadline as history and model together give it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Censored {
    /// The history's estimate at the deadline.
    pub history: KmEstimate,
    /// The history's weight in the blend (its effective sample size).
    pub n: f64,
}

impl Censored {
    /// `(32·model + n·history)/(32 + n)`.
    pub fn blended(&self, model_miss: f64) -> f64 {
        (HISTORY_PRIOR * model_miss + self.n * self.history.survival) / (HISTORY_PRIOR + self.n)
    }

    /// The same blend of the history's upper bound at `z`: what a single-provider plan
    /// must bring within the working level to qualify.
    pub fn upper(&self, model_miss: f64, z: f64) -> f64 {
        (HISTORY_PRIOR * model_miss + self.n * self.history.upper(z)) / (HISTORY_PRIOR + self.n)
    }
}

/// Every provider's history, fed the attempts the model is fed.
#[derive(Debug, Clone, Default)]
pub struct CensoredSet {
    providers: Vec<CensoredHistory>,
}

impl CensoredSet {
    /// Histories for `n` providers.
    pub fn new(n: usize) -> CensoredSet {
        CensoredSet { providers: vec![CensoredHistory::default(); n] }
    }

    /// Keeps one request's attempts, after `model` was fed them: a provider whose shift
    /// detector fired since its last attempt kept starts over from this request's.
    pub fn observe(&mut self, model: &Model, attempts: &[Observation]) {
        for (p, h) in self.providers.iter_mut().enumerate() {
            let shifts = model.providers.get(p).map_or(0, |pm| pm.shift.shifts);
            if shifts != h.shifts_seen {
                h.shifts_seen = shifts;
                h.clear();
            }
        }
        for o in attempts {
            if let Some(h) = self.providers.get_mut(o.provider) {
                h.push(Sample::of(o));
            }
        }
    }

    /// A provider's history.
    pub fn provider(&self, p: usize) -> Option<&CensoredHistory> {
        self.providers.get(p)
    }

    /// Each provider's estimate at `deadline_s` (None without history).
    pub fn at(&self, deadline_s: f64) -> Vec<Option<Censored>> {
        self.providers
            .iter()
            .map(|h| {
                (!h.is_empty()).then(|| {
                    let e = h.at(deadline_s);
                    Censored { history: e, n: e.n_eff }
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
