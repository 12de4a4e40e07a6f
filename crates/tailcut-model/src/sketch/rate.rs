//! [`DecayedRate`]: a share of events under the sketch's forward decay (P(failed),
//! P(invalid), P(warm | idle gap), the pairs' joint slowness).

use serde::{Deserialize, Serialize};

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

    /// Half-life, scale, hits and trials, for the range checks.
    pub(super) fn parts(&self) -> (f64, f64, f64, f64) {
        (self.half_life, self.scale, self.hits, self.trials)
    }

    /// Records one trial.
    pub fn record(&mut self, hit: bool) {
        self.record_share(if hit { 1.0 } else { 0.0 });
    }

    /// Records one trial whose outcome is known only as a probability `p_hit` of a hit
    /// (clamped to [0, 1]; NaN counts as no trial): it adds a whole trial and `p_hit` of
    /// a hit, the expected counts.
    pub fn record_share(&mut self, p_hit: f64) {
        if p_hit.is_nan() {
            return;
        }
        self.trials += self.scale;
        self.hits += self.scale * p_hit.clamp(0.0, 1.0);
        self.n += 1;
        self.scale *= 2f64.powf(1.0 / self.half_life);
        self.renormalise();
    }

    /// Ages every trial so far to `factor` (clamped to [[`super::MIN_AGE`], 1]) of its
    /// weight against the next one; the rate read back shrinks toward its prior.
    pub fn age(&mut self, factor: f64) {
        self.scale /= super::age_factor(factor);
        self.renormalise();
    }

    fn renormalise(&mut self) {
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
