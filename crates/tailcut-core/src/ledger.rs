//! The cost ledger and its budget gates.
//!
//! Every submission is charged its *projected* cost before it is sent. The charge and
//! the limit check happen in one atomic step, so concurrent requests (and concurrent
//! processes sharing one SQLite file) can never push the total past the hard stop.
//! Two limits:
//!
//! - `soft_stop`: no **new** request may start once its first submission would cross it;
//!   hedges of requests already in flight may still launch, so no request is stranded
//!   half-raced at the soft stop;
//! - `hard_stop`: no submission of any kind may cross it.
//!
//! A charge may also name an [`Account`] (the gateway's per-key budgets): its spend is
//! kept in the same ledger, and its limit is checked and its total moved in the same
//! atomic step as the global ones, so a key's spend survives reloads, restarts and
//! `kill -9` exactly as the global spend does, and neither limit can be crossed by a
//! charge the other refused.
//!
//! [`MemoryLedger`] keeps totals in process (demo, benchmarks, `":memory:"`);
//! [`SqliteLedger`] is the durable default: WAL mode, `BEGIN IMMEDIATE` transactions,
//! one row per charge.

use crate::money::MicroUsd;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde::Serialize;
use std::fmt;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

/// The spending limits a ledger enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct BudgetLimits {
    /// New requests are refused once this would be crossed.
    pub soft_stop: MicroUsd,
    /// No submission may cross this.
    pub hard_stop: MicroUsd,
}

impl BudgetLimits {
    /// Effectively unlimited.
    pub const UNLIMITED: BudgetLimits = BudgetLimits { soft_stop: MicroUsd(i64::MAX), hard_stop: MicroUsd(i64::MAX) };
}

/// One projected charge, made before a submission.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Charge<'a> {
    /// Provider the submission goes to.
    pub provider: &'a str,
    /// Request it belongs to.
    pub request_id: &'a str,
    /// Projected cost.
    pub amount: MicroUsd,
    /// True for a request's first submission (subject to the soft stop).
    pub opens_request: bool,
}

/// A spending account inside the ledger (the gateway's API keys, by name), charged
/// together with the global limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    /// The account's name (unique: spend is kept under it).
    pub name: String,
    /// No submission may take the account's total past this (None: recorded, never refused).
    pub limit: Option<MicroUsd>,
}

/// Why a ledger refused or failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum LedgerError {
    /// The charge would cross a limit; nothing was recorded.
    #[error("budget exceeded: {limit_name} {limit} would be crossed (spent {spent}, this submission {requested})")]
    BudgetExceeded {
        /// `soft_stop` or `hard_stop`.
        limit_name: &'static str,
        /// The limit.
        limit: MicroUsd,
        /// Total already committed.
        spent: MicroUsd,
        /// The refused charge.
        requested: MicroUsd,
    },
    /// The charge would cross an account's limit; nothing was recorded (globally either).
    #[error("budget exceeded: the budget {limit} of `{account}` would be crossed (spent {spent}, this submission {requested})")]
    AccountBudgetExceeded {
        /// The account.
        account: String,
        /// Its limit.
        limit: MicroUsd,
        /// What it has spent.
        spent: MicroUsd,
        /// The refused charge.
        requested: MicroUsd,
    },
    /// The store failed; the charge was not recorded and the submission must not go out.
    #[error("ledger storage error: {0}")]
    Storage(String),
}

/// Totals a ledger reports.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LedgerSummary {
    /// Sum of all projected charges plus reconciliations.
    pub total: MicroUsd,
    /// Number of charges recorded.
    pub charges: u64,
    /// Totals per provider.
    pub by_provider: Vec<(String, MicroUsd)>,
}

/// Charges projected costs against limits, atomically.
pub trait BudgetGate: Send + Sync + fmt::Debug {
    /// Records the charge if it fits under the limits; otherwise refuses it with
    /// [`LedgerError::BudgetExceeded`] and records nothing.
    fn charge(&self, charge: &Charge<'_>) -> Result<MicroUsd, LedgerError>;

    /// Records a correction once actual spend is known (may be negative). Never refused.
    fn reconcile(&self, provider: &str, request_id: &str, delta: MicroUsd, note: &str) -> Result<(), LedgerError>;

    /// Current totals.
    fn summary(&self) -> Result<LedgerSummary, LedgerError>;

    /// Records the charge against the global limits and `account`'s limit in one atomic
    /// step: both totals move, or (refused by either) neither does.
    fn charge_account(&self, charge: &Charge<'_>, account: &Account) -> Result<MicroUsd, LedgerError>;

    /// Records a correction to the global total and `account`'s total in one step.
    fn reconcile_account(&self, provider: &str, request_id: &str, delta: MicroUsd, note: &str, account: &str) -> Result<(), LedgerError>;

    /// What `account` has spent (projected charges plus reconciliations).
    fn account_spent(&self, account: &str) -> Result<MicroUsd, LedgerError>;
}

fn check_account(account: &Account, spent: MicroUsd, charge: &Charge<'_>) -> Result<(), LedgerError> {
    match account.limit {
        Some(limit) if spent + charge.amount > limit => {
            Err(LedgerError::AccountBudgetExceeded { account: account.name.clone(), limit, spent, requested: charge.amount })
        }
        _ => Ok(()),
    }
}

fn check(limits: &BudgetLimits, spent: MicroUsd, charge: &Charge<'_>) -> Result<(), LedgerError> {
    let after = spent + charge.amount;
    if after > limits.hard_stop {
        return Err(LedgerError::BudgetExceeded { limit_name: "hard_stop", limit: limits.hard_stop, spent, requested: charge.amount });
    }
    if charge.opens_request && after > limits.soft_stop {
        return Err(LedgerError::BudgetExceeded { limit_name: "soft_stop", limit: limits.soft_stop, spent, requested: charge.amount });
    }
    Ok(())
}

// === impl MemoryLedger ===

/// An in-process ledger (lost on exit). Used by the demo and benchmarks.
#[derive(Debug)]
pub struct MemoryLedger {
    limits: BudgetLimits,
    state: Mutex<MemoryState>,
}

#[derive(Debug, Default)]
struct MemoryState {
    total: MicroUsd,
    charges: u64,
    by_provider: std::collections::BTreeMap<String, MicroUsd>,
    accounts: std::collections::HashMap<String, MicroUsd>,
}

impl MemoryState {
    fn record(&mut self, charge: &Charge<'_>) -> MicroUsd {
        self.total += charge.amount;
        self.charges += 1;
        match self.by_provider.get_mut(charge.provider) {
            Some(v) => *v += charge.amount,
            None => {
                self.by_provider.insert(charge.provider.to_string(), charge.amount);
            }
        }
        self.total
    }
}

impl MemoryLedger {
    /// An empty ledger with these limits.
    pub fn new(limits: BudgetLimits) -> MemoryLedger {
        MemoryLedger { limits, state: Mutex::new(MemoryState::default()) }
    }
}

impl BudgetGate for MemoryLedger {
    fn charge(&self, charge: &Charge<'_>) -> Result<MicroUsd, LedgerError> {
        let mut s = self.state.lock().map_err(|_| LedgerError::Storage("ledger lock poisoned".into()))?;
        check(&self.limits, s.total, charge)?;
        Ok(s.record(charge))
    }

    fn charge_account(&self, charge: &Charge<'_>, account: &Account) -> Result<MicroUsd, LedgerError> {
        let mut s = self.state.lock().map_err(|_| LedgerError::Storage("ledger lock poisoned".into()))?;
        check(&self.limits, s.total, charge)?;
        let spent = s.accounts.get(&account.name).copied().unwrap_or_default();
        check_account(account, spent, charge)?;
        s.accounts.insert(account.name.clone(), spent + charge.amount);
        Ok(s.record(charge))
    }

    fn reconcile_account(&self, provider: &str, _request_id: &str, delta: MicroUsd, _note: &str, account: &str) -> Result<(), LedgerError> {
        let mut s = self.state.lock().map_err(|_| LedgerError::Storage("ledger lock poisoned".into()))?;
        s.total += delta;
        *s.by_provider.entry(provider.to_string()).or_default() += delta;
        *s.accounts.entry(account.to_string()).or_default() += delta;
        Ok(())
    }

    fn account_spent(&self, account: &str) -> Result<MicroUsd, LedgerError> {
        let s = self.state.lock().map_err(|_| LedgerError::Storage("ledger lock poisoned".into()))?;
        Ok(s.accounts.get(account).copied().unwrap_or_default())
    }

    fn reconcile(&self, provider: &str, _request_id: &str, delta: MicroUsd, _note: &str) -> Result<(), LedgerError> {
        let mut s = self.state.lock().map_err(|_| LedgerError::Storage("ledger lock poisoned".into()))?;
        s.total += delta;
        *s.by_provider.entry(provider.to_string()).or_default() += delta;
        Ok(())
    }

    fn summary(&self) -> Result<LedgerSummary, LedgerError> {
        let s = self.state.lock().map_err(|_| LedgerError::Storage("ledger lock poisoned".into()))?;
        Ok(LedgerSummary { total: s.total, charges: s.charges, by_provider: s.by_provider.iter().map(|(k, v)| (k.clone(), *v)).collect() })
    }
}

// === impl SqliteLedger ===

/// A durable ledger in an SQLite file. Safe across threads (one connection behind a
/// mutex) and across processes (`BEGIN IMMEDIATE` takes the database write lock
/// before the limit is read, so two processes cannot both pass the check).
pub struct SqliteLedger {
    limits: BudgetLimits,
    conn: Mutex<Connection>,
}

impl fmt::Debug for SqliteLedger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteLedger").field("limits", &self.limits).finish_non_exhaustive()
    }
}

fn storage(e: rusqlite::Error) -> LedgerError {
    LedgerError::Storage(e.to_string())
}

const SCHEMA: &str = "
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
";

/// Adds the `account` column to a ledger created before accounts existed. In a write
/// transaction, so two processes opening one old file cannot both add it.
fn migrate(conn: &mut Connection) -> Result<(), LedgerError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(storage)?;
    let has_account: bool = tx
        .query_row("SELECT COUNT(*) FROM pragma_table_info('ledger_entries') WHERE name = 'account'", [], |r| r.get::<_, i64>(0))
        .map_err(storage)?
        > 0;
    if !has_account {
        tx.execute_batch("ALTER TABLE ledger_entries ADD COLUMN account TEXT").map_err(storage)?;
    }
    tx.commit().map_err(storage)
}

impl SqliteLedger {
    /// Opens (creating if needed) the ledger at `path`. `:memory:` gives a private
    /// in-memory database.
    pub fn open(path: &Path, limits: BudgetLimits) -> Result<SqliteLedger, LedgerError> {
        let conn = Connection::open(path).map_err(storage)?;
        conn.busy_timeout(Duration::from_secs(30)).map_err(storage)?;
        // WAL keeps readers off the writer's back; NORMAL is durable against process
        // death (a killed process loses nothing committed).
        let _: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).map_err(storage)?;
        conn.execute_batch("PRAGMA synchronous = NORMAL;").map_err(storage)?;
        let mut conn = conn;
        conn.execute_batch(SCHEMA).map_err(storage)?;
        migrate(&mut conn)?;
        Ok(SqliteLedger { limits, conn: Mutex::new(conn) })
    }

    /// The limits in force.
    pub fn limits(&self) -> BudgetLimits {
        self.limits
    }

    fn with_conn<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T, LedgerError>) -> Result<T, LedgerError> {
        let mut conn = self.conn.lock().map_err(|_| LedgerError::Storage("ledger lock poisoned".into()))?;
        f(&mut conn)
    }
}

impl SqliteLedger {
    /// The charge, and the account's if any, in one `BEGIN IMMEDIATE` transaction: both
    /// limits are read and both totals written under the database's write lock.
    fn charge_in(&self, charge: &Charge<'_>, account: Option<&Account>) -> Result<MicroUsd, LedgerError> {
        self.with_conn(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(storage)?;
            let spent: i64 =
                tx.query_row("SELECT micro_usd FROM ledger_totals WHERE scope = 'global'", [], |r| r.get(0)).map_err(storage)?;
            check(&self.limits, MicroUsd(spent), charge)?;
            if let Some(a) = account {
                let account_spent: i64 = tx
                    .query_row("SELECT micro_usd FROM account_totals WHERE account = ?1", [&a.name], |r| r.get(0))
                    .optional()
                    .map_err(storage)?
                    .unwrap_or(0);
                check_account(a, MicroUsd(account_spent), charge)?;
                tx.execute(
                    "INSERT INTO account_totals (account, micro_usd, charges) VALUES (?1, ?2, 1)
                     ON CONFLICT (account) DO UPDATE SET micro_usd = micro_usd + excluded.micro_usd, charges = charges + 1",
                    params![a.name, charge.amount.0],
                )
                .map_err(storage)?;
            }
            tx.execute(
                "INSERT INTO ledger_entries (kind, provider, request_id, micro_usd, account) VALUES ('projected', ?1, ?2, ?3, ?4)",
                params![charge.provider, charge.request_id, charge.amount.0, account.map(|a| a.name.as_str())],
            )
            .map_err(storage)?;
            tx.execute(
                "UPDATE ledger_totals SET micro_usd = micro_usd + ?1, charges = charges + 1 WHERE scope = 'global'",
                params![charge.amount.0],
            )
            .map_err(storage)?;
            tx.commit().map_err(storage)?;
            Ok(MicroUsd(spent) + charge.amount)
        })
    }

    fn reconcile_in(
        &self,
        provider: &str,
        request_id: &str,
        delta: MicroUsd,
        note: &str,
        account: Option<&str>,
    ) -> Result<(), LedgerError> {
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
        self.reconcile_in(provider, request_id, delta, note, None)
    }

    fn charge_account(&self, charge: &Charge<'_>, account: &Account) -> Result<MicroUsd, LedgerError> {
        self.charge_in(charge, Some(account))
    }

    fn reconcile_account(&self, provider: &str, request_id: &str, delta: MicroUsd, note: &str, account: &str) -> Result<(), LedgerError> {
        self.reconcile_in(provider, request_id, delta, note, Some(account))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn charge(amount: i64, opens: bool) -> Charge<'static> {
        Charge { provider: "runpod", request_id: "r", amount: MicroUsd(amount), opens_request: opens }
    }

    fn limits() -> BudgetLimits {
        BudgetLimits { soft_stop: MicroUsd(80), hard_stop: MicroUsd(100) }
    }

    fn exercise(ledger: &dyn BudgetGate) {
        assert_eq!(ledger.charge(&charge(70, true)).unwrap(), MicroUsd(70));
        // A new request would cross the soft stop.
        let err = ledger.charge(&charge(20, true)).unwrap_err();
        assert!(matches!(err, LedgerError::BudgetExceeded { limit_name: "soft_stop", .. }));
        // A hedge of an in-flight request may go past the soft stop...
        assert_eq!(ledger.charge(&charge(20, false)).unwrap(), MicroUsd(90));
        // ...but never past the hard stop.
        let err = ledger.charge(&charge(11, false)).unwrap_err();
        assert!(matches!(err, LedgerError::BudgetExceeded { limit_name: "hard_stop", spent: MicroUsd(90), .. }), "{err}");
        assert_eq!(ledger.charge(&charge(10, false)).unwrap(), MicroUsd(100));
        let s = ledger.summary().unwrap();
        assert_eq!(s.total, MicroUsd(100));
        assert_eq!(s.charges, 3);
    }

    #[test]
    fn memory_ledger_enforces_both_stops() {
        exercise(&MemoryLedger::new(limits()));
    }

    #[test]
    fn sqlite_ledger_enforces_both_stops() {
        exercise(&SqliteLedger::open(Path::new(":memory:"), limits()).unwrap());
    }

    fn account(limit: i64) -> Account {
        Account { name: "team-a".into(), limit: Some(MicroUsd(limit)) }
    }

    fn exercise_accounts(ledger: &dyn BudgetGate) {
        let a = account(50);
        assert_eq!(ledger.charge_account(&charge(30, true), &a).unwrap(), MicroUsd(30));
        // The account's limit refuses, and nothing moves: neither the global total nor the account's.
        let err = ledger.charge_account(&charge(30, true), &a).unwrap_err();
        assert!(matches!(&err, LedgerError::AccountBudgetExceeded { account, spent: MicroUsd(30), .. } if account == "team-a"), "{err}");
        assert_eq!(ledger.summary().unwrap().total, MicroUsd(30));
        // Another account and plain charges share the global limits.
        let b = Account { name: "team-b".into(), limit: None };
        assert_eq!(ledger.charge_account(&charge(40, true), &b).unwrap(), MicroUsd(70));
        // The global limit refuses, and the account's total does not move either.
        let err = ledger.charge_account(&charge(15, true), &a).unwrap_err();
        assert!(matches!(err, LedgerError::BudgetExceeded { limit_name: "soft_stop", .. }), "{err}");
        assert_eq!(ledger.account_spent("team-a").unwrap(), MicroUsd(30));
        // A reconciliation corrects both.
        ledger.reconcile_account("runpod", "r", MicroUsd(-20), "actual was lower", "team-a").unwrap();
        assert_eq!(ledger.account_spent("team-a").unwrap(), MicroUsd(10));
        assert_eq!(ledger.summary().unwrap().total, MicroUsd(50));
        assert_eq!(ledger.charge_account(&charge(40, false), &a).unwrap(), MicroUsd(90));
        assert_eq!(ledger.account_spent("team-b").unwrap(), MicroUsd(40));
        assert_eq!(ledger.account_spent("nobody").unwrap(), MicroUsd(0));
    }

    #[test]
    fn memory_ledger_charges_accounts_with_the_global_limits() {
        exercise_accounts(&MemoryLedger::new(BudgetLimits { soft_stop: MicroUsd(80), hard_stop: MicroUsd(1000) }));
    }

    #[test]
    fn sqlite_ledger_charges_accounts_with_the_global_limits() {
        exercise_accounts(
            &SqliteLedger::open(Path::new(":memory:"), BudgetLimits { soft_stop: MicroUsd(80), hard_stop: MicroUsd(1000) }).unwrap(),
        );
    }

    #[test]
    fn account_spend_survives_reopen() {
        // Per-key spend used to live in memory: a restart reset it.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.sqlite");
        {
            let l = SqliteLedger::open(&path, BudgetLimits::UNLIMITED).unwrap();
            l.charge_account(&charge(30, true), &account(50)).unwrap();
        }
        let l = SqliteLedger::open(&path, BudgetLimits::UNLIMITED).unwrap();
        assert_eq!(l.account_spent("team-a").unwrap(), MicroUsd(30));
        assert!(matches!(l.charge_account(&charge(30, true), &account(50)), Err(LedgerError::AccountBudgetExceeded { .. })));
        assert_eq!(l.charge_account(&charge(20, true), &account(50)).unwrap(), MicroUsd(50));
    }

    #[test]
    fn a_ledger_from_before_accounts_is_migrated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.sqlite");
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(
                "CREATE TABLE ledger_entries (id INTEGER PRIMARY KEY, ts TEXT NOT NULL DEFAULT '', kind TEXT NOT NULL, provider TEXT NOT NULL,
                   request_id TEXT NOT NULL, micro_usd INTEGER NOT NULL, note TEXT NOT NULL DEFAULT '');
                 CREATE TABLE ledger_totals (scope TEXT PRIMARY KEY, micro_usd INTEGER NOT NULL, charges INTEGER NOT NULL);
                 INSERT INTO ledger_totals VALUES ('global', 25, 1);
                 INSERT INTO ledger_entries (kind, provider, request_id, micro_usd) VALUES ('projected', 'runpod', 'r', 25);",
            )
            .unwrap();
        }
        let l = SqliteLedger::open(&path, BudgetLimits::UNLIMITED).unwrap();
        assert_eq!(l.charge_account(&charge(5, true), &account(50)).unwrap(), MicroUsd(30));
        drop(l);
        // Opening it again finds the column in place.
        let l = SqliteLedger::open(&path, BudgetLimits::UNLIMITED).unwrap();
        assert_eq!(l.account_spent("team-a").unwrap(), MicroUsd(5));
    }

    #[test]
    fn sqlite_ledger_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.sqlite");
        {
            let l = SqliteLedger::open(&path, limits()).unwrap();
            l.charge(&charge(60, true)).unwrap();
            l.reconcile("runpod", "r", MicroUsd(-10), "actual was lower").unwrap();
        }
        let l = SqliteLedger::open(&path, limits()).unwrap();
        assert_eq!(l.summary().unwrap().total, MicroUsd(50));
        assert!(l.charge(&charge(51, false)).is_err());
    }
}
