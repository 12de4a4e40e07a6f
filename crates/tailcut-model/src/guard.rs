//! What `auto` learns from outcomes rather than from its model: the guarantees that do
//! not depend on the model being right (issue 28).
//!
//! - [`MissController`]: adaptive conformal inference (Gibbs & Candès 2021) on the
//!   planner's aggressiveness. A working level `α_t` moves after every outcome,
//!   `α_{t+1} = min(α, α_t + γ·(α − err_t))`, and the planner is asked for `α_t`.
//!   Summing the update over any window of `T` requests gives
//!   `mean(err) ≤ α + (α_start − α_end)/(γ·T)`, whatever the sequence (the cap at `α`
//!   only lowers the level, so it keeps this side of Gibbs and Candès' identity: a run
//!   of requests that missed less than the target does not bank slack for a later
//!   stretch to spend).
//! - [`Experts`]: multiplicative weights (Hedge) over fixed plans, for full information
//!   (paired rounds: every plan's loss on every round is known): Follow-the-Leader while
//!   it keeps up, AdaHedge once it falls behind. With losses in [0, 1] and `N` experts,
//!   the loss played over `T` rounds is within [`Experts::regret_bound`]
//!   `= 2·(sqrt(T·ln N) + (16/3)·ln N + 2) + 1` of the best expert in hindsight.
//! - [`Tally`] and [`wilson_upper`]: a plan's realized misses, and the pessimistic bound a
//!   plan must meet to qualify for the miss target.
//! - [`loss`]: the documented combination of miss and cost that the experts are judged on.
//! - [`censored`]: each provider's recent attempts read by Kaplan–Meier (cancels
//!   right-censored), blended with the model, with the upper bound a single-provider plan
//!   must meet live.

pub mod censored;

/// Adaptive-conformal control of the miss rate: see the module doc.
#[derive(Debug, Clone)]
pub struct MissController {
    target: f64,
    gamma: f64,
    level: f64,
    enabled: bool,
}

/// The controller's default step γ. Larger follows faster and oscillates more; the
/// realized deviation over `T` requests is `|α_end − α_start| / (γ·T)`.
pub const CONTROLLER_GAMMA: f64 = 0.02;

impl MissController {
    /// A controller holding `target` with step `gamma`; `α_1 = target`.
    pub fn new(target: f64, gamma: f64) -> MissController {
        MissController { target, gamma, level: target, enabled: true }
    }

    /// Switched off: the level stays at the target (what the property tests compare with).
    pub fn disabled(mut self) -> MissController {
        self.enabled = false;
        self
    }

    /// The working level `α_t` (may leave [0, 1]: below 0 asks for the least miss).
    pub fn level(&self) -> f64 {
        self.level
    }

    /// The target α.
    pub fn target(&self) -> f64 {
        self.target
    }

    /// The step γ.
    pub fn gamma(&self) -> f64 {
        self.gamma
    }

    /// Records one outcome: `α_{t+1} = min(α, α_t + γ·(α − err_t))`.
    pub fn record(&mut self, missed: bool) {
        if self.enabled {
            self.level = (self.level + self.gamma * (self.target - if missed { 1.0 } else { 0.0 })).min(self.target);
        }
    }

    /// The realized bound on the miss rate over the `t` requests since the level was
    /// `start`: `α + (start − α_now)/(γ·t)`.
    pub fn realized_bound(&self, start: f64, t: u64) -> f64 {
        self.target + (start - self.level) / (self.gamma * t.max(1) as f64)
    }

    /// Gibbs and Candès' a-priori bound on `|mean(err) − α|` over `t` requests, valid
    /// while the working level stays within `[−γ, 1 + γ]` (it does when a level ≤ 0 makes
    /// a miss impossible): `(max(α_1, 1 − α_1) + γ) / (γ·t)`.
    pub fn aci_bound(&self, t: u64) -> f64 {
        (self.target.max(1.0 - self.target) + self.gamma) / (self.gamma * t.max(1) as f64)
    }
}

/// Prediction with expert advice over `N` fixed experts: Follow-the-Leader while it
/// keeps up, then Hedge — the idea of FlipFlop (de Rooij, van Erven, Grünwald & Koolen,
/// "Follow the leader if you can, hedge if you must", JMLR 2014), in its simplest form.
///
/// - **Leader phase.** Play the expert with the least cumulative loss. On i.i.d. data
///   the leader settles and the play is deterministic, as a fixed plan's is.
/// - **Switch.** As soon as the loss played exceeds the best expert's by more than
///   `R(t)` ([`Experts::hedge_bound`]), switch for good to AdaHedge started afresh.
/// - **Hedge phase.** AdaHedge: weights `∝ e^{−η·L_i}` with `η_t = ln N / Δ_{t−1}`,
///   `Δ` the sum of the mixability gaps (weighted loss minus mix loss). Their
///   Theorem 8 gives regret `≤ 2·sqrt(ln N · L*(T − L*)/T) + (16/3)·ln N + 2 ≤ R(T)`,
///   `R(T) = sqrt(T·ln N) + (16/3)·ln N + 2`.
///
/// Bound ([`Experts::regret_bound`]): the loss played (the expected loss in the Hedge
/// phase) is at most the best expert's in hindsight plus `2·R(T) + 1`. Proof: until the
/// switch at `s` the leader phase is at most `R(s) + 1` behind the best expert over
/// `1..s` (one round adds at most 1); after it AdaHedge is at most `R(T − s)` behind the
/// best over `s+1..T`; and the sum of two minima is at most the minimum of the sums.
#[derive(Debug, Clone)]
pub struct Experts {
    /// Cumulative losses over every round (for the leader and the switch test).
    cum: Vec<f64>,
    /// Cumulative losses since the switch (AdaHedge's).
    hcum: Vec<f64>,
    t: u64,
    enabled: bool,
    /// The distribution played this round.
    probs: Vec<f64>,
    /// Σ of AdaHedge's mixability gaps.
    delta: f64,
    /// The loss played so far.
    played: f64,
    /// In the Hedge phase (since round `switched`).
    switched: Option<u64>,
    /// Leader phase: the expert played keeps the play until another leads it by more
    /// than this (0 = Follow-the-Leader).
    margin: f64,
    /// Leader phase: what each expert cost beyond its own losses when it was played
    /// ([`Experts::charge`]); the leader is chosen on `cum + charged`, the switch test
    /// and the Hedge phase use `cum` alone.
    charged: Vec<f64>,
}

impl Experts {
    /// `n` experts; the first round plays expert 0 (every expert leads with no loss).
    pub fn new(n: usize) -> Experts {
        let n = n.max(1);
        let mut probs = vec![0.0; n];
        probs[0] = 1.0;
        Experts {
            cum: vec![0.0; n],
            hcum: vec![0.0; n],
            t: 0,
            enabled: true,
            probs,
            delta: 0.0,
            played: 0.0,
            switched: None,
            margin: 0.0,
            charged: vec![0.0; n],
        }
    }

    /// Switched off: uniform weights every round (what the property tests compare with).
    pub fn disabled(mut self) -> Experts {
        self.enabled = false;
        let n = self.cum.len();
        self.probs = vec![1.0 / n as f64; n];
        self
    }

    /// Experts.
    pub fn len(&self) -> usize {
        self.cum.len()
    }

    /// Never empty (at least one expert).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Rounds recorded.
    pub fn rounds(&self) -> u64 {
        self.t
    }

    /// Each expert's cumulative loss.
    pub fn cumulative(&self) -> &[f64] {
        &self.cum
    }

    /// The loss played so far.
    pub fn played(&self) -> f64 {
        self.played
    }

    /// The round the play switched to Hedge, if it did.
    pub fn switched(&self) -> Option<u64> {
        self.switched
    }

    /// The distribution played this round.
    pub fn probs(&self) -> &[f64] {
        &self.probs
    }

    /// AdaHedge's learning rate (+∞ while no mixability gap has been paid).
    pub fn eta(&self) -> f64 {
        let ln = (self.cum.len() as f64).ln();
        if self.delta > 0.0 {
            ln / self.delta
        } else {
            f64::INFINITY
        }
    }

    /// The expert drawn by a uniform `u` in [0, 1).
    pub fn pick(&self, u: f64) -> usize {
        let mut acc = 0.0;
        for (i, p) in self.probs.iter().enumerate() {
            acc += p;
            if u < acc {
                return i;
            }
        }
        self.probs.len() - 1
    }

    /// Sets the leader phase's margin: the expert played keeps the play until another's
    /// cumulative loss is lower by more than `margin` (0, the default, is
    /// Follow-the-Leader).
    pub fn set_margin(&mut self, margin: f64) {
        self.margin = margin.max(0.0);
    }

    /// The leader phase's margin.
    pub fn margin(&self) -> f64 {
        self.margin
    }

    /// Charges expert `i` with `extra` loss for the leader phase's choice only (what it
    /// cost beyond its own losses when it was played); the regret bound is unchanged: the
    /// switch test compares the loss played with the best expert's own losses.
    pub fn charge(&mut self, i: usize, extra: f64) {
        if let Some(c) = self.charged.get_mut(i) {
            *c += extra;
        }
    }

    /// The expert with the least cumulative loss (the first of equals).
    pub fn leader(&self) -> usize {
        (0..self.cum.len()).min_by(|&a, &b| self.cum[a].total_cmp(&self.cum[b])).unwrap_or(0)
    }

    /// Records one round's losses (each in [0, 1], one per expert) and returns the loss
    /// the round's distribution suffered (its expectation in the Hedge phase).
    pub fn record(&mut self, losses: &[f64]) -> f64 {
        let l = |i: usize| losses.get(i).copied().unwrap_or(1.0).clamp(0.0, 1.0);
        let mixed: f64 = self.probs.iter().enumerate().map(|(i, p)| p * l(i)).sum();
        if self.enabled && self.switched.is_some() {
            // AdaHedge's mixability gap at the rate the weights were made with.
            let eta = self.eta();
            let lmin = (0..self.probs.len()).filter(|&i| self.probs[i] > 0.0).map(l).fold(f64::INFINITY, f64::min);
            let mix = if eta.is_finite() {
                let z: f64 = self.probs.iter().enumerate().map(|(i, p)| p * (-eta * (l(i) - lmin)).exp()).sum();
                lmin - z.ln() / eta
            } else {
                lmin
            };
            self.delta += (mixed - mix).max(0.0);
        }
        for i in 0..self.cum.len() {
            self.cum[i] += l(i);
            self.hcum[i] += l(i);
        }
        self.t += 1;
        self.played += mixed;
        if !self.enabled {
            return mixed;
        }
        let best = self.cum.iter().copied().fold(f64::INFINITY, f64::min);
        if self.switched.is_none() && self.played - best > Experts::hedge_bound(self.t, self.cum.len()) {
            self.switched = Some(self.t);
            self.hcum.iter_mut().for_each(|c| *c = 0.0);
            self.delta = 0.0;
        }
        let current = (0..self.probs.len()).max_by(|&a, &b| self.probs[a].total_cmp(&self.probs[b])).unwrap_or(0);
        self.probs.iter_mut().for_each(|p| *p = 0.0);
        if self.switched.is_none() {
            let judged = |i: usize| self.cum[i] + self.charged[i];
            let lead = (0..self.cum.len()).min_by(|&a, &b| judged(a).total_cmp(&judged(b))).unwrap_or(0);
            let keep = self.margin > 0.0 && self.t > 1 && judged(current) - judged(lead) <= self.margin;
            self.probs[if keep { current } else { lead }] = 1.0;
        } else {
            let eta = self.eta();
            let min = self.hcum.iter().copied().fold(f64::INFINITY, f64::min);
            let mut z = 0.0;
            for (p, c) in self.probs.iter_mut().zip(&self.hcum) {
                *p = if eta.is_finite() { (-eta * (c - min)).exp() } else { f64::from(u8::from(*c <= min)) };
                z += *p;
            }
            for p in &mut self.probs {
                *p /= z;
            }
        }
        mixed
    }

    /// AdaHedge's worst-case regret after `t` rounds with `n` experts:
    /// `R(t) = sqrt(t·ln n) + (16/3)·ln n + 2`.
    pub fn hedge_bound(t: u64, n: usize) -> f64 {
        let ln = (n.max(1) as f64).ln();
        (t as f64 * ln).sqrt() + 16.0 / 3.0 * ln + 2.0
    }

    /// The stated regret bound of the whole play after `t` rounds: `2·R(t) + 1`.
    pub fn regret_bound(t: u64, n: usize) -> f64 {
        2.0 * Experts::hedge_bound(t, n) + 1.0
    }
}

/// The loss a plan suffers on one request, in [0, 1]:
/// `(price·miss + min(cost / cost_ref, 1)) / (price + 1)`, where `miss` is 1 when the
/// request ended past the deadline (or never), `cost_ref` is the cost of two attempts on
/// the dearest provider running to the deadline, and `price` is what a miss weighs
/// against `cost_ref` (1 by default: a plan that misses 1 % more must save 1 % of
/// `cost_ref` per request).
pub fn loss(missed: bool, cost_usd: f64, cost_ref: f64, price: f64) -> f64 {
    let c = if cost_ref > 0.0 { (cost_usd / cost_ref).clamp(0.0, 1.0) } else { 0.0 };
    let m = if missed { 1.0 } else { 0.0 };
    (price * m + c) / (price + 1.0)
}

/// The miss price the controller sets at working level `level` for target `target`:
/// `price_0 · 10^((target − level)/target)`, tenfold when the level reaches 0, clamped to
/// [price_0 / 100, price_0 · 10^4].
pub fn miss_price(price0: f64, target: f64, level: f64) -> f64 {
    let x = if target > 0.0 { (target - level) / target } else { 0.0 };
    price0 * 10f64.powf(x.clamp(-2.0, 4.0))
}

/// Wilson's upper confidence bound on a rate from `k` events in `n` trials at `z`
/// standard errors (1 when `n` = 0).
pub fn wilson_upper(k: f64, n: f64, z: f64) -> f64 {
    WilsonAt::new(n, z).upper(k)
}

/// [`wilson_upper`] for many counts over the same `n` and `z`: the terms that depend on
/// `n` and `z` alone are computed once (the same operations, so the same bits).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WilsonAt {
    n: f64,
    z: f64,
    /// `z² / (2n)`.
    shift: f64,
    /// `z² / (4n²)`.
    widen: f64,
    /// `1 + z² / n`.
    scale: f64,
}

impl WilsonAt {
    /// The bound's terms for `n` trials at `z`.
    pub fn new(n: f64, z: f64) -> WilsonAt {
        let z2 = z * z;
        WilsonAt { n, z, shift: z2 / (2.0 * n), widen: z2 / (4.0 * n * n), scale: 1.0 + z2 / n }
    }

    /// The trials `n`.
    pub fn n(&self) -> f64 {
        self.n
    }

    /// Wilson's upper bound from `k` events in the `n` trials (1 when `n` ≤ 0).
    pub fn upper(&self, k: f64) -> f64 {
        let n = self.n;
        if n <= 0.0 {
            return 1.0;
        }
        let p = (k / n).clamp(0.0, 1.0);
        let centre = p + self.shift;
        let spread = self.z * (p * (1.0 - p) / n + self.widen).sqrt();
        ((centre + spread) / self.scale).min(1.0)
    }
}

/// z of the one-sided 95 % bound used for qualification.
pub const QUALIFY_Z: f64 = 1.645;

/// A plan's realized record: decayed trials, misses and cost.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Tally {
    /// Trials (decayed weight).
    pub n: f64,
    /// Misses (decayed weight).
    pub misses: f64,
    /// Cost, $ (decayed sum).
    pub cost: f64,
}

impl Tally {
    /// Adds one outcome after decaying the old ones by `keep` (1 = no decay).
    pub fn add(&mut self, missed: bool, cost_usd: f64, keep: f64) {
        self.n = self.n * keep + 1.0;
        self.misses = self.misses * keep + if missed { 1.0 } else { 0.0 };
        self.cost = self.cost * keep + cost_usd;
    }

    /// Mean cost per trial.
    pub fn mean_cost(&self) -> f64 {
        if self.n > 0.0 {
            self.cost / self.n
        } else {
            0.0
        }
    }

    /// The realized miss rate's upper bound.
    pub fn miss_upper(&self) -> f64 {
        wilson_upper(self.misses, self.n, QUALIFY_Z)
    }

    /// The miss rate blended with a model's prediction worth `prior` trials (the
    /// posterior mean: the model where history is thin, history where it is not).
    pub fn blended(&self, predicted: f64, prior: f64) -> f64 {
        (prior * predicted + self.misses) / (prior + self.n)
    }
}

#[cfg(test)]
mod tests;
