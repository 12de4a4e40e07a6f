//! The learned policies' decision logic, shared by the live engine (`tailcut-core`), the
//! replay and the scenarios so that all three decide with the same code:
//!
//! - `adaptive`: hedge when the primary has not answered by its learned q-quantile
//!   (tower / Finagle style), after a minimum number of samples, clamped;
//! - `singler`: one reissue at `d` with probability `q`, fitted to the model under the
//!   extra-load budget (Kaler, He and Elnikety's SingleR);
//! - `auto`: per request, the cheapest plan predicted to meet a deadline's miss target
//!   (see [`crate::plan`]).
//!
//! Every extra attempt also needs a token from the policy's [`HedgeBudget`] (in
//! [`crate::budget`]), so the
//! extra load stays within budget over any window whatever the model says.

pub use crate::budget::HedgeBudget;
use crate::guard::{MissController, CONTROLLER_GAMMA};
use crate::model::{Model, ModelConfig, Observation};
use crate::plan::{AutoSettings, Plan, Prediction};
use crate::predict::Predictor;
use crate::sketch::CdfTable;
use serde::Serialize;

/// Settings of `adaptive`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AdaptiveSettings {
    /// Primary provider index.
    pub primary: usize,
    /// Hedge provider index.
    pub hedge: usize,
    /// Hedge at this quantile of the primary's learned latency.
    pub quantile: f64,
    /// No hedging before this many primary samples.
    pub min_samples: u64,
    /// Clamp of the delay, s.
    pub min_delay_s: f64,
    /// Clamp of the delay, s.
    pub max_delay_s: f64,
    /// Extra attempts per request allowed (token rate).
    pub budget: f64,
}

/// Settings of `singler`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SingleRSettings {
    /// Primary provider index.
    pub primary: usize,
    /// Reissue target index (may equal the primary for a same-provider reissue).
    pub hedge: usize,
    /// Extra attempts per request allowed (B).
    pub budget: f64,
    /// Tail level minimised (0.99 = p99).
    pub level: f64,
    /// No reissue before this many primary samples.
    pub min_samples: u64,
}

/// Which learned policy, with its settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "policy", rename_all = "snake_case")]
pub enum LearnedKind {
    /// Quantile-triggered hedge.
    Adaptive(AdaptiveSettings),
    /// Randomised single reissue.
    Singler(SingleRSettings),
    /// Deadline-driven plan choice.
    Auto(AutoSettings),
}

/// One request's decision, with the reason recorded in traces.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    /// The plan to run.
    pub plan: Plan,
    /// Its label.
    pub plan_label: String,
    /// Why.
    pub reason: String,
    /// What the model predicted (auto only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted: Option<Prediction>,
    /// The miss controller's working level `α_t` when the plan was chosen (auto only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working_level: Option<f64>,
}

/// SplitMix64: a tiny deterministic generator for the SingleR coin.
#[derive(Debug, Clone)]
struct Coin(u64);

impl Coin {
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One learned policy's decision state (tables, fit, budget, coin), deciding from a
/// [`Model`] it does not own, so that several policies can share one model (the replay
/// feeds the same rounds to all of them).
#[derive(Debug, Clone)]
pub struct PolicyState {
    kind: LearnedKind,
    predictor: Option<Predictor>,
    budget: HedgeBudget,
    refresh_every: u64,
    since_refresh: u64,
    singler: Option<SingleRFit>,
    adaptive_delay: Option<(f64, u64)>,
    coin: Coin,
    names: Vec<String>,
    /// Per provider, requests the model has fed without an attempt of it (as of the last
    /// [`PolicyState::observed`]).
    unseen: Vec<u64>,
    /// Requests without a provider after which `auto` re-probes it (0: never).
    reprobe_after: u64,
    /// Requests decided so far, and per provider the first one at which it may be
    /// re-probed again (a probe's own result may not be fed before the next decisions).
    decided: u64,
    next_probe: Vec<u64>,
    /// `auto`'s miss controller (adaptive conformal; see [`crate::guard`]).
    controller: MissController,
    /// `auto` with full information: Hedge over fixed plans, the model and the record.
    experts: Option<Box<ExpertSet>>,
    /// [`Model::shifts`] as of the last refresh: a detected shift rebuilds the tables at
    /// once, not at the next scheduled refresh.
    shifts_seen: u64,
}

impl PolicyState {
    /// A policy deciding from `model`; tables refresh every `refresh_every` attempts fed
    /// (and at least every 1/64 of the attempts seen, capped at 4,096, on long replays).
    pub fn new(kind: LearnedKind, model: &Model, seed: u64) -> PolicyState {
        let (rate, burst) = match kind {
            LearnedKind::Adaptive(a) => (a.budget, 5.0),
            LearnedKind::Singler(s) => (s.budget, 5.0),
            LearnedKind::Auto(a) => (a.max_extra, 5.0),
        };
        let mut st = PolicyState {
            kind,
            predictor: None,
            budget: HedgeBudget::new(rate, burst),
            refresh_every: 16,
            since_refresh: 0,
            singler: None,
            adaptive_delay: None,
            coin: Coin(seed ^ 0x5EED_5EED),
            names: model.providers.iter().map(|p| p.name.clone()).collect(),
            unseen: (0..model.providers.len()).map(|p| model.unseen(p)).collect(),
            reprobe_after: model.config.reprobe_after(),
            decided: 0,
            next_probe: vec![0; model.providers.len()],
            controller: MissController::new(
                match kind {
                    LearnedKind::Auto(a) => a.target_miss,
                    _ => 0.05,
                },
                CONTROLLER_GAMMA,
            ),
            experts: None,
            shifts_seen: model.shifts,
        };
        st.refresh(model);
        st
    }

    /// Switches `auto`'s miss controller off (its level stays at the target): the
    /// planner then trusts its predictions alone. For comparisons and tests.
    pub fn without_controller(mut self) -> PolicyState {
        self.controller = self.controller.clone().disabled();
        self
    }

    /// Full information (`auto` only): the fixed `plans`, the model's choice and the plan
    /// judged best on the record become experts of a Hedge distribution that picks each
    /// request's plan (see [`full`]). The caller prices every expert's plan on each
    /// round ([`PolicyState::expert_plans`]) and passes the outcomes to
    /// [`PolicyState::settle_experts`]. `weighting = false` keeps the weights uniform.
    pub fn with_experts(mut self, plans: Vec<Plan>, cost_ref: f64, price0: f64, weighting: bool) -> PolicyState {
        if matches!(self.kind, LearnedKind::Auto(_)) {
            let bucket = HedgeBudget::full(self.budget.rate(), self.budget.burst());
            self.experts = Some(Box::new(ExpertSet::new(plans, cost_ref, price0, weighting, bucket)));
        }
        self
    }

    /// Adds the model-only expert to the experts (after [`PolicyState::with_experts`]): the
    /// model-only `auto` run as a separate instance on its own run, priced on it (see
    /// [`full`]). Before each decision the caller gives the plan that instance decided
    /// for the request ([`PolicyState::set_model_only_plan`]) and, after it, puts the
    /// outcome of its own run in the slot [`PolicyState::model_only_index`] of the
    /// outcomes passed to [`PolicyState::settle_experts`].
    pub fn with_model_only_expert(mut self) -> PolicyState {
        if let Some(ex) = self.experts.take() {
            self.experts = Some(Box::new(ex.with_model_only()));
        }
        self
    }

    /// The plan the model-only instance decided for the coming request (no-op without the
    /// model-only expert).
    pub fn set_model_only_plan(&mut self, plan: Plan) {
        if let Some(ex) = &mut self.experts {
            ex.set_model_only(plan);
        }
    }

    /// The model-only expert's index among [`PolicyState::expert_plans`], when on.
    pub fn model_only_index(&self) -> Option<usize> {
        self.experts.as_deref().and_then(ExpertSet::model_only_index)
    }

    /// The fixed experts (the first indices of [`PolicyState::expert_plans`]).
    pub fn fixed_experts(&self) -> usize {
        self.experts.as_deref().map_or(0, ExpertSet::fixed)
    }

    /// Sets the experts' plans for a warm-up round (full information) without deciding:
    /// no budget is earned and no expert is drawn.
    pub fn preview_experts(&mut self, gaps: &[Option<f64>]) {
        let level = self.controller.level();
        if let (Some(ex), Some(pred)) = (&mut self.experts, &mut self.predictor) {
            pred.set_level(level);
            let model_plan = pred.choice(gaps).base.0;
            ex.set_round(model_plan, level);
        }
    }

    /// The experts' plans for the round just decided (None without full information).
    pub fn expert_plans(&self) -> Option<&[Plan]> {
        self.experts.as_deref().map(ExpertSet::round_plans)
    }

    /// The experts' state (None without full information).
    pub fn experts(&self) -> Option<&ExpertSet> {
        self.experts.as_deref()
    }

    /// The experts' state, mutable (to gate their plans with their own buckets).
    pub fn experts_mut(&mut self) -> Option<&mut ExpertSet> {
        self.experts.as_deref_mut()
    }

    /// Records every expert's outcome `(missed, cost $)` on the round just decided, in the
    /// order of [`PolicyState::expert_plans`] (a warm-up round may be recorded without
    /// a decision: the model's and judged plans are then the last round's).
    pub fn settle_experts(&mut self, outcomes: &[(bool, f64)]) {
        let (target, level) = (self.controller.target(), self.controller.level());
        if let Some(ex) = &mut self.experts {
            ex.record(outcomes, target, level);
        }
    }

    /// Records what the plan `auto` ran did: the controller moves its working level, the
    /// plan's record is blended into its predicted miss from the next refresh on, and
    /// with full information the experts measure what switching between them costs
    /// ([`full::ExpertSet::realized`]).
    pub fn settle(&mut self, plan: &Plan, missed: bool, cost_usd: f64) {
        if let LearnedKind::Auto(_) = self.kind {
            self.controller.record(missed);
            if let Some(ex) = &mut self.experts {
                ex.realized(missed, cost_usd);
            }
            if let Some(p) = &mut self.predictor {
                p.record(plan, missed, cost_usd);
            }
        }
    }

    /// The miss controller's working level `α_t`.
    pub fn working_level(&self) -> f64 {
        self.controller.level()
    }

    /// Sets how many fed attempts pass between table refreshes (≥ 1).
    pub fn with_refresh_every(mut self, n: u64) -> PolicyState {
        self.refresh_every = n.max(1);
        self
    }

    /// Sets the extra-load bucket's burst.
    pub fn with_burst(mut self, burst: f64) -> PolicyState {
        self.budget = HedgeBudget::new(self.budget.rate(), burst);
        self
    }

    /// The policy and its settings.
    pub fn kind(&self) -> &LearnedKind {
        &self.kind
    }

    /// The extra-load budget.
    pub fn budget(&mut self) -> &mut HedgeBudget {
        &mut self.budget
    }

    /// `auto`'s tables (None for the other policies).
    pub fn predictor(&mut self) -> Option<&mut Predictor> {
        self.predictor.as_mut()
    }

    /// The current SingleR fit.
    pub fn singler_fit(&self) -> Option<SingleRFit> {
        self.singler
    }

    /// Rebuilds tables and fits from `model` now.
    pub fn refresh(&mut self, model: &Model) {
        self.since_refresh = 0;
        self.shifts_seen = model.shifts;
        match self.kind {
            LearnedKind::Auto(a) => match &mut self.predictor {
                Some(p) => p.refresh(model),
                None => self.predictor = Some(Predictor::new(model, a)),
            },
            LearnedKind::Singler(s) => self.singler = fit_singler(model, &s),
            LearnedKind::Adaptive(a) => {
                let pm = model.providers.get(a.primary);
                let n = pm.map_or(0, |p| p.latency.samples());
                // The learned q-quantile, or, when it sits above a gap in the primary's
                // latencies (a tail mode), the start of that gap: the same launches, sooner.
                self.adaptive_delay = pm
                    .and_then(|p| CdfTable::new(p.tail_latency()))
                    .map(|t| t.hedge_point(a.quantile))
                    .filter(|_| n >= a.min_samples)
                    .map(|d| (d.clamp(a.min_delay_s, a.max_delay_s.max(a.min_delay_s)), n));
            }
        }
    }

    /// `attempts` more attempts were fed to `model`: refresh when due.
    pub fn observed(&mut self, model: &Model, attempts: u64) {
        self.since_refresh += attempts;
        for (p, u) in self.unseen.iter_mut().enumerate() {
            *u = model.unseen(p);
        }
        let every = self.refresh_every.max((model.updates / 64).min(4096));
        let due = match self.kind {
            // Until it hedges, adaptive re-reads the sample count at every request.
            LearnedKind::Adaptive(_) if self.adaptive_delay.is_none() => true,
            // A provider's shapes restarted after a detected shift: decide from them now.
            _ if model.shifts != self.shifts_seen => true,
            _ => self.since_refresh >= every,
        };
        if due {
            self.refresh(model);
        }
    }

    /// Decides one request (idle gap per provider, None = unknown) and earns the
    /// request's budget tokens, without building the explanation (the replay's fast
    /// path). Extra attempts still need [`HedgeBudget::try_take`] when they fire.
    pub fn decide_plan(&mut self, gaps: &[Option<f64>]) -> (Plan, Why) {
        self.budget.request();
        self.decided += 1;
        match self.kind {
            LearnedKind::Adaptive(a) => match self.adaptive_delay {
                Some((delay_s, n)) => (Plan::Hedge { p: a.primary, h: a.hedge, delay_s }, Why::Quantile { delay_s, samples: n }),
                None => (Plan::Single { p: a.primary }, Why::TooFewSamples),
            },
            LearnedKind::Singler(s) => match self.singler {
                Some(fit) if fit.q > 0.0 => {
                    let draw = self.coin.next_f64();
                    if draw < fit.q {
                        // Low on tokens: keep them for the tail requests the reissue is for.
                        let delay_s = if self.budget.tokens() < SINGLER_RESERVE { fit.reserve_delay_s } else { fit.delay_s };
                        (Plan::Hedge { p: s.primary, h: s.hedge, delay_s }, Why::Coin { fit, draw, armed: true })
                    } else if self.budget.tokens() + self.budget.rate() > self.budget.burst() {
                        // The coin said no, but the bucket is full: a token not spent now
                        // is lost with the next request's earnings, so the budget does
                        // not bind and thinning buys nothing. Reissue at the tail mode's
                        // start, where the launch is spent only on a tail request.
                        (Plan::Hedge { p: s.primary, h: s.hedge, delay_s: fit.reserve_delay_s }, Why::Coin { fit, draw, armed: true })
                    } else {
                        (Plan::Single { p: s.primary }, Why::Coin { fit, draw, armed: false })
                    }
                }
                _ => (Plan::Single { p: s.primary }, Why::TooFewSamples),
            },
            LearnedKind::Auto(a) => match &mut self.predictor {
                Some(pred) => {
                    let u = self.coin.next_f64();
                    pred.set_level(self.controller.level());
                    let (plan, pr) = pred.decide(gaps, u);
                    if let Some(ex) = &mut self.experts {
                        // Full information: every plan is seen on every round, so
                        // nothing needs exploring; Hedge picks among the experts.
                        let (chosen, index, weight) = ex.play(plan, self.controller.level(), self.coin.next_f64());
                        let pr = if chosen == plan { pr } else { pred.predict_memo(&chosen, gaps) };
                        return (chosen, Why::Expert { index, weight, kind: ex.kind_of(index), pr });
                    }
                    // A provider the model has (almost) never seen cannot be predicted, and
                    // a policy that never tries it never will: race it beside the chosen
                    // primary (the race needs a budget token like any extra attempt).
                    let unseen = (0..self.names.len()).find(|&p| pred.samples(p) < EXPLORE_SAMPLES && p != plan.primary());
                    let can_race = a.max_live >= 2 && a.max_extra > 0.0;
                    match unseen {
                        Some(h) if can_race => {
                            (Plan::Hedge { p: plan.primary(), h, delay_s: 0.0 }, Why::Explore { provider: h, samples: pred.samples(h) })
                        }
                        // A provider the model has not seen for a while (avoided, or
                        // kept as a partner that never fires) is re-probed: raced beside
                        // the chosen primary, only when a budget token is there for it, at
                        // most once per `reprobe_after` requests. What the model knew of it has aged away by then
                        // (`Model::observe_request`), so the probe's outcome decides
                        // whether it is chosen again.
                        _ if can_race && self.reprobe_after > 0 && self.budget.tokens() >= 1.0 => {
                            let (every, now) = (self.reprobe_after, self.decided);
                            let stale = (0..self.names.len())
                                .filter(|&p| p != plan.primary() && self.unseen[p] >= every && self.next_probe[p] <= now)
                                .max_by_key(|&p| (self.unseen[p], std::cmp::Reverse(p)));
                            match stale {
                                Some(h) => {
                                    self.next_probe[h] = now + every;
                                    (
                                        Plan::Hedge { p: plan.primary(), h, delay_s: 0.0 },
                                        Why::Reprobe { provider: h, unseen: self.unseen[h] },
                                    )
                                }
                                None => (plan, Why::Predicted(pr)),
                            }
                        }
                        _ => (plan, Why::Predicted(pr)),
                    }
                }
                None => (Plan::Single { p: 0 }, Why::TooFewSamples),
            },
        }
    }

    /// Decides one request like [`PolicyState::decide_plan`] and explains it.
    pub fn decide(&mut self, gaps: &[Option<f64>]) -> Decision {
        let (plan, why) = self.decide_plan(gaps);
        self.explain(plan, why)
    }

    /// The explanation of a plan [`PolicyState::decide_plan`] chose: its label and the
    /// reason in words (formatting is the costly part of a decision, so a live caller may
    /// keep the last explanation and call this only when the plan or the reason changed).
    pub fn explain(&self, plan: Plan, why: Why) -> Decision {
        let (reason, predicted) = match (why, self.kind) {
            (Why::Quantile { delay_s, samples }, LearnedKind::Adaptive(a)) => {
                (format!("hedge at learned p{} = {:.3}s of {} samples", fmt_q(a.quantile), delay_s, samples), None)
            }
            (Why::TooFewSamples, LearnedKind::Adaptive(a)) => (format!("no hedge: fewer than {} samples", a.min_samples), None),
            (Why::TooFewSamples, _) => ("no hedge: model not fitted yet".to_string(), None),
            (Why::Coin { fit, draw, armed: true }, LearnedKind::Singler(s)) if draw >= fit.q => (
                format!(
                    "reissue at the tail mode's start d={:.3}s: coin {:.3} >= q={:.3}, but the budget's bucket is full (a token not spent now is lost; predicted p{} {:.2}s)",
                    hedge_delay(&plan).unwrap_or(fit.reserve_delay_s),
                    draw,
                    fit.q,
                    fmt_q(s.level),
                    fit.tail_s
                ),
                None,
            ),
            (Why::Coin { fit, draw, armed: true }, LearnedKind::Singler(s)) => (
                format!(
                    "reissue armed at d={:.3}s{} (q={:.3}, coin {:.3}; predicted p{} {:.2}s)",
                    hedge_delay(&plan).unwrap_or(fit.delay_s),
                    if hedge_delay(&plan).is_some_and(|d| d != fit.delay_s) { ", the tail mode's start: budget low" } else { "" },
                    fit.q,
                    draw,
                    fmt_q(s.level),
                    fit.tail_s
                ),
                None,
            ),
            (Why::Coin { fit, draw, .. }, _) => (format!("no reissue: coin {:.3} >= q={:.3} (d={:.3}s)", draw, fit.q, fit.delay_s), None),
            (Why::Predicted(pr), LearnedKind::Auto(a)) => {
                let head = if pr.miss <= a.target_miss {
                    format!("cheapest meeting miss<={} at {}s", a.target_miss, a.deadline_s)
                } else {
                    format!("no plan meets miss<={} at {}s: least predicted miss", a.target_miss, a.deadline_s)
                };
                (
                    format!(
                        "{head}: predicted miss {:.3}, ${:.5}, extra {:.2}; working level {:.4}",
                        pr.miss,
                        pr.cost_on(a.cost),
                        pr.extra,
                        self.controller.level()
                    ),
                    Some(pr),
                )
            }
            (Why::Expert { index, weight, kind, pr }, LearnedKind::Auto(a)) => (
                format!(
                    "expert {index} ({kind}) drawn with weight {weight:.3} of {}: predicted miss {:.3}, ${:.5}; working level {:.4}",
                    self.experts.as_ref().map_or(0, |e| e.hedge().len()),
                    pr.miss,
                    pr.cost_on(a.cost),
                    self.controller.level()
                ),
                Some(pr),
            ),
            (Why::Reprobe { provider, unseen }, _) => (
                format!(
                    "re-probe: {} not launched for {unseen} requests (re-probed after {}), raced beside the primary",
                    self.names[provider], self.reprobe_after
                ),
                None,
            ),
            (Why::Explore { provider, samples }, _) => {
                (format!("exploring: {} has {samples} of {EXPLORE_SAMPLES} samples, raced beside the primary", self.names[provider]), None)
            }
            (w, _) => (format!("{w:?}"), None),
        };
        let working_level = matches!(self.kind, LearnedKind::Auto(_)).then(|| self.controller.level());
        Decision { plan_label: plan.label(&self.names), plan, reason, predicted, working_level }
    }
}

/// Why a plan was chosen (the unformatted reason).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Why {
    /// Not enough samples (or no tables) yet.
    TooFewSamples,
    /// Adaptive: the learned quantile.
    Quantile {
        /// Delay, s.
        delay_s: f64,
        /// Primary samples.
        samples: u64,
    },
    /// SingleR: the coin against the fitted q.
    Coin {
        /// The fit.
        fit: SingleRFit,
        /// The draw.
        draw: f64,
        /// Whether the reissue is armed.
        armed: bool,
    },
    /// Auto: the prediction of the chosen plan.
    Predicted(Prediction),
    /// Auto: re-probing a provider the chosen plan avoids, unseen for a while.
    Reprobe {
        /// The provider.
        provider: usize,
        /// Requests the model fed without it.
        unseen: u64,
    },
    /// Auto with full information: the expert Hedge drew.
    Expert {
        /// Its index (fixed plans first, then the model-only `auto` when on, then the
        /// model, then the judged plan).
        index: usize,
        /// Its weight.
        weight: f64,
        /// "fixed", "model-only", "model" or "judged".
        kind: &'static str,
        /// The model's prediction of its plan.
        pr: Prediction,
    },
    /// Auto: racing a provider the model has not seen enough of.
    Explore {
        /// The provider.
        provider: usize,
        /// Its samples so far.
        samples: u64,
    },
}

/// Observations of a provider before `auto` trusts its predictions.
pub const EXPLORE_SAMPLES: u64 = 5;

/// A learned policy with its own model: what the live engine holds.
#[derive(Debug, Clone)]
pub struct Learner {
    model: Model,
    state: PolicyState,
}

impl Learner {
    /// A learner over `providers` `(name, rate $/s, idle window s)`, starting from
    /// `model` when given and it lists the same providers.
    /// A stored model keeps its own settings except the shift detector's threshold, which
    /// is the caller's (a policy's, not a file's).
    pub fn new(kind: LearnedKind, providers: &[(String, f64, f64)], model: Option<Model>, config: ModelConfig, seed: u64) -> Learner {
        let mut model = model
            .filter(|m| m.providers.len() == providers.len() && m.providers.iter().zip(providers).all(|(a, b)| a.name == b.0))
            .unwrap_or_else(|| Model::new(providers, config));
        model.config.shift_threshold = config.shift_threshold;
        let state = PolicyState::new(kind, &model, seed);
        Learner { model, state }
    }

    /// The model learned so far.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The decision state.
    pub fn state(&mut self) -> &mut PolicyState {
        &mut self.state
    }

    /// Feeds one request's attempts.
    pub fn observe(&mut self, attempts: &[Observation]) {
        self.model.observe_request(attempts);
        self.state.observed(&self.model, attempts.len() as u64);
    }

    /// Decides one request; see [`PolicyState::decide`].
    pub fn decide(&mut self, gaps: &[Option<f64>]) -> Decision {
        self.state.decide(gaps)
    }

    /// Records what the plan `auto` ran did (missed the deadline or not, its cost): see
    /// [`PolicyState::settle`]. Live, call it once per settled request.
    pub fn settle(&mut self, plan: &Plan, missed: bool, cost_usd: f64) {
        self.state.settle(plan, missed, cost_usd);
    }
}

fn hedge_delay(plan: &Plan) -> Option<f64> {
    match *plan {
        Plan::Hedge { delay_s, .. } => Some(delay_s),
        _ => None,
    }
}

fn fmt_q(q: f64) -> String {
    let mut s = format!("{:.2}", q * 100.0);
    while s.ends_with('0') {
        s.pop();
    }
    if s.ends_with('.') {
        s.pop();
    }
    s
}

pub mod full;
use full::ExpertSet;
mod singler;
pub use singler::{fit_singler, SingleRFit, SINGLER_HEADROOM, SINGLER_RESERVE, SINGLER_TAIL_MARGIN};

#[cfg(test)]
mod tests;
