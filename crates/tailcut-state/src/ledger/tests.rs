//! The SQLite ledger's unit tests: both stops and accounts, the file's durability and
//! migration.

use super::SqliteLedger;
use rusqlite::Connection;
use std::path::Path;
use tailcut_core::ledger::{Account, BudgetGate, BudgetLimits, Charge, LedgerError};
use tailcut_core::MicroUsd;

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
