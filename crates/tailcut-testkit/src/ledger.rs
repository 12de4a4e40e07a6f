//! One test suite for every `BudgetGate` (the memory ledger in tailcut-core, the SQLite ledger
//! in tailcut-state): each backend's tests call these on a fresh ledger.

use tailcut_core::ledger::{Account, BudgetGate, Charge, LedgerError};
use tailcut_core::MicroUsd;

/// A charge of `amount` to `runpod` for request `r`; `opens` when it opens the request.
pub fn charge(amount: i64, opens: bool) -> Charge<'static> {
    Charge { provider: "runpod", request_id: "r", amount: MicroUsd(amount), opens_request: opens }
}

/// Both stops, on a fresh ledger with soft stop 80 and hard stop 100: a new request may
/// not cross the soft stop, a hedge of one in flight may, and nothing crosses the hard stop.
pub fn enforces_both_stops(ledger: &dyn BudgetGate) {
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

/// Account `team-a` with a limit of `limit` micro-dollars.
pub fn account(limit: i64) -> Account {
    Account { name: "team-a".into(), limit: Some(MicroUsd(limit)) }
}

/// Per-key accounts with the global limits, on a fresh ledger with soft stop 80 and a hard
/// stop of at least 1000: an account's limit and the global one both refuse without moving
/// either total, and a reconciliation corrects both.
pub fn charges_accounts_with_the_global_limits(ledger: &dyn BudgetGate) {
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
