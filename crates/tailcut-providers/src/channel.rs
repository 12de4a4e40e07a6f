//! Request-channel providers: the job *is* one in-flight HTTP request (Cerebrium's
//! synchronous call, an OpenAI-compatible completion). Status can only say the request
//! is open (`PENDING`: queued or running is not visible); cancel closes the connection,
//! which earns `request_channel_closed` evidence and nothing stronger.

use async_trait::async_trait;
use futures::future::BoxFuture;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use tailcut_core::{BackendError, CancelContext, CancelScope, Job, JobResult, JobState, Receipt};
use tokio::sync::watch;
use tokio::time::Instant;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A correlation id this client controls (sent to the provider with the request).
pub fn correlation_id(provider: &str) -> String {
    let n = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("tailcut-{provider}-{t:x}-{n}")
}

/// One in-flight request.
#[derive(Debug)]
pub struct ChannelJob {
    provider: String,
    id: String,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    rx: watch::Receiver<Option<JobResult>>,
    closed: AtomicBool,
    note: String,
}

impl ChannelJob {
    /// Starts `request` in a task. `note` goes into cancel receipts (what the provider
    /// does on disconnect).
    pub fn start(provider: &str, id: String, request: BoxFuture<'static, JobResult>, note: &str) -> ChannelJob {
        let (tx, rx) = watch::channel(None);
        let task = tokio::spawn(async move {
            let r = request.await;
            let _ = tx.send(Some(r));
        });
        ChannelJob {
            provider: provider.to_string(),
            id,
            task: Mutex::new(Some(task)),
            rx,
            closed: AtomicBool::new(false),
            note: note.to_string(),
        }
    }

    fn finished(&self) -> Option<JobResult> {
        self.rx.borrow().clone()
    }
}

#[async_trait]
impl Job for ChannelJob {
    fn job_id(&self) -> Option<String> {
        Some(self.id.clone())
    }

    async fn status(&self) -> Result<JobState, BackendError> {
        if self.closed.load(Ordering::SeqCst) {
            return Ok(JobState::Cancelled);
        }
        Ok(self.finished().map_or(JobState::Pending, |r| r.state))
    }

    async fn result(&self, deadline: Instant) -> JobResult {
        let mut rx = self.rx.clone();
        loop {
            if self.closed.load(Ordering::SeqCst) {
                return JobResult::bare(JobState::Cancelled, Some("request closed by the client".into()));
            }
            if let Some(r) = rx.borrow().clone() {
                return r;
            }
            tokio::select! {
                changed = rx.changed() => {
                    if changed.is_err() {
                        return JobResult::bare(JobState::Cancelled, Some("request closed by the client".into()));
                    }
                }
                () = tokio::time::sleep_until(deadline) => return JobResult::timed_out(),
            }
        }
    }

    async fn cancel(&self, ctx: CancelContext) -> Result<Receipt, BackendError> {
        let mut receipt = ctx.receipt(&self.provider, Some(self.id.clone()));
        receipt.cancel_scope = CancelScope::Request;
        if let Some(done) = self.finished() {
            receipt.record_channel_closed(ctx.ms(Instant::now()));
            receipt.note = format!("the request had already ended ({})", done.state.wire());
            return Ok(receipt);
        }
        let task = self.task.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task {
            task.abort();
            let _ = task.await;
        }
        self.closed.store(true, Ordering::SeqCst);
        receipt.record_channel_closed(ctx.ms(Instant::now()));
        receipt.note.clone_from(&self.note);
        Ok(receipt)
    }
}
