//! What travels through a race: the request, job states, and results.

use crate::handover::StreamHandoff;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use tokio::time::Instant;

/// The lifecycle state of a provider job. Wire values match the reference tool's traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum JobState {
    /// Submitted; the provider cannot say whether it is queued or running.
    #[serde(rename = "PENDING")]
    Pending,
    /// Waiting for a worker: no GPU work has started.
    #[serde(rename = "IN_QUEUE")]
    Queued,
    /// A worker is executing it.
    #[serde(rename = "IN_PROGRESS")]
    Running,
    /// Finished with output.
    #[serde(rename = "COMPLETED")]
    Completed,
    /// Finished without usable output.
    #[serde(rename = "FAILED")]
    Failed,
    /// Stopped by a cancel.
    #[serde(rename = "CANCELLED")]
    Cancelled,
    /// Right-censored: the caller's cap passed before the job finished.
    #[serde(rename = "TIMEOUT")]
    TimedOut,
    /// The provider answered with a state we do not recognise.
    #[serde(rename = "UNKNOWN")]
    Unknown,
}

impl JobState {
    /// Whether the job can no longer change state.
    pub fn is_terminal(self) -> bool {
        matches!(self, JobState::Completed | JobState::Failed | JobState::Cancelled | JobState::TimedOut)
    }

    /// The wire value, e.g. `IN_QUEUE`.
    pub fn wire(self) -> &'static str {
        match self {
            JobState::Pending => "PENDING",
            JobState::Queued => "IN_QUEUE",
            JobState::Running => "IN_PROGRESS",
            JobState::Completed => "COMPLETED",
            JobState::Failed => "FAILED",
            JobState::Cancelled => "CANCELLED",
            JobState::TimedOut => "TIMEOUT",
            JobState::Unknown => "UNKNOWN",
        }
    }
}

/// One request to race: an id and the JSON input every provider receives.
#[derive(Clone)]
pub struct JobRequest {
    /// Caller-visible id, also written to the trace.
    pub request_id: String,
    /// The job input, shared by every attempt.
    input: Arc<Input>,
    /// The race's stream hand-over, from its [`RunScope`](crate::engine::RunScope).
    handoff: Option<StreamHandoff>,
    /// The caller's job the race runs for, from its [`RunScope`](crate::engine::RunScope).
    job: Option<Arc<JobTag>>,
}

impl std::fmt::Debug for JobRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobRequest")
            .field("request_id", &self.request_id)
            .field("input", &self.input)
            .field("handoff", &self.handoff.is_some())
            .field("job", &self.job.as_deref().map(JobTag::id))
            .finish()
    }
}

/// A request's input: the document, the text the caller sent, or both. Given only the
/// text, the document is parsed the first time an adapter asks for it, so a request
/// forwarded as sent (the gateway's) is never parsed into a document at all.
#[derive(Debug)]
struct Input {
    document: std::sync::OnceLock<serde_json::Value>,
    raw: Option<bytes::Bytes>,
}

impl JobRequest {
    /// A request with the given id and input.
    pub fn new(request_id: impl Into<String>, input: serde_json::Value) -> JobRequest {
        JobRequest { request_id: request_id.into(), input: Arc::new(Input { document: input.into(), raw: None }), handoff: None, job: None }
    }

    /// A request whose input was parsed from `raw`; `raw` must be the JSON text of `input`.
    pub fn with_raw(request_id: impl Into<String>, input: serde_json::Value, raw: bytes::Bytes) -> JobRequest {
        JobRequest {
            request_id: request_id.into(),
            input: Arc::new(Input { document: input.into(), raw: Some(raw) }),
            handoff: None,
            job: None,
        }
    }

    /// A request whose input is the JSON text `raw`, parsed only if an adapter needs
    /// the document. The caller has checked that `raw` is JSON; if it is not, the
    /// document reads as `null`.
    pub fn from_raw(request_id: impl Into<String>, raw: bytes::Bytes) -> JobRequest {
        JobRequest {
            request_id: request_id.into(),
            input: Arc::new(Input { document: std::sync::OnceLock::new(), raw: Some(raw) }),
            handoff: None,
            job: None,
        }
    }

    /// This request as a race's attempts see it: carrying its scope's hand-over and job
    /// tag (set only by the engine, from the caller's [`RunScope`](crate::engine::RunScope)).
    pub(crate) fn scoped(mut self, handoff: Option<StreamHandoff>, job: Option<Arc<JobTag>>) -> JobRequest {
        self.handoff = handoff;
        self.job = job;
        self
    }

    /// The stream hand-over of the race this request is raced in, if its caller gave one:
    /// a stream provider's job hands its stream over there.
    pub fn handoff(&self) -> Option<&StreamHandoff> {
        self.handoff.as_ref()
    }

    /// The caller's job the race runs for, if it runs for one (the gateway's jobs API).
    pub fn job(&self) -> Option<&JobTag> {
        self.job.as_deref()
    }

    /// The input document every provider receives.
    pub fn input(&self) -> &serde_json::Value {
        let Input { document, raw } = self.input.as_ref();
        document.get_or_init(|| raw.as_deref().and_then(|r| serde_json::from_slice(r).ok()).unwrap_or_default())
    }

    /// The input exactly as the caller sent it (JSON text), when the caller had it.
    /// Adapters that forward the input unchanged send these bytes instead of
    /// re-encoding [`JobRequest::input`]; anything that rewrites the input ignores them.
    pub fn raw(&self) -> Option<&bytes::Bytes> {
        self.input.raw.as_ref()
    }
}

/// The caller's job a race runs for (the gateway's jobs API): the id its attempts are
/// recorded under, each numbered in submit order. Given to the race in its
/// [`RunScope`](crate::engine::RunScope), read by providers as [`JobRequest::job`].
#[derive(Debug)]
pub struct JobTag {
    id: String,
    submitted: AtomicI32,
}

impl JobTag {
    /// The tag of job `id`, no attempt submitted yet.
    pub fn new(id: impl Into<String>) -> JobTag {
        JobTag { id: id.into(), submitted: AtomicI32::new(0) }
    }

    /// The job's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The number of the attempt submitted now: 0 for the first, then 1, 2, ...
    pub fn next_attempt(&self) -> i32 {
        self.submitted.fetch_add(1, Ordering::Relaxed)
    }
}

/// An opaque result payload: bytes plus a content type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Payload {
    /// Raw bytes (audio, JSON, an image, ...); cheap to clone.
    pub bytes: bytes::Bytes,
    /// MIME type, e.g. `audio/wav` or `application/json`.
    pub content_type: std::borrow::Cow<'static, str>,
}

/// What a job ended with. A timeout is a result (state [`JobState::TimedOut`]), never an
/// error: results are right-censored at the caller's cap.
#[derive(Clone, Debug)]
pub struct JobResult {
    /// Terminal state (or `TimedOut`).
    pub state: JobState,
    /// Output, when there is any.
    pub payload: Option<Payload>,
    /// Provider- and worker-reported metrics (queue delay, billed execution, ...).
    pub metrics: serde_json::Map<String, serde_json::Value>,
    /// When execution started, if the provider says.
    pub started: Option<Instant>,
    /// When the result (or terminal state) was observed.
    pub finished: Instant,
    /// Error text for failed or malformed results.
    pub error: Option<String>,
}

impl JobResult {
    /// A result in `state` observed now, with no payload.
    pub fn bare(state: JobState, error: Option<String>) -> JobResult {
        JobResult { state, payload: None, metrics: serde_json::Map::new(), started: None, finished: Instant::now(), error }
    }

    /// A right-censored result: the cap passed.
    pub fn timed_out() -> JobResult {
        JobResult::bare(JobState::TimedOut, Some("cap reached before the job finished".into()))
    }
}
