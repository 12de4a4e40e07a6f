//! Request-channel providers: the job *is* one in-flight HTTP request (Cerebrium's
//! synchronous call, an OpenAI-compatible completion). Status can only say the request
//! is open (`PENDING`: queued or running is not visible); cancel closes the connection,
//! which earns `request_channel_closed` evidence and nothing stronger.

use async_trait::async_trait;
use futures::future::BoxFuture;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use tailcut_core::{CancelContext, CancelScope, Job, JobResult, JobState, ProviderError, Receipt};
use tokio::time::Instant;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A correlation id this client controls (sent to the provider with the request).
/// `tailcut-{provider}-{process start, ns since the epoch, hex}-{sequence}`: unique
/// across restarts without reading the clock per request.
pub fn correlation_id(provider: &str) -> String {
    static STARTED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let started = STARTED.get_or_init(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        format!("{t:x}")
    });
    let n = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let mut id = String::with_capacity(provider.len() + 48);
    id.push_str("tailcut-");
    id.push_str(provider);
    id.push('-');
    id.push_str(started);
    id.push('-');
    id.push_str(itoa::Buffer::new().format(n));
    id
}

/// One in-flight request.
#[derive(Debug)]
pub struct ChannelJob {
    provider: String,
    id: String,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    published: Arc<Published>,
    closed: AtomicBool,
    note: &'static str,
    /// When the request is sure to have ended by itself (its client's own timeout).
    ends_by: Option<Instant>,
}

/// Where the request's task leaves its result, and who is waiting for it: one lock and
/// a waker list, lighter than a watch channel (eight notifiers) for one value sent once.
#[derive(Debug, Default)]
struct Published(Mutex<Slot>);

#[derive(Debug, Default)]
struct Slot {
    result: Option<JobResult>,
    /// The task is gone (finished, aborted by a cancel, or panicked).
    ended: bool,
    waiters: Vec<Waker>,
}

impl Published {
    fn slot(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Marks the task ended and wakes the waiters however the task stops, so a cancelled or
/// panicked request never leaves a waiter hanging.
struct EndGuard(Arc<Published>);

impl Drop for EndGuard {
    fn drop(&mut self) {
        let waiters = {
            let mut slot = self.0.slot();
            slot.ended = true;
            std::mem::take(&mut slot.waiters)
        };
        waiters.into_iter().for_each(Waker::wake);
    }
}

fn closed_result() -> JobResult {
    JobResult::bare(JobState::Cancelled, Some("request closed by the client".into()))
}

impl ChannelJob {
    /// Starts `request` in a task. `note` goes into cancel receipts (what the provider
    /// does on disconnect).
    pub fn start(provider: &str, id: String, request: BoxFuture<'static, JobResult>, note: &'static str) -> ChannelJob {
        ChannelJob::start_bounded(provider, id, request, note, None)
    }

    /// Like [`ChannelJob::start`] for a request sure to end by `ends_by` (its HTTP
    /// client's timeout): a wait for its result whose deadline is no earlier then needs
    /// no timer of its own.
    pub fn start_bounded(
        provider: &str,
        id: String,
        request: BoxFuture<'static, JobResult>,
        note: &'static str,
        ends_by: Option<Instant>,
    ) -> ChannelJob {
        let published = Arc::new(Published::default());
        let guard = EndGuard(published.clone());
        // The request itself: owned by the `ChannelJob`, whose cancel or drop aborts it; the
        // race that holds the job runs on its caller's tracker.
        #[allow(clippy::disallowed_methods)]
        let task = tokio::spawn(async move {
            let r = request.await;
            guard.0.slot().result = Some(r);
            drop(guard);
        });
        ChannelJob {
            provider: provider.to_string(),
            id,
            task: Mutex::new(Some(task)),
            published,
            closed: AtomicBool::new(false),
            note,
            ends_by,
        }
    }

    fn finished(&self) -> Option<JobResult> {
        self.published.slot().result.clone()
    }

    /// Waits for the task's result with no deadline.
    fn outcome(&self) -> impl std::future::Future<Output = JobResult> + '_ {
        std::future::poll_fn(move |cx| {
            let mut slot = self.published.slot();
            if let Some(r) = &slot.result {
                return Poll::Ready(r.clone());
            }
            if slot.ended || self.closed.load(Ordering::SeqCst) {
                return Poll::Ready(closed_result());
            }
            if !slot.waiters.iter().any(|w| w.will_wake(cx.waker())) {
                slot.waiters.push(cx.waker().clone());
            }
            Poll::Pending
        })
    }
}

/// A job nobody holds any more (its race was dropped without being stopped: a runtime
/// shutting down, a caller that drops a race) closes its request, as a cancel would:
/// the request must not run on to its timeout, holding the provider's compute for a
/// reply nobody will read. There is no receipt (no one is left to record it); the
/// gateway stops a race whose client hung up instead of dropping it, so its attempts
/// do get receipts.
impl Drop for ChannelJob {
    fn drop(&mut self) {
        // A finished request (the common case: the race read its result) costs one load.
        if let Ok(Some(task)) = self.task.get_mut() {
            if !task.is_finished() {
                task.abort();
            }
        }
    }
}

#[async_trait]
impl Job for ChannelJob {
    fn job_id(&self) -> Option<String> {
        Some(self.id.clone())
    }

    async fn status(&self) -> Result<JobState, ProviderError> {
        if self.closed.load(Ordering::SeqCst) {
            return Ok(JobState::Cancelled);
        }
        Ok(self.finished().map_or(JobState::Pending, |r| r.state))
    }

    async fn result(&self, deadline: Instant) -> JobResult {
        if self.closed.load(Ordering::SeqCst) {
            return closed_result();
        }
        // The request ends (with its own timeout error) before the deadline could fire.
        if self.ends_by.is_some_and(|end| end <= deadline) {
            return self.outcome().await;
        }
        tokio::select! {
            r = self.outcome() => r,
            () = tokio::time::sleep_until(deadline) => JobResult::timed_out(),
        }
    }

    async fn cancel(&self, ctx: CancelContext) -> Result<Receipt, ProviderError> {
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
        self.note.clone_into(&mut receipt.note);
        Ok(receipt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use std::time::Duration;

    #[test]
    fn correlation_ids_name_the_provider_and_never_repeat() {
        let (a, b) = (correlation_id("vllm-a"), correlation_id("vllm-a"));
        assert_ne!(a, b);
        for id in [&a, &b] {
            let rest = id.strip_prefix("tailcut-vllm-a-").expect("prefix");
            let (started, n) = rest.split_once('-').expect("two parts");
            assert!(u128::from_str_radix(started, 16).is_ok_and(|t| t > 0), "{id}");
            assert!(n.parse::<u64>().is_ok(), "{id}");
        }
        let (na, nb): (u64, u64) = (a.rsplit('-').next().unwrap().parse().unwrap(), b.rsplit('-').next().unwrap().parse().unwrap());
        assert!(nb > na);
    }

    fn after(d: Duration, state: JobState) -> BoxFuture<'static, JobResult> {
        async move {
            tokio::time::sleep(d).await;
            JobResult::bare(state, None)
        }
        .boxed()
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_still_cuts_a_request_that_may_outlive_it() {
        let t0 = Instant::now();
        let job = ChannelJob::start_bounded(
            "p",
            "id".into(),
            after(Duration::from_secs(60), JobState::Completed),
            "",
            Some(t0 + Duration::from_secs(61)),
        );
        let r = job.result(t0 + Duration::from_secs(5)).await;
        assert_eq!(r.state, JobState::TimedOut);
        assert_eq!(Instant::now() - t0, Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_bounded_before_the_deadline_resolves_itself() {
        let t0 = Instant::now();
        // The request's own timeout (here: a failure at 60 s) comes first.
        let job = ChannelJob::start_bounded(
            "p",
            "id".into(),
            after(Duration::from_secs(60), JobState::Failed),
            "",
            Some(t0 + Duration::from_secs(61)),
        );
        let r = job.result(t0 + Duration::from_secs(300)).await;
        assert_eq!(r.state, JobState::Failed);
        assert_eq!(Instant::now() - t0, Duration::from_secs(60));
        let unbounded = ChannelJob::start("p", "id".into(), after(Duration::from_secs(600), JobState::Completed), "");
        assert_eq!(unbounded.result(t0 + Duration::from_secs(300)).await.state, JobState::TimedOut);
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancel_wakes_every_waiter_and_a_finished_request_is_seen_by_all() {
        let job = std::sync::Arc::new(ChannelJob::start("p", "id".into(), after(Duration::from_secs(600), JobState::Completed), "closed"));
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let job = job.clone();
                tokio::spawn(async move { job.result(Instant::now() + Duration::from_secs(900)).await })
            })
            .collect();
        tokio::task::yield_now().await;
        let ctx = CancelContext { reason: "lost".into(), epoch: Instant::now(), sent_at: Instant::now(), state_before: None };
        assert_eq!(job.cancel(ctx).await.unwrap().note, "closed");
        for w in waiters {
            assert_eq!(tokio::time::timeout(Duration::from_secs(1), w).await.unwrap().unwrap().state, JobState::Cancelled);
        }
        let done = std::sync::Arc::new(ChannelJob::start("p", "id".into(), after(Duration::from_secs(1), JobState::Completed), ""));
        let (a, b) =
            tokio::join!(done.result(Instant::now() + Duration::from_secs(9)), done.result(Instant::now() + Duration::from_secs(9)));
        assert_eq!((a.state, b.state), (JobState::Completed, JobState::Completed));
        assert_eq!(done.status().await.unwrap(), JobState::Completed);
    }

    #[tokio::test(start_paused = true)]
    async fn a_job_dropped_unfinished_closes_its_request() {
        struct Dropped(std::sync::Arc<AtomicBool>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let dropped = std::sync::Arc::new(AtomicBool::new(false));
        let guard = Dropped(dropped.clone());
        let request = async move {
            tokio::time::sleep(Duration::from_secs(600)).await;
            drop(guard);
            JobResult::bare(JobState::Completed, None)
        };
        let job = ChannelJob::start("p", "id".into(), request.boxed(), "");
        tokio::task::yield_now().await;
        assert!(!dropped.load(Ordering::SeqCst));
        drop(job);
        tokio::task::yield_now().await;
        assert!(dropped.load(Ordering::SeqCst), "the request ran on after its job was dropped");
    }
}
