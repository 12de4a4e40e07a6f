//! The timer heartbeat of one serving runtime: a timer re-armed every [`HEARTBEAT`]
//! while requests arrive, asleep while none do.
//!
//! Why a busy runtime wants it: tokio's timer driver writes to its eventfd (one system
//! call, and one more `epoll_wait` return) whenever a new timer is due before the
//! wake-up it planned when it last parked, and on a busy thread that is most of the
//! three timers a request sets (the total timeout, the hedge delay, the provider
//! client's timeout): 0.9 wake-ups per request at full load, against nginx's none. A
//! timer re-armed every [`HEARTBEAT`] keeps the planned wake-up at most that far away,
//! so timers longer than it register without a system call.
//!
//! Why an idle runtime must not keep it: ticking on, an idle thread woke three times
//! per tick (the tick, an eventfd write, a timer-wheel step), thirty times a second per
//! runtime. On a small machine those wake-ups of idle threads moved the busy ones
//! between cores and put a band of 0.2–0.5 ms first tokens into streaming rounds
//! (docs/benchmarks.md, run X). So the heartbeat stops after one tick with no request
//! and the next request wakes it ([`Heartbeat::beat`]: a load and a compare on the
//! request path, a store and a local wake-up only for the first request after a tick).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// The heartbeat's period.
pub const HEARTBEAT: Duration = Duration::from_millis(100);

/// No request since the last tick.
const QUIET: u8 = 0;
/// A request came since the last tick.
const BUSY: u8 = 1;
/// The heartbeat is stopped until the next request.
const ASLEEP: u8 = 2;

/// The shared state of one runtime's heartbeat.
#[derive(Debug, Default)]
pub struct Heartbeat {
    state: AtomicU8,
    wake: Notify,
    /// Ticks so far (what the tests observe).
    #[cfg(test)]
    ticks: std::sync::atomic::AtomicU64,
}

impl Heartbeat {
    /// A request arrived: keep the heartbeat going, or start it again.
    #[inline]
    pub fn beat(&self) {
        if self.state.load(Ordering::Relaxed) != BUSY && self.state.swap(BUSY, Ordering::AcqRel) == ASLEEP {
            self.wake.notify_one();
        }
    }

    /// Ticks so far.
    #[cfg(test)]
    fn ticks(&self) -> u64 {
        self.ticks.load(Ordering::Relaxed)
    }

    /// Runs the heartbeat on the current runtime, as a task on `tasks`, until the task
    /// is aborted.
    pub fn spawn(self: &Arc<Self>, tasks: &tokio_util::task::TaskTracker) -> tokio::task::JoinHandle<()> {
        let hb = self.clone();
        tasks.spawn(async move {
            loop {
                let mut tick = tokio::time::interval(HEARTBEAT);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                tick.tick().await; // the first tick is immediate
                loop {
                    tick.tick().await;
                    #[cfg(test)]
                    hb.ticks.fetch_add(1, Ordering::Relaxed);
                    // A whole tick without a request: sleep until the next one.
                    if hb.state.compare_exchange(BUSY, QUIET, Ordering::AcqRel, Ordering::Relaxed).is_err()
                        && hb.state.compare_exchange(QUIET, ASLEEP, Ordering::AcqRel, Ordering::Relaxed).is_ok()
                    {
                        break;
                    }
                }
                // `notify_one` leaves a permit when nobody waits yet: no wake-up is lost.
                hb.wake.notified().await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn advance(ms: u64) {
        // Step in small increments so the heartbeat task runs between ticks.
        for _ in 0..ms / 10 {
            tokio::time::advance(Duration::from_millis(10)).await;
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn ticks_while_requests_come_and_sleeps_when_they_stop() {
        let hb = Arc::new(Heartbeat::default());
        let task = hb.spawn(&tokio_util::task::TaskTracker::new());
        // Requests every 50 ms for a second: it ticks all along.
        for _ in 0..20 {
            hb.beat();
            advance(50).await;
        }
        let busy = hb.ticks();
        assert!((9..=11).contains(&busy), "ticks while busy: {busy}");
        // Two seconds without a request: at most two more ticks, then none.
        advance(2000).await;
        let idle = hb.ticks() - busy;
        assert!(idle <= 2, "ticks while idle: {idle}");
        assert_eq!(hb.state.load(Ordering::Relaxed), ASLEEP);
        // The next request starts it again.
        hb.beat();
        advance(300).await;
        let again = hb.ticks() - busy - idle;
        assert!(again >= 2, "ticks after a new request: {again}");
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_just_before_it_falls_asleep_is_not_lost() {
        let hb = Arc::new(Heartbeat::default());
        let task = hb.spawn(&tokio_util::task::TaskTracker::new());
        advance(500).await;
        assert_eq!(hb.state.load(Ordering::Relaxed), ASLEEP);
        // Beats with no task switch between them (the permit is kept for the sleeper).
        hb.beat();
        hb.beat();
        let before = hb.ticks();
        advance(250).await;
        assert!(hb.ticks() > before, "the heartbeat woke for the request");
        task.abort();
    }
}
