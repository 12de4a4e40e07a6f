//! `auto` with full information (a replay of paired rounds, where every plan's outcome on
//! every past round is known): the fixed plans, the model's choice and the plan judged
//! best on the record are experts, and a Hedge distribution over them picks the plan.
//!
//! - Every fixed plan keeps its realized record ([`Tally`], decayed with a half-life of
//!   256 rounds).
//! - The *judged* expert: among the fixed plans whose Wilson upper bound on the miss rate
//!   is within the working level, the cheapest on the record (costs within 2 % tie, the
//!   lower bound wins); when none qualifies, the lowest upper bound, then the cheapest.
//!   With a thin record nothing qualifies and it plays "fewest misses, then cheapest".
//! - The *model* expert: the planner's choice from the model's tables.
//! - Loss: [`crate::guard::loss`] with the miss price the controller sets
//!   ([`crate::guard::miss_price`]).
//! - The *model-only* expert (optional, [`ExpertSet::with_model_only`]): the model-only
//!   `auto` (the planner alone, no controller, no experts) run as a separate instance on
//!   its own run of the stream — its own provider state, its own model fed by its own
//!   launches — and priced on that run, as a fixed plan is priced on its own. The caller
//!   gives its plan for each request ([`ExpertSet::set_model_only`]) before the decision
//!   and its outcome after. It is *playable*: when it leads, `auto` plays the plan the
//!   model-only instance decided for that request, and as long as `auto` follows it its
//!   run is the model-only run. The regret bound then holds against the best of the
//!   fixed plans and the model-only `auto`.
//! - Only the fixed plans and the model-only expert are *played* ([`META_PLAYED`]): the
//!   model's and the judged expert are priced every round (their records and the traces show them) but enter the
//!   Hedge at the worst loss, so neither leads (after a switch to AdaHedge their weight
//!   falls as `e^{−η·t}`). Both pick a different
//!   plan from one request to the next, and `auto` switching plans pays what their
//!   prices do not show: the plan switched to finds its providers as `auto` left them,
//!   not warm from its own run (cold starts right after a switch; see
//!   docs/learned-policies.md, "Why `auto` loses in the sweep"). The regret bound is
//!   then against the best fixed plan, as the issue states it.

use crate::budget::HedgeBudget;
use crate::guard::{loss, miss_price, Experts, Tally};
use crate::plan::{Plan, COST_TIE};
use crate::predict::TALLY_KEEP;

/// The experts and their records.
#[derive(Debug, Clone)]
pub struct ExpertSet {
    plans: Vec<Plan>,
    hedge: Experts,
    tallies: Vec<Tally>,
    /// Reference cost of the loss, $.
    cost_ref: f64,
    /// Miss price at the target level.
    price0: f64,
    /// This round's plans: the fixed ones, then the model-only instance's (when on), then
    /// the model's, then the judged one.
    round: Vec<Plan>,
    /// Whether the model-only expert is on (at index `plans.len()`).
    model_only: bool,
    /// Whether the Hedge weights move (false: uniform, for checks).
    weighting: bool,
    /// Each expert's own extra-load bucket (the cap `auto` runs under, starting full),
    /// so that an expert's record is what the plan does when it runs within the cap in
    /// the steady state.
    budgets: Vec<HedgeBudget>,
    chosen: usize,
}

/// Whether the model's and the judged expert may be played (see the module doc).
pub const META_PLAYED: bool = false;

/// Index of the model's expert among a round's plans, from the end.
pub const MODEL_FROM_END: usize = 2;

impl ExpertSet {
    /// Experts over `plans` (fixed), the model's choice and the judged plan; losses are
    /// normalised by `cost_ref` and a miss weighs `price0` at the target.
    pub fn new(plans: Vec<Plan>, cost_ref: f64, price0: f64, weighting: bool, budget: HedgeBudget) -> ExpertSet {
        let n = plans.len() + 2;
        let hedge = if weighting { Experts::new(n) } else { Experts::new(n).disabled() };
        let mut round = plans.clone();
        round.extend([Plan::Single { p: 0 }, Plan::Single { p: 0 }]);
        ExpertSet {
            tallies: vec![Tally::default(); plans.len()],
            plans,
            hedge,
            cost_ref,
            price0,
            round,
            model_only: false,
            weighting,
            budgets: vec![budget; n],
            chosen: 0,
        }
    }

    /// Adds the model-only expert (at index [`ExpertSet::fixed`], before the model's and
    /// the judged one): the model-only `auto` on its own run. Call before any round.
    pub fn with_model_only(mut self) -> ExpertSet {
        if !self.model_only {
            self.model_only = true;
            let at = self.plans.len();
            self.round.insert(at, Plan::Single { p: 0 });
            let n = self.round.len();
            self.hedge = if self.weighting { Experts::new(n) } else { Experts::new(n).disabled() };
            self.budgets.push(self.budgets[0].clone());
        }
        self
    }

    /// The fixed experts (the first `fixed()` indices).
    pub fn fixed(&self) -> usize {
        self.plans.len()
    }

    /// The model-only expert's index, when on.
    pub fn model_only_index(&self) -> Option<usize> {
        self.model_only.then_some(self.plans.len())
    }

    /// Sets the plan the model-only instance decided for the coming request (its own
    /// run's plan): what `auto` plays when this expert is drawn.
    pub fn set_model_only(&mut self, plan: Plan) {
        if let Some(i) = self.model_only_index() {
            self.round[i] = plan;
        }
    }

    /// The judged plan at working level `level`.
    fn judged(&self, level: f64) -> Plan {
        let qualified = |t: &Tally| t.n > 0.0 && t.miss_upper() <= level;
        let cheapest = self
            .tallies
            .iter()
            .enumerate()
            .filter(|(_, t)| qualified(t))
            .min_by(|a, b| a.1.mean_cost().total_cmp(&b.1.mean_cost()))
            .map(|(_, t)| t.mean_cost());
        let pick = match cheapest {
            Some(c) => self
                .tallies
                .iter()
                .enumerate()
                .filter(|(_, t)| qualified(t) && t.mean_cost() <= c * (1.0 + COST_TIE) + 1e-12)
                .min_by(|a, b| a.1.miss_upper().total_cmp(&b.1.miss_upper())),
            None => self
                .tallies
                .iter()
                .enumerate()
                .min_by(|a, b| a.1.miss_upper().total_cmp(&b.1.miss_upper()).then(a.1.mean_cost().total_cmp(&b.1.mean_cost()))),
        };
        pick.map_or(Plan::Single { p: 0 }, |(i, _)| self.plans[i])
    }

    /// Sets this round's model and judged plans and draws the expert to play with `u`;
    /// returns the plan, the expert's index and its weight.
    pub fn play(&mut self, model_plan: Plan, level: f64, u: f64) -> (Plan, usize, f64) {
        self.set_round(model_plan, level);
        self.chosen = self.hedge.pick(u);
        (self.round[self.chosen], self.chosen, self.hedge.probs()[self.chosen])
    }

    /// Sets this round's model and judged plans without drawing (a warm-up round).
    pub fn set_round(&mut self, model_plan: Plan, level: f64) {
        let n = self.round.len();
        self.round[n - MODEL_FROM_END] = model_plan;
        self.round[n - 1] = self.judged(level);
        for b in &mut self.budgets {
            b.request();
        }
    }

    /// This round's plans, in expert order (fixed, model, judged): the caller prices
    /// each on the round and passes the outcomes to [`ExpertSet::record`].
    pub fn round_plans(&self) -> &[Plan] {
        &self.round
    }

    /// This round's plans with each expert's extra-load bucket, to gate its extra
    /// attempts as `auto`'s own are gated.
    pub fn round_mut(&mut self) -> (&[Plan], &mut [HedgeBudget]) {
        (&self.round, &mut self.budgets)
    }

    /// Records the round's outcomes `(missed, cost $)` per expert at working level `level`.
    pub fn record(&mut self, outcomes: &[(bool, f64)], target: f64, level: f64) {
        let price = miss_price(self.price0, target, level);
        let mut losses: Vec<f64> = outcomes.iter().map(|&(m, c)| loss(m, c, self.cost_ref, price)).collect();
        if !META_PLAYED {
            // The model's and the judged expert (the last two) are not played.
            let n = losses.len();
            losses.iter_mut().skip(n.saturating_sub(MODEL_FROM_END)).for_each(|l| *l = 1.0);
        }
        self.hedge.record(&losses);
        for (t, &(m, c)) in self.tallies.iter_mut().zip(outcomes) {
            t.add(m, c, TALLY_KEEP);
        }
    }

    /// The Hedge state.
    pub fn hedge(&self) -> &Experts {
        &self.hedge
    }

    /// Label of expert `i` ("model-only", "model", "judged" or "fixed").
    pub fn kind_of(&self, i: usize) -> &'static str {
        let n = self.round.len();
        if Some(i) == self.model_only_index() {
            "model-only"
        } else if i == n - MODEL_FROM_END {
            "model"
        } else if i == n - 1 {
            "judged"
        } else {
            "fixed"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model's and the judged expert miss nothing and cost nothing, the fixed plans
    /// miss every fourth and every other round: priced as they are, either would lead
    /// from the first round; neither is played.
    #[test]
    fn only_fixed_plans_are_played_even_when_a_meta_expert_leads() {
        let fixed = vec![Plan::Single { p: 0 }, Plan::Single { p: 1 }];
        let mut ex = ExpertSet::new(fixed, 1.0, 1.0, true, HedgeBudget::full(1.0, 5.0));
        let model = Plan::Hedge { p: 0, h: 1, delay_s: 0.0 };
        for k in 0..300 {
            let (_, index, _) = ex.play(model, 0.05, (k as f64 * 0.618_034) % 1.0);
            assert_eq!(ex.kind_of(index), "fixed", "round {k}: played the {} expert", ex.kind_of(index));
            ex.record(&[(k % 4 == 0, 0.1), (k % 2 == 0, 0.1), (false, 0.0), (false, 0.0)], 0.05, 0.05);
        }
    }

    /// The model-only expert is played when it leads (what its own run decided for the
    /// request, not the model's choice of the round), and not while a fixed plan leads.
    #[test]
    fn the_model_only_expert_is_played_when_it_leads() {
        let fixed = vec![Plan::Single { p: 0 }, Plan::Single { p: 1 }];
        let mut ex = ExpertSet::new(fixed, 1.0, 1.0, true, HedgeBudget::full(1.0, 5.0)).with_model_only();
        assert_eq!((ex.model_only_index(), ex.hedge().len()), (Some(2), 5));
        let own = Plan::Hedge { p: 1, h: 0, delay_s: 3.0 };
        let model = Plan::Hedge { p: 0, h: 1, delay_s: 0.0 };
        let mut played_own = 0;
        for k in 0..300 {
            ex.set_model_only(own);
            let (plan, index, _) = ex.play(model, 0.05, (k as f64 * 0.618_034) % 1.0);
            assert_ne!(ex.kind_of(index), "model", "round {k}");
            assert_ne!(ex.kind_of(index), "judged", "round {k}");
            if ex.kind_of(index) == "model-only" {
                assert_eq!(plan, own);
                played_own += 1;
            }
            // The model-only run misses every tenth request, the fixed plans every
            // fourth and every other.
            ex.record(&[(k % 4 == 0, 0.1), (k % 2 == 0, 0.1), (k % 10 == 0, 0.1), (false, 0.0), (false, 0.0)], 0.05, 0.05);
        }
        assert!(played_own >= 290, "played the model-only expert {played_own} of 300 rounds");
        // Where it is worse than a fixed plan, the fixed plan is played.
        let mut ex = ExpertSet::new(vec![Plan::Single { p: 0 }], 1.0, 1.0, true, HedgeBudget::full(1.0, 5.0)).with_model_only();
        let mut played_fixed = 0;
        for k in 0..300 {
            ex.set_model_only(own);
            let (_, index, _) = ex.play(model, 0.05, (k as f64 * 0.618_034) % 1.0);
            played_fixed += usize::from(ex.kind_of(index) == "fixed");
            ex.record(&[(k % 10 == 0, 0.1), (k % 4 == 0, 0.1), (false, 0.0), (false, 0.0)], 0.05, 0.05);
        }
        assert!(played_fixed >= 290, "played the fixed plan {played_fixed} of 300 rounds");
    }
}
