//! One request's race: launching attempts, waiting for the first valid result,
//! cancelling in the background, and recording the race's decisions as it goes.
//! Settling the losers once the race ends is in [`settle`].

mod attempt;
mod settle;

use super::launch::Launch;
use super::{RaceError, Shared};
use crate::job::{JobRequest, JobResult, JobState};
use crate::ledger::Account;
use crate::receipt::{offset_ms, Receipt};
use crate::trace::{Decisions, LearnedChoice, RefusedBy, StatePoll};
use crate::validate::judge;
use attempt::{cancel_future, Attempt, CancelFuture, Resolved, ResultFuture};
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use tokio::time::{sleep_until, Instant};

/// A launch every limit allowed, its projected cost charged: what remains is the submit.
struct Reserved {
    provider: usize,
    projected: crate::money::MicroUsd,
}

/// Why a launch was refused before anything was submitted.
enum Refused {
    /// Stopped, at the live cap, or the budget.
    Race(RaceError),
    /// The hedge-load cap.
    HedgeGate,
}

impl Refused {
    /// The trace's name for it (none for a stopped race).
    fn by(&self) -> Option<RefusedBy> {
        match self {
            Refused::HedgeGate => Some(RefusedBy::HedgeGate),
            Refused::Race(RaceError::Budget(_)) => Some(RefusedBy::Budget),
            Refused::Race(RaceError::AtCapacity(_)) => Some(RefusedBy::LiveCap),
            Refused::Race(RaceError::Stopped) => None,
        }
    }
}

/// Index of an attempt within its race, in launch order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AttemptId(pub usize);

/// What woke a wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// A valid result arrived: the race has a winner.
    Winner,
    /// The deadline passed with no winner.
    Deadline,
    /// No attempt is pending: nothing more can arrive.
    Idle,
    /// Something changed (an invalid result, a cancel receipt) and attempts are still pending.
    Progress,
    /// The caller stopped the race: launch nothing more and return.
    Stopped,
}

/// The state of one request's race. Policies drive it through `launch`, `launch_extra`,
/// `poll_status`, `cut_over` and the waits; the engine enforces the invariants.
pub struct Race {
    shared: Arc<Shared>,
    request: JobRequest,
    /// The account every launch is charged to with the global limits (the scope's).
    account: Option<Arc<Account>>,
    policy: String,
    policy_kind: crate::PolicyKind,
    t0: Instant,
    attempts: Vec<Attempt>,
    results: FuturesUnordered<ResultFuture>,
    /// Cancels in flight; made on the first cancel (most races have none).
    cancels: Option<FuturesUnordered<CancelFuture>>,
    winner: Option<usize>,
    winner_result: Option<JobResult>,
    stop: Option<BoxFuture<'static, ()>>,
    /// When the caller's time runs out: the race stops as if `stop` had resolved. Kept
    /// apart from `stop` so that a wait sets one timer for it and its own deadline.
    stop_at: Option<Instant>,
    /// What the race decided and refused, recorded by the race itself as launches,
    /// polls, cutovers and stops happen; written to the trace.
    decisions: Decisions,
}

impl fmt::Debug for Race {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Race")
            .field("request", &self.request.request_id)
            .field("policy", &self.policy)
            .field("attempts", &self.attempts.len())
            .field("winner", &self.winner)
            .finish_non_exhaustive()
    }
}

impl Race {
    pub(crate) fn new(
        shared: Arc<Shared>,
        request: JobRequest,
        account: Option<Arc<Account>>,
        policy: String,
        policy_kind: crate::PolicyKind,
    ) -> Race {
        Race {
            shared,
            request,
            account,
            policy,
            policy_kind,
            t0: Instant::now(),
            attempts: Vec::with_capacity(2),
            results: FuturesUnordered::new(),
            cancels: None,
            winner: None,
            winner_result: None,
            stop: None,
            stop_at: None,
            decisions: Decisions::default(),
        }
    }

    pub(crate) fn set_stop(&mut self, stop: BoxFuture<'static, ()>) {
        self.stop = Some(stop);
    }

    pub(crate) fn set_stop_at(&mut self, at: Instant) {
        self.stop_at = Some(at);
    }

    /// Whether the caller stopped the race (policies must then return).
    pub fn is_stopped(&self) -> bool {
        self.decisions.stopped_by_caller
    }

    /// When the request started; safety and escalation deadlines count from here.
    pub fn t0(&self) -> Instant {
        self.t0
    }

    /// The live-attempt cap.
    pub fn max_live(&self) -> usize {
        self.shared.settings.max_live
    }

    /// Milliseconds since t0.
    pub fn ms(&self, at: Instant) -> f64 {
        offset_ms(self.t0, at)
    }

    /// Attempts whose result has not arrived and that have no confirmed-terminal receipt.
    pub fn live_count(&self) -> usize {
        self.attempts.iter().filter(|a| a.live()).count()
    }

    /// Attempts whose result has not arrived.
    pub fn pending_count(&self) -> usize {
        self.attempts.iter().filter(|a| a.pending()).count()
    }

    /// Attempts launched (including failed submits).
    pub fn attempt_count(&self) -> usize {
        self.attempts.len()
    }

    /// Whether the attempt's result has arrived (or its submit failed).
    pub fn is_resolved(&self, id: AttemptId) -> bool {
        self.attempts.get(id.0).is_none_or(|a| !a.pending())
    }

    /// When the attempt's submit returned; timer hedges and cutover polls count from here.
    pub fn submit_returned(&self, id: AttemptId) -> Instant {
        self.attempts.get(id.0).map_or(self.t0, |a| a.submit_returned)
    }

    /// The winning attempt, once there is one.
    pub fn winner(&self) -> Option<AttemptId> {
        self.winner.map(AttemptId)
    }

    /// What the race has decided so far (the trace's decision flags).
    pub fn decisions(&self) -> &Decisions {
        &self.decisions
    }

    /// Submits to a provider, for the reason `launch` (which gives the attempt's role and
    /// the decision recorded once it goes through). The projected cost is charged first;
    /// a refusal submits nothing. A failed submit is not an error: the attempt is
    /// recorded as resolved and invalid, so policies move on at once.
    pub async fn launch(&mut self, provider: usize, launch: Launch) -> Result<AttemptId, RaceError> {
        match self.reserve(provider, false).await {
            Ok(reserved) => Ok(self.submit(reserved, launch).await),
            Err(Refused::Race(e)) => Err(e),
            // Not asked for a first launch.
            Err(Refused::HedgeGate) => Err(RaceError::Stopped),
        }
    }

    /// Like [`Race::launch`] for a hedge, fallback or extra racer: a refusal is recorded
    /// in the decisions (`hedges_denied`, `budget_refusals`, and for an escalation
    /// `escalation_skipped_at_capacity`) and the race carries on with what it has.
    pub async fn launch_extra(&mut self, provider: usize, launch: Launch) -> Option<AttemptId> {
        match self.reserve(provider, true).await {
            Ok(reserved) => Some(self.submit(reserved, launch).await),
            Err(refused) => {
                self.record_refused(&refused, launch);
                None
            }
        }
    }

    /// Records an extra attempt that the policy's own load budget refused (a learned
    /// policy's token bucket); counted in `hedges_denied` like the hedger's own gate.
    pub fn deny_extra(&mut self) {
        self.decisions.hedges_denied += 1;
    }

    /// Records a cutover that the policy's own load budget refused (a learned policy's
    /// token bucket): `hedges_denied`, and `cutover_refused` = hedge gate. The primary
    /// is kept.
    pub fn deny_cutover(&mut self) {
        self.decisions.hedges_denied += 1;
        self.decisions.cutover_refused = Some(RefusedBy::HedgeGate);
    }

    /// Records why a learned policy chose this request's plan (`decisions.learned`).
    pub fn explain(&mut self, choice: LearnedChoice) {
        self.decisions.learned = Some(choice);
    }

    /// Cuts attempt `from` (a primary still queued at the cutover poll) over to provider
    /// `to`, in the only order that cannot lose the race its last chance: the
    /// replacement is reserved first (live cap, hedge-load cap, budget), then submitted,
    /// and only once its submit went through is `from` cancelled (it stays in the race
    /// until the cancel is confirmed). Records `cutover_fired` and returns the
    /// replacement's id.
    ///
    /// When anything refuses the replacement, or its submit fails, nothing is given up:
    /// `from` keeps running, the refusal is counted as for [`Race::launch_extra`] and
    /// `cutover_refused` says why; returns `None`. A result `from` delivered meanwhile
    /// is taken before the cancel (a finished attempt is never cancelled).
    ///
    /// This is the engine's only way for a policy to cancel an attempt before the race
    /// ends, so no policy can cancel first and ask for its replacement afterwards.
    pub async fn cut_over(&mut self, from: AttemptId, to: usize) -> Option<AttemptId> {
        let reserved = match self.reserve(to, true).await {
            Ok(r) => r,
            Err(refused) => {
                self.record_refused(&refused, Launch::CutoverTarget);
                if let Some(by) = refused.by() {
                    self.decisions.cutover_refused = Some(by);
                }
                return None;
            }
        };
        let id = self.submit(reserved, Launch::CutoverTarget).await;
        if self.attempts[id.0].submit_error.is_some() {
            self.decisions.cutover_refused = Some(RefusedBy::SubmitFailed);
            return None;
        }
        self.decisions.cutover_fired = true;
        self.take_ready_results();
        if self.winner.is_none() {
            self.cancel(from, "still queued at cutover poll");
        }
        Some(id)
    }

    /// Asks every limit for one launch to `provider`, in order: the caller's stop, the
    /// live cap, the hedge-load cap (for an `extra` launch once the race has an
    /// attempt), then the budget, which charges the projected cost. Nothing is submitted
    /// and nothing given up here; what passes is submitted by [`Race::submit`].
    async fn reserve(&mut self, provider: usize, extra: bool) -> Result<Reserved, Refused> {
        if self.is_stopped() {
            return Err(Refused::Race(RaceError::Stopped));
        }
        if self.live_count() >= self.shared.settings.max_live {
            return Err(Refused::Race(RaceError::AtCapacity(self.shared.settings.max_live)));
        }
        if extra && !self.attempts.is_empty() {
            if let Some(g) = &self.shared.hedge_gate {
                if !g.try_extra() {
                    return Err(Refused::HedgeGate);
                }
            }
        }
        let projected = self
            .shared
            .charge_launch(provider, &self.request.request_id, self.attempts.is_empty(), self.account.as_deref())
            .await
            .map_err(|e| Refused::Race(RaceError::Budget(e)))?;
        Ok(Reserved { provider, projected })
    }

    /// Counts a refused extra launch in the decisions.
    fn record_refused(&mut self, refused: &Refused, launch: Launch) {
        match refused {
            Refused::HedgeGate => self.decisions.hedges_denied += 1,
            Refused::Race(RaceError::Budget(_)) => self.decisions.budget_refusals += 1,
            Refused::Race(RaceError::AtCapacity(_)) => launch.record_at_capacity(&mut self.decisions),
            Refused::Race(RaceError::Stopped) => {}
        }
    }

    /// Submits a reserved launch. A failed submit is recorded as a resolved, invalid
    /// attempt.
    async fn submit(&mut self, reserved: Reserved, launch: Launch) -> AttemptId {
        let Reserved { provider, projected } = reserved;
        let backend = self.shared.providers[provider].api.clone();
        let submit_started = Instant::now();
        let submitted = AssertUnwindSafe(backend.submit(&self.request)).catch_unwind().await;
        let submit_returned = Instant::now();
        let index = self.attempts.len();
        let mut attempt = Attempt {
            provider,
            role: launch.role(),
            job: None,
            job_id: None,
            submit_started,
            submit_returned,
            resolved: None,
            receipt: None,
            cancelling: false,
            polls: Vec::new(),
            projected,
            submit_error: None,
        };
        let failure = match submitted {
            Ok(Ok(job)) => {
                attempt.job_id = job.job_id();
                let deadline = submit_started + self.shared.settings.cap;
                let waiting = job.clone();
                let fut = AssertUnwindSafe(async move { waiting.result(deadline).await })
                    .catch_unwind()
                    .map(move |r| (index, r.unwrap_or_else(|_| JobResult::bare(JobState::Failed, Some("backend panicked".into())))));
                self.results.push(fut.boxed());
                attempt.job = Some(job);
                None
            }
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some("backend panicked during submit".to_string()),
        };
        if let Some(error) = failure {
            attempt.resolved = Some(Resolved {
                state: JobState::Failed,
                valid: false,
                reasons: vec![format!("submit failed: {error}")],
                wall_ms: offset_ms(submit_started, submit_returned),
                metrics: serde_json::Map::new(),
            });
            attempt.submit_error = Some(error);
        }
        self.attempts.push(attempt);
        launch.record_launched(&mut self.decisions, index == 0);
        AttemptId(index)
    }

    /// Records the results that are already in, without waiting.
    fn take_ready_results(&mut self) {
        while let Some(Some((i, result))) = self.results.next().now_or_never() {
            self.on_result(i, result);
        }
    }

    /// Polls an attempt's status and records it. A failed poll reads as `UNKNOWN`.
    pub async fn poll_status(&mut self, id: AttemptId) -> JobState {
        let Some(job) = self.attempts.get(id.0).and_then(|a| a.job.clone()) else {
            return JobState::Unknown;
        };
        let at = Instant::now();
        let (state, error) = match AssertUnwindSafe(job.status()).catch_unwind().await {
            Ok(Ok(s)) => (s, None),
            Ok(Err(e)) => (JobState::Unknown, Some(e.to_string())),
            Err(_) => (JobState::Unknown, Some("backend panicked during status".into())),
        };
        let at_ms = self.ms(at);
        if id.0 == 0 && self.decisions.poll_at_ms.is_none() {
            self.decisions.state_at_poll = Some(state);
            self.decisions.poll_at_ms = Some(at_ms);
            self.decisions.poll_latency_ms = Some(offset_ms(at, Instant::now()));
            self.decisions.poll_error.clone_from(&error);
        }
        if let Some(a) = self.attempts.get_mut(id.0) {
            a.polls.push(StatePoll { at_ms, state, error });
        }
        state
    }

    /// Starts cancelling an attempt in the background. It stays in the race (and counts
    /// as live) until its result arrives or a confirmed-terminal receipt comes back.
    /// Private to the engine: a policy gives an attempt up only through
    /// [`Race::cut_over`], which has its replacement submitted first; the rest are
    /// cancelled when the race ends.
    fn cancel(&mut self, id: AttemptId, reason: &str) {
        let Some(a) = self.attempts.get_mut(id.0) else { return };
        if !a.pending() || a.cancelling || a.receipt.is_some() {
            return;
        }
        let Some(job) = a.job.clone() else { return };
        a.cancelling = true;
        let provider = self.shared.providers[a.provider].name.clone();
        self.cancels.get_or_insert_with(FuturesUnordered::new).push(cancel_future(id.0, provider, job, self.t0, reason.to_string()));
    }

    fn on_result(&mut self, index: usize, result: JobResult) {
        let Some(a) = self.attempts.get_mut(index) else { return };
        if a.resolved.is_some() {
            return;
        }
        let verdict = judge(self.shared.validator.as_ref(), &result);
        a.resolved = Some(Resolved {
            state: result.state,
            valid: verdict.valid,
            reasons: verdict.reasons,
            wall_ms: offset_ms(a.submit_started, result.finished.max(a.submit_started)),
            metrics: result.metrics.clone(),
        });
        if verdict.valid && self.winner.is_none() {
            self.winner = Some(index);
            self.winner_result = Some(result);
        }
    }

    fn on_receipt(&mut self, index: usize, receipt: Receipt) {
        let Some(a) = self.attempts.get_mut(index) else { return };
        a.cancelling = false;
        if receipt.confirmed_terminal && a.resolved.is_none() {
            // Proven stopped: it can no longer deliver, so it stops holding the race open.
            a.resolved = Some(Resolved {
                state: receipt.terminal_status.unwrap_or(JobState::Cancelled),
                valid: false,
                reasons: vec!["cancelled".into()],
                wall_ms: receipt.terminal_ms.map_or(0.0, |t| t - offset_ms(self.t0, a.submit_started)),
                metrics: serde_json::Map::new(),
            });
        }
        a.receipt = Some(receipt);
    }

    /// Waits for the next event: a result, a cancel receipt or the deadline.
    pub async fn next(&mut self, deadline: Option<Instant>) -> Wake {
        if self.winner.is_some() {
            return Wake::Winner;
        }
        if self.is_stopped() {
            return Wake::Stopped;
        }
        if self.pending_count() == 0 {
            return Wake::Idle;
        }
        let stop = async {
            match self.stop.as_mut() {
                Some(s) => s.await,
                None => futures::future::pending::<()>().await,
            }
        };
        // One timer for the earlier of the wait's deadline and the caller's.
        let stop_at = self.stop_at;
        let (until, stops) = match (deadline, stop_at) {
            (Some(d), Some(s)) if s <= d => (Some(s), true),
            (None, Some(s)) => (Some(s), true),
            (d, _) => (d, false),
        };
        let sleep = async {
            match until {
                Some(d) => sleep_until(d).await,
                None => futures::future::pending::<()>().await,
            }
        };
        let cancels = async {
            match self.cancels.as_mut().filter(|c| !c.is_empty()) {
                Some(c) => c.next().await,
                None => futures::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            Some((i, result)) = self.results.next(), if !self.results.is_empty() => self.on_result(i, result),
            Some((i, receipt)) = cancels => self.on_receipt(i, receipt),
            () = sleep => {
                if stops {
                    self.stop_at = None;
                    self.decisions.stopped_by_caller = true;
                    return Wake::Stopped;
                }
                return Wake::Deadline;
            }
            () = stop => {
                self.stop = None;
                self.decisions.stopped_by_caller = true;
                return Wake::Stopped;
            }
        }
        if self.winner.is_some() {
            Wake::Winner
        } else if self.pending_count() == 0 {
            Wake::Idle
        } else {
            Wake::Progress
        }
    }

    /// Waits until a winner, the deadline, or nothing pending (an invalid result that
    /// leaves nothing in flight wakes it at once).
    pub async fn wait_until(&mut self, deadline: Option<Instant>) -> Wake {
        loop {
            match self.next(deadline).await {
                Wake::Progress => continue,
                other => return other,
            }
        }
    }
}
