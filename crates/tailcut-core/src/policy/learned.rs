//! Learned policies in the engine: `adaptive`, `singler` and `auto` behind the same
//! [`Policy`] trait as the fixed ones.
//!
//! A [`LearnedPolicy`] holds a [`Learner`] (its own [`tailcut_model::Model`], tables,
//! extra-load budget and coin). Per request it asks the learner for a plan — given each
//! provider's idle gap since it last served a request — writes the plan and the reason
//! into the trace's `decisions.learned`, and runs the plan on the race. Every extra
//! attempt needs a token from the learner's budget *when it fires*; a refused one is
//! counted in `decisions.hedges_denied` and the race carries on without it.
//!
//! Learning is explicit: feed each finished request's trace to
//! [`LearnedPolicy::observe_trace`] (the CLI and gateway do so once the trace is
//! settled), so the same code learns live, in the simulator and in tests. For `auto` the
//! same call settles the request ([`guarded`]): its miss moves the controller's working
//! level, its plan's record grows, and its attempts join the censored history the
//! planner judges single-provider plans by.

use super::{Policy, PolicyError, QueueTimers};
use crate::engine::{Launch, Race, RaceError, Wake};
use crate::job::JobState;
use crate::provider::Provider;
use crate::trace::{LearnedChoice, ProviderBelief, RequestTrace};
use async_trait::async_trait;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tailcut_model::{Decision, LearnedKind, Learner, Model, ModelConfig, Observation, Outcome, Plan, Why};
use tokio::time::Instant;

pub mod guarded;
use guarded::LiveGuard;

/// Model updates between recomputations of the quantiles a decision records.
const BELIEFS_EVERY: u64 = 16;

/// A learned policy over a fixed provider list.
#[derive(Debug)]
pub struct LearnedPolicy {
    label: String,
    kind: crate::PolicyKind,
    names: Vec<String>,
    /// The same names, shared with every decision's trace.
    shared_names: Vec<Arc<str>>,
    /// Model index → index of that provider in the hedger's list.
    slots: Vec<usize>,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    learner: Learner,
    last_served: Vec<Option<Instant>>,
    /// Per provider: samples and learned (p50, p95, p99), as of `beliefs_at` updates.
    beliefs: Vec<(u64, [Option<f64>; 3])>,
    beliefs_at: Option<u64>,
    /// The last plan, its reason and their explanation: a busy route decides the same
    /// plan for the same reason for many requests in a row (until the model's tables
    /// refresh), and formatting the explanation is most of a decision's cost.
    explained: Option<Explained>,
    /// `auto`'s live settling (None for the other policies).
    guard: Option<LiveGuard>,
}

/// A decision's explanation, kept to be repeated (shared, not copied, into each trace).
#[derive(Debug)]
struct Explained {
    plan: Plan,
    why: Why,
    label: Arc<str>,
    reason: Arc<str>,
    predicted: Option<tailcut_model::Prediction>,
}

impl Explained {
    fn new(plan: Plan, why: Why, d: Decision) -> Explained {
        Explained { plan, why, label: d.plan_label.into(), reason: d.reason.into(), predicted: d.predicted }
    }
}

impl Inner {
    /// Decides one request and explains it, reusing the last explanation when the plan
    /// and its reason are the same as last time.
    fn decide(&mut self, gaps: &[Option<f64>]) -> (Plan, LearnedChoice) {
        let (plan, why) = self.learner.state().decide_plan(gaps);
        if !matches!(&self.explained, Some(e) if e.plan == plan && e.why == why) {
            self.explained = None;
        }
        let learner = &mut self.learner;
        let d = self.explained.get_or_insert_with(|| Explained::new(plan, why, learner.state().explain(plan, why)));
        if let Some(g) = &mut self.guard {
            g.decided(&d.label, plan);
        }
        let choice = LearnedChoice {
            plan: d.label.clone(),
            reason: d.reason.clone(),
            predicted_miss: d.predicted.map(|p| p.miss),
            predicted_cost_usd: d.predicted.map(|p| p.cost_usd()),
            predicted_extra: d.predicted.map(|p| p.extra),
            model: Vec::new(),
        };
        (plan, choice)
    }

    /// What the model knows of each provider now. The samples are live; the quantiles
    /// are recomputed when the model changed: after every update while the model has
    /// seen fewer than [`BELIEFS_EVERY`]·4 requests, then at most every
    /// [`BELIEFS_EVERY`] updates (a busy route pays a sketch walk per provider every few
    /// requests, not per request). The age counts the model's updates, not each
    /// provider's samples: a provider the policy rarely launches would otherwise keep
    /// the model young, and every request would walk every sketch.
    fn beliefs(&mut self, names: &[Arc<str>], gaps: &[Option<f64>]) -> Vec<ProviderBelief> {
        let m = self.learner.model();
        let young = m.updates < 4 * BELIEFS_EVERY;
        let due = match self.beliefs_at {
            None => true,
            Some(at) => m.updates != at && (young || m.updates >= at + BELIEFS_EVERY),
        };
        if due {
            self.beliefs = m
                .providers
                .iter()
                .map(|p| (p.samples(), p.latency.quantiles_reached([0.5, 0.95, 0.99]).map(|x| x.filter(|x| x.is_finite()))))
                .collect();
            self.beliefs_at = Some(m.updates);
        }
        let m = self.learner.model();
        names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let (_, [p50_s, p95_s, p99_s]) = self.beliefs.get(i).copied().unwrap_or((0, [None; 3]));
                let samples = m.providers.get(i).map_or(0, |p| p.samples());
                let idle_gap_s = gaps.get(i).copied().flatten();
                let p_warm = idle_gap_s.and_then(|g| m.providers.get(i).and_then(|p| p.p_warm(g)));
                ProviderBelief { provider: n.clone(), samples, p50_s, p95_s, p99_s, idle_gap_s, p_warm }
            })
            .collect()
    }
}

/// The longest idle gap restored from a saved model's last served times; an older time
/// is taken as this old (P(warm) is flat long before a week).
const MAX_RESTORED_GAP_S: f64 = 7.0 * 86_400.0;

/// Seconds since the Unix epoch, by the wall clock.
fn unix_now_s() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// Each provider's last served instant, from the wall-clock times a saved model carries
/// (unknown where it has none). A time in the future (another replica's clock ahead of
/// this one) counts as now.
fn restored_last_served(model: &Model) -> Vec<Option<Instant>> {
    let (now, wall) = (Instant::now(), unix_now_s());
    model
        .providers
        .iter()
        .map(|p| {
            let age_s = (wall - p.last_served_unix_s?).clamp(0.0, MAX_RESTORED_GAP_S);
            now.checked_sub(Duration::try_from_secs_f64(age_s).ok()?)
        })
        .collect()
}

/// The per-attempt observations of a request trace, for providers named in `names`.
/// `gaps` gives each provider's idle gap before this request (None = unknown).
///
/// A valid attempt is observed with its own wall time; an invalid or failed one as such;
/// an attempt cancelled before it resolved as *censored* at the time it had run (until
/// its confirmed cancel, else the race's end minus its launch offset), so hedging does not hide the slow tail from the
/// model. Queue delay comes from `queue_delay_ms` or `{provider}_delay_ms`; warmth from
/// `warm` or the simulator's `sim_mode`.
pub fn observations(trace: &RequestTrace, names: &[String], gaps: &[Option<f64>]) -> Vec<Observation> {
    let end_ms =
        trace.winner_total_ms.or_else(|| trace.attempts.iter().filter_map(|a| a.wall_ms.map(|w| a.submit_offset_ms + w)).reduce(f64::max));
    let mut out = Vec::with_capacity(trace.attempts.len());
    for a in &trace.attempts {
        let Some(p) = names.iter().position(|n| *n == a.provider) else { continue };
        let cancelled = a.outcome == Some(JobState::Cancelled);
        let outcome = match (a.valid, a.wall_ms) {
            (Some(true), Some(w)) => Outcome::Valid { latency_s: w / 1000.0 },
            (Some(false), Some(w)) if cancelled => Outcome::Censored { after_s: w / 1000.0 },
            (Some(false), w) => {
                let wall_s = w.unwrap_or(0.0) / 1000.0;
                if a.outcome == Some(JobState::Completed) {
                    Outcome::Invalid { wall_s }
                } else {
                    Outcome::Failed { wall_s }
                }
            }
            _ => match end_ms {
                Some(end) => Outcome::Censored { after_s: ((end - a.submit_offset_ms) / 1000.0).max(0.0) },
                None => continue,
            },
        };
        let metric = |k: &str| a.metrics.get(k).and_then(|v| v.as_f64());
        // A poll that saw it queued bounds its queue delay from below (cancelled attempts
        // carry no metrics).
        let queued_poll =
            a.polls.iter().filter(|p| p.state == JobState::Queued).map(|p| (p.at_ms - a.submit_offset_ms).max(0.0) + 1.0).reduce(f64::max);
        let own_delay =
            || a.metrics.iter().find(|(k, _)| k.strip_suffix("_delay_ms") == Some(a.provider.as_str())).and_then(|(_, v)| v.as_f64());
        let queue_ms = metric("queue_delay_ms").or_else(own_delay).or(queued_poll);
        let warm = a
            .metrics
            .get("warm")
            .and_then(|v| v.as_bool())
            .or_else(|| a.metrics.get("sim_mode").and_then(|v| v.as_str()).map(|m| m == "warm"));
        out.push(Observation {
            provider: p,
            outcome,
            queue_s: queue_ms.map(|q| q / 1000.0),
            idle_gap_s: gaps.get(p).copied().flatten(),
            warm,
        });
    }
    out
}

impl LearnedPolicy {
    /// Builds the policy over `providers`, starting from `model` when given (it is
    /// ignored unless it lists the same providers in the same order). Indices in `kind`
    /// refer to `providers`.
    pub fn try_new(
        providers: &[Provider],
        label: &str,
        kind: LearnedKind,
        model: Option<Model>,
        config: ModelConfig,
        seed: u64,
    ) -> Result<LearnedPolicy, PolicyError> {
        let names: Vec<&str> = providers.iter().map(|p| p.name.as_str()).collect();
        LearnedPolicy::try_new_over(providers, &names, label, kind, model, config, seed)
    }

    /// Builds the policy over the providers named in `names` (a subset of the hedger's
    /// `providers`, in the model's order); indices in `kind` refer to `names`. The model
    /// starts from `model` when it lists exactly these providers, else cold.
    pub fn try_new_over(
        providers: &[Provider],
        names: &[&str],
        label: &str,
        kind: LearnedKind,
        model: Option<Model>,
        config: ModelConfig,
        seed: u64,
    ) -> Result<LearnedPolicy, PolicyError> {
        let mut slots = Vec::with_capacity(names.len());
        for name in names {
            let i =
                providers.iter().position(|p| p.name == *name).ok_or_else(|| PolicyError::UnknownProvider { name: name.to_string() })?;
            if slots.contains(&i) {
                return Err(PolicyError::DuplicateProvider { name: name.to_string() });
            }
            slots.push(i);
        }
        let providers: Vec<&Provider> = slots.iter().map(|&i| &providers[i]).collect();
        let n = providers.len();
        let check = |i: usize| if i < n { Ok(()) } else { Err(PolicyError::UnknownSlot { index: i }) };
        match kind {
            LearnedKind::Adaptive(a) => {
                check(a.primary)?;
                check(a.hedge)?;
            }
            LearnedKind::Singler(s) => {
                check(s.primary)?;
                check(s.hedge)?;
            }
            LearnedKind::Auto(a) => {
                if !(a.deadline_s > 0.0 && (0.0..=1.0).contains(&a.target_miss) && a.max_extra >= 0.0) {
                    return Err(PolicyError::AutoTargetsOutOfRange);
                }
            }
        }
        let meta: Vec<(String, f64, f64)> =
            providers.iter().map(|p| (p.name.clone(), p.pricing.rate.as_usd_per_s(), p.pricing.idle_window.as_secs_f64())).collect();
        let policy_kind = match kind {
            LearnedKind::Adaptive(_) => crate::PolicyKind::Adaptive,
            LearnedKind::Singler(_) => crate::PolicyKind::Singler,
            LearnedKind::Auto(_) => crate::PolicyKind::Auto,
        };
        let learner = Learner::new(kind, &meta, model, config, seed);
        let last_served = restored_last_served(learner.model());
        let guard = LiveGuard::new(&kind, meta.len());
        Ok(LearnedPolicy {
            label: label.to_string(),
            kind: policy_kind,
            shared_names: meta.iter().map(|m| Arc::from(m.0.as_str())).collect(),
            names: meta.into_iter().map(|m| m.0).collect(),
            slots,
            inner: Mutex::new(Inner { learner, last_served, beliefs: Vec::new(), beliefs_at: None, explained: None, guard }),
        })
    }

    /// Sets the burst of the policy's own extra-load bucket (its rate is the kind's
    /// budget).
    pub fn with_burst(self, burst: f64) -> LearnedPolicy {
        if let Ok(mut inner) = self.inner.lock() {
            let st = inner.learner.state().clone().with_burst(burst);
            *inner.learner.state() = st;
        }
        self
    }

    /// The providers the model covers, in its order.
    pub fn provider_names(&self) -> &[String] {
        &self.names
    }

    /// A copy of the model learned so far (to save it), with each provider's last served
    /// time as a wall-clock time, so a policy built from the saved model knows its idle
    /// gaps.
    pub fn model(&self) -> Option<Model> {
        let inner = self.inner.lock().ok()?;
        let mut model = inner.learner.model().clone();
        let (now, wall) = (Instant::now(), unix_now_s());
        for (p, served) in model.providers.iter_mut().zip(&inner.last_served) {
            if let Some(t) = served {
                p.last_served_unix_s = Some((wall - now.saturating_duration_since(*t).as_secs_f64()).max(0.0));
            }
        }
        Some(model)
    }

    /// Observations fed to the model so far (changes whenever it learns; to save only a
    /// changed model).
    pub fn updates(&self) -> u64 {
        self.inner.lock().map(|i| i.learner.model().updates).unwrap_or(0)
    }

    /// Feeds a settled trace whose race started `trace`'s length before now (what a
    /// caller that did not keep the start instant knows: the gateway records traces once
    /// every loser has settled).
    pub fn observe_settled(&self, trace: &RequestTrace) {
        let length_ms = trace
            .attempts
            .iter()
            .map(|a| a.submit_offset_ms + a.wall_ms.unwrap_or(0.0))
            .fold(trace.winner_total_ms.unwrap_or(0.0), f64::max)
            .clamp(0.0, 7.0 * 86_400_000.0);
        let now = Instant::now();
        let started = now.checked_sub(Duration::from_secs_f64(length_ms / 1000.0)).unwrap_or(now);
        self.observe_trace(trace, started);
    }

    /// `auto`'s working miss level `α_t` now (None for the other policies): the target
    /// until settled requests move it.
    pub fn working_level(&self) -> Option<f64> {
        let mut inner = self.inner.lock().ok()?;
        inner.guard.is_some().then(|| inner.learner.state().working_level())
    }

    /// `auto`'s requests settled so far (0 for the other policies).
    pub fn settled(&self) -> u64 {
        self.inner.lock().ok().and_then(|i| i.guard.as_ref().map(LiveGuard::settled)).unwrap_or(0)
    }

    fn gaps(inner: &Inner, now: Instant) -> Vec<Option<f64>> {
        inner.last_served.iter().map(|t| t.map(|t| now.saturating_duration_since(t).as_secs_f64())).collect()
    }

    /// Feeds a finished request's trace to the model. `started` is when the request
    /// started (its t0): idle gaps are measured from each provider's last served result
    /// to its launch in this request.
    pub fn observe_trace(&self, trace: &RequestTrace, started: Instant) {
        let Ok(mut inner) = self.inner.lock() else { return };
        let gaps: Vec<Option<f64>> = (0..self.names.len())
            .map(|p| {
                let launch = trace.attempts.iter().find(|a| a.provider == self.names[p])?;
                let at = started + Duration::from_secs_f64(launch.submit_offset_ms.max(0.0) / 1000.0);
                inner.last_served[p].map(|t| at.saturating_duration_since(t).as_secs_f64())
            })
            .collect();
        let obs = observations(trace, &self.names, &gaps);
        inner.learner.observe(&obs);
        let Inner { learner, guard, .. } = &mut *inner;
        if let Some(g) = guard {
            g.settle(learner, trace, &obs);
        }
        for a in &trace.attempts {
            if let (Some(p), Some(true), Some(w)) = (self.names.iter().position(|n| *n == a.provider), a.valid, a.wall_ms) {
                let done = started + Duration::from_secs_f64((a.submit_offset_ms + w).max(0.0) / 1000.0);
                if inner.last_served[p].is_none_or(|t| t < done) {
                    inner.last_served[p] = Some(done);
                }
            }
        }
    }

    fn take_token(&self) -> bool {
        self.inner.lock().map(|mut i| i.learner.state().budget().try_take()).unwrap_or(false)
    }

    async fn extra(&self, race: &mut Race, provider: usize, launch: Launch) -> bool {
        if !self.take_token() {
            race.deny_extra();
            return false;
        }
        race.launch_extra(provider, launch).await.is_some()
    }

    /// The plan with its provider indices turned from the model's into the hedger's.
    fn to_hedger(&self, plan: Plan) -> Plan {
        let m = |i: usize| self.slots.get(i).copied().unwrap_or(i);
        match plan {
            Plan::Single { p } => Plan::Single { p: m(p) },
            Plan::Hedge { p, h, delay_s } => Plan::Hedge { p: m(p), h: m(h), delay_s },
            Plan::Cutover { p, h, poll_s, safety_s } => Plan::Cutover { p: m(p), h: m(h), poll_s, safety_s },
            Plan::Cascade { p, h, f, poll_s, safety_s, escalate_s } => {
                Plan::Cascade { p: m(p), h: m(h), f: m(f), poll_s, safety_s, escalate_s }
            }
        }
    }

    async fn run_plan(&self, race: &mut Race, plan: Plan) -> Result<(), RaceError> {
        let plan = self.to_hedger(plan);
        match plan {
            Plan::Single { p } => {
                race.launch(p, Launch::Primary).await?;
                race.wait_until(None).await;
            }
            Plan::Hedge { p, h, delay_s } => {
                let a = race.launch(p, Launch::Primary).await?;
                // At 0 s the two are raced: the second is launched at once, even when the
                // primary's submit returned with its result (a stream that reached its
                // first content while it was submitted). Waiting on a timer already due
                // let such a primary win first, so an explored provider was never launched
                // and its exploration never ended.
                if delay_s > 0.0 {
                    let at = race.submit_returned(a) + Duration::from_secs_f64(delay_s);
                    if race.wait_until(Some(at)).await == Wake::Winner {
                        return Ok(());
                    }
                }
                self.extra(race, h, Launch::Hedge).await;
                race.wait_until(None).await;
            }
            Plan::Cutover { p, h, poll_s, safety_s } | Plan::Cascade { p, h, poll_s, safety_s, .. } => {
                let timers = QueueTimers::try_new(Duration::from_secs_f64(poll_s), Duration::from_secs_f64(safety_s), Duration::MAX)
                    .unwrap_or_default();
                let a = race.launch(p, Launch::Primary).await?;
                let poll_at = race.submit_returned(a) + timers.poll_after;
                if race.wait_until(Some(poll_at)).await == Wake::Winner {
                    return Ok(());
                }
                let mut switched = false;
                if !race.is_resolved(a) && race.poll_status(a).await == JobState::Queued {
                    // The token first, then the race's own limits; the primary is given
                    // up only once the hedge is submitted, and kept otherwise.
                    if self.take_token() {
                        switched = race.cut_over(a, h).await.is_some();
                    } else {
                        race.deny_cutover();
                    }
                }
                if !switched {
                    let safety = race.t0() + timers.safety_at;
                    if race.wait_until(Some(safety)).await == Wake::Winner {
                        return Ok(());
                    }
                    self.extra(race, h, Launch::SafetyHedge).await;
                    race.wait_until(None).await;
                    return Ok(());
                }
                if let Plan::Cascade { f, escalate_s, .. } = plan {
                    let escalate = race.t0() + Duration::from_secs_f64(escalate_s);
                    if race.wait_until(Some(escalate)).await == Wake::Winner {
                        return Ok(());
                    }
                    if race.live_count() < race.max_live() {
                        self.extra(race, f, Launch::Escalation).await;
                    } else {
                        // Refused at the cap: the race records the skip.
                        race.launch_extra(f, Launch::Escalation).await;
                    }
                }
                race.wait_until(None).await;
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Policy for LearnedPolicy {
    fn label(&self) -> &str {
        &self.label
    }

    fn kind(&self) -> crate::PolicyKind {
        self.kind
    }

    async fn drive(&self, race: &mut Race) -> Result<(), RaceError> {
        let (plan, choice) = {
            let mut inner = self.inner.lock().map_err(|_| RaceError::Stopped)?;
            let gaps = Self::gaps(&inner, race.t0());
            let (plan, mut choice) = inner.decide(&gaps);
            choice.model = inner.beliefs(&self.shared_names, &gaps);
            (plan, choice)
        };
        race.explain(choice);
        self.run_plan(race, plan).await
    }
}
