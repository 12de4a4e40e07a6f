//! What one race runs under besides its request and policy, given explicitly by its
//! caller ([`RunScope`]): the account its launches are charged to, when and on what it
//! stops, the stream hand-over and the job tag its attempts' providers read. Nothing of a
//! race travels in a task-local or a type-erased value.

use crate::handover::StreamHandoff;
use crate::job::JobTag;
use crate::ledger::Account;
use futures::future::BoxFuture;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use tokio::time::Instant;

/// One race's scope, given to [`Hedger::run_scoped`](super::Hedger::run_scoped). The
/// default scope charges no account, never stops early and hands nothing over.
#[derive(Default)]
pub struct RunScope {
    /// Every launch is charged to this account together with the global limits, in one
    /// ledger step ([`BudgetGate::charge_account_async`](crate::ledger::BudgetGate::charge_account_async)).
    pub(crate) account: Option<Arc<Account>>,
    /// The race stops (live attempts cancelled with receipts) at this instant.
    pub(crate) stop_at: Option<Instant>,
    /// The race stops when this resolves.
    pub(crate) stop: Option<BoxFuture<'static, ()>>,
    /// Where a stream provider's job hands its stream over ([`crate::JobRequest::handoff`]).
    pub(crate) handoff: Option<StreamHandoff>,
    /// The caller's job the race runs for ([`crate::JobRequest::job`]).
    pub(crate) job: Option<Arc<JobTag>>,
}

impl RunScope {
    /// The default scope.
    pub fn new() -> RunScope {
        RunScope::default()
    }

    /// Launches charged to `account` as well as to the global limits (none: the global
    /// limits only).
    pub fn account(mut self, account: Option<Arc<Account>>) -> RunScope {
        self.account = account;
        self
    }

    /// The race stops at `at` (none: no deadline of the caller's).
    pub fn stop_at(mut self, at: Option<Instant>) -> RunScope {
        self.stop_at = at;
        self
    }

    /// The race stops when `stop` resolves (say, the caller went away); given several,
    /// when the first of them resolves.
    pub fn stop(mut self, stop: impl Future<Output = ()> + Send + 'static) -> RunScope {
        let stop: BoxFuture<'static, ()> = Box::pin(stop);
        self.stop = Some(match self.stop.take() {
            None => stop,
            Some(first) => Box::pin(async move {
                futures::future::select(first, stop).await;
            }),
        });
        self
    }

    /// Stream providers' jobs hand their streams over in `handoff`.
    pub fn handoff(mut self, handoff: StreamHandoff) -> RunScope {
        self.handoff = Some(handoff);
        self
    }

    /// The race runs for the caller's job `job`.
    pub fn job(mut self, job: JobTag) -> RunScope {
        self.job = Some(Arc::new(job));
        self
    }
}

impl fmt::Debug for RunScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunScope")
            .field("account", &self.account.as_deref().map(|a| a.name.as_str()))
            .field("stop_at", &self.stop_at)
            .field("stop", &self.stop.is_some())
            .field("handoff", &self.handoff.is_some())
            .field("job", &self.job.as_deref().map(JobTag::id))
            .finish()
    }
}
