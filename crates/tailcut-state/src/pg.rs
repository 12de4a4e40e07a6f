//! The shared state of gateway replicas on PostgreSQL (feature `postgres`): the
//! connection pool, the numbered schema migrations, and this process's replica row.
//!
//! [`PgState`] owns one background thread with its own tokio runtime: the pool's
//! connections live there, so the state can be opened and used from any runtime (the
//! gateway's per-core runtimes, a reload, a test) and from synchronous code
//! ([`PgState::block_on`]). Every replica has a row in `replicas` that it renews every
//! `lease_ttl / 3`; a replica whose row has expired is dead, and a survivor takes over
//! what it held (see [`crate::ledger::PgLedger`] for budget leases, and the gateway's job
//! store for its jobs).
//!
//! Migrations are numbered and recorded in `schema_migrations(version, name,
//! applied_at)`; they run in one transaction under an advisory lock, so replicas that
//! start together apply each exactly once. [`PgState::connect`] returns only after every
//! migration is in place, which is what the gateway's readiness waits for.

/// Group commit of the ledger's charge rows: the writer tasks this state owns.
pub(crate) mod commit;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// Why the PostgreSQL state failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum PgError {
    /// The URL could not be parsed.
    #[error("state url: {reason}")]
    Url {
        /// The driver's parse error.
        reason: String,
    },
    /// The server refused a statement: its own message.
    #[error("postgres: {message}")]
    Server {
        /// The server's message.
        message: String,
    },
    /// The database could not be reached, or the connection or pool failed.
    #[error("postgres: {reason}")]
    Connection {
        /// The driver's or the pool's error.
        reason: String,
    },
    /// The listening connection ended.
    #[error("postgres: the listening connection closed")]
    ListenerClosed,
    /// The thread that owns the pool could not be started.
    #[error("postgres: cannot start the PostgreSQL thread: {reason}")]
    Thread {
        /// The operating system's error.
        reason: String,
    },
    /// A migration failed; none of the run's migrations is applied.
    #[error("postgres: migration {version} ({name}): {source}")]
    Migration {
        /// Its number.
        version: i32,
        /// What it does.
        name: &'static str,
        /// Why it failed.
        source: Box<PgError>,
    },
    /// The ledger refused or failed inside a PostgreSQL task.
    #[error("postgres: {0}")]
    Ledger(#[from] tailcut_core::ledger::LedgerError),
    /// The background runtime is gone (the state was shut down).
    #[error("the PostgreSQL state has shut down")]
    Closed,
}

impl From<tokio_postgres::Error> for PgError {
    fn from(e: tokio_postgres::Error) -> PgError {
        // `Display` of a server error is just "db error"; the message is in the source.
        match e.as_db_error() {
            Some(d) => PgError::Server { message: d.message().to_string() },
            None => PgError::Connection { reason: e.to_string() },
        }
    }
}

impl From<deadpool_postgres::PoolError> for PgError {
    fn from(e: deadpool_postgres::PoolError) -> PgError {
        PgError::Connection { reason: e.to_string() }
    }
}

/// One schema migration: applied once, in version order.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Its number (strictly increasing).
    pub version: i32,
    /// What it does.
    pub name: &'static str,
    /// The SQL, run in the migration transaction.
    pub sql: &'static str,
}

/// Every migration, in order. Never edit one that has shipped: add the next.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "replicas, budget scopes and leases, ledger entries, jobs and their attempts, learned models",
        sql: "
CREATE TABLE replicas (
    id TEXT PRIMARY KEY,
    started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at TIMESTAMPTZ NOT NULL,
    stopped_at TIMESTAMPTZ,
    taken_over_by TEXT,
    taken_over_at TIMESTAMPTZ
);
-- One row per budget: 'global', or 'account:NAME' for an API key's budget.
-- spent: charges of closed leases plus reconciliations; leased: granted on open leases.
-- Invariant kept by the lease statement: spent + leased <= the limit it was granted under.
CREATE TABLE budget_scopes (
    scope TEXT PRIMARY KEY,
    spent BIGINT NOT NULL DEFAULT 0,
    leased BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE budget_leases (
    id BIGSERIAL PRIMARY KEY,
    scope TEXT NOT NULL REFERENCES budget_scopes (scope),
    replica TEXT NOT NULL REFERENCES replicas (id),
    granted BIGINT NOT NULL CHECK (granted >= 0),
    soft_room BIGINT NOT NULL CHECK (soft_room >= 0),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    closed_at TIMESTAMPTZ,
    closed_how TEXT CHECK (closed_how IN ('returned', 'reclaimed')),
    charged BIGINT
);
CREATE INDEX budget_leases_open ON budget_leases (replica) WHERE closed_at IS NULL;
-- projected: a charge before a submission (against lease, and account_lease for a key);
-- reconcile: a correction; returned / reclaimed: the unused part of a closed lease
-- (informational: it never counts as spend).
CREATE TABLE ledger_entries (
    id BIGSERIAL PRIMARY KEY,
    ts TIMESTAMPTZ NOT NULL DEFAULT now(),
    kind TEXT NOT NULL CHECK (kind IN ('projected', 'reconcile', 'returned', 'reclaimed')),
    provider TEXT NOT NULL DEFAULT '',
    request_id TEXT NOT NULL DEFAULT '',
    micro_usd BIGINT NOT NULL,
    note TEXT NOT NULL DEFAULT '',
    account TEXT,
    lease BIGINT REFERENCES budget_leases (id),
    account_lease BIGINT REFERENCES budget_leases (id),
    replica TEXT NOT NULL
);
CREATE INDEX ledger_entries_lease ON ledger_entries (lease);
CREATE INDEX ledger_entries_account_lease ON ledger_entries (account_lease);
CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    route TEXT NOT NULL,
    owner TEXT,
    state TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    finished_ms BIGINT,
    result TEXT,
    winner TEXT,
    trace TEXT,
    error TEXT,
    replica TEXT NOT NULL,
    cancel_requested BOOLEAN NOT NULL DEFAULT false
);
CREATE INDEX jobs_running ON jobs (replica) WHERE state = 'running';
CREATE INDEX jobs_finished ON jobs (finished_ms);
-- Every submission of a job, with the provider's job id, stored when the submit returns.
CREATE TABLE job_attempts (
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    seq INT NOT NULL,
    provider TEXT NOT NULL,
    provider_job_id TEXT,
    submitted_ms BIGINT NOT NULL,
    PRIMARY KEY (job_id, seq)
);
-- Per-route learned models (the gateway's ModelStore; wired separately).
CREATE TABLE learned_models (
    route TEXT PRIMARY KEY,
    model_json TEXT NOT NULL,
    saved_at BIGINT NOT NULL
);
INSERT INTO budget_scopes (scope) VALUES ('global');
",
    },
    Migration {
        version: 2,
        name: "announce each job's end on channel tailcut_job_done (payload: the job id)",
        sql: "
CREATE FUNCTION tailcut_job_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('tailcut_job_done', NEW.id);
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_ended AFTER UPDATE OF state ON jobs FOR EACH ROW
    WHEN (OLD.state = 'running' AND NEW.state <> 'running') EXECUTE FUNCTION tailcut_job_ended();
",
    },
];

/// What a listener ([`PgState::listen`]) tells its callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listening<'a> {
    /// `LISTEN` is in place (again): notifications sent while it was not were lost.
    Connected,
    /// A notification, with its payload.
    Notification(&'a str),
    /// The connection was lost; it is being reopened.
    Lost,
}

/// One listening connection on `channel` until it fails: `Connected` once `LISTEN` is
/// in place, then each notification. Returns why it stopped.
async fn listen_once(url: &str, channel: &'static str, on: Arc<impl Fn(Listening<'_>) + Send + Sync + 'static>) -> PgError {
    let (client, mut conn) = match tokio_postgres::connect(url, tokio_postgres::NoTls).await {
        Ok(c) => c,
        Err(e) => return e.into(),
    };
    // The connection delivers notifications only while it is polled: a task of its own
    // drives it and hands them over.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    // Owned by this listener (`driver`), which aborts it when it returns.
    #[allow(clippy::disallowed_methods)]
    let driver = tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| conn.poll_message(cx)).await {
                Some(Ok(tokio_postgres::AsyncMessage::Notification(n))) => {
                    if tx.send(n.payload().to_string()).is_err() {
                        return PgError::Closed;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return e.into(),
                None => return PgError::ListenerClosed,
            }
        }
    });
    if let Err(e) = client.batch_execute(&format!("LISTEN {channel}")).await {
        driver.abort();
        return e.into();
    }
    on(Listening::Connected);
    while let Some(payload) = rx.recv().await {
        on(Listening::Notification(&payload));
    }
    drop(client);
    driver.await.unwrap_or(PgError::Closed)
}

/// The advisory lock key migrations run under ("tailcut" in ASCII).
const MIGRATION_LOCK: i64 = 0x0074_6169_6c63_7574;

/// Settings of the shared state.
#[derive(Debug, Clone, PartialEq)]
pub struct PgSettings {
    /// `postgres://...` connection URL.
    pub url: String,
    /// Connections in the pool.
    pub pool_size: usize,
    /// How long a replica's leases and jobs outlive its last heartbeat.
    pub lease_ttl: Duration,
    /// The largest budget slice one lease takes.
    pub lease_slice: tailcut_core::MicroUsd,
    /// Charge rows written behind the lease: a submission goes out once the local lease
    /// check passed, its row queued (`[state] charge_rows = "write_behind"`); false: it
    /// waits until its row has committed.
    pub write_behind: bool,
}

/// The connection pool, the background runtime and this replica's identity.
pub struct PgState {
    pool: deadpool_postgres::Pool,
    handle: tokio::runtime::Handle,
    /// Ends the background thread when the state is dropped.
    _stop: std::sync::mpsc::SyncSender<()>,
    replica: String,
    settings: PgSettings,
    pub(crate) leases: std::sync::Mutex<LocalLeases>,
    /// Serialises lease refills (one lease statement per scope at a time).
    pub(crate) refill: tokio::sync::Mutex<()>,
    /// Writes the ledger's charge rows, batched (group commit).
    pub(crate) charges: commit::ChargeWriter,
    /// Woken when the last charge row in flight is written (a drain waits for it).
    pub(crate) flushed: tokio::sync::Notify,
    /// When the last heartbeat that renewed this replica was sent: no survivor can take it
    /// for dead (and reclaim its leases) before this instant plus the lease TTL.
    renewed: std::sync::Mutex<std::time::Instant>,
    /// Live replicas (not stopped, not taken over, heartbeat not expired), counted at
    /// each heartbeat: the gateway shares its rate limits among them.
    live: Arc<std::sync::atomic::AtomicUsize>,
}

impl fmt::Debug for PgState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the URL: it may carry a password.
        f.debug_struct("PgState").field("replica", &self.replica).finish_non_exhaustive()
    }
}

/// A replica id: host name, pid and start time, unique across restarts.
fn replica_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
    let host = std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()).unwrap_or(host);
    let started = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros());
    format!("{}-{:x}-{:x}", if host.is_empty() { "replica" } else { &host }, std::process::id(), started)
}

impl PgState {
    /// Connects, applies every pending migration and registers this replica. Blocks the
    /// calling thread until done (it may be called inside a runtime).
    // The lease clock is PostgreSQL's wall clock (`now()`): a paused tokio clock must not stretch it.
    #[allow(clippy::disallowed_methods)]
    pub fn connect(settings: PgSettings) -> Result<Arc<PgState>, PgError> {
        let config: tokio_postgres::Config =
            settings.url.parse().map_err(|e: tokio_postgres::Error| PgError::Url { reason: e.to_string() })?;
        let (handle_tx, handle_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::sync_channel::<()>(0);
        std::thread::Builder::new()
            .name("tailcut-postgres".into())
            .spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build() else { return };
                let _ = handle_tx.send(rt.handle().clone());
                // Runs until the state is dropped (the sender goes away).
                let _ = stop_rx.recv();
                rt.shutdown_timeout(Duration::from_secs(1));
            })
            .map_err(|e| PgError::Thread { reason: e.to_string() })?;
        let handle = handle_rx.recv().map_err(|_| PgError::Closed)?;
        let manager = deadpool_postgres::Manager::from_config(
            config,
            tokio_postgres::NoTls,
            deadpool_postgres::ManagerConfig { recycling_method: deadpool_postgres::RecyclingMethod::Fast },
        );
        let pool = {
            let _guard = handle.enter();
            deadpool_postgres::Pool::builder(manager)
                .max_size(settings.pool_size.max(2))
                .runtime(deadpool_postgres::Runtime::Tokio1)
                .wait_timeout(Some(Duration::from_secs(10)))
                .create_timeout(Some(Duration::from_secs(10)))
                .build()
                .map_err(|e| PgError::Connection { reason: e.to_string() })?
        };
        let replica = replica_id();
        let writers = commit::writers(settings.pool_size.max(2));
        let charges = commit::ChargeWriter::start(&handle, pool.clone(), replica.clone(), writers);
        let state = Arc::new(PgState {
            pool,
            handle,
            _stop: stop_tx,
            replica,
            charges,
            flushed: tokio::sync::Notify::new(),
            renewed: std::sync::Mutex::new(std::time::Instant::now()),
            settings,
            leases: std::sync::Mutex::default(),
            refill: tokio::sync::Mutex::new(()),
            live: Arc::new(std::sync::atomic::AtomicUsize::new(1)),
        });
        let s = state.clone();
        state.block_on(async move {
            s.migrate().await?;
            s.register().await?;
            s.count_live().await
        })?;
        let weak = Arc::downgrade(&state);
        let every = state.settings.lease_ttl / 3;
        state.handle.spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(s) = weak.upgrade() else { return };
                if let Err(e) = s.heartbeat().await {
                    tailcut_core::log::warn("replica_heartbeat_failed", || serde_json::json!({"error": e.to_string()}));
                }
            }
        });
        Ok(state)
    }

    /// This replica's id.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// The settings it was opened with.
    pub fn settings(&self) -> &PgSettings {
        &self.settings
    }

    /// A pooled connection (use only on the state's runtime: inside [`PgState::run`] or
    /// [`PgState::block_on`]).
    pub async fn client(&self) -> Result<deadpool_postgres::Object, PgError> {
        Ok(self.pool.get().await?)
    }

    /// Runs one statement with owned parameters on the state's runtime, from any runtime;
    /// returns the rows it changed.
    pub async fn execute(
        &self,
        sql: &'static str,
        params: Vec<Box<dyn tokio_postgres::types::ToSql + Send + Sync>>,
    ) -> Result<u64, PgError> {
        let pool = self.pool.clone();
        self.run(async move {
            let c = pool.get().await?;
            let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params.iter().map(|p| &**p as _).collect();
            Ok(c.execute(sql, &refs).await?)
        })
        .await
    }

    /// Runs `fut` on the state's runtime and awaits it from any runtime.
    pub async fn run<T: Send + 'static>(&self, fut: impl Future<Output = Result<T, PgError>> + Send + 'static) -> Result<T, PgError> {
        self.handle.spawn(fut).await.map_err(|_| PgError::Closed)?
    }

    /// Runs `fut` on the state's runtime and blocks this thread until it is done (for
    /// synchronous callers; never call it from the state's own runtime).
    pub fn block_on<T: Send + 'static>(&self, fut: impl Future<Output = Result<T, PgError>> + Send + 'static) -> Result<T, PgError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.handle.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv().map_err(|_| PgError::Closed)?
    }

    /// Spawns a background task on the state's runtime.
    pub fn spawn(&self, fut: impl Future<Output = ()> + Send + 'static) {
        self.handle.spawn(fut);
    }

    /// Listens on `channel` (an SQL identifier) on a connection of its own, outside the
    /// pool, for as long as the state lives, telling `on` what happens
    /// ([`Listening`]). A lost connection is reopened with a backoff of up to 5 s.
    pub fn listen(&self, channel: &'static str, on: impl Fn(Listening<'_>) + Send + Sync + 'static) {
        let url = self.settings.url.clone();
        let on = Arc::new(on);
        self.handle.spawn(async move {
            let mut backoff = Duration::from_millis(100);
            loop {
                let err = listen_once(&url, channel, on.clone()).await;
                on(Listening::Lost);
                tailcut_core::log::warn("state_listener_lost", || serde_json::json!({"channel": channel, "error": err.to_string()}));
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        });
    }

    async fn migrate(&self) -> Result<(), PgError> {
        let mut c = self.client().await?;
        let tx = c.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                version INT PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
        )
        .await?;
        let applied: i32 = tx.query_one("SELECT COALESCE(MAX(version), 0) FROM schema_migrations", &[]).await?.get(0);
        for m in MIGRATIONS.iter().filter(|m| m.version > applied) {
            tx.batch_execute(m.sql).await.map_err(|e| PgError::Migration {
                version: m.version,
                name: m.name,
                source: Box::new(e.into()),
            })?;
            tx.execute("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", &[&m.version, &m.name]).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The highest migration applied to the database.
    pub async fn schema_version(&self) -> Result<i32, PgError> {
        let c = self.client().await?;
        Ok(c.query_one("SELECT COALESCE(MAX(version), 0) FROM schema_migrations", &[]).await?.get(0))
    }

    fn ttl_ms(&self) -> i64 {
        i64::try_from(self.settings.lease_ttl.as_millis()).unwrap_or(i64::MAX)
    }

    async fn register(&self) -> Result<(), PgError> {
        let c = self.client().await?;
        c.execute(
            "INSERT INTO replicas (id, expires_at) VALUES ($1, now() + make_interval(secs => $2::bigint / 1000.0))",
            &[&self.replica, &self.ttl_ms()],
        )
        .await?;
        Ok(())
    }

    async fn heartbeat(&self) -> Result<(), PgError> {
        // Before the statement: the database's now() is later, so the expiry it sets is
        // at least this + the TTL.
        // Compared with the database's wall clock, as at `connect`.
        #[allow(clippy::disallowed_methods)]
        let sent = std::time::Instant::now();
        let c = self.client().await?;
        let renewed = c
            .execute(
                "UPDATE replicas SET heartbeat_at = now(), expires_at = now() + make_interval(secs => $2::bigint / 1000.0)
                 WHERE id = $1 AND stopped_at IS NULL AND taken_over_by IS NULL",
                &[&self.replica, &self.ttl_ms()],
            )
            .await?;
        drop(c);
        if renewed == 1 {
            if let Ok(mut r) = self.renewed.lock() {
                *r = sent;
            }
        }
        self.count_live().await
    }

    /// Whether this replica's leases are safe from a reclaim for at least half the lease
    /// TTL more (its last renewing heartbeat was sent less than half a TTL ago). Charge
    /// rows are written behind the lease only then; otherwise a submission waits for its
    /// row, whose write fails on a reclaimed lease.
    pub(crate) fn leases_fresh(&self) -> bool {
        self.renewed.lock().is_ok_and(|r| r.elapsed() < self.settings.lease_ttl / 2)
    }

    async fn count_live(&self) -> Result<(), PgError> {
        let c = self.client().await?;
        let n: i64 = c
            .query_one("SELECT count(*) FROM replicas WHERE expires_at > now() AND stopped_at IS NULL AND taken_over_by IS NULL", &[])
            .await?
            .get(0);
        self.live.store(usize::try_from(n).unwrap_or(1).max(1), std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// The live replica count (at least 1), kept current at every heartbeat.
    pub fn live_replicas(&self) -> Arc<std::sync::atomic::AtomicUsize> {
        self.live.clone()
    }

    /// Claims the dead replicas (expired, not stopped, not yet taken over) for this one:
    /// each is claimed by exactly one survivor. Returns their ids.
    pub async fn claim_dead_replicas(&self) -> Result<Vec<String>, PgError> {
        let c = self.client().await?;
        let rows = c
            .query(
                "UPDATE replicas SET taken_over_by = $1, taken_over_at = now()
                 WHERE id IN (SELECT id FROM replicas WHERE expires_at < now() AND taken_over_by IS NULL AND id <> $1
                              FOR UPDATE SKIP LOCKED)
                 RETURNING id",
                &[&self.replica],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Marks this replica stopped (after a drain has returned its leases and finished its
    /// jobs): nobody needs to take it over.
    pub async fn mark_stopped(&self) -> Result<(), PgError> {
        let c = self.client().await?;
        c.execute("UPDATE replicas SET stopped_at = now() WHERE id = $1", &[&self.replica]).await?;
        Ok(())
    }
}

// What the ledger keeps in memory per replica lives with the shared state, so a
// reload's new ledger keeps this replica's open leases.

/// This replica's open slice of one budget.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slice {
    pub(crate) lease: i64,
    /// Not yet charged.
    pub(crate) left: i64,
    /// The part of `left` granted below the soft stop.
    pub(crate) soft_left: i64,
}

impl Slice {
    pub(crate) fn fits(&self, amount: i64, opens: bool) -> bool {
        self.left >= amount && (!opens || self.soft_left >= amount)
    }

    /// Charges `amount`: a request's first submission from the part below the soft stop,
    /// hedges from the part above it first.
    pub(crate) fn take(&mut self, amount: i64, opens: bool) {
        if opens {
            self.soft_left -= amount;
        } else {
            let above = self.left - self.soft_left;
            if amount > above {
                self.soft_left -= amount - above;
            }
        }
        self.left -= amount;
    }
}

/// This replica's open slices, by scope.
#[derive(Debug, Default)]
pub(crate) struct LocalLeases {
    pub(crate) slices: std::collections::HashMap<String, Slice>,
    /// Charges taken from each lease whose rows are not written yet.
    pub(crate) in_flight: std::collections::HashMap<i64, usize>,
    /// Leases replaced by a new slice while charges on them were in flight: closed by the
    /// last of those charges (see `pg::commit::InFlight`).
    pub(crate) retired: std::collections::HashSet<i64>,
}
