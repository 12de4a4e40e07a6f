//! What `auto` learns from outcomes rather than from its model: the guarantees that do
//! not depend on the model being right (issue 28).
//!
//! - [`MissController`]: adaptive conformal inference (Gibbs & Candès 2021) on the
//!   planner's aggressiveness. A working level `α_t` moves after every outcome,
//!   `α_{t+1} = α_t + γ·(α − err_t)`, and the planner is asked for `α_t`. Summing the
//!   update over any window of `T` requests gives the identity
//!   `mean(err) = α − (α_end − α_start)/(γ·T)`, whatever the sequence.
//! - [`Experts`]: multiplicative weights (Hedge) over fixed plans, for full information
//!   (paired rounds: every plan's loss on every round is known). With losses in [0, 1],
//!   `N` experts and the anytime step `η_t = c·sqrt(8·ln N / t)`, the weighted loss is
//!   within [`Experts::regret_bound`] `= (c + 1/(2c))·sqrt((T/2)·ln N)` of the best
//!   expert in hindsight (the decreasing-step analysis: `ln N / η_T + Σ η_t / 8`).
//! - [`Tally`] and [`wilson_upper`]: a plan's realized misses, and the pessimistic bound a
//!   plan must meet to qualify for the miss target.
//! - [`loss`]: the documented combination of miss and cost that the experts are judged on.

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

    /// Records one outcome: `α_{t+1} = α_t + γ·(α − err_t)`.
    pub fn record(&mut self, missed: bool) {
        if self.enabled {
            self.level += self.gamma * (self.target - if missed { 1.0 } else { 0.0 });
        }
    }

    /// Gibbs and Candès' a-priori bound on `|mean(err) − α|` over `t` requests, valid
    /// while the working level stays within `[−γ, 1 + γ]` (it does when a level ≤ 0 makes
    /// a miss impossible): `(max(α_1, 1 − α_1) + γ) / (γ·t)`.
    pub fn aci_bound(&self, t: u64) -> f64 {
        (self.target.max(1.0 - self.target) + self.gamma) / (self.gamma * t.max(1) as f64)
    }
}

/// Hedge (multiplicative weights) over `N` fixed experts with the anytime step
/// `η_t = c·sqrt(8·ln N / t)`.
#[derive(Debug, Clone)]
pub struct Experts {
    cum: Vec<f64>,
    t: u64,
    enabled: bool,
    probs: Vec<f64>,
    scale: f64,
}

/// `auto`'s step scale `c`: 4× the step that minimises the worst-case bound. The bound
/// grows from 1.5 to 4.1 × sqrt((T/2)·ln N), and the weights settle on the leaders within
/// a few dozen rounds instead of a few hundred (the worst-case step spreads a 36-round
/// replay over every expert within a miss of the best).
pub const ETA_SCALE: f64 = 4.0;

impl Experts {
    /// `n` experts, uniform weights, step scale [`ETA_SCALE`].
    pub fn new(n: usize) -> Experts {
        Experts::with_scale(n, ETA_SCALE)
    }

    /// `n` experts with step scale `c`.
    pub fn with_scale(n: usize, c: f64) -> Experts {
        let n = n.max(1);
        Experts { cum: vec![0.0; n], t: 0, enabled: true, probs: vec![1.0 / n as f64; n], scale: c }
    }

    /// The step scale `c`.
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// Switched off: the weights stay uniform (what the property tests compare with).
    pub fn disabled(mut self) -> Experts {
        self.enabled = false;
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

    /// The current distribution over experts.
    pub fn probs(&self) -> &[f64] {
        &self.probs
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

    /// The expert with the most weight.
    pub fn leader(&self) -> usize {
        (0..self.cum.len()).min_by(|&a, &b| self.cum[a].total_cmp(&self.cum[b])).unwrap_or(0)
    }

    /// Records one round's losses (each in [0, 1], one per expert) and returns the
    /// weighted loss the current distribution suffered.
    pub fn record(&mut self, losses: &[f64]) -> f64 {
        let mixed: f64 = self.probs.iter().zip(losses).map(|(p, l)| p * l.clamp(0.0, 1.0)).sum();
        for (c, l) in self.cum.iter_mut().zip(losses) {
            *c += l.clamp(0.0, 1.0);
        }
        self.t += 1;
        if self.enabled {
            let n = self.cum.len() as f64;
            let eta = self.scale * (8.0 * n.ln() / self.t as f64).sqrt();
            let min = self.cum.iter().copied().fold(f64::INFINITY, f64::min);
            let mut z = 0.0;
            for (p, c) in self.probs.iter_mut().zip(&self.cum) {
                *p = (-eta * (c - min)).exp();
                z += *p;
            }
            for p in &mut self.probs {
                *p /= z;
            }
        }
        mixed
    }

    /// The regret bound after `t` rounds with `n` experts and step scale `c`:
    /// `ln n / η_t + Σ η_s / 8 ≤ (c + 1/(2c))·sqrt((t/2)·ln n)` (Σ 1/sqrt(s) ≤ 2·sqrt(t)).
    pub fn regret_bound(t: u64, n: usize, c: f64) -> f64 {
        let ln = (n.max(1) as f64).ln();
        (c + 1.0 / (2.0 * c)) * (t as f64 / 2.0 * ln).sqrt()
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
    if n <= 0.0 {
        return 1.0;
    }
    let p = (k / n).clamp(0.0, 1.0);
    let z2 = z * z;
    let centre = p + z2 / (2.0 * n);
    let spread = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre + spread) / (1.0 + z2 / n)).min(1.0)
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
