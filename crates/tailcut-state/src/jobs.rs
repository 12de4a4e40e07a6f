//! The job store: rows of every job — state, result, winner, the full trace record with
//! receipts, and each attempt's provider job id, stored when its submit returns — kept
//! for the retention window, in SQLite (or memory) for one gateway or in PostgreSQL for
//! several replicas (`[state] url`). Every job belongs to the tenant that created it;
//! [`JobStore::get_owned`] is the only read the API makes, so another tenant's job is
//! indistinguishable from a missing one.
//!
//! Jobs left `running` by a gateway that died are taken over: on SQLite by a live
//! gateway process on the same file (one started later, or one already running) once
//! the dead one's heartbeat has expired or its pid is gone ([`JobStore::take_over_dead`],
//! `jobs/process.rs`), on PostgreSQL by a surviving replica once the dead one's lease
//! has expired ([`JobStore::take_over`]). A live process's jobs are never taken. They
//! are marked `interrupted` and the gateway cancels their provider jobs by id
//! (`replicas::cancel_orphans`), with receipts. A `DELETE` on a replica (or process)
//! that does not run the job sets `cancel_requested`; the owner polls for it
//! ([`JobStore::cancel_requests`]) and stops the race.
//!
//! A caller waiting for a job to end ([`JobStore::wait_ended`]) is woken by the end
//! (`jobs/wake.rs`), not by polling the store.
//!
//! [`JobStore`] is the same for every backend: it holds one [`JobBackend`], the queries
//! of one database (`jobs/sqlite.rs`, `jobs/postgres.rs`), and the waiters of jobs.
//! Every call the API makes is `async` and never blocks its thread: on PostgreSQL it is
//! awaited on the state's own runtime, on SQLite on the connection's writer thread.

use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "postgres")]
mod postgres;
mod process;
mod sqlite;
mod wake;
pub use crate::worker::WorkerGone;
pub use wake::{FALLBACK_POLL, FALLBACK_POLL_LISTENING};

/// A stored job.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRow {
    /// Id.
    pub id: String,
    /// Route.
    pub route: String,
    /// The tenant (API key name) that created it; `None` for jobs stored before owners
    /// were recorded, which no tenant can read.
    pub owner: Option<String>,
    /// `running`, `succeeded`, `failed`, `cancelled` or `interrupted`.
    pub state: String,
    /// Created, Unix ms.
    pub created_ms: i64,
    /// Result payload (JSON) when succeeded.
    pub result: Option<Value>,
    /// Winning provider.
    pub winner: Option<String>,
    /// The trace record (attempts, receipts, cost).
    pub trace: Option<Value>,
    /// Error text.
    pub error: Option<String>,
}

impl JobRow {
    /// The API representation.
    pub fn to_json(&self) -> Value {
        let t = self.trace.clone().unwrap_or(Value::Null);
        json!({
            "id": self.id, "route": self.route, "state": self.state, "created_ms": self.created_ms,
            "result": self.result, "winner": self.winner, "error": self.error,
            "latency_ms": t.get("winner_total_ms"), "attempts": t.get("attempts"), "receipts": t.get("receipts"),
            "projected_cost_micro_usd": t.get("projected_cost_micro_usd"),
        })
    }
}

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite.
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL.
    #[cfg(feature = "postgres")]
    #[error("{0}")]
    Pg(#[from] crate::pg::PgError),
    /// The SQLite connection's thread stopped.
    #[error("the job store's {0}")]
    Worker(#[from] WorkerGone),
}

/// A result of the store.
pub type StoreResult<T> = Result<T, StoreError>;

/// An attempt of a job that was in flight when its gateway died: what is needed to cancel
/// it at its provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    /// The job.
    pub job: String,
    /// The provider it was submitted to.
    pub provider: String,
    /// The provider's job id.
    pub provider_job_id: String,
}

/// A job's end, as a backend records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobEnd {
    /// The job.
    pub id: String,
    /// `succeeded`, `failed` or `cancelled`.
    pub state: String,
    /// Result payload (JSON text).
    pub result: Option<String>,
    /// Winning provider.
    pub winner: Option<String>,
    /// The trace record (JSON text).
    pub trace: Option<String>,
    /// Error text.
    pub error: Option<String>,
}

/// The queries of one database behind [`JobStore`]. Every async call is safe on a serving
/// runtime (it never blocks the thread); [`JobBackend::take_over_dead`] blocks its caller
/// and is made only at start and from a blocking thread.
#[async_trait::async_trait]
pub trait JobBackend: Send + Sync + std::fmt::Debug {
    /// This store's replica id on PostgreSQL (`None` on SQLite).
    fn replica(&self) -> Option<String>;
    /// On SQLite: claims the dead processes sharing the file, marks their running jobs
    /// interrupted and returns those jobs and their in-flight attempts. Nothing elsewhere.
    fn take_over_dead(&self) -> StoreResult<(Vec<String>, Vec<Orphan>)>;
    /// On PostgreSQL: marks the running jobs of `dead` replicas interrupted and returns
    /// how many, with their in-flight attempts. Nothing elsewhere.
    async fn take_over(&self, dead: Vec<String>) -> StoreResult<(usize, Vec<Orphan>)>;
    /// Marks this process stopped (on SQLite; PostgreSQL's replica row is the state's).
    async fn mark_stopped(&self) -> StoreResult<()>;
    /// Records a new running job.
    async fn insert(&self, id: &str, route: &str, owner: &str) -> StoreResult<()>;
    /// Records an attempt whose submit returned.
    async fn record_attempt(&self, id: &str, seq: i32, provider: &str, provider_job_id: Option<&str>) -> StoreResult<()>;
    /// Records a running job's end (an ended job keeps its first end).
    async fn finish(&self, end: JobEnd) -> StoreResult<()>;
    /// A job by id.
    async fn get(&self, id: &str) -> StoreResult<Option<JobRow>>;
    /// Sets a running job's `cancel_requested`.
    async fn request_cancel(&self, id: &str) -> StoreResult<()>;
    /// This replica's (process's) running jobs with `cancel_requested`.
    async fn cancel_requests(&self) -> StoreResult<Vec<String>>;
    /// Replaces a job's trace.
    async fn set_trace(&self, id: &str, trace: String) -> StoreResult<()>;
    /// Deletes jobs finished at or before `cutoff_ms`; returns how many.
    async fn cleanup(&self, cutoff_ms: i64) -> StoreResult<usize>;
}

/// The store.
#[derive(Debug)]
pub struct JobStore {
    backend: Box<dyn JobBackend>,
    /// Who waits for which job's end.
    waiters: Arc<wake::Waiters>,
    /// Reads of a job row, counted in unit tests.
    #[cfg(test)]
    reads: std::sync::atomic::AtomicU64,
}

/// The PostgreSQL channel a job's end is announced on (its payload: the job id), by a
/// trigger on `jobs` (`crate::pg::MIGRATIONS`).
#[cfg(feature = "postgres")]
const JOB_DONE_CHANNEL: &str = "tailcut_job_done";

const INTERRUPTED: &str =
    "the gateway that ran this job stopped while it was running; its provider jobs were cancelled by id (see the receipts in the log)";

/// Wall-clock milliseconds (processes sharing a file share the clock).
fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// A JSON column read back (`None` when empty or not JSON).
fn parse(s: Option<String>) -> Option<Value> {
    s.and_then(|s| serde_json::from_str(&s).ok())
}

impl JobStore {
    /// Opens (creating) the store on SQLite; `None` keeps it in memory. Registers this
    /// process among those sharing the file, renewing its heartbeat every `ttl / 3`
    /// (`[state] lease_ttl_s`): another process takes this one's running jobs over only
    /// once it has missed its heartbeats for `ttl`, stopped, or (on this host) exited.
    pub fn open(path: Option<&Path>, ttl: Duration) -> StoreResult<JobStore> {
        Ok(JobStore::with_backend(Box::new(sqlite::SqliteJobs::open(path, ttl)?)))
    }

    /// The store on any backend.
    pub fn with_backend(backend: Box<dyn JobBackend>) -> JobStore {
        JobStore {
            backend,
            waiters: Arc::default(),
            #[cfg(test)]
            reads: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The store in the replicas' shared PostgreSQL (its tables come with the state's
    /// migrations). Listens for the ends of jobs on every replica, to wake this one's
    /// waiters.
    #[cfg(feature = "postgres")]
    pub fn postgres(state: Arc<crate::pg::PgState>) -> JobStore {
        let store = JobStore::with_backend(Box::new(postgres::PgJobs { state: state.clone() }));
        let waiters = store.waiters.clone();
        state.listen(JOB_DONE_CHANNEL, move |event| match event {
            crate::pg::Listening::Notification(id) => waiters.wake(id),
            crate::pg::Listening::Connected => waiters.listening(true),
            crate::pg::Listening::Lost => waiters.listening(false),
        });
        store
    }

    /// This store's replica id on PostgreSQL (`None` on SQLite).
    pub fn replica(&self) -> Option<String> {
        self.backend.replica()
    }

    /// On SQLite: claims the processes sharing the file that are dead (stopped, their
    /// heartbeat expired, or their pid gone from this host), marks their running jobs
    /// interrupted and returns how many, with those jobs' in-flight attempts to cancel.
    /// Called when the gateway is built and then periodically from a blocking thread
    /// (it waits for the writer thread). On PostgreSQL nothing is done here: see
    /// [`JobStore::take_over`].
    pub fn take_over_dead(&self) -> StoreResult<(usize, Vec<Orphan>)> {
        let (jobs, orphans) = self.backend.take_over_dead()?;
        for id in &jobs {
            self.waiters.wake(id);
        }
        Ok((jobs.len(), orphans))
    }

    /// At the end of a drain, on SQLite: marks this process stopped (its jobs have
    /// ended), so nobody waits for its heartbeat to expire.
    pub async fn mark_stopped(&self) -> StoreResult<()> {
        self.backend.mark_stopped().await
    }

    /// Job `id` once it is no longer running, or as it is after `max`. Woken by the
    /// job's end (`store/wake.rs`); without a wake-up it reads the row again every
    /// [`FALLBACK_POLL`] ([`FALLBACK_POLL_LISTENING`] on PostgreSQL while the listener
    /// is connected).
    pub async fn wait_ended(&self, id: &str, max: Duration) -> Option<JobRow> {
        let until = tokio::time::Instant::now() + max;
        // Subscribed before the first read: an end recorded in between wakes it.
        let mut waiter = self.waiters.subscribe(id);
        loop {
            let row = self.get(id).await.ok().flatten();
            let now = tokio::time::Instant::now();
            if row.as_ref().is_some_and(|r| r.state != "running") || now >= until {
                return row;
            }
            waiter.woken((until - now).min(self.waiters.fallback())).await;
        }
    }

    /// On PostgreSQL: marks the running jobs of `dead` replicas interrupted (this replica
    /// having claimed them) and returns their in-flight attempts to cancel.
    pub async fn take_over(&self, dead: Vec<String>) -> StoreResult<(usize, Vec<Orphan>)> {
        self.backend.take_over(dead).await
    }

    /// Records a new running job owned by `owner`.
    pub async fn insert(&self, id: &str, route: &str, owner: &str) -> StoreResult<()> {
        self.backend.insert(id, route, owner).await
    }

    /// Records an attempt of job `id` whose submit returned, with the provider's job id,
    /// before the race goes on (so a gateway that dies can have it cancelled).
    pub async fn record_attempt(&self, id: &str, seq: i32, provider: &str, provider_job_id: Option<&str>) -> StoreResult<()> {
        self.backend.record_attempt(id, seq, provider, provider_job_id).await
    }

    /// Records a job's end (a job already ended, e.g. taken over as `interrupted`, keeps
    /// its first end).
    pub async fn finish(
        &self,
        id: &str,
        state: &str,
        result: Option<&Value>,
        winner: Option<&str>,
        trace: Option<&Value>,
        error: Option<&str>,
    ) -> StoreResult<()> {
        let end = JobEnd {
            id: id.to_string(),
            state: state.to_string(),
            result: result.map(Value::to_string),
            winner: winner.map(str::to_string),
            trace: trace.map(Value::to_string),
            error: error.map(str::to_string),
        };
        let done = self.backend.finish(end).await;
        self.waiters.wake(id);
        done
    }

    /// A job by id, whoever owns it (for the gateway's own use: webhooks, draining).
    pub async fn get(&self, id: &str) -> StoreResult<Option<JobRow>> {
        #[cfg(test)]
        self.reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.backend.get(id).await
    }

    /// A job by id if `owner` created it; `None` when it is missing or someone else's.
    pub async fn get_owned(&self, id: &str, owner: &str) -> StoreResult<Option<JobRow>> {
        Ok(self.get(id).await?.filter(|row| row.owner.as_deref() == Some(owner)))
    }

    /// Asks the replica (or, on SQLite, the process sharing the file) running job `id`
    /// to stop it.
    pub async fn request_cancel(&self, id: &str) -> StoreResult<()> {
        self.backend.request_cancel(id).await
    }

    /// The running jobs of this replica (process, on SQLite) that a `DELETE` on another
    /// one asked to stop.
    pub async fn cancel_requests(&self) -> StoreResult<Vec<String>> {
        self.backend.cancel_requests().await
    }

    /// Stores the receipts of an interrupted job's orphaned provider jobs as its trace's
    /// receipts (what `GET /v1/jobs/{id}` shows).
    pub async fn set_orphan_receipts(&self, id: &str, receipts: &Value) -> StoreResult<()> {
        let trace = json!({ "receipts": receipts, "interrupted": true }).to_string();
        self.backend.set_trace(id, trace).await
    }

    /// Deletes finished jobs older than `retention`; returns how many.
    pub async fn cleanup(&self, retention: Duration) -> StoreResult<usize> {
        self.backend.cleanup(now_ms() - retention.as_millis() as i64).await
    }
}

#[cfg(test)]
mod tests;
