//! Causal replay of the learned policies (`adaptive`, `singler`, `auto`) over paired
//! rounds.
//!
//! Round *i* is decided by policies whose shared model has seen only the warm-up rounds
//! (the calibration split, for the evaluation split) and rounds before *i*; the round is
//! then priced by the fixed families' own rules ([`evaluate_round`]), and only after that
//! fed to the model. Within a round a policy uses only what it could observe by then:
//! a hedge or cutover fires only if the primary had no valid result by the delay (or was
//! still queued at the poll), and firing needs a token from the policy's extra-load
//! budget; a refused hedge leaves the primary alone (priced as `single`).
//!
//! Every arm of a past round is fed to the model, not only the arms the policy launched:
//! the paired benchmark ran them all, so that knowledge is honestly available after the
//! round. Idle gaps are unknown in paired rounds (every arm is a cold start by protocol).

use crate::rounds::RoundSet;
use crate::summary::PolicySummary;
use crate::sweep::{evaluate_round, Evaluated, Family, ProviderRates};
use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;
use tailcut_model::plan::PlanBits;
use tailcut_model::{
    AdaptiveSettings, AutoSettings, CostBasis, HedgeBudget, LearnedKind, Model, ModelConfig, Observation, Outcome, Plan, PolicyState,
    SingleRSettings, Why,
};
use tailcut_stats::reliability::{reliability, Forecast, Reliability};
use tailcut_stats::Estimator;

/// A learned policy to replay.
#[derive(Debug, Clone, PartialEq)]
pub struct LearnedDef {
    /// Row label.
    pub label: String,
    /// The policy.
    pub kind: LearnedKind,
}

/// Settings of the learned rows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LearnedSettings {
    /// `auto`'s deadline, target and caps.
    pub auto: AutoSettings,
    /// Extra-load budget of `adaptive` and `singler` (extra attempts per request).
    pub budget: f64,
    /// `adaptive`'s quantile.
    pub quantile: f64,
    /// Samples before `adaptive` and `singler` hedge.
    pub min_samples: u64,
    /// The tail level `singler` minimises.
    pub level: f64,
    /// Model learning settings.
    pub model: ModelConfig,
    /// Attempts between table refreshes.
    pub refresh_every: u64,
    /// Seed of the SingleR coins.
    pub seed: u64,
    /// `auto` plays Hedge over the fixed plans, its model and its record (full
    /// information: every arm of a paired round is known); false = the model alone.
    pub experts: bool,
    /// `auto`'s Hedge weights move with the losses (false = uniform; for checks).
    pub weighting: bool,
    /// `auto`'s miss controller is on (false = the planner trusts its predictions).
    pub controller: bool,
}

impl Default for LearnedSettings {
    fn default() -> Self {
        LearnedSettings {
            auto: AutoSettings::default(),
            budget: 0.05,
            quantile: 0.95,
            min_samples: 10,
            level: 0.99,
            model: ModelConfig { half_life: 32.0, ..ModelConfig::default() },
            refresh_every: 1,
            seed: 1,
            experts: true,
            weighting: true,
            controller: true,
        }
    }
}

fn pct(x: f64) -> String {
    crate::fmt_g((x * 1000.0).round() / 10.0)
}

/// `auto`'s row label: `auto:60s/miss5%/extra35%`.
pub fn auto_label(a: &AutoSettings) -> String {
    format!("auto:{}s/miss{}%/extra{}%", crate::fmt_g(a.deadline_s), pct(a.target_miss), pct(a.max_extra))
}

/// The learned rows: `auto`, then `adaptive` and `singler` for every ordered pair.
pub fn learned_defs(names: &[String], s: &LearnedSettings) -> Vec<LearnedDef> {
    let mut out = vec![LearnedDef { label: auto_label(&s.auto), kind: LearnedKind::Auto(s.auto) }];
    for p in 0..names.len() {
        for h in (0..names.len()).filter(|&h| h != p) {
            out.push(LearnedDef {
                label: format!("adaptive:{}->{}@p{}", names[p], names[h], pct(s.quantile)),
                kind: LearnedKind::Adaptive(AdaptiveSettings {
                    primary: p,
                    hedge: h,
                    quantile: s.quantile,
                    min_samples: s.min_samples,
                    min_delay_s: 0.0,
                    max_delay_s: s.auto.cap_s,
                    budget: s.budget,
                }),
            });
            out.push(LearnedDef {
                label: format!("singler:{}->{}@B{}%", names[p], names[h], pct(s.budget)),
                kind: LearnedKind::Singler(SingleRSettings {
                    primary: p,
                    hedge: h,
                    budget: s.budget,
                    level: s.level,
                    min_samples: s.min_samples,
                }),
            });
        }
    }
    out
}

/// What round `r` tells the model: one observation per provider present in it.
pub fn round_observations(set: &RoundSet, r: usize, out: &mut Vec<Observation>) {
    out.clear();
    let w = set.width();
    for p in 0..w {
        let (l, b, q) = (set.latency[r * w + p], set.billed[r * w + p], set.queue[r * w + p]);
        let outcome = if l.is_finite() {
            Outcome::Valid { latency_s: l }
        } else if b.is_nan() {
            continue;
        } else {
            Outcome::Failed { wall_s: b }
        };
        out.push(Observation { provider: p, outcome, queue_s: (!q.is_nan()).then_some(q), idle_gap_s: None, warm: None });
    }
}

/// A model fed with every round of `set`, in order.
pub fn fit_rounds(model: &mut Model, set: &RoundSet) {
    let mut obs = Vec::with_capacity(set.width());
    for r in 0..set.len() {
        round_observations(set, r, &mut obs);
        model.observe_request(&obs);
    }
}

fn queue_star(set: &RoundSet, r: usize, p: usize) -> f64 {
    let q = set.queue[r * set.width() + p];
    if !q.is_nan() {
        q
    } else if set.lat(r, p).is_infinite() {
        f64::INFINITY
    } else {
        0.0
    }
}

/// The family round `r` runs under `plan`, and the extra attempts it launched: the
/// budget is asked (in the order the extra attempts would fire) only for extra attempts
/// that fire in this round.
pub fn gate_plan(set: &RoundSet, r: usize, plan: &Plan, state: &mut PolicyState) -> (Family, u8) {
    gate_with(set, r, plan, state.budget())
}

/// [`gate_plan`] with an explicit extra-load bucket.
pub fn gate_with(set: &RoundSet, r: usize, plan: &Plan, budget: &mut HedgeBudget) -> (Family, u8) {
    match *plan {
        Plan::Single { p } => (Family::Single { p }, 0),
        Plan::Hedge { p, h, .. } if p == h => (Family::Single { p }, 0),
        Plan::Hedge { p, h, delay_s } => {
            if set.lat(r, p) <= delay_s {
                (Family::Hedge { p, h, delay: delay_s }, 0)
            } else if budget.try_take() {
                (Family::Hedge { p, h, delay: delay_s }, 1)
            } else {
                (Family::Single { p }, 0)
            }
        }
        Plan::Cutover { p, h, poll_s, safety_s } => {
            let fires = queue_star(set, r, p) > poll_s || set.lat(r, p) > safety_s;
            if !fires {
                (Family::Cutover { p, h, cutover: poll_s, safety: safety_s }, 0)
            } else if budget.try_take() {
                (Family::Cutover { p, h, cutover: poll_s, safety: safety_s }, 1)
            } else {
                (Family::Single { p }, 0)
            }
        }
        Plan::Cascade { p, h, f, poll_s, safety_s, escalate_s } => {
            let switched = queue_star(set, r, p) > poll_s;
            let fires = switched || set.lat(r, p) > safety_s;
            if !fires {
                return (Family::Cutover { p, h, cutover: poll_s, safety: safety_s }, 0);
            }
            if !budget.try_take() {
                return (Family::Single { p }, 0);
            }
            let escalates = switched && poll_s + set.lat(r, h) > escalate_s;
            if !escalates {
                (Family::Cutover { p, h, cutover: poll_s, safety: safety_s }, 1)
            } else if budget.try_take() {
                (Family::Cascade { p, h, f, cutover: poll_s, safety: safety_s, escalate: escalate_s }, 2)
            } else {
                (Family::Cutover { p, h, cutover: poll_s, safety: safety_s }, 1)
            }
        }
    }
}

/// One learned policy's replay: the per-round results and how often each plan ran.
#[derive(Debug, Clone, Default)]
pub struct LearnedRun {
    /// Latencies and cost sums, as for a fixed policy.
    pub evaluated: Evaluated,
    /// Plans chosen, with counts, in first-use order.
    pub plans: Vec<(Plan, u64)>,
    /// Hedges the budget refused.
    pub denied: u64,
    /// Extra attempts launched in each round.
    pub extra: Vec<u8>,
    /// `auto` with full information: the loss its experts' play suffered, the best
    /// expert's, and the stated regret bound (over the warm-up and replayed rounds).
    pub regret: Option<(f64, f64, f64)>,
    /// `auto`: every decision the model predicted (not explorations or re-probes), its
    /// predicted miss and cost (on `auto`'s cost basis) against the round's outcome.
    pub forecasts: Vec<Forecast>,
}

/// The plan a fixed family runs.
pub fn family_plan(f: &Family) -> Plan {
    match *f {
        Family::Single { p } => Plan::Single { p },
        Family::Hedge { p, h, delay } => Plan::Hedge { p, h, delay_s: delay },
        Family::Cutover { p, h, cutover, safety } => Plan::Cutover { p, h, poll_s: cutover, safety_s: safety },
        Family::Cascade { p, h, f, cutover, safety, escalate } => {
            Plan::Cascade { p, h, f, poll_s: cutover, safety_s: safety, escalate_s: escalate }
        }
    }
}

/// The family a plan runs when every extra attempt it wants may fire (no budget).
pub fn plan_family(plan: &Plan) -> Family {
    match *plan {
        Plan::Single { p } => Family::Single { p },
        Plan::Hedge { p, h, .. } if p == h => Family::Single { p },
        Plan::Hedge { p, h, delay_s } => Family::Hedge { p, h, delay: delay_s },
        Plan::Cutover { p, h, poll_s, safety_s } => Family::Cutover { p, h, cutover: poll_s, safety: safety_s },
        Plan::Cascade { p, h, f, poll_s, safety_s, escalate_s } => {
            Family::Cascade { p, h, f, cutover: poll_s, safety: safety_s, escalate: escalate_s }
        }
    }
}

/// The reference cost of `auto`'s loss: two attempts on the dearest provider running to
/// the deadline.
pub fn loss_cost_ref(rates: &[ProviderRates], deadline_s: f64) -> f64 {
    2.0 * deadline_s * rates.iter().map(|r| r.rate).fold(0.0, f64::max)
}

/// Prices every expert plan of `state` on round `r` into `buf` (`(missed, cost $)` per
/// expert, in expert order) without recording. Each plan is priced on its own run of
/// the round, as its fixed row is: in a paired round every arm's outcome is known, and
/// a fixed plan's extra attempts are not gated by `auto`'s extra-load bucket (the
/// fixed rows have none). `fixed` may give the families of the first experts' plans
/// (`plan_family` of each, which never change), so that they are not converted again
/// every round; the others are converted.
pub(crate) fn price_experts(
    state: &PolicyState,
    set: &RoundSet,
    rates: &[ProviderRates],
    a: &AutoSettings,
    r: usize,
    fixed: &[Family],
    buf: &mut Vec<(bool, f64)>,
) {
    buf.clear();
    let Some(plans) = state.expert_plans() else { return };
    for (i, plan) in plans.iter().enumerate() {
        let (lat, act, bill, _) = match fixed.get(i) {
            Some(family) => evaluate_round(set, rates, family, a.cap_s, r),
            None => evaluate_round(set, rates, &plan_family(plan), a.cap_s, r),
        };
        let cost = match a.cost {
            CostBasis::Active => act,
            CostBasis::Billed => bill,
        };
        buf.push((lat > a.deadline_s, cost));
    }
}

/// Counts one more round of `plan` in `plans` (plans in first-use order), finding its
/// entry through `index`.
fn count_plan(plans: &mut Vec<(Plan, u64)>, index: &mut HashMap<PlanBits, usize>, plan: Plan) {
    let Some(key) = PlanBits::of(&plan) else {
        plans.push((plan, 1));
        return;
    };
    match index.get(&key) {
        Some(&i) => plans[i].1 += 1,
        None => {
            index.insert(key, plans.len());
            plans.push((plan, 1));
        }
    }
}

/// The model-only `auto` beside a full-information `auto`: the planner alone (no
/// controller, no experts) deciding from the shared model, with its own coin and
/// extra-load bucket. A replay has no provider state, so its run of a round is its own
/// plan gated by its own bucket and priced on the round: the outcome its expert gets.
struct ModelOnly {
    state: PolicyState,
    /// The plan it decided for the round in progress.
    plan: Option<Plan>,
}

impl ModelOnly {
    fn new(kind: LearnedKind, model: &Model, seed: u64, refresh_every: u64) -> ModelOnly {
        ModelOnly { state: PolicyState::new(kind, model, seed ^ 0x4D4F_4445_4C00).with_refresh_every(refresh_every), plan: None }
    }

    /// Decides the coming round and hands the plan to `auto`'s model-only expert.
    fn decide(&mut self, auto: &mut PolicyState, gaps: &[Option<f64>]) {
        let (plan, _) = self.state.decide_plan(gaps);
        auto.set_model_only_plan(plan);
        self.plan = Some(plan);
    }

    /// Its own run of round `r` (its plan gated by its own bucket), written into `auto`'s
    /// outcomes `buf` at the model-only expert's slot.
    fn price(&mut self, auto: &PolicyState, set: &RoundSet, rates: &[ProviderRates], a: &AutoSettings, r: usize, buf: &mut [(bool, f64)]) {
        let Some(plan) = self.plan.take() else { return };
        let (family, _) = gate_plan(set, r, &plan, &mut self.state);
        let (lat, act, bill, _) = evaluate_round(set, rates, &family, a.cap_s, r);
        let cost = match a.cost {
            CostBasis::Active => act,
            CostBasis::Billed => bill,
        };
        if let Some(slot) = auto.model_only_index().and_then(|i| buf.get_mut(i)) {
            *slot = (lat > a.deadline_s, cost);
        }
    }
}

/// Replays `defs` causally over `set` after feeding `warmup` to the shared model; `auto`
/// plays Hedge over the fixed plans `experts` (the sweep's families) and the model-only
/// `auto` when [`LearnedSettings::experts`] is set.
pub fn evaluate_learned(
    set: &RoundSet,
    warmup: &RoundSet,
    rates: &[ProviderRates],
    defs: &[LearnedDef],
    s: &LearnedSettings,
    experts: &[Family],
) -> Vec<LearnedRun> {
    let providers: Vec<(String, f64, f64)> = rates.iter().map(|r| (r.name.clone(), r.rate, r.idle_s)).collect();
    let mut model = Model::new(&providers, s.model);
    let build = |d: &LearnedDef, i: usize, model: &Model| {
        let mut st = PolicyState::new(d.kind, model, s.seed.wrapping_add(i as u64)).with_refresh_every(s.refresh_every);
        if let LearnedKind::Auto(a) = d.kind {
            if !s.controller {
                st = st.without_controller();
            }
            if s.experts && !experts.is_empty() {
                let plans = experts.iter().map(family_plan).collect();
                st = st.with_experts(plans, loss_cost_ref(rates, a.deadline_s), 1.0, s.weighting).with_model_only_expert();
            }
        }
        st
    };
    // The families of `auto`'s fixed experts (the first of its experts' plans), as
    // `price_experts` would convert them every round.
    let fixed: Vec<Family> = experts.iter().map(|f| plan_family(&family_plan(f))).collect();
    let companion = |st: &PolicyState, i: usize, model: &Model| {
        st.model_only_index().map(|_| ModelOnly::new(*st.kind(), model, s.seed.wrapping_add(i as u64), s.refresh_every))
    };
    // `auto`'s experts learn from the warm-up rounds too (every arm known, in order).
    let mut warm_auto: Vec<(usize, PolicyState, Option<ModelOnly>)> = Vec::new();
    if s.experts && !experts.is_empty() && !warmup.is_empty() {
        for (i, d) in defs.iter().enumerate().filter(|(_, d)| matches!(d.kind, LearnedKind::Auto(_))) {
            let st = build(d, i, &model);
            let mo = companion(&st, i, &model);
            warm_auto.push((i, st, mo));
        }
    }
    let gaps0 = vec![None; warmup.width()];
    let mut buf = Vec::new();
    let mut obs0 = Vec::with_capacity(warmup.width());
    for r in 0..warmup.len() {
        // `auto` runs from the first warm-up round (its bucket, controller and experts
        // carry over, as they would live); only the rounds of `set` are reported.
        for (_, st, mo) in &mut warm_auto {
            if let Some(m) = mo.as_mut() {
                m.decide(st, &gaps0);
            }
            let (plan, _) = st.decide_plan(&gaps0);
            let (family, _) = gate_plan(warmup, r, &plan, st);
            let (lat, act, bill, _) = evaluate_round(warmup, rates, &family, s.auto.cap_s, r);
            price_experts(st, warmup, rates, &s.auto, r, &fixed, &mut buf);
            if let Some(m) = mo.as_mut() {
                m.price(st, warmup, rates, &s.auto, r, &mut buf);
            }
            st.settle_experts(&buf);
            let cost = match s.auto.cost {
                tailcut_model::CostBasis::Active => act,
                tailcut_model::CostBasis::Billed => bill,
            };
            st.settle(&plan, lat > s.auto.deadline_s, cost);
        }
        round_observations(warmup, r, &mut obs0);
        model.observe_request(&obs0);
        for (_, st, mo) in &mut warm_auto {
            st.observed(&model, obs0.len() as u64);
            if let Some(m) = mo {
                m.state.observed(&model, obs0.len() as u64);
            }
        }
    }
    let mut companions: Vec<Option<ModelOnly>> = Vec::with_capacity(defs.len());
    let mut states: Vec<PolicyState> = defs
        .iter()
        .enumerate()
        .map(|(i, d)| match warm_auto.iter().position(|(j, _, _)| *j == i) {
            Some(k) => {
                let (_, mut st, mut mo) = warm_auto.swap_remove(k);
                st.refresh(&model);
                if let Some(m) = &mut mo {
                    m.state.refresh(&model);
                }
                companions.push(mo);
                st
            }
            None => {
                let st = build(d, i, &model);
                companions.push(companion(&st, i, &model));
                st
            }
        })
        .collect();
    let mut runs: Vec<LearnedRun> = defs.iter().map(|_| LearnedRun::default()).collect();
    for (run, d) in runs.iter_mut().zip(defs) {
        run.evaluated.lats.reserve(set.len());
        run.extra.reserve(set.len());
        if matches!(d.kind, LearnedKind::Auto(_)) {
            // Nearly every `auto` decision is a prediction (with experts, every one).
            run.forecasts.reserve(set.len());
        }
    }
    // Where each run's plans sit in its list: a learned delay that moves with every
    // refresh makes the list long (thousands of plans), too long to search per round.
    let mut plan_index: Vec<HashMap<PlanBits, usize>> = defs.iter().map(|_| HashMap::default()).collect();
    let gaps = vec![None; set.width()];
    let mut obs = Vec::with_capacity(set.width());
    for r in 0..set.len() {
        for (((state, run), index), mo) in states.iter_mut().zip(runs.iter_mut()).zip(plan_index.iter_mut()).zip(companions.iter_mut()) {
            if let Some(m) = mo.as_mut() {
                m.decide(state, &gaps);
            }
            let (plan, why) = state.decide_plan(&gaps);
            let (family, extra) = gate_plan(set, r, &plan, state);
            let denied = !matches!(plan, Plan::Single { .. }) && matches!(family, Family::Single { .. });
            let (lat, act, bill, hedged) = evaluate_round(set, rates, &family, s.auto.cap_s, r);
            if let LearnedKind::Auto(a) = state.kind() {
                let cost = match a.cost {
                    CostBasis::Active => act,
                    CostBasis::Billed => bill,
                };
                let missed = lat > a.deadline_s;
                if let Why::Predicted(pr) | Why::Expert { pr, .. } = why {
                    run.forecasts.push(Forecast {
                        p: pr.miss,
                        missed,
                        cost_predicted: Some(pr.cost_on(a.cost)),
                        cost_realized: Some(cost),
                    });
                }
                price_experts(state, set, rates, &s.auto, r, &fixed, &mut buf);
                if let Some(m) = mo.as_mut() {
                    m.price(state, set, rates, &s.auto, r, &mut buf);
                }
                state.settle_experts(&buf);
                state.settle(&plan, missed, cost);
            }
            let ev = &mut run.evaluated;
            ev.lats.push(lat);
            ev.active_sum += act;
            ev.billed_sum += bill;
            ev.hedged += u64::from(hedged);
            run.denied += u64::from(denied);
            run.extra.push(extra);
            count_plan(&mut run.plans, index, plan);
        }
        round_observations(set, r, &mut obs);
        model.observe_request(&obs);
        for state in &mut states {
            state.observed(&model, obs.len() as u64);
        }
        for m in companions.iter_mut().flatten() {
            m.state.observed(&model, obs.len() as u64);
        }
    }
    for (state, run) in states.iter().zip(runs.iter_mut()) {
        if let Some(ex) = state.experts() {
            let h = ex.hedge();
            let best = h.cumulative().iter().copied().fold(f64::INFINITY, f64::min);
            run.regret = Some((h.played(), best, tailcut_model::guard::Experts::regret_bound(h.rounds(), h.len())));
        }
    }
    runs
}

/// A learned policy's row: the fixed rows' statistics plus the plans it ran.
#[derive(Debug, Clone, Serialize)]
pub struct LearnedRow {
    /// Statistics, as for a fixed policy.
    #[serde(flatten)]
    pub summary: PolicySummary,
    /// Always true (tells learned rows apart in JSON).
    pub learned: bool,
    /// Plan label → rounds it ran.
    pub plans: Vec<(String, u64)>,
    /// Hedges the extra-load budget refused.
    pub budget_denied: u64,
    /// `auto`: its predictions against what happened (None for the other policies).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reliability: Option<Reliability>,
}

/// Summarises learned runs like fixed policies.
pub fn learned_rows(
    defs: &[LearnedDef],
    runs: &[LearnedRun],
    names: &[String],
    deadlines: &[u32],
    estimator: Estimator,
) -> Vec<LearnedRow> {
    defs.iter()
        .zip(runs)
        .map(|(d, run)| LearnedRow {
            summary: PolicySummary::new(d.label.clone(), &run.evaluated, deadlines, estimator),
            learned: true,
            plans: run.plans.iter().map(|(p, k)| (p.label(names), *k)).collect(),
            budget_denied: run.denied,
            reliability: matches!(d.kind, LearnedKind::Auto(_)).then(|| reliability(&run.forecasts)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The indexed count gives the list the reverse scan gave (`==` on plans: `-0.0`
    /// equals `0.0`, a NaN timer equals nothing).
    #[test]
    fn indexed_plan_counts_match_the_scan() {
        let plans = [
            Plan::Single { p: 0 },
            Plan::Hedge { p: 0, h: 1, delay_s: 0.0 },
            Plan::Hedge { p: 0, h: 1, delay_s: -0.0 },
            Plan::Hedge { p: 0, h: 1, delay_s: f64::NAN },
            Plan::Hedge { p: 0, h: 1, delay_s: 3.25 },
            Plan::Cutover { p: 0, h: 2, poll_s: 2.5, safety_s: 8.5 },
            Plan::Cascade { p: 0, h: 2, f: 1, poll_s: 2.5, safety_s: 8.5, escalate_s: 25.0 },
            Plan::Cascade { p: 0, h: 1, f: 2, poll_s: 2.5, safety_s: 8.5, escalate_s: 25.0 },
            Plan::Single { p: 1 },
        ];
        let (mut scanned, mut indexed, mut index) = (Vec::<(Plan, u64)>::new(), Vec::new(), HashMap::default());
        for i in 0..500usize {
            let plan = plans[(i * 7 + i / 3) % plans.len()];
            match scanned.iter_mut().rev().find(|(p, _)| *p == plan) {
                Some((_, k)) => *k += 1,
                None => scanned.push((plan, 1)),
            }
            count_plan(&mut indexed, &mut index, plan);
        }
        assert_eq!(format!("{scanned:?}"), format!("{indexed:?}"));
    }

    fn names() -> Vec<String> {
        vec!["runpod".into(), "modal".into(), "cerebrium".into()]
    }

    /// A RunPod-like primary (1 in 3 rounds slow, with a queue signal) and two partners.
    fn rounds(n: usize, seed: u64) -> RoundSet {
        let mut set = RoundSet::new(names());
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) as f64 / (1u64 << 31) as f64
        };
        for r in 0..n {
            set.round_ids.push(r as i64 + 1);
            set.blocks.push(0);
            let slow = next() < 0.33;
            let rp = if slow { 90.0 + 30.0 * next() } else { 5.8 + 2.5 * next() };
            let md = if next() < 0.15 { 80.0 + 20.0 * next() } else { 28.0 + 12.0 * next() };
            let ce = if next() < 0.05 { 95.0 + 10.0 * next() } else { 18.0 + 2.0 * next() };
            set.latency.extend([rp, md, ce]);
            set.billed.extend([rp, md, ce]);
            set.queue.extend([if slow { 9.0 + 18.0 * next() } else { 1.1 + 0.2 * next() }, f64::NAN, f64::NAN]);
        }
        set
    }

    fn settings() -> LearnedSettings {
        LearnedSettings::default()
    }

    #[test]
    fn auto_learns_the_cutover_and_beats_the_primary_alone() {
        let rates = ProviderRates::reference_2026_07();
        let set = rounds(400, 3);
        let s = LearnedSettings { auto: AutoSettings { cost: tailcut_model::CostBasis::Active, ..AutoSettings::default() }, ..settings() };
        let defs = learned_defs(&names(), &s);
        let runs = evaluate_learned(&set, &RoundSet::new(names()), &rates, &defs[..1], &s, &[]);
        let run = &runs[0];
        let most = run.plans.iter().max_by_key(|(_, k)| *k).unwrap();
        // The queue cutover to Cerebrium (or the cascade that adds Modal after it, which the
        // model rightly finds cheaper when Cerebrium is slow).
        assert!(matches!(most.0, Plan::Cutover { p: 0, h: 2, .. } | Plan::Cascade { p: 0, h: 2, .. }), "{:?}", run.plans);
        let miss = run.evaluated.lats.iter().filter(|l| **l > 60.0).count() as f64 / 400.0;
        assert!(miss < 0.05, "miss {miss}");
    }

    #[test]
    fn adaptive_never_exceeds_its_budget_over_a_window() {
        let rates = ProviderRates::reference_2026_07();
        let set = rounds(600, 9);
        let s = LearnedSettings { budget: 0.1, ..settings() };
        let defs = learned_defs(&names(), &s);
        let runs = evaluate_learned(&set, &RoundSet::new(names()), &rates, &defs, &s, &[]);
        for (d, run) in defs.iter().zip(&runs) {
            // Extra attempts over any window of w rounds ≤ burst + budget·w.
            let budget = if matches!(d.kind, LearnedKind::Auto(_)) { s.auto.max_extra } else { s.budget };
            for w in [1usize, 10, 50, 200, 600] {
                for start in 0..=set.len() - w {
                    let k: u32 = run.extra[start..start + w].iter().map(|x| u32::from(*x)).sum();
                    assert!(f64::from(k) <= 5.0 + budget * w as f64 + 1e-9, "{}: {k} extra in {w} rounds from {start}", d.label);
                }
            }
            assert!(run.evaluated.hedged <= run.extra.iter().map(|x| u64::from(*x)).sum::<u64>());
        }
    }

    fn sweep_families(set: &RoundSet, rates: &[ProviderRates]) -> Vec<Family> {
        crate::sweep::standard_sweep(set, rates, &[0.0, 10.0, 30.0]).into_iter().map(|d| d.family).collect()
    }

    /// Full information: whatever the stream, `auto`'s experts play within the stated
    /// regret bound of the best fixed plan; with the weighting off (uniform) they do not.
    #[test]
    fn auto_with_full_information_stays_within_the_regret_bound() {
        let rates = ProviderRates::reference_2026_07();
        for seed in [1u64, 2, 3] {
            let set = rounds(800, seed);
            let warm = rounds(40, seed ^ 9);
            let experts = sweep_families(&set, &rates);
            let s = settings();
            let defs = learned_defs(&names(), &s);
            let run = &evaluate_learned(&set, &warm, &rates, &defs[..1], &s, &experts)[0];
            let (played, best, bound) = run.regret.expect("full information");
            assert!(played <= best + bound, "seed {seed}: played {played} best {best} bound {bound}");
            let off = LearnedSettings { weighting: false, ..s };
            let run = &evaluate_learned(&set, &warm, &rates, &defs[..1], &off, &experts)[0];
            let (played_off, best_off, _) = run.regret.expect("full information");
            assert!(played_off - best_off > played - best, "seed {seed}: uniform {played_off} - {best_off} vs {played} - {best}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 12, .. ProptestConfig::default() })]

        /// Causality: poisoning every round after `cut` (the primary never answers and its
        /// queue delay is huge, which would change every later decision) leaves every
        /// result up to and including round `cut` bit-identical.
        #[test]
        fn a_poisoned_future_round_changes_nothing_before_it(seed in 0u64..1000, cut in 5usize..120) {
            let rates = ProviderRates::reference_2026_07();
            let set = rounds(160, seed);
            let warm = rounds(20, seed ^ 77);
            let mut poisoned = set.clone();
            for r in cut + 1..set.len() {
                poisoned.latency[r * 3] = f64::INFINITY;
                poisoned.billed[r * 3] = 300.0;
                poisoned.queue[r * 3] = 250.0;
                poisoned.latency[r * 3 + 2] = f64::INFINITY;
            }
            let s = settings();
            let defs = learned_defs(&names(), &s);
            let experts = crate::sweep::standard_sweep(&set, &rates, &[0.0, 10.0, 30.0]);
            let experts: Vec<Family> = experts.into_iter().map(|d| d.family).collect();
            let a = evaluate_learned(&set, &warm, &rates, &defs, &s, &experts);
            let b = evaluate_learned(&poisoned, &warm, &rates, &defs, &s, &experts);
            let mut changed_later = false;
            for (x, y) in a.iter().zip(&b) {
                prop_assert_eq!(&x.evaluated.lats[..=cut], &y.evaluated.lats[..=cut]);
                changed_later |= x.evaluated.lats[cut + 1..] != y.evaluated.lats[cut + 1..];
            }
            prop_assert!(changed_later, "the poison must matter to later rounds");
        }
    }
}
