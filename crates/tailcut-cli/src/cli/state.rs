//! `tailcut state ...`: the gateway's shared state on PostgreSQL.

use clap::Subcommand;
use std::path::PathBuf;

/// `tailcut state` subcommands.
#[derive(Debug, Subcommand)]
pub enum StateCommand {
    /// Apply the schema migrations of `[state] url` and exit (a Kubernetes init
    /// container or a readiness check runs this; `tailcut serve` also runs them at start).
    Migrate {
        /// The gateway's configuration file (its `[state]` section names the database).
        #[arg(long)]
        config: PathBuf,
    },
    /// Every budget's books, to the micro-dollar: charged, reconciled, leased, returned
    /// and reclaimed, and whether they balance. Exits 1 when they do not.
    Reconcile {
        /// The gateway's configuration file (its `[state]` section names the database).
        #[arg(long)]
        config: PathBuf,
        /// One JSON document instead of the table.
        #[arg(long)]
        json: bool,
    },
}
