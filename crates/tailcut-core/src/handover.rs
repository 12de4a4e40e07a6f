//! The stream hand-over: the event model of a streamed reply, and the slot in which the
//! streams that reached their first content wait for the race's caller to take the
//! winner's ([`StreamHandoff`]). A caller gives the slot to the race in its
//! [`RunScope`](crate::engine::RunScope); the race hands it to every attempt's provider
//! as a typed field of the request ([`JobRequest::handoff`](crate::job::JobRequest::handoff)).
//! The stream job that fills it is [`crate::stream`]'s.

use bytes::Bytes;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::mpsc;

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
    pub(crate) fn ends(&self) -> bool {
        matches!(self, StreamEvent::Done | StreamEvent::Failed { .. })
    }
}

/// Where a provider's reader puts the events it reads.
#[derive(Debug)]
pub struct EventSender {
    pub(crate) events: mpsc::UnboundedSender<StreamEvent>,
    /// Set once the reader sent the stream's end (shared with its [`Reader`]).
    pub(crate) ended: Arc<AtomicBool>,
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
pub(crate) struct Reader {
    pub(crate) task: tokio::task::JoinHandle<()>,
    pub(crate) ended: Arc<AtomicBool>,
}

impl Drop for Reader {
    fn drop(&mut self) {
        if !self.ended.load(Ordering::Acquire) {
            self.task.abort();
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The winner's stream: every event it produced, in order, none lost.
#[derive(Debug)]
pub struct WinnerStream {
    /// Events read before the hand-over: the preamble and the first content event (or
    /// the end, for a stream that ended before any content).
    pub(crate) head: VecDeque<StreamEvent>,
    /// The rest, as the reader reads it.
    pub(crate) rest: mpsc::UnboundedReceiver<StreamEvent>,
    /// The reader; the stream is closed when the `WinnerStream` (or its event stream) is
    /// dropped.
    pub(crate) _reader: Option<Reader>,
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
/// the race (failures before the first content). Cheap to clone; give it to the race
/// in its [`RunScope`](crate::engine::RunScope).
#[derive(Clone, Debug, Default)]
pub struct StreamHandoff(Arc<Mutex<HandoffState>>);

impl StreamHandoff {
    /// A new, empty hand-over.
    pub fn new() -> StreamHandoff {
        StreamHandoff::default()
    }

    pub(crate) fn started(&self) {
        let mut s = lock(&self.0);
        let n = s.failures.len();
        s.failures_before_start.push(n);
    }

    pub(crate) fn failed(&self, provider: &str, why: &str) {
        lock(&self.0).failures.push((provider.to_string(), why.to_string()));
    }

    pub(crate) fn ready(&self, provider: &str, stream: WinnerStream) {
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
