//! How two providers are slow together: the per-pair counts the model keeps, the
//! shrunk conditional rate, and the joint survival (a Fréchet mixture) the predictions
//! join two providers with.

use crate::sketch::DecayedRate;
use serde::{Deserialize, Serialize};

/// How often two providers are slow in the same request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairStat {
    /// First provider (index).
    pub a: usize,
    /// Second provider (index).
    pub b: usize,
    /// P(a slow), over requests where both outcomes were known.
    pub a_slow: DecayedRate,
    /// P(b slow), over the same requests.
    pub b_slow: DecayedRate,
    /// P(both slow), over the same requests.
    pub both_slow: DecayedRate,
    /// P(b slow | a slow): over requests where both were known and `a` was slow.
    #[serde(default = "empty_rate")]
    pub b_given_a: DecayedRate,
    /// P(a slow | b slow).
    #[serde(default = "empty_rate")]
    pub a_given_b: DecayedRate,
}

/// Half-life given to counters missing from a model saved before they existed (the
/// default [`crate::ModelConfig::half_life`]).
const DEFAULT_HALF_LIFE: f64 = 64.0;

fn empty_rate() -> DecayedRate {
    DecayedRate::new(DEFAULT_HALF_LIFE)
}

impl PairStat {
    /// Requests where both outcomes were known.
    pub fn samples(&self) -> u64 {
        self.both_slow.samples()
    }

    /// P(one slow | the other slow), pooled over both directions and shrunk toward
    /// independence (`p_slow`) with [`PAIR_PRIOR`] pseudo-observations.
    ///
    /// Conditional rates, not the joint rate over paired requests: a policy sees both
    /// providers of a pair mostly when it hedged, i.e. *because* the primary was slow, so
    /// the paired requests over-represent a slow primary and `P(both)/(P(a)·P(b))` over
    /// them is biased. `P(b slow | a slow)` is what those requests measure without bias,
    /// and each provider's marginal `P(slow)` is known by construction (`slow` is "above
    /// its own quantile").
    pub fn conditional(&self, p_slow: f64) -> f64 {
        let (h1, t1) = self.b_given_a.weights();
        let (h2, t2) = self.a_given_b.weights();
        (h1 + h2 + p_slow * PAIR_PRIOR) / (t1 + t2 + PAIR_PRIOR)
    }

    /// `P(both slow) / (P(a slow)·P(b slow))` = `P(b slow | a slow) / P(b slow)`, where
    /// `p_slow` is each provider's marginal share of slow attempts: 1 when independent,
    /// above 1 when slow together (for display; predictions use
    /// [`PairStat::dependence`]).
    pub fn lift(&self, p_slow: f64) -> f64 {
        if p_slow <= 0.0 {
            1.0
        } else {
            self.conditional(p_slow) / p_slow
        }
    }

    /// The weight `ρ ∈ [−1, 1]` of the Fréchet mixture that reproduces the (shrunk)
    /// both-slow rate `p_slow · P(b slow | a slow)`: the joint survival of the pair is
    /// `(1 − ρ)·S_a·S_b + ρ·min(S_a, S_b)` for `ρ ≥ 0` (slow together) and
    /// `(1 + ρ)·S_a·S_b − ρ·max(S_a + S_b − 1, 0)` for `ρ < 0`. Unlike a constant lift
    /// on `S_a·S_b`, this is a joint survival at every `t`: 1 at `t = 0`, never above
    /// either marginal, independence at `ρ = 0`.
    pub fn dependence(&self, p_slow: f64) -> f64 {
        let p = p_slow.clamp(1e-6, 1.0 - 1e-6);
        let both = p * self.conditional(p);
        let ind = p * p;
        if both >= ind {
            ((both - ind) / (p - ind)).clamp(0.0, 1.0)
        } else {
            let bottom = ind - (2.0 * p - 1.0).max(0.0);
            -((ind - both) / bottom).clamp(0.0, 1.0)
        }
    }
}

/// Pseudo-observations of independence in a pair's both-slow rate.
pub const PAIR_PRIOR: f64 = 16.0;

/// The joint survival `P(A > ·, B > ·)` of two providers whose marginal survivals at the
/// points in question are `sa` and `sb`, under the Fréchet mixture of weight `dep` (see
/// [`PairStat::dependence`]).
pub fn joint_survival(sa: f64, sb: f64, dep: f64) -> f64 {
    let ind = sa * sb;
    if dep >= 0.0 {
        (1.0 - dep) * ind + dep * sa.min(sb)
    } else {
        (1.0 + dep) * ind - dep * (sa + sb - 1.0).max(0.0)
    }
}
