//! A client hanging up while its request is raced: the connection's reader marks it
//! ([`Hangup`]), and the race stops on it, cancelling its live attempts with receipts
//! as at the total timeout.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A client that closed its connection while its request was being raced: the race
/// stops on it ([`Hangup::wait`]) and cancels its live attempts with receipts, as at
/// the total timeout. One per connection on the fast path (its requests are answered
/// one at a time); one per request on hyper's ([`crate::dispatch`]), set when hyper drops
/// the request's future.
#[derive(Debug, Default)]
pub(crate) struct Hangup {
    gone: AtomicBool,
    waker: futures::task::AtomicWaker,
}

impl Hangup {
    /// The client went away.
    pub(crate) fn hang_up(&self) {
        self.gone.store(true, Ordering::Release);
        self.waker.wake();
    }

    /// Whether the client went away.
    pub(crate) fn happened(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    /// Resolves once the client has gone.
    pub(crate) fn wait(self: Arc<Self>) -> impl Future<Output = ()> + Send + 'static {
        std::future::poll_fn(move |cx| {
            if self.happened() {
                return std::task::Poll::Ready(());
            }
            self.waker.register(cx.waker());
            if self.happened() {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
    }
}
