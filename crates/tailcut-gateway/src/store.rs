//! The job store: rows of every job — state, result, winner, the full trace record with
//! receipts, and each attempt's provider job id, stored when its submit returns — kept
//! for the retention window, in SQLite (or memory) for one gateway or in PostgreSQL for
//! several replicas (`[state] url`). Every job belongs to the tenant that created it;
//! [`JobStore::get_owned`] is the only read the API makes, so another tenant's job is
//! indistinguishable from a missing one.
//!
//! Jobs left `running` by a gateway that died are taken over: on SQLite by the same
//! gateway when it restarts, on PostgreSQL by a surviving replica once the dead one's
//! lease has expired ([`JobStore::take_over`]). They are marked `interrupted` and the
//! gateway cancels their provider jobs by id (`state::cancel_orphans`), with receipts.
//! A `DELETE` on a replica that does not run the job sets `cancel_requested`; the owner
//! polls for it ([`JobStore::cancel_requests`]) and stops the race.
//!
//! Every call the API makes is `async`: on PostgreSQL it is awaited on the state's own
//! runtime ([`tailcut_core::pg::PgState::run`]), so a round trip to the database never
//! blocks a serving thread; on SQLite it is a local write under the connection's lock.

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

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
}

#[derive(Debug)]
enum Backend {
    Sqlite(Mutex<Connection>),
    #[cfg(feature = "postgres")]
    Pg(std::sync::Arc<tailcut_core::pg::PgState>),
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

const INTERRUPTED: &str =
    "the gateway that ran this job stopped while it was running; its provider jobs were cancelled by id (see the receipts in the log)";

impl JobStore {
    /// Opens (creating) the store; `None` keeps it in memory.
    pub fn open(path: Option<&Path>) -> StoreResult<JobStore> {
        let conn = match path {
            Some(p) => {
                if let Some(parent) = p.parent().filter(|x| !x.as_os_str().is_empty()) {
                    let _ = std::fs::create_dir_all(parent);
                }
                Connection::open(p)?
            }
            None => Connection::open_in_memory()?,
        };
        conn.busy_timeout(Duration::from_secs(10))?;
        let _: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS jobs (
                id TEXT PRIMARY KEY, route TEXT NOT NULL, state TEXT NOT NULL, created_ms INTEGER NOT NULL,
                finished_ms INTEGER, result TEXT, winner TEXT, trace TEXT, error TEXT);
             CREATE INDEX IF NOT EXISTS jobs_finished ON jobs (finished_ms);
             CREATE TABLE IF NOT EXISTS job_attempts (
                job_id TEXT NOT NULL, seq INTEGER NOT NULL, provider TEXT NOT NULL, provider_job_id TEXT,
                submitted_ms INTEGER NOT NULL, PRIMARY KEY (job_id, seq));",
        )?;
        // Stores made before jobs had owners gain the column; their jobs stay unowned.
        let has_owner = conn.prepare("SELECT 1 FROM pragma_table_info('jobs') WHERE name = 'owner'")?.exists([])?;
        if !has_owner {
            conn.execute_batch("ALTER TABLE jobs ADD COLUMN owner TEXT")?;
        }
        Ok(JobStore { backend: Backend::Sqlite(Mutex::new(conn)) })
    }

    /// The store in the replicas' shared PostgreSQL (its tables come with the state's
    /// migrations).
    #[cfg(feature = "postgres")]
    pub fn postgres(state: std::sync::Arc<tailcut_core::pg::PgState>) -> JobStore {
        JobStore { backend: Backend::Pg(state) }
    }

    fn with<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> StoreResult<T> {
        match &self.backend {
            Backend::Sqlite(conn) => {
                let c = conn.lock().map_err(|_| StoreError::Poisoned)?;
                Ok(f(&c)?)
            }
            #[cfg(feature = "postgres")]
            Backend::Pg(_) => Err(StoreError::Poisoned),
        }
    }

    /// This store's replica id on PostgreSQL (`None` on SQLite: one gateway).
    pub fn replica(&self) -> Option<String> {
        match &self.backend {
            Backend::Sqlite(_) => None,
            #[cfg(feature = "postgres")]
            Backend::Pg(st) => Some(st.replica().to_string()),
        }
    }

    /// On SQLite, at start: marks the jobs a previous process left running as
    /// interrupted and returns their in-flight attempts to cancel. On PostgreSQL nothing
    /// is done here (other replicas' jobs are running): see [`JobStore::take_over`].
    pub fn mark_interrupted(&self) -> StoreResult<(usize, Vec<Orphan>)> {
        match &self.backend {
            Backend::Sqlite(_) => self.with(|c| {
                let mut stmt = c.prepare(
                    "SELECT a.job_id, a.provider, a.provider_job_id FROM job_attempts a JOIN jobs j ON j.id = a.job_id
                     WHERE j.state = 'running' AND a.provider_job_id IS NOT NULL ORDER BY a.job_id, a.seq",
                )?;
                let orphans = stmt
                    .query_map([], |r| Ok(Orphan { job: r.get(0)?, provider: r.get(1)?, provider_job_id: r.get(2)? }))?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                let n = c.execute(
                    "UPDATE jobs SET state = 'interrupted', finished_ms = ?1, error = ?2 WHERE state = 'running'",
                    params![now_ms(), INTERRUPTED],
                )?;
                Ok((n, orphans))
            }),
            #[cfg(feature = "postgres")]
            Backend::Pg(_) => Ok((0, Vec::new())),
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
            Backend::Sqlite(_) => self.with(|c| {
                c.execute(
                    "INSERT INTO jobs (id, route, state, created_ms, owner) VALUES (?1, ?2, 'running', ?3, ?4)",
                    params![id, route, now_ms(), owner],
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
            Backend::Sqlite(_) => self.with(|c| {
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
        match &self.backend {
            Backend::Sqlite(_) => self.with(|c| {
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
        let parse = |s: Option<String>| s.and_then(|s| serde_json::from_str(&s).ok());
        match &self.backend {
            Backend::Sqlite(_) => self.with(|c| {
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

    /// Asks the replica running job `id` to stop it (PostgreSQL; on SQLite the job runs
    /// here or nowhere).
    pub async fn request_cancel(&self, #[cfg_attr(not(feature = "postgres"), allow(unused_variables))] id: &str) -> StoreResult<()> {
        match &self.backend {
            Backend::Sqlite(_) => Ok(()),
            #[cfg(feature = "postgres")]
            Backend::Pg(st) => {
                st.execute("UPDATE jobs SET cancel_requested = true WHERE id = $1 AND state = 'running'", vec![Box::new(id.to_string())])
                    .await?;
                Ok(())
            }
        }
    }

    /// The running jobs of this replica that a `DELETE` on another replica asked to stop.
    pub async fn cancel_requests(&self) -> StoreResult<Vec<String>> {
        match &self.backend {
            Backend::Sqlite(_) => Ok(Vec::new()),
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
            Backend::Sqlite(_) => self.with(|c| c.execute("UPDATE jobs SET trace = ?2 WHERE id = ?1", params![id, trace]).map(|_| ())),
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
            Backend::Sqlite(_) => self.with(|c| {
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
