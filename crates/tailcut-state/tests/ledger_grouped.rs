//! The SQLite ledger's group commit (`charge_async`, `charge_account_async`: what the
//! engine charges every launch through): concurrent charges from two handles on one file
//! (as two processes would have) never overspend, globally or per account, and the rows
//! agree with the totals; and a process killed while batches are being written loses no
//! charge that it was told had committed.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

mod common;

use proptest::prelude::*;
use std::path::Path;
use std::sync::Arc;
use tailcut_core::ledger::{Account, BudgetGate, BudgetLimits, Charge, LedgerError};
use tailcut_core::MicroUsd;
use tailcut_state::ledger::SqliteLedger;

/// (sum of the rows, the global total), and (sum of the account's rows, its total).
fn sums(path: &Path, account: &str) -> ((i64, i64), (i64, i64)) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let q = |sql: &str| -> i64 { conn.query_row(sql, [account], |r| r.get(0)).unwrap() };
    (
        (
            q("SELECT COALESCE(SUM(micro_usd), 0) FROM ledger_entries WHERE ?1 = ?1"),
            q("SELECT micro_usd FROM ledger_totals WHERE scope = 'global' AND ?1 = ?1"),
        ),
        (
            q("SELECT COALESCE(SUM(micro_usd), 0) FROM ledger_entries WHERE account = ?1"),
            q("SELECT COALESCE(MAX(micro_usd), 0) FROM account_totals WHERE account = ?1"),
        ),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn grouped_charges_never_overspend_and_the_rows_agree_with_the_totals(
        charges in proptest::collection::vec((1i64..5_000, any::<bool>(), any::<bool>()), 1..200),
        hard in 20_000i64..200_000,
        limit in 5_000i64..100_000,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.sqlite");
        let limits = BudgetLimits { soft_stop: MicroUsd(hard), hard_stop: MicroUsd(hard) };
        let ledgers = [Arc::new(SqliteLedger::open(&path, limits).unwrap()), Arc::new(SqliteLedger::open(&path, limits).unwrap())];
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
        let outcomes: Vec<(i64, bool, Result<MicroUsd, LedgerError>)> = rt.block_on(async {
            let tasks: Vec<_> = charges
                .iter()
                .enumerate()
                .map(|(i, &(amount, keyed, second))| {
                    let l = ledgers[usize::from(second)].clone();
                    tokio::spawn(async move {
                        let id = format!("r{i}");
                        let c = Charge { provider: "p", request_id: &id, amount: MicroUsd(amount), opens_request: false };
                        let account = Account { name: "team-a".into(), limit: Some(MicroUsd(limit)) };
                        let r = if keyed { l.charge_account_async(&c, &account).await } else { l.charge_async(&c).await };
                        (amount, keyed, r)
                    })
                })
                .collect();
            let mut v = Vec::new();
            for t in tasks {
                v.push(t.await.unwrap());
            }
            v
        });
        let total: i64 = outcomes.iter().filter(|o| o.2.is_ok()).map(|o| o.0).sum();
        let keyed: i64 = outcomes.iter().filter(|o| o.1 && o.2.is_ok()).map(|o| o.0).sum();
        prop_assert!(total <= hard, "global {total} > {hard}");
        prop_assert!(keyed <= limit, "account {keyed} > {limit}");
        for (_, _, r) in &outcomes {
            prop_assert!(matches!(r, Ok(_) | Err(LedgerError::BudgetExceeded { .. } | LedgerError::AccountBudgetExceeded { .. })), "{r:?}");
        }
        // A refused charge was refused for a reason: it would have crossed a limit then.
        let smallest_refused = outcomes.iter().filter(|o| o.2.is_err() && !o.1).map(|o| o.0).min();
        if let Some(a) = smallest_refused {
            prop_assert!(total + a > hard, "a charge of {a} refused with {total} of {hard} spent");
        }
        prop_assert_eq!(sums(&path, "team-a"), ((total, total), (keyed, keyed)));
        prop_assert_eq!(ledgers[0].summary().unwrap().charges, outcomes.iter().filter(|o| o.2.is_ok()).count() as u64);
    }
}

/// Child side of the kill test: 32 tasks charge through the group commit forever, each
/// printing the total its charge committed.
#[test]
fn grouped_ledger_child_writer() {
    let Ok(path) = std::env::var("TAILCUT_LEDGER_GROUPED_CHILD") else { return };
    let ledger = Arc::new(SqliteLedger::open(Path::new(&path), BudgetLimits::UNLIMITED).unwrap());
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    rt.block_on(async {
        let tasks: Vec<_> = (0..32)
            .map(|t| {
                let ledger = ledger.clone();
                tokio::spawn(async move {
                    for i in 0.. {
                        let id = format!("c{t}-{i}");
                        let charge = Charge { provider: "runpod", request_id: &id, amount: MicroUsd(7), opens_request: true };
                        let total = ledger.charge_account_async(&charge, &Account { name: "team-a".into(), limit: None }).await.unwrap();
                        println!("committed {}", total.0);
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
}

#[test]
fn a_process_killed_during_group_commits_loses_nothing_committed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    let most_committed = common::committed_before_kill("grouped_ledger_child_writer", "TAILCUT_LEDGER_GROUPED_CHILD", &path, 7 * 3_000);
    assert!(most_committed >= 7 * 3_000);
    let ledger = SqliteLedger::open(&path, BudgetLimits::UNLIMITED).unwrap();
    let total = ledger.summary().unwrap().total.0;
    assert!(total >= most_committed, "a charge was told {most_committed} had committed, but the reopened total is {total}");
    let ((rows, global), (account_rows, account)) = sums(&path, "team-a");
    assert_eq!((rows, account_rows, account), (global, global, global), "rows and totals agree after the kill");
    assert_eq!(ledger.summary().unwrap().charges as i64 * 7, total, "one row per committed charge");
    assert_eq!(common::integrity(&path), "ok");
}
