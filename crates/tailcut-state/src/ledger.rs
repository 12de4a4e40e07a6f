//! The durable ledgers behind [`tailcut_core::ledger::BudgetGate`] (the contract, its
//! limit checks and the memory ledger stay in `tailcut-core`):
//!
//! - [`SqliteLedger`] (`ledger/sqlite.rs`): WAL mode, `BEGIN IMMEDIATE` transactions, one
//!   row per charge; the engine's async charges are group-committed by a writer thread;
//! - `PgLedger` (`ledger/postgres.rs`, feature `postgres`): the ledger gateway replicas
//!   share. Each replica leases slices of a budget in one statement and charges them
//!   locally (one durable row per charge, no shared row locked per request), so no number
//!   of replicas can overspend.

use tailcut_core::MicroUsd;

#[cfg(feature = "postgres")]
pub(crate) mod postgres;
#[cfg(feature = "postgres")]
pub use postgres::{PgLedger, Reconciliation, ScopeReconciliation};
mod sqlite;
pub use sqlite::SqliteLedger;

/// One reconcile entry as the database ledgers write it (a `ledger_entries` row of kind
/// `reconcile`): a correction of a request's projected cost, why, and the account it moves
/// besides the global total.
#[derive(Clone, Debug)]
struct ReconcileEntry {
    provider: String,
    request_id: String,
    delta: MicroUsd,
    note: String,
    account: Option<String>,
}

impl ReconcileEntry {
    fn new(provider: &str, request_id: &str, delta: MicroUsd, note: &str, account: Option<&str>) -> ReconcileEntry {
        let (provider, request_id, note) = (provider.to_string(), request_id.to_string(), note.to_string());
        ReconcileEntry { provider, request_id, delta, note, account: account.map(str::to_string) }
    }
}

#[cfg(all(test, feature = "postgres"))]
mod postgres_tests;
#[cfg(test)]
mod tests;
