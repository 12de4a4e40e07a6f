//! Hedging policies behind one small trait.
//!
//! A policy only decides *when* to launch, poll and cancel; the [`Race`] enforces the
//! invariants (first valid result wins, live cap, receipts). Built in:
//!
//! | policy | label |
//! |---|---|
//! | [`Single`] | `single:P` |
//! | [`ImmediateRace`] | `race:A+B(+C…)` |
//! | [`FixedHedge`] | `hedge:P->H@10s` |
//! | [`Cutover`] | `cutover:P->H@q2.5s+s8.5s` |
//! | [`Cascade`] | `cascade:P->H->F@q2.5s+s8.5s+e25s` |
//! | [`DeadlineTier`] | `deadline:P->H+F@q2.5s+s8.5s` |
//! | [`learned::LearnedPolicy`] | `adaptive:…`, `singler:…`, `auto:…` |
//!
//! Timer bases follow the reference tool: the hedge delay and the cutover poll count
//! from the moment the primary's submit *returned*; safety and escalation deadlines
//! count from the request's start (t0).

pub mod learned;

use crate::engine::{AttemptId, Race, RaceError, Wake};
use crate::provider::Provider;
use crate::trace::Role;
use async_trait::async_trait;
use std::fmt;
use std::time::Duration;
use tokio::time::Instant;

/// A hedging policy.
#[async_trait]
pub trait Policy: Send + Sync + fmt::Debug {
    /// The label written to traces and tables.
    fn label(&self) -> &str;

    /// Drives the race until it has a winner or nothing more can be tried. Returning
    /// early is safe: the engine cancels whatever is still running.
    async fn drive(&self, race: &mut Race) -> Result<(), RaceError>;
}

/// Why a policy could not be built.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum PolicyError {
    /// The policy names a provider that is not configured.
    #[error("unknown provider `{0}`")]
    UnknownProvider(String),
    /// The same provider appears twice.
    #[error("provider `{0}` appears more than once in the policy")]
    DuplicateProvider(String),
    /// The primary of a queue-state policy cannot report a queued state.
    #[error("provider `{0}` cannot tell queued from running, so it cannot be a cutover primary")]
    NoQueueSignal(String),
    /// Timer settings are inconsistent.
    #[error("{0}")]
    BadTiming(String),
    /// The policy needs more providers.
    #[error("an immediate race needs at least two providers")]
    TooFewProviders,
}

/// Formats seconds like Python's `:g` for labels: `10`, `2.5`, `0`.
pub fn secs_label(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{}", s as u64)
    } else {
        let mut t = format!("{s:.3}");
        while t.ends_with('0') {
            t.pop();
        }
        t
    }
}

fn resolve(providers: &[Provider], name: &str) -> Result<usize, PolicyError> {
    providers.iter().position(|p| p.name == name).ok_or_else(|| PolicyError::UnknownProvider(name.to_string()))
}

fn distinct(providers: &[Provider], ids: &[usize]) -> Result<(), PolicyError> {
    for (i, a) in ids.iter().enumerate() {
        if ids[..i].contains(a) {
            return Err(PolicyError::DuplicateProvider(providers[*a].name.clone()));
        }
    }
    Ok(())
}

fn require_queue_signal(providers: &[Provider], id: usize) -> Result<(), PolicyError> {
    if providers[id].api.capabilities().reports_queued {
        Ok(())
    } else {
        Err(PolicyError::NoQueueSignal(providers[id].name.clone()))
    }
}

// === impl Single ===

/// No hedge: one provider, wait for its result.
#[derive(Debug, Clone)]
pub struct Single {
    provider: usize,
    label: String,
}

impl Single {
    /// Builds the policy for the named provider.
    pub fn try_new(providers: &[Provider], provider: &str) -> Result<Single, PolicyError> {
        Ok(Single { provider: resolve(providers, provider)?, label: format!("single:{provider}") })
    }
}

#[async_trait]
impl Policy for Single {
    fn label(&self) -> &str {
        &self.label
    }

    async fn drive(&self, race: &mut Race) -> Result<(), RaceError> {
        race.launch(self.provider, Role::Primary).await?;
        race.wait_until(None).await;
        Ok(())
    }
}

// === impl ImmediateRace ===

/// Launches up to the live cap at once; when one resolves invalid, the next in line
/// launches. The first valid result wins.
#[derive(Debug, Clone)]
pub struct ImmediateRace {
    providers: Vec<usize>,
    label: String,
}

impl ImmediateRace {
    /// Builds the policy over the named providers, in order of preference.
    pub fn try_new(providers: &[Provider], names: &[&str]) -> Result<ImmediateRace, PolicyError> {
        if names.len() < 2 {
            return Err(PolicyError::TooFewProviders);
        }
        let ids = names.iter().map(|n| resolve(providers, n)).collect::<Result<Vec<_>, _>>()?;
        distinct(providers, &ids)?;
        Ok(ImmediateRace { providers: ids, label: format!("race:{}", names.join("+")) })
    }
}

#[async_trait]
impl Policy for ImmediateRace {
    fn label(&self) -> &str {
        &self.label
    }

    async fn drive(&self, race: &mut Race) -> Result<(), RaceError> {
        race.launch(self.providers[0], Role::Racer).await?;
        let mut queue = self.providers[1..].iter().copied();
        loop {
            if race.is_stopped() {
                return Ok(());
            }
            while race.live_count() < race.max_live() {
                let Some(next) = queue.next() else { break };
                if race.launch_extra(next, Role::Racer).await.is_some() {
                    race.decisions.hedge_launched = true;
                }
            }
            match race.next(None).await {
                Wake::Winner => return Ok(()),
                Wake::Idle if queue.len() == 0 => return Ok(()),
                _ => {}
            }
        }
    }
}

// === impl FixedHedge ===

/// A plain timer hedge: if the primary has no valid result `delay` after its submit
/// returned, launch the hedge. A fast invalid primary triggers the hedge at once.
#[derive(Debug, Clone)]
pub struct FixedHedge {
    primary: usize,
    hedge: usize,
    delay: Duration,
    label: String,
}

impl FixedHedge {
    /// Builds the policy.
    pub fn try_new(providers: &[Provider], primary: &str, hedge: &str, delay: Duration) -> Result<FixedHedge, PolicyError> {
        let (p, h) = (resolve(providers, primary)?, resolve(providers, hedge)?);
        distinct(providers, &[p, h])?;
        Ok(FixedHedge { primary: p, hedge: h, delay, label: format!("hedge:{primary}->{hedge}@{}s", secs_label(delay)) })
    }
}

#[async_trait]
impl Policy for FixedHedge {
    fn label(&self) -> &str {
        &self.label
    }

    async fn drive(&self, race: &mut Race) -> Result<(), RaceError> {
        let p = race.launch(self.primary, Role::Primary).await?;
        let hedge_at = race.submit_returned(p) + self.delay;
        if race.wait_until(Some(hedge_at)).await == Wake::Winner {
            return Ok(());
        }
        if race.launch_extra(self.hedge, Role::Hedge).await.is_some() {
            race.decisions.hedge_launched = true;
        }
        race.wait_until(None).await;
        Ok(())
    }
}

// === Queue-state timing ===

/// Timer settings shared by the queue-state policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueTimers {
    /// Poll the primary this long after its submit returned.
    pub poll_after: Duration,
    /// If the primary was kept, launch the safety hedge at t0 + this.
    pub safety_at: Duration,
    /// Escalate to the fallback at t0 + this (cascade only).
    pub escalate_at: Duration,
}

impl Default for QueueTimers {
    fn default() -> Self {
        QueueTimers {
            poll_after: Duration::from_millis(2500),
            safety_at: Duration::from_millis(8500),
            escalate_at: Duration::from_secs(25),
        }
    }
}

impl QueueTimers {
    /// Validates the ordering poll ≤ safety ≤ escalate.
    pub fn try_new(poll_after: Duration, safety_at: Duration, escalate_at: Duration) -> Result<QueueTimers, PolicyError> {
        if poll_after > safety_at {
            return Err(PolicyError::BadTiming(format!(
                "the cutover poll ({poll_after:?}) must come no later than the safety hedge ({safety_at:?})"
            )));
        }
        if safety_at > escalate_at {
            return Err(PolicyError::BadTiming(format!(
                "the safety hedge ({safety_at:?}) must come no later than escalation ({escalate_at:?})"
            )));
        }
        Ok(QueueTimers { poll_after, safety_at, escalate_at })
    }
}

/// What the primary looked like at the cutover poll.
enum PollVerdict {
    /// A valid result already won.
    Won,
    /// Still queued: it was cancelled (in the background) and should be switched away from.
    Queued,
    /// Running, unknown, or already finished invalid: keep it (or move on at once).
    Kept,
}

async fn cutover_poll(race: &mut Race, primary: AttemptId, poll_after: Duration) -> PollVerdict {
    let poll_at = race.submit_returned(primary) + poll_after;
    if race.wait_until(Some(poll_at)).await == Wake::Winner {
        return PollVerdict::Won;
    }
    if race.is_resolved(primary) {
        return PollVerdict::Kept;
    }
    if race.poll_status(primary).await == crate::job::JobState::Queued {
        race.decisions.cutover_fired = true;
        race.cancel(primary, "still queued at cutover poll");
        PollVerdict::Queued
    } else {
        PollVerdict::Kept
    }
}

/// Launches each provider in `waiting` as soon as the live cap allows, until a winner
/// arrives or nothing is pending and nothing is left to launch.
async fn race_with_waiting(race: &mut Race, waiting: &[(usize, Role)]) {
    let mut queue = waiting.iter().copied();
    loop {
        if race.is_stopped() {
            return;
        }
        while race.live_count() < race.max_live() && race.winner().is_none() {
            let Some((provider, role)) = queue.next() else { break };
            if race.launch_extra(provider, role).await.is_some() && role == Role::Fallback {
                race.decisions.escalation_fired = true;
            }
        }
        match race.next(None).await {
            Wake::Winner => return,
            Wake::Idle if queue.len() == 0 => return,
            _ => {}
        }
    }
}

// === impl Cutover ===

/// Queue-state cutover: poll the primary at `poll_after`; if it is still queued, cancel
/// it (it stays in the race until the cancel is confirmed) and switch to the hedge at
/// once; otherwise keep it and arm a safety hedge at `safety_at`.
#[derive(Debug, Clone)]
pub struct Cutover {
    primary: usize,
    hedge: usize,
    timers: QueueTimers,
    label: String,
}

impl Cutover {
    /// Builds the policy; the primary must be able to report a queued state.
    pub fn try_new(providers: &[Provider], primary: &str, hedge: &str, timers: QueueTimers) -> Result<Cutover, PolicyError> {
        let (p, h) = (resolve(providers, primary)?, resolve(providers, hedge)?);
        distinct(providers, &[p, h])?;
        require_queue_signal(providers, p)?;
        let label = format!("cutover:{primary}->{hedge}@q{}s+s{}s", secs_label(timers.poll_after), secs_label(timers.safety_at));
        Ok(Cutover { primary: p, hedge: h, timers, label })
    }
}

#[async_trait]
impl Policy for Cutover {
    fn label(&self) -> &str {
        &self.label
    }

    async fn drive(&self, race: &mut Race) -> Result<(), RaceError> {
        let p = race.launch(self.primary, Role::Primary).await?;
        match cutover_poll(race, p, self.timers.poll_after).await {
            PollVerdict::Won => return Ok(()),
            PollVerdict::Queued => {
                race.launch_extra(self.hedge, Role::Hedge).await;
            }
            PollVerdict::Kept => {
                let safety = race.t0() + self.timers.safety_at;
                if race.wait_until(Some(safety)).await == Wake::Winner {
                    return Ok(());
                }
                if race.launch_extra(self.hedge, Role::Hedge).await.is_some() {
                    race.decisions.safety_hedge_fired = true;
                }
            }
        }
        race.wait_until(None).await;
        Ok(())
    }
}

// === impl Cascade ===

/// Cutover plus safety hedge plus escalation: at `escalate_at` (or earlier, as soon as
/// nothing is pending) a third provider launches — but only while fewer than `max_live`
/// attempts are live. A cancelled-but-unconfirmed attempt still counts.
#[derive(Debug, Clone)]
pub struct Cascade {
    primary: usize,
    hedge: usize,
    fallback: usize,
    timers: QueueTimers,
    label: String,
}

impl Cascade {
    /// Builds the policy; the primary must be able to report a queued state.
    pub fn try_new(
        providers: &[Provider],
        primary: &str,
        hedge: &str,
        fallback: &str,
        timers: QueueTimers,
    ) -> Result<Cascade, PolicyError> {
        let (p, h, f) = (resolve(providers, primary)?, resolve(providers, hedge)?, resolve(providers, fallback)?);
        distinct(providers, &[p, h, f])?;
        require_queue_signal(providers, p)?;
        let label = format!(
            "cascade:{primary}->{hedge}->{fallback}@q{}s+s{}s+e{}s",
            secs_label(timers.poll_after),
            secs_label(timers.safety_at),
            secs_label(timers.escalate_at)
        );
        Ok(Cascade { primary: p, hedge: h, fallback: f, timers, label })
    }
}

#[async_trait]
impl Policy for Cascade {
    fn label(&self) -> &str {
        &self.label
    }

    async fn drive(&self, race: &mut Race) -> Result<(), RaceError> {
        let p = race.launch(self.primary, Role::Primary).await?;
        match cutover_poll(race, p, self.timers.poll_after).await {
            PollVerdict::Won => return Ok(()),
            PollVerdict::Queued => {
                race.launch_extra(self.hedge, Role::Hedge).await;
            }
            PollVerdict::Kept => {
                let safety = race.t0() + self.timers.safety_at;
                if race.wait_until(Some(safety)).await == Wake::Winner {
                    return Ok(());
                }
                if race.launch_extra(self.hedge, Role::Hedge).await.is_some() {
                    race.decisions.safety_hedge_fired = true;
                }
            }
        }
        let escalate = race.t0() + self.timers.escalate_at;
        let mut fallback_tried = false;
        loop {
            if race.winner().is_some() || race.is_stopped() {
                return Ok(());
            }
            let pending = race.pending_count();
            if !fallback_tried && (pending == 0 || Instant::now() >= escalate) {
                if race.live_count() < race.max_live() {
                    fallback_tried = true;
                    if race.launch_extra(self.fallback, Role::Fallback).await.is_some() {
                        race.decisions.escalation_fired = true;
                    }
                    continue;
                }
                race.decisions.escalation_skipped_at_capacity = true;
            }
            if pending == 0 {
                return Ok(());
            }
            let deadline = (!fallback_tried && Instant::now() < escalate).then_some(escalate);
            if race.next(deadline).await == Wake::Winner {
                return Ok(());
            }
        }
    }
}

// === impl DeadlineTier ===

/// The critical tier: poll the primary at `poll_after`; if it is still queued, cancel it
/// and race the hedge and the fallback at once (the fallback as soon as the live cap
/// allows, i.e. when the queued cancel is confirmed or with `max_live` ≥ 3). A running
/// primary is kept, and at `safety_at` the hedge and then the fallback join it as
/// capacity allows.
#[derive(Debug, Clone)]
pub struct DeadlineTier {
    primary: usize,
    hedge: usize,
    fallback: usize,
    timers: QueueTimers,
    label: String,
}

impl DeadlineTier {
    /// Builds the policy; the primary must be able to report a queued state.
    pub fn try_new(
        providers: &[Provider],
        primary: &str,
        hedge: &str,
        fallback: &str,
        timers: QueueTimers,
    ) -> Result<DeadlineTier, PolicyError> {
        let (p, h, f) = (resolve(providers, primary)?, resolve(providers, hedge)?, resolve(providers, fallback)?);
        distinct(providers, &[p, h, f])?;
        require_queue_signal(providers, p)?;
        let label =
            format!("deadline:{primary}->{hedge}+{fallback}@q{}s+s{}s", secs_label(timers.poll_after), secs_label(timers.safety_at));
        Ok(DeadlineTier { primary: p, hedge: h, fallback: f, timers, label })
    }
}

#[async_trait]
impl Policy for DeadlineTier {
    fn label(&self) -> &str {
        &self.label
    }

    async fn drive(&self, race: &mut Race) -> Result<(), RaceError> {
        let p = race.launch(self.primary, Role::Primary).await?;
        match cutover_poll(race, p, self.timers.poll_after).await {
            PollVerdict::Won => return Ok(()),
            PollVerdict::Queued => {}
            PollVerdict::Kept => {
                let safety = race.t0() + self.timers.safety_at;
                if race.wait_until(Some(safety)).await == Wake::Winner {
                    return Ok(());
                }
                race.decisions.safety_hedge_fired = true;
            }
        }
        race_with_waiting(race, &[(self.hedge, Role::Hedge), (self.fallback, Role::Fallback)]).await;
        Ok(())
    }
}
