//! Who waits for which job to end (`?wait=`, `DELETE`, a drain), so that the job's end
//! wakes them instead of each polling the store: the store wakes a job's waiters when it
//! records the end in this process, and, on PostgreSQL, when another replica's end
//! arrives as a notification (`LISTEN tailcut_job_done`, sent by a trigger on `jobs`).
//! A waiter still re-reads the store without a wake-up, slowly: every [`FALLBACK_POLL`]
//! for what no notification reaches (another process on a shared SQLite file, a
//! PostgreSQL listener reconnecting), every [`FALLBACK_POLL_LISTENING`] on PostgreSQL
//! while the listener is connected (a reconnect wakes every waiter, for the ends it may
//! have missed).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::watch;

/// How long a waiter sleeps without a wake-up before it reads the store again.
pub const FALLBACK_POLL: Duration = Duration::from_secs(1);

/// The same on PostgreSQL while the listener is connected: every replica's job ends
/// arrive as notifications, so the poll is only a backstop.
pub const FALLBACK_POLL_LISTENING: Duration = Duration::from_secs(10);

type Map = Mutex<HashMap<String, watch::Sender<u64>>>;

/// The waiters of every job, by job id.
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    map: Arc<Map>,
    /// Whether a PostgreSQL listener is connected.
    listening: std::sync::atomic::AtomicBool,
}

impl Waiters {
    /// Registers a waiter for job `id` (before its row is read, so an end recorded in
    /// between is not missed).
    pub(crate) fn subscribe(&self, id: &str) -> Waiter {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        let rx = map.entry(id.to_string()).or_insert_with(|| watch::channel(0).0).subscribe();
        Waiter { rx, id: id.to_string(), map: self.map.clone() }
    }

    /// Wakes job `id`'s waiters.
    pub(crate) fn wake(&self, id: &str) {
        if let Some(tx) = self.map.lock().unwrap_or_else(PoisonError::into_inner).get(id) {
            tx.send_modify(|n| *n += 1);
        }
    }

    /// A PostgreSQL listener connected (`true`: every waiter is woken, for the ends it
    /// may have missed) or lost its connection (`false`).
    pub(crate) fn listening(&self, connected: bool) {
        self.listening.store(connected, std::sync::atomic::Ordering::Relaxed);
        self.wake_all();
    }

    /// How long a waiter may sleep without a wake-up.
    pub(crate) fn fallback(&self) -> Duration {
        if self.listening.load(std::sync::atomic::Ordering::Relaxed) {
            FALLBACK_POLL_LISTENING
        } else {
            FALLBACK_POLL
        }
    }

    /// Wakes every waiter.
    pub(crate) fn wake_all(&self) {
        for tx in self.map.lock().unwrap_or_else(PoisonError::into_inner).values() {
            tx.send_modify(|n| *n += 1);
        }
    }

    /// Jobs with waiters (tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

/// One waiter of one job; unregistered when dropped.
#[derive(Debug)]
pub(crate) struct Waiter {
    rx: watch::Receiver<u64>,
    id: String,
    map: Arc<Map>,
}

impl Waiter {
    /// Until the job is woken (since the last call, or since subscribing) or `at_most`
    /// has passed.
    pub(crate) async fn woken(&mut self, at_most: Duration) {
        let _ = tokio::time::timeout(at_most, self.rx.changed()).await;
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        // This waiter's receiver is still alive here: the last one leaves a count of 1.
        if map.get(&self.id).is_some_and(|tx| tx.receiver_count() <= 1) {
            map.remove(&self.id);
        }
    }
}
