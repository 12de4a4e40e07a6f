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
//! event, then the rest as they come — through the race's [`StreamHandoff`] (given in its
//! [`RunScope`](crate::engine::RunScope), read by providers as [`JobRequest::handoff`]):
//! [`StreamHandoff::take`] gives it to the caller once the race names the winner. This
//! module owns the stream job and the validator of stream races ([`FirstEvent`]); the
//! event model and the hand-over are [`crate::handover`]'s, reading a provider's wire
//! format is the provider module's.

use crate::handover::{lock, Reader};
use crate::job::{JobRequest, JobResult, JobState, Payload};
use crate::provider::{CancelContext, Job, ProviderError};
use crate::receipt::{CancelScope, Receipt};
use crate::validate::{Validation, Validator};
use async_trait::async_trait;
use bytes::Bytes;
use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;
use tokio::time::Instant;

pub use crate::handover::{EventSender, StreamEvent, StreamHandoff, WinnerStream};

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
        let handoff = request.handoff().cloned();
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
