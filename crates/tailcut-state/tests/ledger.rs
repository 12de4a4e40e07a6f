//! Ledger durability and concurrency: never overspend under 64-way concurrency (each
//! writer on its own SQLite connection, as separate processes would be), globally and per
//! account (the gateway's per-key budgets), and a process killed mid-write loses nothing
//! it committed, globally or per account.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

mod common;

use proptest::prelude::*;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use tailcut_core::ledger::{Account, BudgetGate, BudgetLimits, Charge, LedgerError, MemoryLedger};
use tailcut_core::MicroUsd;
use tailcut_state::ledger::SqliteLedger;

fn limits(hard: i64) -> BudgetLimits {
    BudgetLimits { soft_stop: MicroUsd(hard), hard_stop: MicroUsd(hard) }
}

fn entries_sum(path: &Path) -> (i64, i64) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let sum: i64 = conn.query_row("SELECT COALESCE(SUM(micro_usd), 0) FROM ledger_entries", [], |r| r.get(0)).unwrap();
    let total: i64 = conn.query_row("SELECT micro_usd FROM ledger_totals WHERE scope = 'global'", [], |r| r.get(0)).unwrap();
    (sum, total)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn never_overspends_under_64_way_concurrency(amounts in proptest::collection::vec(1i64..5_000, 64), hard in 20_000i64..120_000) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.sqlite");
        drop(SqliteLedger::open(&path, limits(hard)).unwrap());
        let accepted = Arc::new(AtomicI64::new(0));
        let handles: Vec<_> = amounts
            .iter()
            .enumerate()
            .map(|(i, &amount)| {
                let (path, accepted) = (path.clone(), accepted.clone());
                std::thread::spawn(move || {
                    // Its own connection: the same code path as a separate process.
                    let ledger = SqliteLedger::open(&path, limits(hard)).unwrap();
                    for round in 0..5 {
                        let request_id = format!("t{i}-{round}");
                        match ledger.charge(&Charge { provider: "runpod", request_id: &request_id, amount: MicroUsd(amount), opens_request: true }) {
                            Ok(_) => {
                                accepted.fetch_add(amount, Ordering::SeqCst);
                            }
                            Err(LedgerError::BudgetExceeded { .. }) => {}
                            Err(e) => panic!("storage error: {e}"),
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let (sum, total) = entries_sum(&path);
        prop_assert!(total <= hard, "total {total} > hard stop {hard}");
        prop_assert_eq!(sum, total);
        prop_assert_eq!(accepted.load(Ordering::SeqCst), total);
    }
}

fn account_sums(path: &Path, account: &str) -> (i64, i64) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let sum: i64 =
        conn.query_row("SELECT COALESCE(SUM(micro_usd), 0) FROM ledger_entries WHERE account = ?1", [account], |r| r.get(0)).unwrap();
    let total: i64 =
        conn.query_row("SELECT COALESCE(MAX(micro_usd), 0) FROM account_totals WHERE account = ?1", [account], |r| r.get(0)).unwrap();
    (sum, total)
}

/// 32 threads charge one account (limit `limit`) and 32 another (no limit), all under a
/// global hard stop `hard`; `ledger` gives each thread its ledger handle.
fn race_accounts(ledger: impl Fn() -> Arc<dyn BudgetGate> + Sync, amounts: &[i64], limit: i64, hard: i64) -> (i64, i64) {
    let (accepted_a, accepted_all) = (AtomicI64::new(0), AtomicI64::new(0));
    std::thread::scope(|s| {
        for (i, &amount) in amounts.iter().enumerate() {
            let (ledger, accepted_a, accepted_all) = (&ledger, &accepted_a, &accepted_all);
            s.spawn(move || {
                let ledger = ledger();
                let account = if i % 2 == 0 {
                    Account { name: "team-a".into(), limit: Some(MicroUsd(limit)) }
                } else {
                    Account { name: "team-b".into(), limit: None }
                };
                for round in 0..5 {
                    let request_id = format!("t{i}-{round}");
                    let c = Charge { provider: "runpod", request_id: &request_id, amount: MicroUsd(amount), opens_request: round == 0 };
                    match ledger.charge_account(&c, &account) {
                        Ok(_) => {
                            accepted_all.fetch_add(amount, Ordering::SeqCst);
                            if i % 2 == 0 {
                                accepted_a.fetch_add(amount, Ordering::SeqCst);
                            }
                        }
                        Err(LedgerError::BudgetExceeded { .. } | LedgerError::AccountBudgetExceeded { .. }) => {}
                        Err(e) => panic!("storage error: {e}"),
                    }
                }
            });
        }
    });
    let (a, all) = (accepted_a.load(Ordering::SeqCst), accepted_all.load(Ordering::SeqCst));
    assert!(a <= limit, "account spent {a} > its limit {limit}");
    assert!(all <= hard, "spent {all} > hard stop {hard}");
    (a, all)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn one_account_never_overspends_under_concurrency(
        amounts in proptest::collection::vec(1i64..5_000, 64),
        limit in 5_000i64..60_000,
        hard in 40_000i64..400_000,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.sqlite");
        drop(SqliteLedger::open(&path, limits(hard)).unwrap());
        // Each thread on its own connection, as separate processes would be.
        let (a, all) = race_accounts(|| Arc::new(SqliteLedger::open(&path, limits(hard)).unwrap()), &amounts, limit, hard);
        let (sum, total) = account_sums(&path, "team-a");
        prop_assert_eq!(sum, total, "entries and the account's running total agree");
        prop_assert_eq!(total, a, "the account's total is what was accepted for it");
        prop_assert_eq!(entries_sum(&path), (all, all));

        let memory: Arc<dyn BudgetGate> = Arc::new(MemoryLedger::new(limits(hard)));
        let (a, _) = race_accounts(|| memory.clone(), &amounts, limit, hard);
        prop_assert_eq!(memory.account_spent("team-a").unwrap(), MicroUsd(a));
    }
}

/// Child side of the kill test: charges forever, printing each committed total.
#[test]
fn ledger_child_writer() {
    let Ok(path) = std::env::var("TAILCUT_LEDGER_CHILD") else { return };
    let ledger = SqliteLedger::open(Path::new(&path), BudgetLimits::UNLIMITED).unwrap();
    let mut out = std::io::stdout();
    for i in 0.. {
        let id = format!("c{i}");
        let charge = Charge { provider: "runpod", request_id: &id, amount: MicroUsd(7), opens_request: true };
        let total = ledger.charge_account(&charge, &Account { name: "team-a".into(), limit: None }).unwrap();
        use std::io::Write;
        writeln!(out, "committed {}", total.0).unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn killed_process_loses_nothing_committed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    let last_committed = common::committed_before_kill("ledger_child_writer", "TAILCUT_LEDGER_CHILD", &path, 7 * 300);
    assert!(last_committed >= 7 * 300);
    let ledger = SqliteLedger::open(&path, BudgetLimits::UNLIMITED).unwrap();
    let total = ledger.summary().unwrap().total.0;
    assert!(total >= last_committed, "committed {last_committed} but reopened total is {total}");
    let (sum, row) = entries_sum(&path);
    assert_eq!(sum, row, "entries and running total agree after the kill");
    // The account's spend is in the same transactions: as durable as the global total.
    assert_eq!(ledger.account_spent("team-a").unwrap().0, total, "per-account spend survives kill -9");
    assert_eq!(account_sums(&path, "team-a"), (total, total));
    assert_eq!(common::integrity(&path), "ok");
}
