//! The provider contract: what a GPU job service must offer the engine.
//!
//! A [`ProviderApi`] submits jobs and returns a [`Job`] handle at once; the handle reports
//! status, waits for a result up to a deadline (a timeout is a result, not an error),
//! and cancels with a [`Receipt`]. Each backend declares [`Capabilities`] so policies can
//! refuse combinations that cannot work (a cutover primary that cannot report "queued").

use crate::job::{JobRequest, JobResult, JobState};
use crate::money::Pricing;
use crate::receipt::{Evidence, Receipt};
use async_trait::async_trait;
use std::fmt;
use std::sync::Arc;
use tokio::time::Instant;

/// What a backend can observe and prove.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Status distinguishes queued from running (required of a cutover primary).
    pub reports_queued: bool,
    /// The strongest cancel evidence this provider can earn.
    pub cancel_evidence: Evidence,
    /// Results carry provider-billed execution time.
    pub reports_billed_time: bool,
}

/// A failure talking to a provider.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ProviderError {
    /// The request never reached the provider or the connection broke.
    #[error("transport error: {reason}")]
    Transport {
        /// What the HTTP client reported (never contains credentials).
        reason: String,
    },
    /// The provider answered with an error status.
    #[error("provider rejected the call (status {status}): {message}")]
    Rejected {
        /// HTTP status or provider code.
        status: u16,
        /// Provider message (never contains credentials).
        message: String,
    },
    /// The provider answered with something we could not parse.
    #[error("malformed response: {reason}")]
    MalformedResponse {
        /// What was missing or unreadable in the reply.
        reason: String,
    },
    /// The endpoint is not deployed.
    #[error("provider `{provider}` is not deployed")]
    NotDeployed {
        /// The provider's name.
        provider: String,
    },
    /// The operation is not offered by this provider.
    #[error("not supported: {0}")]
    Unsupported(&'static str),
}

/// Context handed to [`Job::cancel`].
#[derive(Clone, Debug)]
pub struct CancelContext {
    /// Why the engine cancels.
    pub reason: String,
    /// The request's start: receipt times are offsets from it.
    pub epoch: Instant,
    /// When the cancel is being sent.
    pub sent_at: Instant,
    /// The state polled just before cancelling, if the poll worked.
    pub state_before: Option<JobState>,
}

impl CancelContext {
    /// Milliseconds since the request started.
    pub fn ms(&self, at: Instant) -> f64 {
        crate::receipt::offset_ms(self.epoch, at)
    }

    /// A fresh conservative receipt pre-filled with what the engine knows.
    pub fn receipt(&self, provider: &str, job_id: Option<String>) -> Receipt {
        let mut r = Receipt::unproven(provider, job_id, self.ms(self.sent_at));
        r.reason = self.reason.clone();
        r.state_before_cancel = self.state_before;
        r.was_running = self.state_before == Some(JobState::Running);
        r
    }
}

/// A submitted job.
#[async_trait]
pub trait Job: Send + Sync + fmt::Debug {
    /// The provider's job id, when it issued one.
    fn job_id(&self) -> Option<String>;

    /// Current state. Cheap enough to poll. A provider that cannot tell queued from
    /// running reports [`JobState::Pending`] and never invents a state.
    async fn status(&self) -> Result<JobState, ProviderError>;

    /// Waits for the result until `deadline`. Hitting the deadline returns a
    /// [`JobState::TimedOut`] result; transport failures return a `Failed` result.
    async fn result(&self, deadline: Instant) -> JobResult;

    /// Cancels the job and returns what was observed. Errors here become leaked
    /// receipts in the engine.
    async fn cancel(&self, ctx: CancelContext) -> Result<Receipt, ProviderError>;
}

/// A GPU job service.
#[async_trait]
pub trait ProviderApi: Send + Sync + fmt::Debug {
    /// What this backend can observe and prove.
    fn capabilities(&self) -> Capabilities;

    /// Submits a job and returns its handle as soon as the provider accepted it.
    async fn submit(&self, request: &JobRequest) -> Result<Arc<dyn Job>, ProviderError>;

    /// A handle to a job submitted earlier, by the provider's job id (one a gateway that
    /// died had in flight), so it can be polled and cancelled with a receipt. `None` when
    /// this provider cannot address a job by id alone.
    fn attach(&self, _job_id: &str) -> Option<Arc<dyn Job>> {
        None
    }
}

/// A named backend with its pricing, as the engine sees it.
#[derive(Clone, Debug)]
pub struct Provider {
    /// Provider key (`runpod`, `cerebrium`, ...).
    pub name: String,
    /// How the engine talks to it: submit, then the job handle.
    pub api: Arc<dyn ProviderApi>,
    /// How it charges.
    pub pricing: Pricing,
}

impl Provider {
    /// The charge a submission to this provider must clear first: its projected cost.
    pub fn projected_charge<'a>(&'a self, request_id: &'a str, opens_request: bool) -> crate::ledger::Charge<'a> {
        crate::ledger::Charge { provider: &self.name, request_id, amount: self.pricing.projected_submission(), opens_request }
    }
}
