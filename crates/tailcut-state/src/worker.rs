//! A SQLite connection on a thread of its own, fed closures over a channel: the caller
//! awaits the answer on a oneshot, so a busy file (another process holding the write
//! lock, up to the connection's busy timeout) stalls this thread, never the async
//! runtime that asked. The pattern is sqlx's SQLite worker; it replaces a std `Mutex`
//! held inside async functions.
//!
//! Calls run one at a time, in the order they were sent. The thread ends when the last
//! handle is dropped (after the calls already sent).

use rusqlite::Connection;
use std::sync::mpsc;
use tokio::sync::oneshot;

type Call = Box<dyn FnOnce(&mut Connection) + Send>;

/// Why a call got no answer.
#[derive(Debug, thiserror::Error, Clone, Copy, PartialEq, Eq)]
#[error("the SQLite writer thread has stopped")]
pub struct WorkerGone;

/// The handle of one connection's thread.
#[derive(Debug)]
pub(crate) struct Worker {
    calls: mpsc::Sender<Call>,
}

impl Worker {
    /// Moves `conn` to a new thread named `name`.
    pub(crate) fn start(conn: Connection, name: &str) -> std::io::Result<Worker> {
        let (calls, rx) = mpsc::channel::<Call>();
        std::thread::Builder::new().name(name.to_string()).spawn(move || {
            let mut conn = conn;
            while let Ok(call) = rx.recv() {
                call(&mut conn);
            }
        })?;
        Ok(Worker { calls })
    }

    /// Runs `f` on the connection's thread; the caller's task waits without blocking its
    /// thread.
    pub(crate) async fn call<T: Send + 'static>(&self, f: impl FnOnce(&mut Connection) -> T + Send + 'static) -> Result<T, WorkerGone> {
        let (tx, rx) = oneshot::channel();
        self.calls
            .send(Box::new(move |c| {
                let _ = tx.send(f(c));
            }))
            .map_err(|_| WorkerGone)?;
        rx.await.map_err(|_| WorkerGone)
    }

    /// Runs `f` on the connection's thread and blocks this thread until it answers: for
    /// synchronous callers only (a gateway being built, a blocking-pool thread).
    pub(crate) fn call_blocking<T: Send + 'static>(&self, f: impl FnOnce(&mut Connection) -> T + Send + 'static) -> Result<T, WorkerGone> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.calls
            .send(Box::new(move |c| {
                let _ = tx.send(f(c));
            }))
            .map_err(|_| WorkerGone)?;
        rx.recv().map_err(|_| WorkerGone)
    }
}
