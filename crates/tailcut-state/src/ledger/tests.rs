//! The SQLite ledger's unit tests: both stops and accounts, the file's durability and
//! migration.

use super::SqliteLedger;
use rusqlite::Connection;
use std::path::Path;
use tailcut_core::ledger::{BudgetGate, BudgetLimits, LedgerError};
use tailcut_core::MicroUsd;
use tailcut_testkit::ledger::{account, charge, charges_accounts_with_the_global_limits, enforces_both_stops};

fn limits() -> BudgetLimits {
    BudgetLimits { soft_stop: MicroUsd(80), hard_stop: MicroUsd(100) }
}

#[test]
fn sqlite_ledger_enforces_both_stops() {
    enforces_both_stops(&SqliteLedger::open(Path::new(":memory:"), limits()).unwrap());
}

#[test]
fn sqlite_ledger_charges_accounts_with_the_global_limits() {
    charges_accounts_with_the_global_limits(
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
