//! Command-line definitions (clap). Only argument shapes and help text live here.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

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
    /// Show or check a configuration file.
    #[command(subcommand)]
    Config(ConfigCommand),
}

/// Request arrival pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Arrivals {
    /// Evenly spaced, one every `--interarrival` (every request meets a cold endpoint
    /// when the spacing exceeds the idle window, as in the reference benchmark).
    Fixed,
    /// A Poisson process with mean spacing `--interarrival` (some requests find warm workers).
    Poisson,
}

/// Options of `tailcut demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Requests per policy.
    #[arg(long, default_value_t = 1000)]
    pub requests: usize,
    /// Mixes into every simulated provider's seed; the same seed gives the same table.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Spacing between requests, in simulated time (e.g. `130s`, `2m`).
    #[arg(long, default_value = "130s", value_parser = humantime::parse_duration)]
    pub interarrival: Duration,
    /// Arrival pattern.
    #[arg(long, value_enum, default_value_t = Arrivals::Fixed)]
    pub arrivals: Arrivals,
    /// Deadline for the miss column, seconds.
    #[arg(long, default_value_t = 60.0)]
    pub deadline: f64,
    /// Probability that a running cancel is acknowledged but ineffective (on every
    /// simulated provider); shows how leaks are reported.
    #[arg(long)]
    pub leak_p: Option<f64>,
    /// Configuration file (defaults to the built-in simulated providers and policies).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Append every request's trace record (JSONL) to this file.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Print a JSON array (one object per policy) instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `tailcut config ...`
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the built-in configuration (a starting point for your own file).
    Show,
    /// Validate a configuration file; exits 2 with the key and what was expected if it is bad.
    Check {
        /// The file to check.
        file: PathBuf,
    },
}
