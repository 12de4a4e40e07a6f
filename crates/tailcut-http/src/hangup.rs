//! A client hanging up while its request is served: the connection's reader marks it
//! ([`Hangup`]), and the service (the gateway's race) stops on it. On hyper's path,
//! [`HangUpOnDrop`] marks it when hyper drops the request's future.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A client that closed its connection while its request was being served: the
/// service stops on it ([`Hangup::wait`]). One per connection on the fast path (its
/// requests are answered one at a time); one per request on hyper's, set when hyper
/// drops the request's future ([`HangUpOnDrop`]).
#[derive(Debug, Default)]
pub struct Hangup {
    gone: AtomicBool,
    waker: futures::task::AtomicWaker,
}

impl Hangup {
    /// The client went away.
    pub fn hang_up(&self) {
        self.gone.store(true, Ordering::Release);
        self.waker.wake();
    }

    /// Whether the client went away.
    pub fn happened(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    /// Resolves once the client has gone.
    pub fn wait(self: Arc<Self>) -> impl Future<Output = ()> + Send + 'static {
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

/// Hangs up when dropped while armed: made with a request on hyper's path and dropped
/// with its future (hyper drops it when the client hangs up) unless the service
/// answered first ([`HangUpOnDrop::disarm`]).
#[derive(Debug)]
pub struct HangUpOnDrop(Option<Arc<Hangup>>);

impl HangUpOnDrop {
    /// Armed for `hangup`.
    pub fn new(hangup: Arc<Hangup>) -> HangUpOnDrop {
        HangUpOnDrop(Some(hangup))
    }

    /// The service answered: the client's going away no longer concerns it.
    pub fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for HangUpOnDrop {
    fn drop(&mut self) {
        if let Some(hangup) = self.0.take() {
            hangup.hang_up();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_armed_it_hangs_up_and_disarmed_it_does_not() {
        let h = Arc::new(Hangup::default());
        drop(HangUpOnDrop::new(h.clone()));
        assert!(h.happened());
        let h = Arc::new(Hangup::default());
        let mut guard = HangUpOnDrop::new(h.clone());
        guard.disarm();
        drop(guard);
        assert!(!h.happened());
    }
}
