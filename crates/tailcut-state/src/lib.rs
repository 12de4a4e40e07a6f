//! # tailcut-state
//!
//! Everything tailcut keeps between runs, behind one trait per store with one file per
//! backend. It owns:
//!
//! - [`sqlite_schema`]: how a SQLite file several processes share is opened (WAL) and
//!   migrated (numbered migrations per component, applied under the file's write lock);
//! - `pg` (feature `postgres`): the state gateway replicas share on PostgreSQL: the pool on
//!   its own runtime, numbered migrations under an advisory lock, replica heartbeats,
//!   leases and `LISTEN`;
//! - [`ledger`]: the durable ledgers behind `tailcut_core::ledger::BudgetGate`:
//!   `ledger/sqlite.rs` and `ledger/postgres.rs`;
//! - [`jobs`]: the gateway's job store, [`jobs::JobStore`] over one [`jobs::JobBackend`]
//!   (`jobs/sqlite.rs`, on a writer thread of its own, and `jobs/postgres.rs`);
//! - [`learned`]: where learned models are kept, [`learned::ModelStore`]
//!   (`learned/sqlite.rs`, `learned/postgres.rs`, or memory).

#![warn(missing_docs)]
// Unit tests spawn and read the wall clock freely (clippy.toml).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod jobs;
pub mod learned;
pub mod ledger;
#[cfg(feature = "postgres")]
pub mod pg;
pub mod sqlite_schema;
mod worker;
