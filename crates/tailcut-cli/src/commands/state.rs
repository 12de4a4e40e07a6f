//! `tailcut state migrate|reconcile`: the gateway's shared state on PostgreSQL.

use crate::cli::StateCommand;
use crate::commands::BadInput;
use std::process::ExitCode;
use tailcut_config::StateBackend;
use tailcut_state::ledger::PgLedger;
use tailcut_state::pg::{PgSettings, PgState};

fn connect(config: &std::path::Path) -> anyhow::Result<(tailcut_config::Config, std::sync::Arc<PgState>)> {
    let c = tailcut_config::Config::load(config)?;
    let StateBackend::Postgres { url } = &c.state.backend else {
        return Err(BadInput(format!(
            "{}: state.url is not a postgres:// URL (the embedded SQLite state needs no migration or lease reconciliation)",
            config.display()
        ))
        .into());
    };
    let url = url.resolve().map_err(|e| BadInput(format!("{}: {e}", config.display())))?;
    let settings = PgSettings { url, pool_size: 2, lease_ttl: c.state.lease_ttl, lease_slice: c.state.lease_slice, write_behind: false };
    let pg = PgState::connect(settings).map_err(|e| BadInput(format!("{}: state.url: {e}", config.display())))?;
    Ok((c, pg))
}

pub fn run(cmd: &StateCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        StateCommand::Migrate { config } => {
            let (_, pg) = connect(config)?;
            let st = pg.clone();
            let v = pg.block_on(async move {
                let v = st.schema_version().await?;
                // A migration-only connection is not a serving replica.
                st.mark_stopped().await?;
                Ok(v)
            })?;
            println!("schema at migration {v} (of {})", tailcut_state::pg::MIGRATIONS.len());
            Ok(ExitCode::SUCCESS)
        }
        StateCommand::Reconcile { config, json } => {
            let (c, pg) = connect(config)?;
            let ledger = PgLedger::new(pg.clone(), c.budget.limits);
            let st = pg.clone();
            let r = pg.block_on(async move {
                let r = ledger.reconciliation().await?;
                st.mark_stopped().await?;
                Ok(r)
            })?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                println!(
                    "{:<24} {:>14} {:>8} {:>12} {:>14} {:>14} {:>14} {:>14} {:>12}  balanced",
                    "budget", "charged µ$", "charges", "reconciled", "spent µ$", "leased µ$", "returned µ$", "reclaimed µ$", "open leases"
                );
                for s in &r.scopes {
                    println!(
                        "{:<24} {:>14} {:>8} {:>12} {:>14} {:>14} {:>14} {:>14} {:>12}  {}",
                        s.scope, s.charged, s.charges, s.reconciled, s.spent, s.leased, s.returned, s.reclaimed, s.open_leases, s.balanced
                    );
                }
            }
            Ok(if r.balanced { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
    }
}
