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
//! `store/process.rs`), on PostgreSQL by a surviving replica once the dead one's lease
//! has expired ([`JobStore::take_over`]). A live process's jobs are never taken. They
//! are marked `interrupted` and the gateway cancels their provider jobs by id
//! (`replicas::cancel_orphans`), with receipts. A `DELETE` on a replica (or process)
//! that does not run the job sets `cancel_requested`; the owner polls for it
//! ([`JobStore::cancel_requests`]) and stops the race.
//!
//! A caller waiting for a job to end ([`JobStore::wait_ended`]) is woken by the end
//! (`store/wake.rs`), not by polling the store.
//!
//! The SQLite tables come with numbered migrations (component `jobs`, applied under
//! the file's write lock: [`tailcut_core::sqlite_schema`]), so processes that open one
//! file together do not race each other's schema changes.
//!
//! Every call the API makes is `async`: on PostgreSQL it is awaited on the state's own
//! runtime ([`tailcut_core::pg::PgState::run`]), so a round trip to the database never
//! blocks a serving thread; on SQLite it is a local write under the connection's lock.

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tailcut_core::sqlite_schema::{self, Migration, Step};

mod process;
mod wake;
pub use wake::{FALLBACK_POLL, FALLBACK_POLL_LISTENING};

/// The job store's migrations on SQLite (component `jobs`). Never edit one that has
/// shipped: add the next.
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "jobs and their attempts",
        steps: &[Step::Sql(
            "CREATE TABLE IF NOT EXISTS jobs (
                id TEXT PRIMARY KEY, route TEXT NOT NULL, state TEXT NOT NULL, created_ms INTEGER NOT NULL,
                finished_ms INTEGER, result TEXT, winner TEXT, trace TEXT, error TEXT);
             CREATE INDEX IF NOT EXISTS jobs_finished ON jobs (finished_ms);
             CREATE TABLE IF NOT EXISTS job_attempts (
                job_id TEXT NOT NULL, seq INTEGER NOT NULL, provider TEXT NOT NULL, provider_job_id TEXT,
                submitted_ms INTEGER NOT NULL, PRIMARY KEY (job_id, seq));",
        )],
    },
    // Stores made before jobs had owners gain the column; their jobs stay unowned.
    Migration { version: 2, name: "jobs.owner", steps: &[Step::AddColumn { table: "jobs", column: "owner", decl: "TEXT" }] },
    // Several processes on one file: each job belongs to the process running it, which
    // renews its row's heartbeat; only a dead process's jobs are taken over.
    Migration {
        version: 3,
        name: "processes and jobs.process",
        steps: &[
            Step::Sql(
                "CREATE TABLE IF NOT EXISTS processes (
                    id TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL, started_ms INTEGER NOT NULL,
                    heartbeat_ms INTEGER NOT NULL, ttl_ms INTEGER NOT NULL, stopped_ms INTEGER)",
            ),
            Step::AddColumn { table: "jobs", column: "process", decl: "TEXT" },
            Step::Sql("CREATE INDEX IF NOT EXISTS jobs_running ON jobs (process) WHERE state = 'running'"),
        ],
    },
    // A `DELETE` on another process asks the one running the job to stop it.
    Migration {
        version: 4,
        name: "jobs.cancel_requested",
        steps: &[Step::AddColumn { table: "jobs", column: "cancel_requested", decl: "INTEGER NOT NULL DEFAULT 0" }],
    },
];

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
    Pg(#[from] tailcut_core::pg::PgError),
    /// The connection's lock was poisoned.
    #[error("the job store's lock was poisoned")]
    Poisoned,
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

/// The store.
#[derive(Debug)]
pub struct JobStore {
    backend: Backend,
    /// Who waits for which job's end.
    waiters: Arc<wake::Waiters>,
    /// Reads of a job row, counted in unit tests.
    #[cfg(test)]
    reads: std::sync::atomic::AtomicU64,
}

#[derive(Debug)]
enum Backend {
    Sqlite {
        conn: Mutex<Connection>,
        /// This process's row among those sharing the file.
        process: process::Registration,
    },
    #[cfg(feature = "postgres")]
    Pg(std::sync::Arc<tailcut_core::pg::PgState>),
}

/// The PostgreSQL channel a job's end is announced on (its payload: the job id), by a
/// trigger on `jobs` (`tailcut_core::pg::MIGRATIONS`).
#[cfg(feature = "postgres")]
const JOB_DONE_CHANNEL: &str = "tailcut_job_done";

use process::now_ms;

const INTERRUPTED: &str =
    "the gateway that ran this job stopped while it was running; its provider jobs were cancelled by id (see the receipts in the log)";

impl JobStore {
    /// Opens (creating) the store; `None` keeps it in memory. Registers this process
    /// among those sharing the file, renewing its heartbeat every `ttl / 3` (`[state]
    /// lease_ttl_s`): another process takes this one's running jobs over only once it
    /// has missed its heartbeats for `ttl`, stopped, or (on this host) exited.
    pub fn open(path: Option<&Path>, ttl: Duration) -> StoreResult<JobStore> {
        let mut conn = match path {
            Some(p) => {
                if let Some(parent) = p.parent().filter(|x| !x.as_os_str().is_empty()) {
                    let _ = std::fs::create_dir_all(parent);
                }
                sqlite_schema::open(p)?
            }
            None => Connection::open_in_memory()?,
        };
        sqlite_schema::migrate(&mut conn, "jobs", MIGRATIONS)?;
        let process = process::register(&conn, path, ttl)?;
        Ok(JobStore::with_backend(Backend::Sqlite { conn: Mutex::new(conn), process }))
    }

    fn with_backend(backend: Backend) -> JobStore {
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
    pub fn postgres(state: std::sync::Arc<tailcut_core::pg::PgState>) -> JobStore {
        let store = JobStore::with_backend(Backend::Pg(state.clone()));
        let waiters = store.waiters.clone();
        state.listen(JOB_DONE_CHANNEL, move |event| match event {
            tailcut_core::pg::Listening::Notification(id) => waiters.wake(id),
            tailcut_core::pg::Listening::Connected => waiters.listening(true),
            tailcut_core::pg::Listening::Lost => waiters.listening(false),
        });
        store
    }

    fn with<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> StoreResult<T> {
        match &self.backend {
            Backend::Sqlite { conn, .. } => {
                let c = conn.lock().map_err(|_| StoreError::Poisoned)?;
                Ok(f(&c)?)
            }
            #[cfg(feature = "postgres")]
            Backend::Pg(_) => Err(StoreError::Poisoned),
        }
    }

    /// This store's replica id on PostgreSQL (`None` on SQLite).
    pub fn replica(&self) -> Option<String> {
        match &self.backend {
            Backend::Sqlite { .. } => None,
            #[cfg(feature = "postgres")]
            Backend::Pg(st) => Some(st.replica().to_string()),
        }
    }

    /// On SQLite: claims the processes sharing the file that are dead (stopped, their
    /// heartbeat expired, or their pid gone from this host), marks their running jobs
    /// interrupted and returns those jobs' in-flight attempts to cancel. Called when the
    /// store is opened and then periodically (`replicas::spawn_replica_loop`). On
    /// PostgreSQL nothing is done here: see [`JobStore::take_over`].
    pub fn take_over_dead(&self) -> StoreResult<(usize, Vec<Orphan>)> {
        let Backend::Sqlite { conn, process } = &self.backend else { return Ok((0, Vec::new())) };
        let mut c = conn.lock().map_err(|_| StoreError::Poisoned)?;
        let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let dead = process::claim_dead(&tx, &process.id)?;
        let (mut orphans, mut jobs) = (Vec::new(), Vec::new());
        for p in &dead {
            let mut stmt = tx.prepare_cached(
                "SELECT a.job_id, a.provider, a.provider_job_id FROM job_attempts a JOIN jobs j ON j.id = a.job_id
                 WHERE j.state = 'running' AND j.process IS ?1 AND a.provider_job_id IS NOT NULL ORDER BY a.job_id, a.seq",
            )?;
            let rows = stmt.query_map([p], |r| Ok(Orphan { job: r.get(0)?, provider: r.get(1)?, provider_job_id: r.get(2)? }))?;
            orphans.extend(rows.collect::<rusqlite::Result<Vec<_>>>()?);
            let mut stmt = tx.prepare_cached("SELECT id FROM jobs WHERE state = 'running' AND process IS ?1")?;
            jobs.extend(stmt.query_map([p], |r| r.get::<_, String>(0))?.collect::<rusqlite::Result<Vec<_>>>()?);
            tx.execute(
                "UPDATE jobs SET state = 'interrupted', finished_ms = ?1, error = ?2 WHERE state = 'running' AND process IS ?3",
                params![now_ms(), INTERRUPTED, p],
            )?;
        }
        tx.commit()?;
        drop(c);
        for id in &jobs {
            self.waiters.wake(id);
        }
        Ok((jobs.len(), orphans))
    }

    /// At the end of a drain, on SQLite: marks this process stopped (its jobs have
    /// ended), so nobody waits for its heartbeat to expire.
    pub fn mark_stopped(&self) -> StoreResult<()> {
        match &self.backend {
            Backend::Sqlite { conn, process } => {
                let c = conn.lock().map_err(|_| StoreError::Poisoned)?;
                Ok(process.mark_stopped(&c)?)
            }
            #[cfg(feature = "postgres")]
            Backend::Pg(_) => Ok(()),
        }
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
    #[cfg(feature = "postgres")]
    pub async fn take_over(&self, dead: Vec<String>) -> StoreResult<(usize, Vec<Orphan>)> {
        let Backend::Pg(st) = &self.backend else { return Ok((0, Vec::new())) };
        let s = st.clone();
        Ok(st
            .run(async move {
                let mut c = s.client().await?;
                let tx = c.transaction().await?;
                let rows = tx
                    .query(
                        "SELECT a.job_id, a.provider, a.provider_job_id FROM job_attempts a JOIN jobs j ON j.id = a.job_id
                         WHERE j.state = 'running' AND j.replica = ANY($1) AND a.provider_job_id IS NOT NULL
                         ORDER BY a.job_id, a.seq FOR UPDATE OF j",
                        &[&dead],
                    )
                    .await?;
                let orphans = rows.iter().map(|r| Orphan { job: r.get(0), provider: r.get(1), provider_job_id: r.get(2) }).collect();
                let n = tx
                    .execute(
                        "UPDATE jobs SET state = 'interrupted', finished_ms = $2, error = $3 WHERE state = 'running' AND replica = ANY($1)",
                        &[&dead, &now_ms(), &INTERRUPTED],
                    )
                    .await?;
                tx.commit().await?;
                Ok((n as usize, orphans))
            })
            .await?)
    }

    /// Records a new running job owned by `owner`.
    pub async fn insert(&self, id: &str, route: &str, owner: &str) -> StoreResult<()> {
        match &self.backend {
            Backend::Sqlite { process, .. } => self.with(|c| {
                c.execute(
                    "INSERT INTO jobs (id, route, state, created_ms, owner, process) VALUES (?1, ?2, 'running', ?3, ?4, ?5)",
                    params![id, route, now_ms(), owner, process.id],
                )
                .map(|_| ())
            }),
            #[cfg(feature = "postgres")]
            Backend::Pg(st) => {
                st.execute(
                    "INSERT INTO jobs (id, route, state, created_ms, owner, replica) VALUES ($1, $2, 'running', $3, $4, $5)",
                    vec![
                        Box::new(id.to_string()),
                        Box::new(route.to_string()),
                        Box::new(now_ms()),
                        Box::new(owner.to_string()),
                        Box::new(st.replica().to_string()),
                    ],
                )
                .await?;
                Ok(())
            }
        }
    }

    /// Records an attempt of job `id` whose submit returned, with the provider's job id,
    /// before the race goes on (so a gateway that dies can have it cancelled).
    pub async fn record_attempt(&self, id: &str, seq: i32, provider: &str, provider_job_id: Option<&str>) -> StoreResult<()> {
        match &self.backend {
            Backend::Sqlite { .. } => self.with(|c| {
                c.execute(
                    "INSERT OR REPLACE INTO job_attempts (job_id, seq, provider, provider_job_id, submitted_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![id, seq, provider, provider_job_id, now_ms()],
                )
                .map(|_| ())
            }),
            #[cfg(feature = "postgres")]
            Backend::Pg(st) => {
                st.execute(
                    "INSERT INTO job_attempts (job_id, seq, provider, provider_job_id, submitted_ms) VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (job_id, seq) DO UPDATE SET provider = $3, provider_job_id = $4",
                    vec![Box::new(id.to_string()), Box::new(seq), Box::new(provider.to_string()), Box::new(provider_job_id.map(str::to_string)), Box::new(now_ms())],
                )
                .await?;
                Ok(())
            }
        }
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
        let done = self.finish_row(id, state, result, winner, trace, error).await;
        self.waiters.wake(id);
        done
    }

    async fn finish_row(
        &self,
        id: &str,
        state: &str,
        result: Option<&Value>,
        winner: Option<&str>,
        trace: Option<&Value>,
        error: Option<&str>,
    ) -> StoreResult<()> {
        match &self.backend {
            Backend::Sqlite { .. } => self.with(|c| {
                c.execute(
                    "UPDATE jobs SET state = ?2, finished_ms = ?3, result = ?4, winner = ?5, trace = ?6, error = ?7 WHERE id = ?1 AND state = 'running'",
                    params![id, state, now_ms(), result.map(Value::to_string), winner, trace.map(Value::to_string), error],
                )
                .map(|_| ())
            }),
            #[cfg(feature = "postgres")]
            Backend::Pg(st) => {
                st.execute(
                    "UPDATE jobs SET state = $2, finished_ms = $3, result = $4, winner = $5, trace = $6, error = $7 WHERE id = $1 AND state = 'running'",
                    vec![
                        Box::new(id.to_string()),
                        Box::new(state.to_string()),
                        Box::new(now_ms()),
                        Box::new(result.map(Value::to_string)),
                        Box::new(winner.map(str::to_string)),
                        Box::new(trace.map(Value::to_string)),
                        Box::new(error.map(str::to_string)),
                    ],
                )
                .await?;
                Ok(())
            }
        }
    }

    /// A job by id, whoever owns it (for the gateway's own use: webhooks, draining).
    pub async fn get(&self, id: &str) -> StoreResult<Option<JobRow>> {
        #[cfg(test)]
        self.reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let parse = |s: Option<String>| s.and_then(|s| serde_json::from_str(&s).ok());
        match &self.backend {
            Backend::Sqlite { .. } => self.with(|c| {
                c.query_row(
                    "SELECT id, route, state, created_ms, result, winner, trace, error, owner FROM jobs WHERE id = ?1",
                    params![id],
                    |r| {
                        Ok(JobRow {
                            id: r.get(0)?,
                            route: r.get(1)?,
                            state: r.get(2)?,
                            created_ms: r.get(3)?,
                            result: parse(r.get(4)?),
                            winner: r.get(5)?,
                            trace: parse(r.get(6)?),
                            error: r.get(7)?,
                            owner: r.get(8)?,
                        })
                    },
                )
                .optional()
            }),
            #[cfg(feature = "postgres")]
            Backend::Pg(st) => {
                let (s, id) = (st.clone(), id.to_string());
                let row = st
                    .run(async move {
                        let c = s.client().await?;
                        let r = c
                            .query_opt(
                                "SELECT id, route, state, created_ms, result, winner, trace, error, owner FROM jobs WHERE id = $1",
                                &[&id],
                            )
                            .await?;
                        Ok(r.map(|r| {
                            (
                                r.get::<_, String>(0),
                                r.get::<_, String>(1),
                                r.get::<_, String>(2),
                                r.get::<_, i64>(3),
                                r.get::<_, Option<String>>(4),
                                r.get::<_, Option<String>>(5),
                                r.get::<_, Option<String>>(6),
                                r.get::<_, Option<String>>(7),
                                r.get::<_, Option<String>>(8),
                            )
                        }))
                    })
                    .await?;
                Ok(row.map(|(id, route, state, created_ms, result, winner, trace, error, owner)| JobRow {
                    id,
                    route,
                    state,
                    created_ms,
                    result: parse(result),
                    winner,
                    trace: parse(trace),
                    error,
                    owner,
                }))
            }
        }
    }

    /// A job by id if `owner` created it; `None` when it is missing or someone else's.
    pub async fn get_owned(&self, id: &str, owner: &str) -> StoreResult<Option<JobRow>> {
        Ok(self.get(id).await?.filter(|row| row.owner.as_deref() == Some(owner)))
    }

    /// Asks the replica (or, on SQLite, the process sharing the file) running job `id`
    /// to stop it.
    pub async fn request_cancel(&self, id: &str) -> StoreResult<()> {
        match &self.backend {
            Backend::Sqlite { .. } => self
                .with(|c| c.execute("UPDATE jobs SET cancel_requested = 1 WHERE id = ?1 AND state = 'running'", params![id]).map(|_| ())),
            #[cfg(feature = "postgres")]
            Backend::Pg(st) => {
                st.execute("UPDATE jobs SET cancel_requested = true WHERE id = $1 AND state = 'running'", vec![Box::new(id.to_string())])
                    .await?;
                Ok(())
            }
        }
    }

    /// The running jobs of this replica (process, on SQLite) that a `DELETE` on another
    /// one asked to stop.
    pub async fn cancel_requests(&self) -> StoreResult<Vec<String>> {
        match &self.backend {
            Backend::Sqlite { process, .. } => self.with(|c| {
                let mut stmt = c.prepare_cached("SELECT id FROM jobs WHERE process = ?1 AND state = 'running' AND cancel_requested")?;
                let ids = stmt.query_map([&process.id], |r| r.get(0))?.collect::<rusqlite::Result<Vec<String>>>();
                ids
            }),
            #[cfg(feature = "postgres")]
            Backend::Pg(st) => {
                let s = st.clone();
                Ok(st
                    .run(async move {
                        let c = s.client().await?;
                        let rows = c
                            .query("SELECT id FROM jobs WHERE replica = $1 AND state = 'running' AND cancel_requested", &[&s.replica()])
                            .await?;
                        Ok(rows.iter().map(|r| r.get(0)).collect())
                    })
                    .await?)
            }
        }
    }

    /// Stores the receipts of an interrupted job's orphaned provider jobs as its trace's
    /// receipts (what `GET /v1/jobs/{id}` shows).
    pub async fn set_orphan_receipts(&self, id: &str, receipts: &Value) -> StoreResult<()> {
        let trace = json!({ "receipts": receipts, "interrupted": true }).to_string();
        match &self.backend {
            Backend::Sqlite { .. } => self.with(|c| c.execute("UPDATE jobs SET trace = ?2 WHERE id = ?1", params![id, trace]).map(|_| ())),
            #[cfg(feature = "postgres")]
            Backend::Pg(st) => {
                st.execute("UPDATE jobs SET trace = $2 WHERE id = $1", vec![Box::new(id.to_string()), Box::new(trace)]).await?;
                Ok(())
            }
        }
    }

    /// Deletes finished jobs older than `retention`; returns how many.
    pub async fn cleanup(&self, retention: Duration) -> StoreResult<usize> {
        let cutoff = now_ms() - retention.as_millis() as i64;
        match &self.backend {
            Backend::Sqlite { .. } => self.with(|c| {
                c.execute(
                    "DELETE FROM job_attempts WHERE job_id IN (SELECT id FROM jobs WHERE finished_ms IS NOT NULL AND finished_ms <= ?1)",
                    params![cutoff],
                )?;
                c.execute("DELETE FROM jobs WHERE finished_ms IS NOT NULL AND finished_ms <= ?1", params![cutoff])
            }),
            #[cfg(feature = "postgres")]
            Backend::Pg(st) => Ok(st
                .execute("DELETE FROM jobs WHERE finished_ms IS NOT NULL AND finished_ms <= $1", vec![Box::new(cutoff)])
                .await? as usize),
        }
    }
}

#[cfg(test)]
mod tests;
