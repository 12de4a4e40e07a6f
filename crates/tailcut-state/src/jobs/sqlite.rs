//! The job store in a SQLite file (or memory), for one gateway or several processes
//! sharing the file. Its connection lives on a writer thread of its own
//! ([`crate::worker`]): a call is sent there and awaited, so a busy file stalls that
//! thread, never the serving runtime that made the call.
//!
//! The tables come with numbered migrations (component `jobs`, applied under the file's
//! write lock: [`crate::sqlite_schema`]), so processes that open one file together do not
//! race each other's schema changes. Each process has a row in `processes`
//! (`jobs/process.rs`); only a dead process's running jobs are taken over.

use super::{now_ms, parse, process, JobBackend, JobEnd, JobRow, Orphan, StoreResult, INTERRUPTED};
use crate::sqlite_schema::{self, Migration, Step};
use crate::worker::Worker;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The job store's migrations on SQLite (component `jobs`). Never edit one that has
/// shipped: add the next.
pub(super) const MIGRATIONS: &[Migration] = &[
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

/// The SQLite backend: the connection's writer thread and this process's row.
#[derive(Debug)]
pub(super) struct SqliteJobs {
    worker: Worker,
    /// This process's row among those sharing the file.
    process: Arc<process::Registration>,
}

impl SqliteJobs {
    /// Opens (creating) the store; `None` keeps it in memory.
    pub(super) fn open(path: Option<&Path>, ttl: Duration) -> StoreResult<SqliteJobs> {
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
        let process = Arc::new(process::register(&conn, path, ttl)?);
        let worker = Worker::start(conn, "tailcut-job-store").map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
        Ok(SqliteJobs { worker, process })
    }

    /// Runs `f` on the writer thread.
    async fn call<T: Send + 'static>(&self, f: impl FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static) -> StoreResult<T> {
        Ok(self.worker.call(f).await??)
    }
}

/// In one `BEGIN IMMEDIATE` transaction: claims the dead processes other than `me`,
/// marks their running jobs interrupted, and returns those jobs and their in-flight
/// attempts.
fn take_over_dead(c: &mut Connection, me: &str) -> rusqlite::Result<(Vec<String>, Vec<Orphan>)> {
    let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let dead = process::claim_dead(&tx, me)?;
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
    Ok((jobs, orphans))
}

#[async_trait::async_trait]
impl JobBackend for SqliteJobs {
    fn replica(&self) -> Option<String> {
        None
    }

    fn take_over_dead(&self) -> StoreResult<(Vec<String>, Vec<Orphan>)> {
        let me = self.process.id.clone();
        Ok(self.worker.call_blocking(move |c| take_over_dead(c, &me))??)
    }

    async fn take_over(&self, _dead: Vec<String>) -> StoreResult<(usize, Vec<Orphan>)> {
        Ok((0, Vec::new()))
    }

    async fn mark_stopped(&self) -> StoreResult<()> {
        let process = self.process.clone();
        self.call(move |c| process.mark_stopped(c)).await
    }

    async fn insert(&self, id: &str, route: &str, owner: &str) -> StoreResult<()> {
        let (id, route, owner, process) = (id.to_string(), route.to_string(), owner.to_string(), self.process.id.clone());
        self.call(move |c| {
            c.execute(
                "INSERT INTO jobs (id, route, state, created_ms, owner, process) VALUES (?1, ?2, 'running', ?3, ?4, ?5)",
                params![id, route, now_ms(), owner, process],
            )
            .map(|_| ())
        })
        .await
    }

    async fn record_attempt(&self, id: &str, seq: i32, provider: &str, provider_job_id: Option<&str>) -> StoreResult<()> {
        let (id, provider, provider_job_id) = (id.to_string(), provider.to_string(), provider_job_id.map(str::to_string));
        self.call(move |c| {
            c.execute(
                "INSERT OR REPLACE INTO job_attempts (job_id, seq, provider, provider_job_id, submitted_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![id, seq, provider, provider_job_id, now_ms()],
            )
            .map(|_| ())
        })
        .await
    }

    async fn finish(&self, end: JobEnd) -> StoreResult<()> {
        self.call(move |c| {
            c.execute(
                "UPDATE jobs SET state = ?2, finished_ms = ?3, result = ?4, winner = ?5, trace = ?6, error = ?7 WHERE id = ?1 AND state = 'running'",
                params![end.id, end.state, now_ms(), end.result, end.winner, end.trace, end.error],
            )
            .map(|_| ())
        })
        .await
    }

    async fn get(&self, id: &str) -> StoreResult<Option<JobRow>> {
        let id = id.to_string();
        self.call(move |c| {
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
        })
        .await
    }

    async fn request_cancel(&self, id: &str) -> StoreResult<()> {
        let id = id.to_string();
        self.call(move |c| c.execute("UPDATE jobs SET cancel_requested = 1 WHERE id = ?1 AND state = 'running'", params![id]).map(|_| ()))
            .await
    }

    async fn cancel_requests(&self) -> StoreResult<Vec<String>> {
        let process = self.process.id.clone();
        self.call(move |c| {
            let mut stmt = c.prepare_cached("SELECT id FROM jobs WHERE process = ?1 AND state = 'running' AND cancel_requested")?;
            let ids = stmt.query_map([&process], |r| r.get(0))?.collect::<rusqlite::Result<Vec<String>>>();
            ids
        })
        .await
    }

    async fn set_trace(&self, id: &str, trace: String) -> StoreResult<()> {
        let id = id.to_string();
        self.call(move |c| c.execute("UPDATE jobs SET trace = ?2 WHERE id = ?1", params![id, trace]).map(|_| ())).await
    }

    async fn cleanup(&self, cutoff_ms: i64) -> StoreResult<usize> {
        self.call(move |c| {
            c.execute(
                "DELETE FROM job_attempts WHERE job_id IN (SELECT id FROM jobs WHERE finished_ms IS NOT NULL AND finished_ms <= ?1)",
                params![cutoff_ms],
            )?;
            c.execute("DELETE FROM jobs WHERE finished_ms IS NOT NULL AND finished_ms <= ?1", params![cutoff_ms])
        })
        .await
    }
}
