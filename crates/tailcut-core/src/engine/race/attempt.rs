//! One attempt's state inside a race, and the background cancel that earns its receipt.

use crate::job::{JobResult, JobState};
use crate::money::MicroUsd;
use crate::provider::{CancelContext, Job};
use crate::receipt::Receipt;
use crate::trace::{Role, StatePoll};
use futures::future::BoxFuture;
use futures::FutureExt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use tokio::time::Instant;

/// An attempt's result once it is in (or its submit failed, or a cancel proved it stopped).
pub(super) struct Resolved {
    pub(super) state: JobState,
    pub(super) valid: bool,
    pub(super) reasons: Vec<String>,
    pub(super) wall_ms: f64,
    pub(super) metrics: serde_json::Map<String, serde_json::Value>,
}

/// One submission to one provider.
pub(super) struct Attempt {
    pub(super) provider: usize,
    pub(super) role: Role,
    pub(super) job: Option<Arc<dyn Job>>,
    pub(super) job_id: Option<String>,
    pub(super) submit_started: Instant,
    pub(super) submit_returned: Instant,
    pub(super) resolved: Option<Resolved>,
    pub(super) receipt: Option<Receipt>,
    pub(super) cancelling: bool,
    pub(super) polls: Vec<StatePoll>,
    pub(super) projected: MicroUsd,
    pub(super) submit_error: Option<String>,
}

impl Attempt {
    /// Submitted, and its result has not arrived.
    pub(super) fn pending(&self) -> bool {
        self.job.is_some() && self.resolved.is_none()
    }

    /// Pending, and no confirmed-terminal receipt says it stopped.
    pub(super) fn live(&self) -> bool {
        self.pending() && !self.receipt.as_ref().is_some_and(|r| r.confirmed_terminal)
    }
}

/// An attempt's result, tagged with its index in the race.
pub(super) type ResultFuture = BoxFuture<'static, (usize, JobResult)>;
/// An attempt's cancel receipt, tagged with its index in the race.
pub(super) type CancelFuture = BoxFuture<'static, (usize, Receipt)>;

/// Cancels `job` and returns its receipt. A cancel that errors or panics becomes a
/// leaked receipt, never an error.
pub(super) fn cancel_future(index: usize, provider: String, job: Arc<dyn Job>, epoch: Instant, reason: String) -> CancelFuture {
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
