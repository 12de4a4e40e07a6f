//! Streams as races of the engine.
//!
//! A streamed reply (an LLM's server-sent events) is raced like any other job: a
//! provider's [`ProviderApi::submit`](crate::provider::ProviderApi::submit) starts reading
//! the stream and returns a [`StreamJob`] at once, and the job's *result* is the stream's
//! first content event (or its clean end before any content, or its failure). So any
//! [`Policy`](crate::policy::Policy) drives streams: the first stream to produce content
//! wins, a stream that fails before its first content is an invalid result (the policy
//! moves on), budgets and the live cap are the engine's, and every loser still running is
//! cancelled by the engine, which closes its stream (a `request_channel_closed` receipt).
//!
//! The winner's stream is handed over intact — the events before its first content, that
//! event, then the rest as they come — through the request's [`StreamHandoff`] (a
//! [`JobRequest`] extension): [`StreamHandoff::take`] gives it to the caller once the race
//! names the winner. This module owns the event model, the stream job, the hand-over and
//! the validator of stream races ([`FirstEvent`]); reading a provider's wire format is the
//! provider module's.

use crate::job::{JobRequest, JobResult, JobState, Payload};
use crate::provider::{CancelContext, Job, ProviderError};
use crate::receipt::{CancelScope, Receipt};
use crate::validate::{Validation, Validator};
use async_trait::async_trait;
use bytes::Bytes;
use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// One event of a streamed reply, framed as the client gets it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamEvent {
    /// An event without content (a role chunk, a keep-alive): held until the stream wins.
    Preamble(Bytes),
    /// An event carrying content; the first one is the stream's race result.
    Content(Bytes),
    /// The stream ended normally.
    Done,
    /// The stream failed (why, never containing credentials).
    Failed {
        /// What broke, as the provider's reader saw it.
        reason: String,
    },
}

impl StreamEvent {
    fn ends(&self) -> bool {
        matches!(self, StreamEvent::Done | StreamEvent::Failed { .. })
    }
}

/// Where a provider's reader puts the events it reads.
#[derive(Debug)]
pub struct EventSender {
    events: mpsc::UnboundedSender<StreamEvent>,
    /// Set once the reader sent the stream's end (shared with its [`Reader`]).
    ended: Arc<AtomicBool>,
}

impl EventSender {
    /// Sends one event; `false` once nobody listens (the stream was closed), when the
    /// reader should stop. After the stream's end ([`StreamEvent::Done`] or
    /// [`StreamEvent::Failed`]) the reader is no longer stopped with the stream: it may
    /// tidy up (read the reply's last bytes, so that its connection is kept alive).
    pub fn send(&self, event: StreamEvent) -> bool {
        if event.ends() {
            self.ended.store(true, Ordering::Release);
        }
        self.events.send(event).is_ok()
    }
}

/// A reader task, stopped when this is dropped while it is still streaming: whoever
/// holds it keeps the stream open. A reader that already sent the stream's end is left
/// to finish by itself.
#[derive(Debug)]
struct Reader {
    task: tokio::task::JoinHandle<()>,
    ended: Arc<AtomicBool>,
}

impl Drop for Reader {
    fn drop(&mut self) {
        if !self.ended.load(Ordering::Acquire) {
            self.task.abort();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The winner's stream: every event it produced, in order, none lost.
#[derive(Debug)]
pub struct WinnerStream {
    /// Events read before the hand-over: the preamble and the first content event (or
    /// the end, for a stream that ended before any content).
    head: VecDeque<StreamEvent>,
    /// The rest, as the reader reads it.
    rest: mpsc::UnboundedReceiver<StreamEvent>,
    /// The reader; the stream is closed when the `WinnerStream` (or its event stream) is
    /// dropped.
    _reader: Option<Reader>,
}

impl WinnerStream {
    /// Every event of the stream in order: the held ones first, then the rest as they
    /// arrive, ending with its [`StreamEvent::Done`] or [`StreamEvent::Failed`] (a reader
    /// that stops without saying reads as `Done`). Dropping the stream closes it.
    pub fn into_events(self) -> impl futures::Stream<Item = StreamEvent> + Send + 'static {
        futures::stream::unfold(Some(self), |state| async move {
            let mut s = state?;
            let event = match s.head.pop_front() {
                Some(e) => e,
                None => s.rest.recv().await.unwrap_or(StreamEvent::Done),
            };
            let next = if event.ends() { None } else { Some(s) };
            Some((event, next))
        })
    }
}

#[derive(Debug, Default)]
struct HandoffState {
    /// Failures logged before each stream started, in start order.
    failures_before_start: Vec<usize>,
    /// Streams that failed before their first content: provider and why.
    failures: Vec<(String, String)>,
    /// Streams that reached their first content (or ended cleanly), in order.
    ready: Vec<(String, WinnerStream)>,
}

/// One request's stream hand-over: the streams that reached their first content wait
/// here for the caller to take the winner's, and it keeps what the caller reports about
/// the race (failures before the first content). Cheap to clone; attach it with
/// [`JobRequest::with_extension`].
#[derive(Clone, Debug, Default)]
pub struct StreamHandoff(Arc<Mutex<HandoffState>>);

impl StreamHandoff {
    /// A new, empty hand-over.
    pub fn new() -> StreamHandoff {
        StreamHandoff::default()
    }

    fn started(&self) {
        let mut s = lock(&self.0);
        let n = s.failures.len();
        s.failures_before_start.push(n);
    }

    fn failed(&self, provider: &str, why: &str) {
        lock(&self.0).failures.push((provider.to_string(), why.to_string()));
    }

    fn ready(&self, provider: &str, stream: WinnerStream) {
        lock(&self.0).ready.push((provider.to_string(), stream));
    }

    /// The winner's stream (the first of `provider`'s to reach its first content).
    /// Every other stream waiting here is closed at once: the caller never gets two.
    pub fn take(&self, provider: &str) -> Option<WinnerStream> {
        let mut ready = std::mem::take(&mut lock(&self.0).ready);
        let at = ready.iter().position(|(p, _)| p == provider)?;
        Some(ready.swap_remove(at).1)
    }

    /// The streams that failed before their first content, in order: provider and why.
    pub fn failures(&self) -> Vec<(String, String)> {
        lock(&self.0).failures.clone()
    }

    /// Whether the last stream started after a failure since the one before it (a
    /// fall-through), rather than on a timer. `false` with fewer than two streams.
    pub fn last_start_followed_failure(&self) -> bool {
        let s = lock(&self.0);
        match s.failures_before_start.as_slice() {
            [.., before, last] => last > before,
            _ => false,
        }
    }
}

/// A stream raced as a job: its result is the first content event. Built by a
/// provider's `submit` with [`StreamJob::start`].
#[derive(Debug)]
pub struct StreamJob {
    provider: String,
    /// Taken by the (single) `result` call.
    events: Mutex<Option<mpsc::UnboundedReceiver<StreamEvent>>>,
    /// Taken by the hand-over (the winner) or by a cancel (a loser).
    reader: Mutex<Option<Reader>>,
    handoff: Option<StreamHandoff>,
    /// Set by a cancel: the stream's end is then the cancel's doing, not a failure.
    cancelled: AtomicBool,
}

impl StreamJob {
    /// Starts `read` on its own task with the sender for the events it reads (it opens
    /// the provider's stream and sends every event, ending with `Done` or `Failed`), and
    /// returns the job at once. If `request` carries a [`StreamHandoff`], the stream is
    /// handed over there when it reaches its first content.
    pub fn start<F, Fut>(provider: &str, request: &JobRequest, read: F) -> StreamJob
    where
        F: FnOnce(EventSender) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (tx, rx) = mpsc::unbounded_channel();
        let ended = Arc::new(AtomicBool::new(false));
        // The body reader: owned by the `Reader` (aborted when it is dropped), it ends with the
        // body; the race's own task, on its caller's tracker, holds the reader.
        #[allow(clippy::disallowed_methods)]
        let task = tokio::spawn(read(EventSender { events: tx, ended: ended.clone() }));
        let reader = Reader { task, ended };
        let handoff = request.extension::<StreamHandoff>().cloned();
        if let Some(h) = &handoff {
            h.started();
        }
        StreamJob {
            provider: provider.to_string(),
            events: Mutex::new(Some(rx)),
            reader: Mutex::new(Some(reader)),
            handoff,
            cancelled: AtomicBool::new(false),
        }
    }

    fn failed(&self, why: String) -> JobResult {
        if self.cancelled.load(Ordering::SeqCst) {
            return JobResult::bare(JobState::Cancelled, Some("stream closed by a cancel".into()));
        }
        if let Some(h) = &self.handoff {
            h.failed(&self.provider, &why);
        }
        JobResult::bare(JobState::Failed, Some(why))
    }

    /// The stream reached its first content (`first`, empty when it ended before any):
    /// hand it over and report a completed result.
    fn won(&self, head: VecDeque<StreamEvent>, rest: mpsc::UnboundedReceiver<StreamEvent>, first: Bytes) -> JobResult {
        let reader = lock(&self.reader).take();
        if let Some(h) = &self.handoff {
            h.ready(&self.provider, WinnerStream { head, rest, _reader: reader });
        }
        let mut r = JobResult::bare(JobState::Completed, None);
        r.payload = Some(Payload { bytes: first, content_type: "text/event-stream".into() });
        r
    }
}

#[async_trait]
impl Job for StreamJob {
    fn job_id(&self) -> Option<String> {
        None
    }

    /// `PENDING` until cancelled: a stream cannot say whether it is queued or running.
    async fn status(&self) -> Result<JobState, ProviderError> {
        Ok(if self.cancelled.load(Ordering::SeqCst) { JobState::Cancelled } else { JobState::Pending })
    }

    async fn result(&self, deadline: Instant) -> JobResult {
        let Some(mut rx) = lock(&self.events).take() else {
            return JobResult::bare(JobState::Failed, Some("the stream's result was already read".into()));
        };
        let mut head = VecDeque::new();
        loop {
            let event = tokio::select! {
                e = rx.recv() => e,
                () = tokio::time::sleep_until(deadline) => return JobResult::timed_out(),
            };
            match event {
                Some(StreamEvent::Preamble(b)) => head.push_back(StreamEvent::Preamble(b)),
                Some(StreamEvent::Content(b)) => {
                    head.push_back(StreamEvent::Content(b.clone()));
                    return self.won(head, rx, b);
                }
                Some(StreamEvent::Done) => {
                    head.push_back(StreamEvent::Done);
                    return self.won(head, rx, Bytes::new());
                }
                Some(StreamEvent::Failed { reason }) => return self.failed(reason),
                None => return self.failed("the stream closed before its first content".into()),
            }
        }
    }

    /// Closes the stream (its reader stops at once): `request_channel_closed` evidence.
    async fn cancel(&self, ctx: CancelContext) -> Result<Receipt, ProviderError> {
        self.cancelled.store(true, Ordering::SeqCst);
        drop(lock(&self.reader).take());
        drop(lock(&self.events).take());
        let mut receipt = ctx.receipt(&self.provider, None);
        receipt.cancel_scope = CancelScope::Request;
        receipt.record_channel_closed(ctx.ms(Instant::now()));
        receipt.note = "stream closed before its first token".into();
        Ok(receipt)
    }
}

/// The validator of stream races: a stream that reached its first content event (or
/// ended cleanly before any) may win; the engine already rejects failures and timeouts.
#[derive(Debug, Clone, Copy, Default)]
pub struct FirstEvent;

impl Validator for FirstEvent {
    fn validate(&self, _result: &JobResult) -> Validation {
        Validation::ok()
    }
}
