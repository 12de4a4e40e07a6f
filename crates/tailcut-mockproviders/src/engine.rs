//! The shared job engine: jobs, their phases under a [`Behaviour`], and the state every
//! provider kind's routes read.

use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tailcut_providers::ProviderKind;
use tokio::time::Instant;

/// The mock servers' name for a provider kind (the kinds of `tailcut-providers`, one
/// list): `MockServer::start(Flavor::OpenAi, ..)` reads as before.
pub type Flavor = ProviderKind;

/// How jobs behave.
#[derive(Clone, Debug, PartialEq)]
pub struct Behaviour {
    /// Time in queue before a worker takes the job.
    pub queue: Duration,
    /// Run time once started.
    pub run: Duration,
    /// Jobs fail.
    pub fail: bool,
    /// Completed bodies are malformed JSON.
    pub malformed: bool,
    /// Running cancels are acknowledged but ignored (the job runs to the end).
    pub ignore_running_cancel: bool,
    /// The first N status/result calls answer 503.
    pub status_503: u32,
    /// The first N status/result calls answer 429 with `Retry-After`.
    pub status_429: u32,
    /// Seconds in `Retry-After`.
    pub retry_after_s: u64,
    /// Status calls never answer.
    pub hang_status: bool,
    /// Results expire this long after completion (then 404).
    pub result_ttl: Option<Duration>,
    /// Delay between streamed tokens (OpenAI), and before the first one.
    pub token_interval: Duration,
    /// Tokens in a completion (OpenAI).
    pub tokens: usize,
}

impl Default for Behaviour {
    fn default() -> Self {
        Behaviour {
            queue: Duration::from_millis(150),
            run: Duration::from_millis(250),
            fail: false,
            malformed: false,
            ignore_running_cancel: false,
            status_503: 0,
            status_429: 0,
            retry_after_s: 1,
            hang_status: false,
            result_ttl: None,
            token_interval: Duration::from_millis(10),
            tokens: 5,
        }
    }
}

impl Behaviour {
    /// Jobs that wait `queue` for a worker, then run for `run`; everything else default.
    pub fn timed(queue: Duration, run: Duration) -> Behaviour {
        Behaviour { queue, run, ..Behaviour::default() }
    }
}

/// Where a job is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for a worker.
    Queued,
    /// Executing.
    Running,
    /// Finished with output.
    Completed,
    /// Finished with an error.
    Failed,
    /// Stopped by a cancel.
    Cancelled,
    /// Result retention passed.
    Expired,
}

/// A job as the engine sees it.
#[derive(Clone, Debug)]
pub struct JobView {
    /// Id.
    pub id: String,
    /// Phase now.
    pub phase: Phase,
    /// Queue delay so far or total, ms.
    pub delay_ms: u64,
    /// Execution so far or total, ms.
    pub execution_ms: u64,
    /// Input as submitted.
    pub input: Value,
    /// Whether a cancel was requested.
    pub cancel_requested: bool,
}

#[derive(Debug)]
pub(crate) struct Job {
    pub created: Instant,
    pub queue: Duration,
    pub run: Duration,
    pub fail: bool,
    pub malformed: bool,
    pub input: Value,
    pub cancelled_at: Option<Instant>,
    pub cancel_requested: bool,
    pub ignore_cancel: bool,
    pub ttl: Option<Duration>,
}

impl Job {
    fn end(&self) -> Instant {
        self.created + self.queue + self.run
    }

    pub fn phase(&self, now: Instant) -> Phase {
        if let Some(c) = self.cancelled_at {
            if now >= c {
                return Phase::Cancelled;
            }
        }
        if now < self.created + self.queue {
            return Phase::Queued;
        }
        if now < self.end() {
            return Phase::Running;
        }
        if let Some(ttl) = self.ttl {
            if now >= self.end() + ttl {
                return Phase::Expired;
            }
        }
        if self.fail {
            Phase::Failed
        } else {
            Phase::Completed
        }
    }
}

/// Shared state of a mock server.
#[derive(Debug)]
pub(crate) struct State {
    pub kind: ProviderKind,
    pub base: String,
    pub behaviour: Mutex<Behaviour>,
    pub jobs: Mutex<HashMap<String, Job>>,
    pub counter: AtomicU64,
    pub status_calls: AtomicU32,
    pub disconnects: AtomicU32,
    pub submits: AtomicU32,
    pub vanished: std::sync::atomic::AtomicBool,
    pub vanish: tokio::sync::Notify,
    /// When the first worker is ready (Vast.ai: `queue` after the first route call; no
    /// ready worker before).
    pub ready_at: Mutex<Option<Instant>>,
}

impl State {
    /// Resolves when the server vanishes.
    pub async fn vanishing(&self) {
        let n = self.vanish.notified();
        tokio::pin!(n);
        n.as_mut().enable();
        if self.vanished.load(Ordering::SeqCst) {
            return;
        }
        n.await;
    }

    pub fn behaviour(&self) -> Behaviour {
        self.behaviour.lock().map(|b| b.clone()).unwrap_or_default()
    }

    pub fn create(&self, input: Value) -> String {
        let n = self.counter.fetch_add(1, Ordering::SeqCst) + 1;
        self.submits.fetch_add(1, Ordering::SeqCst);
        let id = format!("job-{n:06}");
        let b = self.behaviour();
        let job = Job {
            created: Instant::now(),
            queue: b.queue,
            run: b.run,
            fail: b.fail,
            malformed: b.malformed,
            input,
            cancelled_at: None,
            cancel_requested: false,
            ignore_cancel: b.ignore_running_cancel,
            ttl: b.result_ttl,
        };
        if let Ok(mut jobs) = self.jobs.lock() {
            jobs.insert(id.clone(), job);
        }
        id
    }

    pub fn view(&self, id: &str) -> Option<JobView> {
        let jobs = self.jobs.lock().ok()?;
        let j = jobs.get(id)?;
        let now = Instant::now();
        let phase = j.phase(now);
        let started = j.created + j.queue;
        let delay = if now < started { now - j.created } else { j.queue };
        let exec_end = j.cancelled_at.map_or(j.end(), |c| c.min(j.end())).min(now);
        let execution = exec_end.saturating_duration_since(started);
        Some(JobView {
            id: id.to_string(),
            phase,
            delay_ms: delay.as_millis() as u64,
            execution_ms: execution.as_millis() as u64,
            input: j.input.clone(),
            cancel_requested: j.cancel_requested,
        })
    }

    pub fn malformed(&self, id: &str) -> bool {
        self.jobs.lock().ok().and_then(|j| j.get(id).map(|j| j.malformed)).unwrap_or(false)
    }

    /// Applies a cancel; returns the phase before it (None for an unknown id).
    pub fn cancel(&self, id: &str) -> Option<Phase> {
        let mut jobs = self.jobs.lock().ok()?;
        let j = jobs.get_mut(id)?;
        let now = Instant::now();
        let before = j.phase(now);
        j.cancel_requested = true;
        match before {
            Phase::Queued => j.cancelled_at = Some(now),
            Phase::Running if !j.ignore_cancel => j.cancelled_at = Some(now + Duration::from_millis(30)),
            _ => {}
        }
        Some(before)
    }

    /// Counts a status-type call; returns an injected error status if one is due.
    pub fn injected_error(&self) -> Option<(u16, u64)> {
        let n = self.status_calls.fetch_add(1, Ordering::SeqCst);
        let b = self.behaviour();
        if n < b.status_503 {
            return Some((503, 0));
        }
        if n < b.status_503 + b.status_429 {
            return Some((429, b.retry_after_s));
        }
        None
    }

    pub fn output(&self, id: &str) -> Value {
        json!({"audio_base64": "UklGRg==", "text": format!("output of {id}"), "output": "ok"})
    }
}
