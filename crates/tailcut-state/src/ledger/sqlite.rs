//! The durable ledger: one SQLite file, safe across threads and processes (feature
//! `sqlite`).
//!
//! Charges made through [`BudgetGate::charge_async`] (every launch the engine charges)
//! are group-committed: a writer thread takes the charges waiting at that moment and
//! checks and records them in one `BEGIN IMMEDIATE` transaction, each against the totals
//! its predecessors in the batch left; each caller waits until that transaction has
//! committed, so nothing goes out before its charge is on disk, as before. No serving
//! thread runs SQLite or waits on its lock, and a batch writes the totals' pages once.

use super::ReconcileEntry;
use crate::sqlite_schema::{self, Migration, Step};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};
use tailcut_core::ledger::{check, check_account, Account, BudgetGate, BudgetLimits, Charge, ChargeFuture, LedgerError, LedgerSummary};
use tailcut_core::MicroUsd;

/// A durable ledger in an SQLite file. Safe across threads (one connection behind a
/// mutex) and across processes (`BEGIN IMMEDIATE` takes the database write lock
/// before the limit is read, so two processes cannot both pass the check).
pub struct SqliteLedger {
    limits: BudgetLimits,
    conn: Arc<Mutex<Connection>>,
    /// The group-commit writer's queue (async charges).
    writer: mpsc::Sender<Pending>,
}

/// The most charges one group-commit transaction takes.
const MAX_BATCH: usize = 256;

/// An async charge waiting for the writer.
struct Pending {
    provider: String,
    request_id: String,
    amount: MicroUsd,
    opens_request: bool,
    account: Option<Account>,
    done: tokio::sync::oneshot::Sender<Result<MicroUsd, LedgerError>>,
}

/// The writer thread: batches of waiting charges, one transaction each, until the ledger
/// is dropped.
fn write_batches(conn: Arc<Mutex<Connection>>, limits: BudgetLimits, rx: mpsc::Receiver<Pending>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(p) => batch.push(p),
                Err(_) => break,
            }
        }
        let charges: Vec<(Charge<'_>, Option<&Account>)> = batch
            .iter()
            .map(|p| {
                let charge = Charge { provider: &p.provider, request_id: &p.request_id, amount: p.amount, opens_request: p.opens_request };
                (charge, p.account.as_ref())
            })
            .collect();
        let outcome = match conn.lock() {
            Ok(mut c) => charge_batch(&mut c, &limits, &charges),
            Err(_) => Err(LedgerError::LockPoisoned),
        };
        match outcome {
            Ok(results) => {
                for (p, r) in batch.into_iter().zip(results) {
                    let _ = p.done.send(r);
                }
            }
            Err(e) => {
                for p in batch {
                    let _ = p.done.send(Err(e.clone()));
                }
            }
        }
    }
}

/// Checks and records `batch` (each charge with its account, if any) in one `BEGIN
/// IMMEDIATE` transaction, in order, each charge against the totals the charges before it
/// left: the same outcome as one transaction each, with both limits read and both totals
/// written under the database's write lock. Returns each charge's outcome; nothing is
/// recorded unless the transaction commits.
fn charge_batch(
    conn: &mut Connection,
    limits: &BudgetLimits,
    batch: &[(Charge<'_>, Option<&Account>)],
) -> Result<Vec<Result<MicroUsd, LedgerError>>, LedgerError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(storage)?;
    let mut spent: i64 = tx
        .prepare_cached("SELECT micro_usd FROM ledger_totals WHERE scope = 'global'")
        .and_then(|mut s| s.query_row([], |r| r.get(0)))
        .map_err(storage)?;
    let (mut delta, mut count) = (0i64, 0i64);
    // Per account: its total before the batch, and what the batch added (amount, charges).
    let mut accounts: HashMap<&str, (i64, i64, i64)> = HashMap::new();
    let mut results = Vec::with_capacity(batch.len());
    for (charge, account) in batch {
        if let Err(e) = check(limits, MicroUsd(spent), charge) {
            results.push(Err(e));
            continue;
        }
        if let Some(a) = account {
            let entry = match accounts.get(a.name.as_str()) {
                Some(e) => *e,
                None => {
                    let before = account_total(&tx, &a.name)?;
                    (before, 0, 0)
                }
            };
            if let Err(e) = check_account(a, MicroUsd(entry.0 + entry.1), charge) {
                results.push(Err(e));
                continue;
            }
            accounts.insert(a.name.as_str(), (entry.0, entry.1 + charge.amount.0, entry.2 + 1));
        }
        tx.prepare_cached(
            "INSERT INTO ledger_entries (kind, provider, request_id, micro_usd, account) VALUES ('projected', ?1, ?2, ?3, ?4)",
        )
        .and_then(|mut s| s.execute(params![charge.provider, charge.request_id, charge.amount.0, account.map(|a| a.name.as_str())]))
        .map_err(storage)?;
        spent += charge.amount.0;
        delta += charge.amount.0;
        count += 1;
        results.push(Ok(MicroUsd(spent)));
    }
    if count > 0 {
        tx.prepare_cached("UPDATE ledger_totals SET micro_usd = micro_usd + ?1, charges = charges + ?2 WHERE scope = 'global'")
            .and_then(|mut s| s.execute(params![delta, count]))
            .map_err(storage)?;
    }
    for (name, (_, amount, charges)) in &accounts {
        tx.prepare_cached(
            "INSERT INTO account_totals (account, micro_usd, charges) VALUES (?1, ?2, ?3)
             ON CONFLICT (account) DO UPDATE SET micro_usd = micro_usd + excluded.micro_usd, charges = charges + excluded.charges",
        )
        .and_then(|mut s| s.execute(params![name, amount, charges]))
        .map_err(storage)?;
    }
    tx.commit().map_err(storage)?;
    Ok(results)
}

fn account_total(conn: &Connection, account: &str) -> Result<i64, LedgerError> {
    conn.prepare_cached("SELECT micro_usd FROM account_totals WHERE account = ?1")
        .and_then(|mut s| s.query_row([account], |r| r.get(0)).optional())
        .map(Option::unwrap_or_default)
        .map_err(storage)
}

impl fmt::Debug for SqliteLedger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteLedger").field("limits", &self.limits).finish_non_exhaustive()
    }
}

fn storage(e: rusqlite::Error) -> LedgerError {
    LedgerError::Database { backend: "sqlite", reason: e.to_string() }
}

/// The ledger's migrations (component `ledger` in `schema_migrations`: see
/// [`crate::sqlite_schema`]). Never edit one that has shipped: add the next.
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "ledger entries and totals",
        steps: &[Step::Sql(
            "
CREATE TABLE IF NOT EXISTS ledger_entries (
    id INTEGER PRIMARY KEY,
    ts TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    kind TEXT NOT NULL CHECK (kind IN ('projected', 'reconcile')),
    provider TEXT NOT NULL,
    request_id TEXT NOT NULL,
    micro_usd INTEGER NOT NULL,
    note TEXT NOT NULL DEFAULT '',
    account TEXT
);
CREATE TABLE IF NOT EXISTS ledger_totals (
    scope TEXT PRIMARY KEY,
    micro_usd INTEGER NOT NULL,
    charges INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS account_totals (
    account TEXT PRIMARY KEY,
    micro_usd INTEGER NOT NULL,
    charges INTEGER NOT NULL
);
INSERT OR IGNORE INTO ledger_totals (scope, micro_usd, charges) VALUES ('global', 0, 0);
",
        )],
    },
    // Ledgers created before accounts existed gain the column.
    Migration {
        version: 2,
        name: "ledger_entries.account",
        steps: &[Step::AddColumn { table: "ledger_entries", column: "account", decl: "TEXT" }],
    },
];

impl SqliteLedger {
    /// Opens (creating if needed) the ledger at `path`. `:memory:` gives a private
    /// in-memory database.
    pub fn open(path: &Path, limits: BudgetLimits) -> Result<SqliteLedger, LedgerError> {
        // WAL keeps readers off the writer's back; NORMAL is durable against process
        // death (a killed process loses nothing committed). Migrations are safe to run
        // beside another process opening the same file.
        let mut conn = sqlite_schema::open(path).map_err(storage)?;
        sqlite_schema::migrate(&mut conn, "ledger", MIGRATIONS).map_err(storage)?;
        let conn = Arc::new(Mutex::new(conn));
        let (tx, rx) = mpsc::channel();
        let c = conn.clone();
        std::thread::Builder::new()
            .name("tailcut-ledger".into())
            .spawn(move || write_batches(c, limits, rx))
            .map_err(|e| LedgerError::WriterThread { reason: e.to_string() })?;
        Ok(SqliteLedger { limits, conn, writer: tx })
    }

    /// Queues an async charge for the writer thread; resolves once its batch committed.
    fn charge_grouped<'a>(&'a self, charge: &Charge<'_>, account: Option<&Account>) -> ChargeFuture<'a> {
        let (done, wait) = tokio::sync::oneshot::channel();
        let pending = Pending {
            provider: charge.provider.to_string(),
            request_id: charge.request_id.to_string(),
            amount: charge.amount,
            opens_request: charge.opens_request,
            account: account.cloned(),
            done,
        };
        let sent = self.writer.send(pending);
        Box::pin(async move {
            sent.map_err(|_| LedgerError::WriterStopped)?;
            wait.await.map_err(|_| LedgerError::WriterStopped)?
        })
    }

    /// The limits in force.
    pub fn limits(&self) -> BudgetLimits {
        self.limits
    }

    fn with_conn<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T, LedgerError>) -> Result<T, LedgerError> {
        let mut conn = self.conn.lock().map_err(|_| LedgerError::LockPoisoned)?;
        f(&mut conn)
    }
}

impl SqliteLedger {
    /// The charge, and the account's if any, as a batch of one ([`charge_batch`]).
    fn charge_in(&self, charge: &Charge<'_>, account: Option<&Account>) -> Result<MicroUsd, LedgerError> {
        let mut results = self.with_conn(|conn| charge_batch(conn, &self.limits, &[(charge.clone(), account)]))?;
        results.pop().unwrap_or(Err(LedgerError::NoOutcome))
    }

    fn reconcile_in(&self, entry: &ReconcileEntry) -> Result<(), LedgerError> {
        let ReconcileEntry { provider, request_id, delta, note, account } = entry;
        self.with_conn(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(storage)?;
            tx.execute(
                "INSERT INTO ledger_entries (kind, provider, request_id, micro_usd, note, account) VALUES ('reconcile', ?1, ?2, ?3, ?4, ?5)",
                params![provider, request_id, delta.0, note, account],
            )
            .map_err(storage)?;
            tx.execute("UPDATE ledger_totals SET micro_usd = micro_usd + ?1 WHERE scope = 'global'", params![delta.0]).map_err(storage)?;
            if let Some(a) = account {
                tx.execute(
                    "INSERT INTO account_totals (account, micro_usd, charges) VALUES (?1, ?2, 0)
                     ON CONFLICT (account) DO UPDATE SET micro_usd = micro_usd + excluded.micro_usd",
                    params![a, delta.0],
                )
                .map_err(storage)?;
            }
            tx.commit().map_err(storage)
        })
    }
}

impl BudgetGate for SqliteLedger {
    fn charge(&self, charge: &Charge<'_>) -> Result<MicroUsd, LedgerError> {
        self.charge_in(charge, None)
    }

    fn reconcile(&self, provider: &str, request_id: &str, delta: MicroUsd, note: &str) -> Result<(), LedgerError> {
        self.reconcile_in(&ReconcileEntry::new(provider, request_id, delta, note, None))
    }

    fn charge_account(&self, charge: &Charge<'_>, account: &Account) -> Result<MicroUsd, LedgerError> {
        self.charge_in(charge, Some(account))
    }

    fn reconcile_account(&self, provider: &str, request_id: &str, delta: MicroUsd, note: &str, account: &str) -> Result<(), LedgerError> {
        self.reconcile_in(&ReconcileEntry::new(provider, request_id, delta, note, Some(account)))
    }

    fn charge_async<'a>(&'a self, charge: &'a Charge<'a>) -> ChargeFuture<'a> {
        self.charge_grouped(charge, None)
    }

    fn charge_account_async<'a>(&'a self, charge: &'a Charge<'a>, account: &'a Account) -> ChargeFuture<'a> {
        self.charge_grouped(charge, Some(account))
    }

    fn account_spent(&self, account: &str) -> Result<MicroUsd, LedgerError> {
        self.with_conn(|conn| {
            let spent: Option<i64> = conn
                .query_row("SELECT micro_usd FROM account_totals WHERE account = ?1", [account], |r| r.get(0))
                .optional()
                .map_err(storage)?;
            Ok(MicroUsd(spent.unwrap_or(0)))
        })
    }

    fn summary(&self) -> Result<LedgerSummary, LedgerError> {
        self.with_conn(|conn| {
            let (total, charges): (i64, i64) = conn
                .query_row("SELECT micro_usd, charges FROM ledger_totals WHERE scope = 'global'", [], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
                .map_err(storage)?
                .unwrap_or((0, 0));
            let mut stmt =
                conn.prepare("SELECT provider, SUM(micro_usd) FROM ledger_entries GROUP BY provider ORDER BY provider").map_err(storage)?;
            let by_provider = stmt
                .query_map([], |r| Ok((r.get::<_, String>(0)?, MicroUsd(r.get(1)?))))
                .map_err(storage)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(storage)?;
            Ok(LedgerSummary { total: MicroUsd(total), charges: charges as u64, by_provider })
        })
    }
}
