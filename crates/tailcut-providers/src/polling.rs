//! Job-queue providers: submit, poll status, fetch the result, cancel and poll the
//! cancel to a terminal state. Each provider kind contributes a [`PollingApi`] (its calls and how to read their replies); the polling,
//! right-censoring and receipt honesty live here once.

use crate::client::{HttpClient, Reply};
use async_trait::async_trait;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tailcut_core::{
    CancelContext, CancelScope, Capabilities, Job, JobRequest, JobResult, JobState, MicroUsd, Payload, ProviderApi, ProviderError,
    RateNanoUsdPerSec, Receipt,
};
use tokio::time::{sleep, Instant};

/// A submitted job as the provider identifies it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Remote {
    /// Provider job id.
    pub id: String,
    /// URLs the provider returned (status, result, cancel, ...).
    pub urls: BTreeMap<String, String>,
}

/// One status observation.
#[derive(Clone, Debug)]
pub struct Observation {
    /// Mapped state.
    pub state: JobState,
    /// Output, when the status carries it.
    pub output: Option<Value>,
    /// Provider metrics (queue delay, execution, ...).
    pub metrics: Map<String, Value>,
    /// Provider error text.
    pub error: Option<String>,
}

impl Observation {
    /// A bare state.
    pub fn state(state: JobState) -> Observation {
        Observation { state, output: None, metrics: Map::new(), error: None }
    }
}

/// What the cancel call said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CancelReply {
    /// The provider accepted the cancel.
    pub acknowledged: bool,
    /// What it said, for the receipt.
    pub note: String,
}

/// One provider's API surface.
#[async_trait]
pub trait PollingApi: Send + Sync + fmt::Debug + 'static {
    /// Provider key, for receipts and metric names.
    fn provider(&self) -> &str;
    /// What it can observe and prove.
    fn capabilities(&self) -> Capabilities;
    /// Submits (never retried).
    async fn submit(&self, http: &HttpClient, request: &JobRequest) -> Result<Remote, ProviderError>;
    /// Polls the job's state (idempotent; retried by the client).
    async fn poll(&self, http: &HttpClient, job: &Remote) -> Result<Observation, ProviderError>;
    /// Fetches the output of a completed job whose status did not carry it.
    async fn fetch(&self, _http: &HttpClient, _job: &Remote, obs: &Observation) -> Result<Payload, ProviderError> {
        obs.output.as_ref().map(json_payload).ok_or_else(|| ProviderError::MalformedResponse { reason: "completed without output".into() })
    }
    /// Sends the cancel (never retried).
    async fn cancel(&self, http: &HttpClient, job: &Remote) -> Result<CancelReply, ProviderError>;
    /// Metric key carrying the provider-reported execution time in ms, if any.
    fn execution_metric(&self) -> Option<String> {
        None
    }
}

/// Polling cadence and windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PollSettings {
    /// Time between status polls while waiting for a result.
    pub interval: Duration,
    /// How long to poll for a terminal state after a cancel.
    pub cancel_window: Duration,
    /// Consecutive failed polls before the result is reported as failed.
    pub max_poll_failures: u32,
}

impl Default for PollSettings {
    fn default() -> Self {
        PollSettings { interval: Duration::from_secs(1), cancel_window: Duration::from_secs(20), max_poll_failures: 5 }
    }
}

/// A job-queue provider over its [`PollingApi`].
#[derive(Debug, Clone)]
pub struct PollingProvider<D> {
    api: Arc<D>,
    http: HttpClient,
    settings: PollSettings,
    rate: RateNanoUsdPerSec,
}

impl<D: PollingApi> PollingProvider<D> {
    /// A provider speaking `api`, billing at `rate` for cost estimates.
    pub fn new(api: D, http: HttpClient, settings: PollSettings, rate: RateNanoUsdPerSec) -> PollingProvider<D> {
        PollingProvider { api: Arc::new(api), http, settings, rate }
    }
}

#[async_trait]
impl<D: PollingApi> ProviderApi for PollingProvider<D> {
    fn capabilities(&self) -> Capabilities {
        self.api.capabilities()
    }

    async fn submit(&self, request: &JobRequest) -> Result<Arc<dyn Job>, ProviderError> {
        let submitted = Instant::now();
        let remote = self.api.submit(&self.http, request).await?;
        Ok(Arc::new(PollingJob {
            api: self.api.clone(),
            http: self.http.clone(),
            settings: self.settings,
            rate: self.rate,
            remote,
            submitted,
            last: Mutex::new(JobState::Queued),
        }))
    }

    fn attach(&self, job_id: &str) -> Option<Arc<dyn Job>> {
        // Every queue API here addresses status and cancel by the job id (URLs the submit
        // returned, where a kind uses them, are rebuilt from it).
        Some(Arc::new(PollingJob {
            api: self.api.clone(),
            http: self.http.clone(),
            settings: self.settings,
            rate: self.rate,
            remote: Remote { id: job_id.to_string(), urls: BTreeMap::new() },
            submitted: Instant::now(),
            last: Mutex::new(JobState::Unknown),
        }))
    }
}

/// One submitted job.
pub struct PollingJob<D> {
    api: Arc<D>,
    http: HttpClient,
    settings: PollSettings,
    rate: RateNanoUsdPerSec,
    remote: Remote,
    submitted: Instant,
    last: Mutex<JobState>,
}

impl<D: PollingApi> fmt::Debug for PollingJob<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PollingJob").field("provider", &self.api.provider()).field("id", &self.remote.id).finish_non_exhaustive()
    }
}

impl<D: PollingApi> PollingJob<D> {
    async fn observe(&self) -> Result<Observation, ProviderError> {
        let obs = self.api.poll(&self.http, &self.remote).await?;
        if obs.state != JobState::Unknown {
            if let Ok(mut last) = self.last.lock() {
                *last = obs.state;
            }
        }
        Ok(obs)
    }

    async fn completed(&self, obs: Observation) -> JobResult {
        let mut r = JobResult::bare(JobState::Completed, None);
        r.metrics = obs.metrics.clone();
        match self.api.fetch(&self.http, &self.remote, &obs).await {
            Ok(p) => r.payload = Some(p),
            Err(e) => {
                r.state = JobState::Failed;
                r.error = Some(e.to_string());
            }
        }
        r.finished = Instant::now();
        r
    }
}

#[async_trait]
impl<D: PollingApi> Job for PollingJob<D> {
    fn job_id(&self) -> Option<String> {
        Some(self.remote.id.clone())
    }

    async fn status(&self) -> Result<JobState, ProviderError> {
        match self.observe().await {
            Ok(o) if o.state == JobState::Unknown => Ok(self.last.lock().map(|s| *s).unwrap_or(JobState::Unknown)),
            Ok(o) => Ok(o.state),
            Err(e) => Err(e),
        }
    }

    async fn result(&self, deadline: Instant) -> JobResult {
        let mut failures = 0;
        loop {
            if Instant::now() >= deadline {
                return JobResult::timed_out();
            }
            let polled = tokio::select! {
                o = self.observe() => Some(o),
                () = tokio::time::sleep_until(deadline) => None,
            };
            match polled {
                None => return JobResult::timed_out(),
                Some(Ok(obs)) => {
                    failures = 0;
                    match obs.state {
                        JobState::Completed => return self.completed(obs).await,
                        s if s.is_terminal() => {
                            let mut r = JobResult::bare(s, obs.error.clone());
                            r.metrics = obs.metrics;
                            return r;
                        }
                        _ => {}
                    }
                }
                Some(Err(e @ ProviderError::MalformedResponse { .. })) => return JobResult::bare(JobState::Failed, Some(e.to_string())),
                Some(Err(e @ ProviderError::Rejected { status: 404, .. })) => {
                    return JobResult::bare(JobState::Failed, Some(format!("job vanished (result expired or unknown id): {e}")))
                }
                Some(Err(e)) => {
                    failures += 1;
                    if failures >= self.settings.max_poll_failures {
                        return JobResult::bare(JobState::Failed, Some(format!("provider unreachable: {e}")));
                    }
                }
            }
            let next = (Instant::now() + self.settings.interval).min(deadline);
            tokio::time::sleep_until(next).await;
        }
    }

    async fn cancel(&self, ctx: CancelContext) -> Result<Receipt, ProviderError> {
        let mut receipt = ctx.receipt(self.api.provider(), Some(self.remote.id.clone()));
        let reply = self.api.cancel(&self.http, &self.remote).await?;
        receipt.note = reply.note.clone();
        if !reply.acknowledged {
            // Refused: nothing was stopped by us. If the job has already ended, say so.
            receipt.cancel_scope = if ctx.state_before == Some(JobState::Queued) { CancelScope::QueuedJob } else { CancelScope::Request };
            if let Ok(obs) = self.observe().await {
                if obs.state.is_terminal() {
                    receipt.record_terminal(ctx.ms(Instant::now()), obs.state);
                    receipt.note = format!("{} — but the job had already ended ({})", receipt.note, obs.state.wire());
                }
            }
            return Ok(receipt);
        }
        receipt.record_ack(ctx.ms(Instant::now()));
        let until = Instant::now() + self.settings.cancel_window;
        let mut last_obs = None;
        while Instant::now() < until {
            if let Ok(obs) = self.observe().await {
                if obs.state.is_terminal() {
                    receipt.record_terminal(ctx.ms(Instant::now()), obs.state);
                    last_obs = Some(obs);
                    break;
                }
            }
            sleep(self.settings.interval.min(Duration::from_millis(500))).await;
        }
        let was_queued = ctx.state_before == Some(JobState::Queued);
        receipt.cancel_scope = if was_queued { CancelScope::QueuedJob } else { CancelScope::Request };
        if let Some(obs) = &last_obs {
            let exec_ms = self.api.execution_metric().and_then(|k| obs.metrics.get(&k)).and_then(Value::as_f64);
            match exec_ms {
                Some(ms) => {
                    receipt.execution_ms_before_cancel = Some(ms);
                    let cost = self.rate.cost_of(Duration::from_millis(ms as u64));
                    receipt.reconciled_cost_micro_usd = Some(cost);
                    receipt.estimated_cost_micro_usd = Some(cost);
                    receipt.billing_stop_confirmed = true;
                }
                None if was_queued => {
                    receipt.execution_ms_before_cancel = Some(0.0);
                    receipt.estimated_cost_micro_usd = Some(MicroUsd::ZERO);
                }
                None => {
                    let ran = Instant::now().saturating_duration_since(self.submitted);
                    receipt.execution_ms_before_cancel = Some(ran.as_millis() as f64);
                    receipt.estimated_cost_micro_usd = Some(self.rate.cost_of(ran));
                }
            }
        } else {
            receipt.note =
                format!("{} (no terminal state within {:?} of the cancel)", receipt.note, self.settings.cancel_window).trim().to_string();
        }
        Ok(receipt)
    }
}

/// The longest provider error text kept (characters): a provider's error string goes
/// into results, traces and job rows, and one of megabytes must not.
pub const MAX_ERROR_CHARS: usize = 1000;

/// A provider's error text as kept: at most [`MAX_ERROR_CHARS`] characters, marked when cut.
pub fn error_text(text: &str) -> String {
    match text.char_indices().nth(MAX_ERROR_CHARS) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}… ({} bytes in all)", &text[..cut], text.len()),
    }
}

/// Reads a cancel reply whose status is the whole answer (RunPod, Replicate): a 2xx is
/// an acknowledged cancel, anything else its rejection.
pub fn read_acknowledged(reply: &Reply) -> Result<CancelReply, ProviderError> {
    if !reply.ok() {
        return Err(reply.rejected());
    }
    Ok(CancelReply { acknowledged: true, note: String::new() })
}

/// The string member `key` of a provider's reply `v`, or a malformed-reply error that
/// names the reply (`what`) and the member: ``submit reply without `id` ``.
pub fn required_str<'a>(v: &'a Value, key: &str, what: &str) -> Result<&'a str, ProviderError> {
    v.get(key).and_then(Value::as_str).ok_or_else(|| ProviderError::MalformedResponse { reason: format!("{what} without `{key}`") })
}

/// A JSON value as a payload.
pub fn json_payload(v: &Value) -> Payload {
    Payload { bytes: serde_json::to_vec(v).unwrap_or_default().into(), content_type: "application/json".into() }
}

/// Reads a dotted path (`a.b.0.c`) from JSON.
pub fn path<'a>(v: &'a Value, p: &str) -> Option<&'a Value> {
    tailcut_core::validate::dotted(v, p)
}

/// Copies a numeric field into metrics under `key`.
pub fn metric(metrics: &mut Map<String, Value>, key: &str, v: Option<&Value>) {
    if let Some(x) = v.filter(|x| x.is_number()) {
        metrics.insert(key.to_string(), x.clone());
    }
}
