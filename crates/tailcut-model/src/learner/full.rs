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
//! - `auto`'s realized outcome is compared with the played expert's own run
//!   ([`ExpertSet::realized`]): the excess within [`SWITCH_WINDOW`] requests of a switch,
//!   per switch, is the leader phase's margin (a lazy leader: the plan played keeps the
//!   play until another leads it by more than a switch has cost); later excess is charged
//!   to the plan played. The switch test and the bound use own-run losses only.
//! - While every fixed plan's record misses more than the target, the miss price stops
//!   at tenfold ([`ExpertSet::price`]).

use crate::budget::HedgeBudget;
use crate::guard::{loss, miss_price, Experts, Tally, WilsonAt, QUALIFY_Z};
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
    /// Each record as the judged expert reads it (kept in step with `tallies`).
    reads: Vec<TallyRead>,
    /// The last round's losses (a buffer kept between rounds).
    losses: Vec<f64>,
    /// The expert played the round before (to count switches).
    previous: Option<usize>,
    /// Switches of the played expert so far.
    switches: u64,
    /// The played expert's own-run loss on the last recorded round, and the miss price
    /// it was priced at.
    last_own: Option<(f64, f64)>,
    /// Σ (`auto`'s realized loss − the played expert's own-run loss) over the
    /// [`SWITCH_WINDOW`] requests after each switch: what switching cost beyond what the
    /// experts' own runs show.
    excess: f64,
    /// Requests played since the last switch.
    since_switch: u64,
}

/// A fixed plan's record as the judged expert reads it: trials, the miss rate's upper
/// bound and the mean cost.
#[derive(Debug, Clone, Copy)]
struct TallyRead {
    n: f64,
    upper: f64,
    cost: f64,
}

impl TallyRead {
    fn of(t: &Tally) -> TallyRead {
        TallyRead { n: t.n, upper: t.miss_upper(), cost: t.mean_cost() }
    }

    /// [`TallyRead::of`] with the bound's terms for `t.n` given (`w` is
    /// `WilsonAt::new(t.n, QUALIFY_Z)`).
    fn with(t: &Tally, w: &WilsonAt) -> TallyRead {
        TallyRead { n: t.n, upper: w.upper(t.misses), cost: t.mean_cost() }
    }
}

/// Requests after a switch whose excess (realized − own run) is the switch's cost; later
/// excess is charged to the plan played (its own run does not show what it does when
/// `auto` plays it, e.g. under `auto`'s extra-load cap).
pub const SWITCH_WINDOW: u64 = 8;

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
            reads: vec![TallyRead::of(&Tally::default()); plans.len()],
            losses: Vec::with_capacity(n),
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
            previous: None,
            switches: 0,
            last_own: None,
            excess: 0.0,
            since_switch: 0,
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

    /// The judged plan at working level `level` (from each record's bound and mean cost,
    /// read once per [`ExpertSet::record`]).
    fn judged(&self, level: f64) -> Plan {
        let reads = &self.reads;
        let qualified = |r: &TallyRead| r.n > 0.0 && r.upper <= level;
        let cheapest = reads.iter().filter(|r| qualified(r)).min_by(|a, b| a.cost.total_cmp(&b.cost)).map(|r| r.cost);
        let pick = match cheapest {
            Some(c) => reads
                .iter()
                .enumerate()
                .filter(|(_, r)| qualified(r) && r.cost <= c * (1.0 + COST_TIE) + 1e-12)
                .min_by(|a, b| a.1.upper.total_cmp(&b.1.upper)),
            None => reads.iter().enumerate().min_by(|a, b| a.1.upper.total_cmp(&b.1.upper).then(a.1.cost.total_cmp(&b.1.cost))),
        };
        pick.map_or(Plan::Single { p: 0 }, |(i, _)| self.plans[i])
    }

    /// Sets this round's model and judged plans and draws the expert to play with `u`;
    /// returns the plan, the expert's index and its weight.
    pub fn play(&mut self, model_plan: Plan, level: f64, u: f64) -> (Plan, usize, f64) {
        self.set_round(model_plan, level);
        self.chosen = self.hedge.pick(u);
        if self.previous.is_some_and(|p| p != self.chosen) {
            self.switches += 1;
            self.since_switch = 0;
        } else {
            self.since_switch += 1;
        }
        self.previous = Some(self.chosen);
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
        let price = self.price(target, level);
        let mut losses = std::mem::take(&mut self.losses);
        losses.clear();
        losses.extend(outcomes.iter().map(|&(m, c)| loss(m, c, self.cost_ref, price)));
        if !META_PLAYED {
            // The model's and the judged expert (the last two) are not played.
            let n = losses.len();
            losses.iter_mut().skip(n.saturating_sub(MODEL_FROM_END)).for_each(|l| *l = 1.0);
        }
        self.last_own = losses.get(self.chosen).map(|&l| (l, price));
        self.hedge.record(&losses);
        self.losses = losses;
        // Every fixed plan is priced every round, so the records share their trials `n`
        // and the bound's terms are computed once (again whenever an `n` differs).
        let mut w: Option<WilsonAt> = None;
        for ((t, r), &(m, c)) in self.tallies.iter_mut().zip(&mut self.reads).zip(outcomes) {
            t.add(m, c, TALLY_KEEP);
            let at = match w {
                Some(at) if at.n().to_bits() == t.n.to_bits() => at,
                _ => *w.insert(WilsonAt::new(t.n, QUALIFY_Z)),
            };
            *r = TallyRead::with(t, &at);
        }
    }

    /// Records what `auto` itself realized on the round just recorded (`missed`, cost $).
    /// Its excess over the played expert's own run, within [`SWITCH_WINDOW`] requests of
    /// a switch, per switch, becomes the leader phase's margin (a measured switching
    /// cost); later excess is charged to the expert played, so that a plan whose play
    /// keeps doing worse than its own run loses the lead.
    pub fn realized(&mut self, missed: bool, cost_usd: f64) {
        let Some((own, price)) = self.last_own.take() else { return };
        let excess = loss(missed, cost_usd, self.cost_ref, price) - own;
        if self.since_switch < SWITCH_WINDOW {
            self.excess += excess;
        } else {
            self.hedge.charge(self.chosen, excess);
        }
        self.hedge.set_margin(self.switching_cost());
    }

    /// The measured cost of a switch: `max(excess, 0) / max(switches, 1)`, in loss units.
    /// The leader phase keeps the expert played until another leads it by more (a lazy
    /// leader); where switching costs nothing (the played plan's outcome is its own
    /// run's) it is Follow-the-Leader.
    pub fn switching_cost(&self) -> f64 {
        self.excess.max(0.0) / self.switches.max(1) as f64
    }

    /// The miss price at working level `level`: [`miss_price`], but no more than at level
    /// 0 (tenfold) while the target is out of reach, i.e. while every fixed plan's
    /// record misses more than `target`. Raising it further would only pick among plans
    /// whose misses differ by noise, whatever they cost (docs/learned-policies.md, "Why
    /// `auto` loses in the sweep", cause 2).
    pub fn price(&self, target: f64, level: f64) -> f64 {
        let price = miss_price(self.price0, target, level);
        let least = self.tallies.iter().filter(|t| t.n > 0.0).map(|t| t.misses / t.n).fold(f64::INFINITY, f64::min);
        if least.is_finite() && least > target {
            price.min(miss_price(self.price0, target, 0.0))
        } else {
            price
        }
    }

    /// Switches of the played expert so far.
    pub fn switches(&self) -> u64 {
        self.switches
    }

    /// Σ (`auto`'s realized loss − the played expert's own-run loss) after switches.
    pub fn excess(&self) -> f64 {
        self.excess
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
    /// Two fixed plans trade the lead every round. When `auto`'s realized outcome right
    /// after a switch is dearer than the plan's own run (a cold start), the measured
    /// switching cost becomes the leader's margin and the play stops flip-flopping; when
    /// switching is free, the play is Follow-the-Leader.
    #[test]
    fn the_leader_sticks_when_switching_has_cost_more_than_it_gained() {
        let switches = |charged: bool| {
            let fixed = vec![Plan::Single { p: 0 }, Plan::Single { p: 1 }];
            let mut ex = ExpertSet::new(fixed, 1.0, 1.0, true, HedgeBudget::full(1.0, 5.0));
            let mut previous = None;
            for k in 0..400 {
                let (_, index, _) = ex.play(Plan::Single { p: 0 }, 0.05, 0.5);
                let (a, b) = if k % 2 == 0 { (0.6, 0.4) } else { (0.4, 0.6) };
                let own = [a, b][index.min(1)];
                ex.record(&[(false, a), (false, b), (false, 0.0), (false, 0.0)], 0.05, 0.05);
                let switched = previous.is_some_and(|p| p != index);
                previous = Some(index);
                ex.realized(false, if charged && switched { 1.0 } else { own });
            }
            ex.switches()
        };
        let (free, charged) = (switches(false), switches(true));
        assert!(free >= 100, "switching for free: {free} switches");
        assert!(charged <= 5, "switching at a cost: {charged} switches (free: {free})");
    }

    /// The miss price stops at tenfold while every fixed plan's record misses more than
    /// the target, and rises on when some plan meets it.
    #[test]
    fn the_miss_price_stops_rising_while_the_target_is_out_of_reach() {
        let price_after = |miss_b: bool| {
            let fixed = vec![Plan::Single { p: 0 }, Plan::Single { p: 1 }];
            let mut ex = ExpertSet::new(fixed, 1.0, 1.0, true, HedgeBudget::full(1.0, 5.0));
            for k in 0..200 {
                ex.play(Plan::Single { p: 0 }, 0.05, 0.5);
                ex.record(&[(k % 2 == 0, 0.1), (miss_b && k % 3 == 0, 0.2), (false, 0.0), (false, 0.0)], 0.05, 0.05);
            }
            ex.price(0.05, -0.15)
        };
        assert!((price_after(true) - 10.0).abs() < 1e-9, "out of reach: {}", price_after(true));
        assert!((price_after(false) - miss_price(1.0, 0.05, -0.15)).abs() < 1e-6, "within reach: {}", price_after(false));
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
