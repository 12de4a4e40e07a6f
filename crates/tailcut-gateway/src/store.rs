//! The job store: SQLite (or in memory) rows of every job — state, result, winner and the
//! full trace record with receipts — kept for the retention window. On startup, jobs
//! left `running` by a previous process are marked `interrupted`, honestly. Every job
//! belongs to the tenant that created it; [`JobStore::get_owned`] is the only read the
//! API makes, so another tenant's job is indistinguishable from a missing one.

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

/// The store.
#[derive(Debug)]
pub struct JobStore {
    conn: Mutex<Connection>,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

impl JobStore {
    /// Opens (creating) the store; `None` keeps it in memory.
    pub fn open(path: Option<&Path>) -> rusqlite::Result<JobStore> {
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
             CREATE INDEX IF NOT EXISTS jobs_finished ON jobs (finished_ms);",
        )?;
        // Stores made before jobs had owners gain the column; their jobs stay unowned.
        let has_owner = conn.prepare("SELECT 1 FROM pragma_table_info('jobs') WHERE name = 'owner'")?.exists([])?;
        if !has_owner {
            conn.execute_batch("ALTER TABLE jobs ADD COLUMN owner TEXT")?;
        }
        Ok(JobStore { conn: Mutex::new(conn) })
    }

    fn with<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> rusqlite::Result<T> {
        let c = self.conn.lock().map_err(|_| rusqlite::Error::InvalidQuery)?;
        f(&c)
    }

    /// Marks jobs a previous process left running as interrupted; returns how many.
    pub fn mark_interrupted(&self) -> rusqlite::Result<usize> {
        self.with(|c| {
            c.execute(
                "UPDATE jobs SET state = 'interrupted', finished_ms = ?1, error = 'the gateway restarted while this job was running; its provider jobs were not tracked across the restart' WHERE state = 'running'",
                params![now_ms()],
            )
        })
    }

    /// Records a new running job owned by `owner`.
    pub fn insert(&self, id: &str, route: &str, owner: &str) -> rusqlite::Result<()> {
        self.with(|c| {
            c.execute(
                "INSERT INTO jobs (id, route, state, created_ms, owner) VALUES (?1, ?2, 'running', ?3, ?4)",
                params![id, route, now_ms(), owner],
            )
            .map(|_| ())
        })
    }

    /// Records a job's end.
    pub fn finish(
        &self,
        id: &str,
        state: &str,
        result: Option<&Value>,
        winner: Option<&str>,
        trace: Option<&Value>,
        error: Option<&str>,
    ) -> rusqlite::Result<()> {
        self.with(|c| {
            c.execute(
                "UPDATE jobs SET state = ?2, finished_ms = ?3, result = ?4, winner = ?5, trace = ?6, error = ?7 WHERE id = ?1",
                params![id, state, now_ms(), result.map(Value::to_string), winner, trace.map(Value::to_string), error],
            )
            .map(|_| ())
        })
    }

    /// A job by id, whoever owns it (for the gateway's own use: webhooks, draining).
    pub fn get(&self, id: &str) -> rusqlite::Result<Option<JobRow>> {
        self.with(|c| {
            c.query_row(
                "SELECT id, route, state, created_ms, result, winner, trace, error, owner FROM jobs WHERE id = ?1",
                params![id],
                |r| {
                    let parse = |s: Option<String>| s.and_then(|s| serde_json::from_str(&s).ok());
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
    }

    /// A job by id if `owner` created it; `None` when it is missing or someone else's.
    pub fn get_owned(&self, id: &str, owner: &str) -> rusqlite::Result<Option<JobRow>> {
        Ok(self.get(id)?.filter(|row| row.owner.as_deref() == Some(owner)))
    }

    /// Deletes finished jobs older than `retention`; returns how many.
    pub fn cleanup(&self, retention: Duration) -> rusqlite::Result<usize> {
        let cutoff = now_ms() - retention.as_millis() as i64;
        self.with(|c| c.execute("DELETE FROM jobs WHERE finished_ms IS NOT NULL AND finished_ms <= ?1", params![cutoff]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_marks_running_jobs_interrupted_and_keeps_finished_ones() {
        let dir = std::env::temp_dir().join(format!("tailcut-store-{}", std::process::id()));
        let path = dir.join("jobs.sqlite");
        {
            let s = JobStore::open(Some(&path)).unwrap();
            s.insert("a", "r", "t").unwrap();
            s.insert("b", "r", "t").unwrap();
            s.finish("b", "succeeded", Some(&json!({"x": 1})), Some("p"), None, None).unwrap();
        }
        let s = JobStore::open(Some(&path)).unwrap();
        assert_eq!(s.mark_interrupted().unwrap(), 1);
        assert_eq!(s.get("a").unwrap().unwrap().state, "interrupted");
        assert_eq!(s.get("b").unwrap().unwrap().result, Some(json!({"x": 1})));
        assert_eq!(s.cleanup(Duration::ZERO).unwrap(), 2);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_job_is_readable_only_by_its_owner() {
        let s = JobStore::open(None).unwrap();
        s.insert("j", "r", "alice").unwrap();
        assert_eq!(s.get_owned("j", "alice").unwrap().unwrap().owner.as_deref(), Some("alice"));
        assert_eq!(s.get_owned("j", "bob").unwrap(), None);
        assert_eq!(s.get_owned("missing", "alice").unwrap(), None);
    }

    #[test]
    fn a_store_from_before_owners_gains_the_column_and_its_jobs_stay_unreadable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.sqlite");
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(
                "CREATE TABLE jobs (id TEXT PRIMARY KEY, route TEXT NOT NULL, state TEXT NOT NULL, created_ms INTEGER NOT NULL,
                 finished_ms INTEGER, result TEXT, winner TEXT, trace TEXT, error TEXT);
                 INSERT INTO jobs (id, route, state, created_ms) VALUES ('old', 'r', 'succeeded', 1);",
            )
            .unwrap();
        }
        let s = JobStore::open(Some(&path)).unwrap();
        assert_eq!(s.get("old").unwrap().unwrap().owner, None);
        assert_eq!(s.get_owned("old", "anonymous").unwrap(), None);
        s.insert("new", "r", "alice").unwrap();
        assert!(s.get_owned("new", "alice").unwrap().is_some());
    }
}
