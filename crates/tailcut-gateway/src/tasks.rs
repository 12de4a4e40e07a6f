//! Supervised tasks: every task the gateway starts runs on one [`TaskTracker`], and
//! every long-lived loop stops on one [`CancellationToken`] ([`Tasks`], held by
//! `AppState`).
//!
//! What runs on the tracker: connection tasks and hyper-path handler tasks, job tasks
//! (`POST /v1/jobs`), the tasks that record a race once its losers are settled
//! (`observe::record_when_settled`), the cleaner, the model saver, the heartbeat, the
//! replicas loops and the startup orphan cancels. The engine's own settle task (loser
//! cancels, their receipts, the trace record) runs on the same tracker too: every
//! hedger the gateway builds is given it (`Hedger::with_gate`), so the guarantee holds
//! by construction, not by the order of operations at shutdown.
//!
//! The guarantee, kept by `serving::drain_in_flight_races`: once the drain starts, the
//! tracker is closed and waited on (up to `[gateway] drain_timeout_s`), so every loser
//! cancel started before or during the drain has its receipt in the trace before the
//! process saves its models and exits. A bare `tokio::spawn` would escape that wait;
//! `clippy.toml` bans it.

use std::future::Future;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The gateway's one tracker and one stop token.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tasks {
    /// Every task the gateway spawns; the drain waits on it.
    pub(crate) tracker: TaskTracker,
    /// Cancelled when the drain starts: loops (cleaner, saver, heartbeat, replicas)
    /// return on it.
    pub(crate) stop: CancellationToken,
}

impl Tasks {
    /// Spawns `task` on the tracker (on the current runtime).
    pub(crate) fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tracker.spawn(task)
    }

    /// Spawns a loop on the tracker that ends when the drain starts (at its next await).
    pub(crate) fn spawn_loop<F>(&self, task: F) -> tokio::task::JoinHandle<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let stop = self.stop.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                () = stop.cancelled() => {}
                () = task => {}
            }
        })
    }
}
