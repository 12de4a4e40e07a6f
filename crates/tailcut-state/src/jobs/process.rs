//! On SQLite, the gateway processes that share one job store file: each registers a row
//! in `processes` when it opens the store and renews its heartbeat every `ttl / 3` from a
//! thread of its own (as replicas do on PostgreSQL). A process is dead when its row says
//! it stopped, when its heartbeat is older than its TTL, or, on this host, when its pid
//! is gone; only a dead process's running jobs are taken over
//! ([`super::JobStore::take_over_dead`], `jobs/sqlite.rs`), so a second gateway started beside a live one
//! leaves that one's jobs alone.

use super::now_ms;
use rusqlite::{params, Connection, OptionalExtension, Transaction};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// This host's name, as the process rows record it.
fn host() -> &'static str {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        let file = std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
        std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()).unwrap_or(file)
    })
}

/// Whether process `pid` of this host exists (a pid that cannot be checked counts as
/// alive: its heartbeat decides).
fn pid_alive(pid: i64) -> bool {
    let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) else { return true };
    !matches!(rustix::process::test_kill_process(pid), Err(rustix::io::Errno::SRCH))
}

/// This process's row in a store file and the thread that renews it; dropping it stops
/// the thread and marks the row stopped (its running jobs, if any, are then orphans any
/// live process takes over at once).
#[derive(Debug)]
pub(super) struct Registration {
    /// The row's id: host, pid, start time and a count of the stores this process
    /// opened, unique across restarts.
    pub(super) id: String,
    stopped: Arc<AtomicBool>,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Inserts this process's row (in `conn`'s file) and, for a file, starts its heartbeat
/// thread on a connection of its own.
pub(super) fn register(conn: &Connection, path: Option<&Path>, ttl: Duration) -> rusqlite::Result<Registration> {
    // Stores opened in one process (tests) get ids of their own, even in one microsecond.
    static OPENED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let started = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros());
    let n = OPENED.fetch_add(1, Ordering::Relaxed);
    let id = format!("{}-{:x}-{:x}-{n}", if host().is_empty() { "process" } else { host() }, std::process::id(), started);
    let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
    insert(conn, &id, ttl_ms)?;
    let stopped = Arc::new(AtomicBool::new(false));
    let Some(path) = path else { return Ok(Registration { id, stopped, stop: None, thread: None }) };
    let hb = crate::sqlite_schema::open(path)?;
    let (stop, rx) = mpsc::channel::<()>();
    let (rid, flag) = (id.clone(), stopped.clone());
    let thread = std::thread::Builder::new()
        .name("tailcut-store-heartbeat".into())
        .spawn(move || heartbeat(&hb, &rid, ttl_ms, &rx, &flag))
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    Ok(Registration { id, stopped, stop: Some(stop), thread: Some(thread) })
}

fn insert(conn: &Connection, id: &str, ttl_ms: i64) -> rusqlite::Result<()> {
    let now = now_ms();
    conn.execute(
        "INSERT OR REPLACE INTO processes (id, host, pid, started_ms, heartbeat_ms, ttl_ms) VALUES (?1, ?2, ?3, ?4, ?4, ?5)",
        params![id, host(), i64::from(std::process::id()), now, ttl_ms],
    )?;
    Ok(())
}

/// Renews the row every `ttl / 3` until the registration is dropped (then marks it
/// stopped). A row another process deleted (it took this one for dead: a stall longer
/// than the TTL) is inserted again, so the jobs started from now on are covered.
fn heartbeat(conn: &Connection, id: &str, ttl_ms: i64, stop: &mpsc::Receiver<()>, stopped: &AtomicBool) {
    let every = Duration::from_millis(u64::try_from(ttl_ms / 3).unwrap_or(1000).max(10));
    while let Err(mpsc::RecvTimeoutError::Timeout) = stop.recv_timeout(every) {
        if stopped.load(Ordering::Relaxed) {
            continue;
        }
        let renewed = conn.execute("UPDATE processes SET heartbeat_ms = ?2 WHERE id = ?1", params![id, now_ms()]);
        let outcome = match renewed {
            Ok(0) => insert(conn, id, ttl_ms).map(|()| "process_reregistered"),
            Ok(_) => Ok(""),
            Err(e) => Err(e),
        };
        match outcome {
            Ok("") => {}
            Ok(event) => tailcut_core::log::info(event, || serde_json::json!({"process": id})),
            Err(e) => tailcut_core::log::info("process_heartbeat_failed", || serde_json::json!({"process": id, "error": e.to_string()})),
        }
    }
    let _ = conn.execute("UPDATE processes SET stopped_ms = ?2 WHERE id = ?1", params![id, now_ms()]);
}

impl Registration {
    /// Marks the row stopped now (a drain finished every job): no survivor needs to wait
    /// for the heartbeat to expire.
    pub(super) fn mark_stopped(&self, conn: &Connection) -> rusqlite::Result<()> {
        self.stopped.store(true, Ordering::Relaxed);
        conn.execute("UPDATE processes SET stopped_ms = ?2 WHERE id = ?1", params![self.id, now_ms()]).map(|_| ())
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // The thread marks the row stopped on its way out; waiting for it means a store
        // opened right after this one is dropped sees that.
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// In `tx` (a `BEGIN IMMEDIATE` transaction): the processes other than `me` that are
/// dead, their rows deleted (each is claimed by exactly one survivor). `None` stands for
/// the jobs stored before processes were recorded (their process column is empty): a
/// gateway without heartbeats could only have run them, so they are orphans.
pub(super) fn claim_dead(tx: &Transaction<'_>, me: &str) -> rusqlite::Result<Vec<Option<String>>> {
    let now = now_ms();
    let mut dead = Vec::new();
    {
        let mut stmt = tx.prepare("SELECT id, host, pid, heartbeat_ms, ttl_ms, stopped_ms FROM processes WHERE id <> ?1")?;
        let rows = stmt.query_map([me], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, Option<i64>>(5)?,
            ))
        })?;
        for row in rows {
            let (id, row_host, pid, heartbeat_ms, ttl_ms, stopped_ms) = row?;
            let expired = heartbeat_ms.saturating_add(ttl_ms) < now;
            let gone = row_host == host() && !pid_alive(pid);
            if stopped_ms.is_some() || expired || gone {
                dead.push(id);
            }
        }
    }
    for id in &dead {
        tx.execute("DELETE FROM processes WHERE id = ?1", [id])?;
    }
    let mut claimed: Vec<Option<String>> = dead.into_iter().map(Some).collect();
    let legacy: Option<i64> =
        tx.query_row("SELECT 1 FROM jobs WHERE state = 'running' AND process IS NULL LIMIT 1", [], |r| r.get(0)).optional()?;
    if legacy.is_some() {
        claimed.push(None);
    }
    Ok(claimed)
}
