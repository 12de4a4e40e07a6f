//! The hedging engine: a [`Race`] runs attempts for one request, and the [`Hedger`]
//! drives a [`Policy`] over it, returns the winner at once and
//! settles the losers (cancels, receipts, trace) in the background.
//!
//! Invariants the engine itself enforces, whatever the policy does:
//! - the first *valid* result wins; invalid or failed results never win;
//! - at most `max_live` attempts are live (result not in, and no confirmed-terminal
//!   receipt); a launch past the cap is refused;
//! - every attempt still running when the race ends is cancelled and gets a receipt;
//!   attempts whose result already arrived are never cancelled;
//! - a cancel that errors or panics becomes a leaked receipt, never an error;
//! - the caller's result never waits for loser cleanup.
//!
//! Loser cleanup (cancels, receipts, the trace record) runs as a task on the hedger's
//! [`TaskTracker`], never detached: a server passes its own tracker
//! ([`Hedger::with_gate`]) and its drain waits on it, so no cancel or receipt of a race
//! it started can outlive the drain unseen. [`Hedger::new`] gives the hedger a tracker of
//! its own (see [`Hedger::tasks`]) for callers that wait on each [`Settled`] themselves.

mod launch;
mod policy;
mod race;
mod scope;

pub use launch::Launch;
pub use policy::Policy;
pub use race::{AttemptId, Race, Wake};
pub use scope::RunScope;

use crate::job::{JobRequest, JobResult};
use crate::ledger::{Account, BudgetGate, LedgerError};
use crate::money::MicroUsd;
use crate::provider::Provider;
use crate::trace::{Decisions, RequestTrace, TraceWriter};
use crate::validate::Validator;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::task::TaskTracker;

/// Caps extra attempts (hedges, fallbacks) relative to requests, so that a slow but
/// healthy upstream cannot multiply load.
pub trait HedgeGate: Send + Sync + fmt::Debug {
    /// A request started.
    fn request_started(&self);
    /// May one more extra attempt launch now? Consumes the allowance if so.
    fn try_extra(&self) -> bool;
}

/// Limits applied to every race.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RaceSettings {
    /// Most attempts live at once (default 2).
    pub max_live: usize,
    /// Per-attempt cap, measured from that attempt's own submit (default 300 s).
    pub cap: Duration,
}

impl Default for RaceSettings {
    fn default() -> Self {
        RaceSettings { max_live: 2, cap: Duration::from_secs(300) }
    }
}

/// Why a launch was refused (nothing was submitted), and so why a request could not be
/// raced when its first launch is refused.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum RaceError {
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

/// What a caller gets back as soon as the race has a winner (or cannot have one).
#[derive(Debug)]
pub struct Outcome {
    /// Request id.
    pub request_id: String,
    /// Policy label.
    pub policy: String,
    /// Winning provider.
    pub winner: Option<String>,
    /// The winning result (payload included).
    pub result: Option<JobResult>,
    /// End-to-end latency: the winner's launch offset plus its own wall time.
    pub latency: Option<Duration>,
    /// Attempts launched.
    pub attempts: usize,
    /// The attempts that ended without a valid result before the race ended, in launch
    /// order: the provider and why (its trace record's reasons).
    pub failures: Vec<(String, String)>,
    /// Policy decisions: the flags and counts (a learned policy's explanation is in the
    /// trace record, [`Outcome::settled`], not here).
    pub decisions: Decisions,
    /// Sum of projected charges.
    pub projected_cost: MicroUsd,
    /// Loser cleanup; resolves to the full trace record once every receipt is in.
    pub settled: Settled,
}

/// The trace record of a request, ready now or once loser cleanup finishes.
#[derive(Debug)]
pub struct Settled(SettledInner);

#[derive(Debug)]
enum SettledInner {
    Ready(Box<RequestTrace>),
    Pending(tokio::task::JoinHandle<RequestTrace>),
}

impl Settled {
    /// Waits for every receipt and returns the trace record. Dropping a `Settled`
    /// does not stop the cleanup: it runs (and writes the trace) regardless.
    pub async fn wait(self) -> Option<RequestTrace> {
        match self.0 {
            SettledInner::Ready(t) => Some(*t),
            SettledInner::Pending(h) => h.await.ok(),
        }
    }

    /// The record now if no loser needed cleanup, else `Err(self)` to wait on.
    pub fn ready(self) -> Result<RequestTrace, Settled> {
        match self.0 {
            SettledInner::Ready(t) => Ok(*t),
            pending => Err(Settled(pending)),
        }
    }
}

/// Runs policies over a fixed set of providers with one validator, budget and trace.
#[derive(Clone)]
pub struct Hedger {
    shared: Arc<Shared>,
}

pub(crate) struct Shared {
    pub(crate) providers: Arc<[Provider]>,
    pub(crate) validator: Arc<dyn Validator>,
    pub(crate) budget: Arc<dyn BudgetGate>,
    pub(crate) trace: Option<Arc<TraceWriter>>,
    pub(crate) settings: RaceSettings,
    pub(crate) hedge_gate: Option<Arc<dyn HedgeGate>>,
    /// Where each race's settle task (loser cancels, receipts, trace write) runs.
    pub(crate) tasks: TaskTracker,
}

impl Shared {
    /// Charges provider `index`'s projected submission cost, to `account` (the race's
    /// scope's) as well as the global limits when there is one; nothing may be submitted
    /// unless this succeeds. Returns the amount charged.
    pub(crate) async fn charge_launch(
        &self,
        index: usize,
        request_id: &str,
        opens_request: bool,
        account: Option<&Account>,
    ) -> Result<MicroUsd, LedgerError> {
        let Some(entry) = self.providers.get(index) else { return Ok(MicroUsd::ZERO) };
        let charge = entry.projected_charge(request_id, opens_request);
        match account {
            Some(account) => self.budget.charge_account_async(&charge, account).await?,
            None => self.budget.charge_async(&charge).await?,
        };
        Ok(charge.amount)
    }
}

impl fmt::Debug for Hedger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hedger")
            .field("providers", &self.shared.providers.iter().map(|p| p.name.as_str()).collect::<Vec<_>>())
            .field("settings", &self.shared.settings)
            .finish_non_exhaustive()
    }
}

impl Hedger {
    /// A hedger over `providers`.
    pub fn new(
        providers: Vec<Provider>,
        validator: Arc<dyn Validator>,
        budget: Arc<dyn BudgetGate>,
        settings: RaceSettings,
        trace: Option<Arc<TraceWriter>>,
    ) -> Hedger {
        Hedger::with_gate(providers, validator, budget, settings, trace, None, TaskTracker::new())
    }

    /// A hedger whose extra attempts also pass a hedge-load cap, and whose races settle
    /// (cancel losers, collect receipts, write the trace) as tasks on `tasks`: waiting on
    /// that tracker waits for every cancel and receipt of every race this hedger ran.
    pub fn with_gate(
        providers: Vec<Provider>,
        validator: Arc<dyn Validator>,
        budget: Arc<dyn BudgetGate>,
        settings: RaceSettings,
        trace: Option<Arc<TraceWriter>>,
        hedge_gate: Option<Arc<dyn HedgeGate>>,
        tasks: TaskTracker,
    ) -> Hedger {
        let settings = RaceSettings { max_live: settings.max_live.max(1), ..settings };
        Hedger { shared: Arc::new(Shared { providers: providers.into(), validator, budget, trace, settings, hedge_gate, tasks }) }
    }

    /// The tracker this hedger's races settle on.
    pub fn tasks(&self) -> &TaskTracker {
        &self.shared.tasks
    }

    /// The providers, in the order given.
    pub fn providers(&self) -> &[Provider] {
        &self.shared.providers
    }

    /// The race limits.
    pub fn settings(&self) -> RaceSettings {
        self.shared.settings
    }

    /// Races `request` under `policy` in the default scope (see [`Hedger::run_scoped`]).
    /// Returns as soon as a winner is known or no attempt can produce one; loser
    /// cancellation and the trace write continue in the background (see
    /// [`Outcome::settled`]).
    pub async fn run(&self, policy: &dyn Policy, request: JobRequest) -> Result<Outcome, RaceError> {
        self.run_scoped(policy, request, RunScope::new()).await
    }

    /// Like [`Hedger::run`], but when `stop` resolves first the race ends at once (see
    /// [`Hedger::run_scoped`]).
    pub async fn run_until(
        &self,
        policy: &dyn Policy,
        request: JobRequest,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<Outcome, RaceError> {
        self.run_scoped(policy, request, RunScope::new().stop(stop)).await
    }

    /// Like [`Hedger::run`] with a deadline: at `stop_at` the race ends as if stopped
    /// (see [`Hedger::run_scoped`]).
    pub async fn run_by(&self, policy: &dyn Policy, request: JobRequest, stop_at: tokio::time::Instant) -> Result<Outcome, RaceError> {
        self.run_scoped(policy, request, RunScope::new().stop_at(Some(stop_at))).await
    }

    /// Races `request` under `policy` in `scope`:
    /// - every launch is charged to the scope's account (if any) with the global limits;
    /// - the race stops at the scope's `stop_at`, or when its `stop` resolves, whichever
    ///   comes first: every attempt still running is cancelled (with receipts),
    ///   `decisions.stopped_by_caller` is set, and the outcome has no winner unless one
    ///   had already arrived. A submit already in flight is allowed to finish (so its job
    ///   is known and can be cancelled): dropping it could leave a provider job nobody
    ///   knows about. The deadline shares one timer with the policy's own;
    /// - every attempt's provider reads the scope's stream hand-over and job tag from the
    ///   request ([`JobRequest::handoff`], [`JobRequest::job`]).
    pub async fn run_scoped(&self, policy: &dyn Policy, request: JobRequest, scope: RunScope) -> Result<Outcome, RaceError> {
        let RunScope { account, stop_at, stop, handoff, job } = scope;
        let mut race = self.race(policy, request.scoped(handoff, job), account);
        if let Some(at) = stop_at {
            race.set_stop_at(at);
        }
        if let Some(stop) = stop {
            race.set_stop(stop);
        }
        self.drive(policy, race).await
    }

    fn race(&self, policy: &dyn Policy, request: JobRequest, account: Option<Arc<Account>>) -> Race {
        if let Some(g) = &self.shared.hedge_gate {
            g.request_started();
        }
        Race::new(self.shared.clone(), request, account, policy.label().to_string(), policy.kind())
    }

    async fn drive(&self, policy: &dyn Policy, mut race: Race) -> Result<Outcome, RaceError> {
        let driven = policy.drive(&mut race).await;
        let outcome = race.finish();
        match driven {
            Ok(()) | Err(RaceError::Stopped) => Ok(outcome),
            Err(e) => Err(e),
        }
    }
}
