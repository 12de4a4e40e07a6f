//! The memory ledger through the suite every `BudgetGate` runs (tailcut_testkit::ledger).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use tailcut_core::ledger::{BudgetLimits, MemoryLedger};
use tailcut_core::MicroUsd;
use tailcut_testkit::ledger::{charges_accounts_with_the_global_limits, enforces_both_stops};

#[test]
fn memory_ledger_enforces_both_stops() {
    enforces_both_stops(&MemoryLedger::new(BudgetLimits { soft_stop: MicroUsd(80), hard_stop: MicroUsd(100) }));
}

#[test]
fn memory_ledger_charges_accounts_with_the_global_limits() {
    charges_accounts_with_the_global_limits(&MemoryLedger::new(BudgetLimits { soft_stop: MicroUsd(80), hard_stop: MicroUsd(1000) }));
}
