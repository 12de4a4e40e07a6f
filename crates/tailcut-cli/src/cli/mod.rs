//! Command-line definitions (clap). Only argument shapes and help text live here: the
//! top level here, each command family's arguments in its own module.
//!
//! The doc comments below are `--help` text, written for a terminal: `[gateway]` is a
//! TOML table and `<mode>` a placeholder, not rustdoc links or HTML.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

mod contend;
mod jobs;
mod model;
mod replay;
mod state;
mod values;

pub use contend::*;
pub use jobs::*;
pub use model::*;
pub use replay::*;
pub use state::*;

use clap::{Parser, Subcommand};

/// tailcut cuts the latency tail of GPU inference: it races a job across serverless GPU
/// providers, takes the first valid result, cancels the losers with evidence, and
/// replays traces offline to pick policies.
#[derive(Debug, Parser)]
#[command(name = "tailcut", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Race every configured policy over simulated providers (no accounts, no network)
    /// and print one comparison table.
    Demo(DemoArgs),
    /// Replay recorded paired rounds through the standard policy sweep (singles, races,
    /// fixed hedges over a delay grid, queue cutovers, cascades) and print policy tables.
    Replay(ReplayArgs),
    /// Summarise live request traces per policy arm: latency quantiles, misses,
    /// hedges, winners, cancellation evidence, leaks and cancel latencies.
    Report(ReportArgs),
    /// Write synthetic paired-round traces drawn from the simulator profiles.
    Synth(SynthArgs),
    /// Send one hedged request (or `--repeat N`) through a configured policy; prints the
    /// winner, latency, cost and every receipt, and appends the trace. Exits 1 when no
    /// request got a valid result; each failed request's attempt causes go to stderr.
    Run(RunArgs),
    /// Check each configured provider's credentials with read-only calls (spends nothing).
    LoginCheck(LoginCheckArgs),
    /// Paired cold-start rounds: the same request to every provider, writing round traces
    /// that `tailcut replay` reads.
    Bench(BenchArgs),
    /// Forced loser cancellations (early and late) per provider, with receipts.
    CancelAudit(CancelAuditArgs),
    /// Serve the gateway: a jobs API and an OpenAI-compatible proxy with hedged streaming.
    Serve(ServeArgs),
    /// Serve a simulated serverless GPU provider over HTTP (RunPod queue API and
    /// OpenAI-compatible API) in compressed real time.
    SimProvider(SimProviderArgs),
    /// Measure what sharing a processor costs co-located agents, emit the Kubernetes
    /// configuration for GPU sharing experiments, and plan placements.
    #[command(subcommand)]
    Contend(ContendCommand),
    /// Show or check a configuration file.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Fit the online provider model from traces, or show a saved one.
    #[command(subcommand)]
    Model(ModelCommand),
    /// Simulated request streams for what paired cold rounds cannot show (cadence,
    /// degradation, correlation, outages, price changes, stragglers).
    #[command(subcommand)]
    Scenario(ScenarioCommand),
    /// The gateway's shared state on PostgreSQL (`[state] url`): apply migrations, or
    /// reconcile every budget to the micro-dollar.
    #[command(subcommand)]
    State(StateCommand),
}
