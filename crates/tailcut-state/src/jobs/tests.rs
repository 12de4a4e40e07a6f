//! The job store on SQLite: restarts, orphans, owners, old stores; processes sharing a
//! file; waiters woken by a job's end (in process, and across replicas on PostgreSQL).

use super::*;
use rusqlite::{params, Connection};
use std::path::Path;

const TTL: Duration = Duration::from_secs(15);

#[tokio::test]
async fn restart_marks_running_jobs_interrupted_and_keeps_finished_ones() {
    let dir = std::env::temp_dir().join(format!("tailcut-store-{}", std::process::id()));
    let path = dir.join("jobs.sqlite");
    {
        let s = JobStore::open(Some(&path), TTL).unwrap();
        s.insert("a", "r", "t").await.unwrap();
        s.insert("b", "r", "t").await.unwrap();
        s.finish("b", "succeeded", Some(&json!({"x": 1})), Some("p"), None, None).await.unwrap();
    }
    let s = JobStore::open(Some(&path), TTL).unwrap();
    assert_eq!(s.take_over_dead().unwrap().0, 1);
    assert_eq!(s.get("a").await.unwrap().unwrap().state, "interrupted");
    assert_eq!(s.get("b").await.unwrap().unwrap().result, Some(json!({"x": 1})));
    assert_eq!(s.cleanup(Duration::ZERO).await.unwrap(), 2);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_restart_returns_the_provider_jobs_its_predecessor_left_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.sqlite");
    {
        let s = JobStore::open(Some(&path), TTL).unwrap();
        s.insert("a", "r", "t").await.unwrap();
        s.record_attempt("a", 0, "runpod", Some("rp-1")).await.unwrap();
        s.record_attempt("a", 1, "fal", Some("fal-9")).await.unwrap();
        s.insert("b", "r", "t").await.unwrap();
        s.record_attempt("b", 0, "runpod", Some("rp-2")).await.unwrap();
        s.finish("b", "succeeded", None, Some("runpod"), None, None).await.unwrap();
    }
    let s = JobStore::open(Some(&path), TTL).unwrap();
    let (n, orphans) = s.take_over_dead().unwrap();
    assert_eq!(n, 1);
    let ids: Vec<(&str, &str)> = orphans.iter().map(|o| (o.provider.as_str(), o.provider_job_id.as_str())).collect();
    assert_eq!(ids, [("runpod", "rp-1"), ("fal", "fal-9")], "only the interrupted job's attempts");
    s.set_orphan_receipts("a", &json!([{"job_id": "rp-1"}])).await.unwrap();
    assert_eq!(s.get("a").await.unwrap().unwrap().to_json()["receipts"][0]["job_id"], "rp-1");
    // A late finish of a job already interrupted does not overwrite it.
    s.finish("a", "succeeded", None, None, None, None).await.unwrap();
    assert_eq!(s.get("a").await.unwrap().unwrap().state, "interrupted");
}

#[tokio::test]
async fn a_job_is_readable_only_by_its_owner() {
    let s = JobStore::open(None, TTL).unwrap();
    s.insert("j", "r", "alice").await.unwrap();
    assert_eq!(s.get_owned("j", "alice").await.unwrap().unwrap().owner.as_deref(), Some("alice"));
    assert_eq!(s.get_owned("j", "bob").await.unwrap(), None);
    assert_eq!(s.get_owned("missing", "alice").await.unwrap(), None);
}

#[tokio::test]
async fn a_store_from_before_owners_gains_the_column_and_its_jobs_stay_unreadable() {
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
    let s = JobStore::open(Some(&path), TTL).unwrap();
    assert_eq!(s.get("old").await.unwrap().unwrap().owner, None);
    assert_eq!(s.get_owned("old", "anonymous").await.unwrap(), None);
    s.insert("new", "r", "alice").await.unwrap();
    assert!(s.get_owned("new", "alice").await.unwrap().is_some());
}

/// What a gateway opens on `[state] url = "sqlite:PATH"`: the ledger, the job store and
/// the learned-model store, all in `path`.
fn open_all(path: &Path) -> Result<JobStore, OpenError> {
    let limits = tailcut_core::ledger::BudgetLimits {
        soft_stop: tailcut_core::MicroUsd::from_usd(1.0),
        hard_stop: tailcut_core::MicroUsd::from_usd(1.0),
    };
    crate::ledger::SqliteLedger::open(path, limits)?;
    let store = JobStore::open(Some(path), TTL)?;
    crate::learned::SqliteModelStore::open(path)?;
    Ok(store)
}

/// Which of the three stores [`open_all`] failed to open.
#[derive(Debug, thiserror::Error)]
enum OpenError {
    #[error("ledger: {0}")]
    Ledger(#[from] tailcut_core::ledger::LedgerError),
    #[error("job store: {0}")]
    Jobs(#[from] StoreError),
    #[error("models: {0}")]
    Models(#[from] crate::learned::StoreError),
}

/// Issue 27, item 4: two gateways started together on a fresh file failed with
/// `duplicate column name: owner` or `database is locked` in 1–2 of 8 trials.
#[test]
fn two_gateways_opening_one_fresh_file_together_never_fail() {
    let mut failures = Vec::new();
    for trial in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.sqlite");
        let start = std::sync::Arc::new(std::sync::Barrier::new(2));
        let opened: Vec<Result<JobStore, OpenError>> = (0..2)
            .map(|_| {
                let (path, start) = (path.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    open_all(&path)
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        failures.extend(opened.into_iter().filter_map(Result::err).map(|e| format!("trial {trial}: {e}")));
        let c = Connection::open(&path).unwrap();
        let versions: i64 =
            c.query_row("SELECT COUNT(*) FROM schema_migrations WHERE component = 'jobs'", [], |r| r.get(0)).unwrap_or_default();
        if versions != sqlite::MIGRATIONS.len() as i64 {
            failures.push(format!("trial {trial}: {versions} job-store migrations recorded, not {}", sqlite::MIGRATIONS.len()));
        }
    }
    assert!(failures.is_empty(), "{} failures in 20 trials:\n{}", failures.len(), failures.join("\n"));
}

/// A process row of another host (its pid cannot be checked from here), with its last
/// heartbeat `age_ms` ago, running job `job`.
fn foreign_process(path: &Path, id: &str, age_ms: i64, job: &str) {
    let c = Connection::open(path).unwrap();
    c.execute(
        "INSERT INTO processes (id, host, pid, started_ms, heartbeat_ms, ttl_ms) VALUES (?1, 'elsewhere', 1, 0, ?2, 1000)",
        params![id, now_ms() - age_ms],
    )
    .unwrap();
    c.execute("INSERT INTO jobs (id, route, state, created_ms, owner, process) VALUES (?1, 'r', 'running', 0, 't', ?2)", params![job, id])
        .unwrap();
    c.execute("INSERT INTO job_attempts (job_id, seq, provider, provider_job_id, submitted_ms) VALUES (?1, 0, 'p', 'pj', 0)", [job])
        .unwrap();
}

#[tokio::test]
async fn only_the_jobs_of_a_process_whose_heartbeat_expired_are_taken_over() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.sqlite");
    let s = JobStore::open(Some(&path), TTL).unwrap();
    foreign_process(&path, "alive", 100, "live-job");
    foreign_process(&path, "dead", 5_000, "dead-job");
    let (n, orphans) = s.take_over_dead().unwrap();
    assert_eq!(n, 1);
    assert_eq!(orphans, [Orphan { job: "dead-job".into(), provider: "p".into(), provider_job_id: "pj".into() }]);
    assert_eq!(s.get("dead-job").await.unwrap().unwrap().state, "interrupted");
    assert_eq!(s.get("live-job").await.unwrap().unwrap().state, "running");
    // Claimed once: a second look finds nothing more.
    assert_eq!(s.take_over_dead().unwrap().0, 0);
}

#[tokio::test]
async fn a_second_store_on_the_file_leaves_a_live_stores_jobs_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.sqlite");
    let first = JobStore::open(Some(&path), TTL).unwrap();
    first.insert("j", "r", "t").await.unwrap();
    first.record_attempt("j", 0, "p", Some("pj")).await.unwrap();
    let second = JobStore::open(Some(&path), TTL).unwrap();
    assert_eq!(second.take_over_dead().unwrap().0, 0, "the first store's process is alive");
    first.finish("j", "succeeded", None, Some("p"), None, None).await.unwrap();
    assert_eq!(second.get("j").await.unwrap().unwrap().state, "succeeded");
    // Once the first store is gone with a job running, the second takes that job over.
    first.insert("k", "r", "t").await.unwrap();
    drop(first);
    assert_eq!(second.take_over_dead().unwrap().0, 1);
    assert_eq!(second.get("k").await.unwrap().unwrap().state, "interrupted");
}

/// Issue 27, item 6: `?wait=` read the store every 10 ms per waiter. A waiter is woken
/// by the job's end, and reads the row about twice (before, and after its wake-up).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_woken_by_the_jobs_end_within_milliseconds_reading_the_store_twice() {
    let s = std::sync::Arc::new(JobStore::open(None, TTL).unwrap());
    s.insert("j", "r", "t").await.unwrap();
    const WAITERS: u64 = 50;
    let tasks: Vec<_> = (0..WAITERS)
        .map(|_| {
            let s = s.clone();
            tokio::spawn(async move {
                let row = s.wait_ended("j", Duration::from_secs(30)).await;
                (std::time::Instant::now(), row.map(|r| r.state))
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ended = std::time::Instant::now();
    s.finish("j", "succeeded", None, None, None, None).await.unwrap();
    let mut slowest = Duration::ZERO;
    for t in tasks {
        let (at, state) = t.await.unwrap();
        assert_eq!(state.as_deref(), Some("succeeded"));
        slowest = slowest.max(at.duration_since(ended));
    }
    let reads = s.reads.load(std::sync::atomic::Ordering::Relaxed);
    println!("{WAITERS} waiters over 500 ms: {reads} reads of the store; the slowest returned {slowest:?} after the job's end");
    assert!(slowest < Duration::from_millis(100), "a waiter returned {slowest:?} after the job's end");
    assert!(reads <= 2 * WAITERS + 2, "{reads} reads for {WAITERS} waiters: they polled");
    assert_eq!(s.waiters.len(), 0, "every waiter unregistered");
}

/// On PostgreSQL (skipped where it is not installed, unless
/// `TAILCUT_REQUIRE_POSTGRES=1`): a waiter on one replica is woken by a job's end on
/// another through `LISTEN`/`NOTIFY`, well before its fallback poll.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_on_one_replica_is_woken_by_the_jobs_end_on_another() {
    let Some(pg) = tailcut_testkit::postgres::PgServer::start() else { return };
    let url = pg.database("wake");
    let settings = crate::pg::PgSettings {
        url,
        pool_size: 4,
        lease_ttl: Duration::from_secs(30),
        lease_slice: tailcut_core::MicroUsd(1_000),
        write_behind: false,
    };
    let a = JobStore::postgres(crate::pg::PgState::connect(settings.clone()).unwrap());
    let b = std::sync::Arc::new(JobStore::postgres(crate::pg::PgState::connect(settings).unwrap()));
    a.insert("j", "r", "t").await.unwrap();
    let waiter = {
        let b = b.clone();
        tokio::spawn(async move {
            let row = b.wait_ended("j", Duration::from_secs(30)).await;
            (std::time::Instant::now(), row.map(|r| r.state))
        })
    };
    // Past the waiter's first read and its listener's start; its next fallback read is
    // seconds away.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let ended = std::time::Instant::now();
    a.finish("j", "succeeded", None, None, None, None).await.unwrap();
    let (at, state) = waiter.await.unwrap();
    let took = at.duration_since(ended);
    println!("the waiter on replica B returned {took:?} after the job ended on replica A");
    assert_eq!(state.as_deref(), Some("succeeded"));
    assert!(took < Duration::from_millis(300), "woken {took:?} after the end: by its fallback poll, not a notification");
    let reads = b.reads.load(std::sync::atomic::Ordering::Relaxed);
    assert!(reads <= 3, "the waiter read its row {reads} times in 1.5 s: it polled");
}

/// Issue 29, item 3: a busy SQLite file (another connection holding the write lock)
/// stalls the store's writer thread, never the runtime that awaits it. A current-thread
/// runtime, as each serving core runs, keeps ticking while an insert waits for the lock.
#[test]
fn a_busy_file_never_blocks_the_serving_runtime() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.sqlite");
    let store = JobStore::open(Some(&path), TTL).unwrap();
    let blocker = rusqlite::Connection::open(&path).unwrap();
    blocker
        .execute_batch(
            "BEGIN IMMEDIATE; INSERT INTO processes (id, host, pid, started_ms, heartbeat_ms, ttl_ms) VALUES ('x', '', 0, 0, 0, 0)",
        )
        .unwrap();
    let held = Duration::from_millis(500);
    let release = std::thread::spawn(move || {
        std::thread::sleep(held);
        blocker.execute_batch("COMMIT").unwrap();
    });
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let (ticks, waited) = rt.block_on(async {
        let ticks = Arc::new(AtomicU64::new(0));
        let t = ticks.clone();
        let ticker = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(10)).await;
                t.fetch_add(1, Ordering::Relaxed);
            }
        });
        let started = std::time::Instant::now();
        store.insert("j", "r", "t").await.unwrap();
        let waited = started.elapsed();
        ticker.abort();
        (ticks.load(Ordering::Relaxed), waited)
    });
    release.join().unwrap();
    eprintln!("the runtime ticked {ticks} times while the insert waited {waited:?} for the lock");
    assert!(waited >= held * 8 / 10, "the insert did not wait for the lock ({waited:?})");
    assert!(ticks >= 10, "the runtime ticked {ticks} times while the insert waited {waited:?} for the lock");
}
