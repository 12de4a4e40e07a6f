//! One request's race: launching attempts, waiting for the first valid result,
//! cancelling in the background, and settling losers once a winner is known.

use super::{Outcome, Settled, SettledInner, Shared};
use crate::job::{JobRequest, JobResult, JobState};
use crate::ledger::LedgerError;
use crate::money::MicroUsd;
use crate::provider::{CancelContext, Job};
use crate::receipt::{offset_ms, Receipt};
use crate::trace::{now_rfc3339, AttemptTrace, Decisions, RequestTrace, Role, StatePoll, REQUEST_KIND, SCHEMA_VERSION};
use crate::validate::judge;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use tokio::time::{sleep_until, Instant};

/// Index of an attempt within its race, in launch order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AttemptId(pub usize);

/// Why a launch was refused. Nothing was submitted.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum LaunchError {
    /// The ledger refused the projected charge.
    #[error(transparent)]
    Budget(#[from] LedgerError),
    /// `max_live` attempts are already live.
    #[error("live-attempt cap of {0} reached")]
    AtCapacity(usize),
    /// The caller stopped the race.
    #[error("stopped by the caller")]
    Stopped,
}

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

struct Resolved {
    state: JobState,
    valid: bool,
    reasons: Vec<String>,
    wall_ms: f64,
    metrics: serde_json::Map<String, serde_json::Value>,
}

struct Attempt {
    provider: usize,
    role: Role,
    job: Option<Arc<dyn Job>>,
    job_id: Option<String>,
    submit_started: Instant,
    submit_returned: Instant,
    resolved: Option<Resolved>,
    receipt: Option<Receipt>,
    cancelling: bool,
    polls: Vec<StatePoll>,
    projected: MicroUsd,
    submit_error: Option<String>,
}

impl Attempt {
    fn pending(&self) -> bool {
        self.job.is_some() && self.resolved.is_none()
    }

    fn live(&self) -> bool {
        self.pending() && !self.receipt.as_ref().is_some_and(|r| r.confirmed_terminal)
    }
}

type ResultFuture = BoxFuture<'static, (usize, JobResult)>;
type CancelFuture = BoxFuture<'static, (usize, Receipt)>;

/// The state of one request's race. Policies drive it through `launch`, `poll_status`,
/// `cancel` and the waits; the engine enforces the invariants.
pub struct Race {
    shared: Arc<Shared>,
    request: JobRequest,
    policy: String,
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
    /// Decision flags the policy sets; written to the trace.
    pub decisions: Decisions,
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

fn cancel_future(index: usize, provider: String, job: Arc<dyn Job>, epoch: Instant, reason: String) -> CancelFuture {
    let job_id = job.job_id();
    let fut = async move {
        // Poll first so `was_running` is current.
        let state_before = job.status().await.ok();
        let sent_at = Instant::now();
        let ctx = CancelContext { reason: reason.clone(), epoch, sent_at, state_before };
        match AssertUnwindSafe(job.cancel(ctx.clone())).catch_unwind().await {
            Ok(Ok(mut receipt)) => {
                if receipt.reason.is_empty() {
                    receipt.reason = reason;
                }
                receipt
            }
            Ok(Err(e)) => {
                let mut r = Receipt::cancel_failed(provider, job_id, ctx.ms(sent_at), &e.to_string());
                r.reason = reason;
                r.state_before_cancel = state_before;
                r.was_running = state_before == Some(JobState::Running);
                r
            }
            Err(_) => {
                let mut r = Receipt::cancel_failed(provider, job_id, ctx.ms(sent_at), "backend panicked during cancel");
                r.reason = reason;
                r
            }
        }
    };
    fut.map(move |r| (index, r)).boxed()
}

impl Race {
    pub(crate) fn new(shared: Arc<Shared>, request: JobRequest, policy: String) -> Race {
        Race {
            shared,
            request,
            policy,
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

    /// Submits to a provider. The projected cost is charged first; a refusal submits
    /// nothing. A failed submit is not an error: the attempt is recorded as resolved
    /// and invalid, so policies move on at once.
    pub async fn launch(&mut self, provider: usize, role: Role) -> Result<AttemptId, LaunchError> {
        if self.is_stopped() {
            return Err(LaunchError::Stopped);
        }
        let live = self.live_count();
        if live >= self.shared.settings.max_live {
            return Err(LaunchError::AtCapacity(self.shared.settings.max_live));
        }
        let projected = self.shared.charge_launch(provider, &self.request.request_id, self.attempts.is_empty())?;
        let backend = self.shared.providers[provider].api.clone();
        let submit_started = Instant::now();
        let submitted = AssertUnwindSafe(backend.submit(&self.request)).catch_unwind().await;
        let submit_returned = Instant::now();
        let index = self.attempts.len();
        let mut attempt = Attempt {
            provider,
            role,
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
        Ok(AttemptId(index))
    }

    /// Like [`Race::launch`] for a hedge, fallback or extra racer: a refusal is recorded
    /// in the decisions and the race carries on with what it has.
    pub async fn launch_extra(&mut self, provider: usize, role: Role) -> Option<AttemptId> {
        if !self.attempts.is_empty() {
            if let Some(g) = &self.shared.hedge_gate {
                if self.live_count() < self.shared.settings.max_live && !g.try_extra() {
                    self.decisions.hedges_denied += 1;
                    return None;
                }
            }
        }
        match self.launch(provider, role).await {
            Ok(id) => Some(id),
            Err(LaunchError::Budget(_)) => {
                self.decisions.budget_refusals += 1;
                None
            }
            Err(LaunchError::AtCapacity(_) | LaunchError::Stopped) => None,
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
    pub fn cancel(&mut self, id: AttemptId, reason: &str) {
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

    /// Ends the race: returns the outcome at once; losers are cancelled and the trace
    /// record written in the background.
    pub(crate) fn finish(mut self) -> Outcome {
        self.stop = None;
        // Results that are already in are recorded, so finished attempts are never cancelled.
        while let Some(Some((i, result))) = self.results.next().now_or_never() {
            self.on_result(i, result);
        }
        for i in 0..self.attempts.len() {
            if Some(i) != self.winner {
                self.cancel(AttemptId(i), "lost the race");
            }
        }
        let winner = self.winner.map(|i| self.shared.providers[self.attempts[i].provider].name.clone());
        let latency = self.winner.and_then(|i| {
            let a = &self.attempts[i];
            let r = self.winner_result.as_ref()?;
            Some(r.finished.saturating_duration_since(self.t0).max(a.submit_started.saturating_duration_since(self.t0)))
        });
        let projected_cost = self.attempts.iter().map(|a| a.projected).sum();
        let outcome_head = (self.request.request_id.clone(), self.policy.clone(), self.attempts.len(), self.decisions.clone());
        let result = self.winner_result.take();
        let settled = if self.cancels.as_ref().is_none_or(FuturesUnordered::is_empty) {
            let record = self.into_record();
            Settled(SettledInner::Ready(Box::new(record)))
        } else {
            Settled(SettledInner::Pending(tokio::spawn(async move {
                while let Some((i, receipt)) = match self.cancels.as_mut() {
                    Some(c) => c.next().await,
                    None => None,
                } {
                    self.on_receipt(i, receipt);
                }
                self.into_record()
            })))
        };
        let (request_id, policy, attempts, decisions) = outcome_head;
        Outcome { request_id, policy, winner, result, latency, attempts, decisions, projected_cost, settled }
    }

    fn into_record(mut self) -> RequestTrace {
        let request_id = std::mem::take(&mut self.request.request_id);
        let policy = std::mem::take(&mut self.policy);
        let decisions = std::mem::take(&mut self.decisions);
        let providers = &self.shared.providers;
        let winner = self.winner.map(|i| &self.attempts[i]);
        let winner_valid_at_ms = winner.and_then(|a| a.resolved.as_ref()).map(|r| r.wall_ms);
        let winner_total_ms =
            winner.and_then(|a| a.resolved.as_ref().map(|r| ((offset_ms(self.t0, a.submit_started) + r.wall_ms) * 10.0).round() / 10.0));
        let record = RequestTrace {
            kind: REQUEST_KIND.to_string(),
            schema_version: SCHEMA_VERSION,
            ts: now_rfc3339(),
            request_id,
            policy,
            decisions,
            winner: winner.map(|a| providers[a.provider].name.clone()),
            winner_valid_at_ms,
            winner_total_ms,
            receipts: self.attempts.iter().filter_map(|a| a.receipt.clone()).collect(),
            projected_cost_micro_usd: self.attempts.iter().map(|a| a.projected).sum(),
            attempts: self
                .attempts
                .into_iter()
                .map(|a| AttemptTrace {
                    provider: providers[a.provider].name.clone(),
                    role: a.role,
                    job_id: a.job_id,
                    submit_offset_ms: offset_ms(self.t0, a.submit_started),
                    submit_returned_ms: offset_ms(self.t0, a.submit_returned),
                    polls: a.polls,
                    outcome: a.resolved.as_ref().map(|r| r.state),
                    valid: a.resolved.as_ref().map(|r| r.valid),
                    reasons: a.resolved.as_ref().map(|r| r.reasons.clone()).unwrap_or_default(),
                    wall_ms: a.resolved.as_ref().map(|r| r.wall_ms),
                    metrics: a.resolved.map(|r| r.metrics).unwrap_or_default(),
                    projected_cost_micro_usd: a.projected,
                    submit_error: a.submit_error,
                })
                .collect(),
        };
        if let Some(w) = &self.shared.trace {
            if let Err(e) = w.write(&record) {
                tracing_fallback(&e.to_string());
            }
        }
        record
    }
}

/// Trace-write failures must never fail a request; they are reported on stderr.
fn tracing_fallback(message: &str) {
    eprintln!("tailcut: could not write trace record: {message}");
}
