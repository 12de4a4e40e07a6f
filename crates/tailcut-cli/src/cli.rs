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
    /// Replay recorded paired rounds through the standard policy sweep (singles, races,
    /// fixed hedges over a delay grid, queue cutovers, cascades) and print policy tables.
    Replay(ReplayArgs),
    /// Summarise live request traces per policy arm: latency quantiles, misses,
    /// hedges, winners, cancellation evidence, leaks and cancel latencies.
    Report(ReportArgs),
    /// Write synthetic paired-round traces drawn from the simulator profiles.
    Synth(SynthArgs),
    /// Show or check a configuration file.
    #[command(subcommand)]
    Config(ConfigCommand),
}

/// Quantile estimator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EstimatorArg {
    /// The reference tool's order statistic at round-half-even(q·(n−1)) (matches its tables).
    Nearest,
    /// Linear interpolation between neighbouring order statistics.
    Linear,
}

/// Ranking for `--top`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SortBy {
    /// p95 latency.
    P95,
    /// Median latency.
    P50,
    /// Active-compute $/request.
    Cost,
    /// Billed $/request.
    Billed,
    /// Miss rate at 60 s (then active cost), the reference's ranking.
    Miss60,
}

/// Options of `tailcut replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Paired-round trace files (reference `round` or tailcut `tailcut_round` records), read in order.
    #[arg(required = true)]
    pub traces: Vec<PathBuf>,
    /// Configuration with provider rates, idle windows, deadlines and the delay grid
    /// (defaults to the built-in one, whose rates equal the reference's 2026-07 rates).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Also evaluate the calibration (round_id <= K) and evaluation (round_id > K) splits.
    #[arg(long, value_name = "K")]
    pub calibration_rounds: Option<i64>,
    /// Miss deadlines in seconds, comma-separated (default from config: 30,60,90,120).
    #[arg(long, value_delimiter = ',')]
    pub deadlines: Option<Vec<u32>>,
    /// Fixed-hedge delays in seconds, comma-separated (default from config: 0,5,10,15,20,30,45,60).
    #[arg(long, value_delimiter = ',')]
    pub delays: Option<Vec<f64>>,
    /// Quantile estimator.
    #[arg(long, value_enum, default_value_t = EstimatorArg::Nearest)]
    pub estimator: EstimatorArg,
    /// Show only the N best policies (by `--by`) instead of the reference's selection.
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// Ranking used by `--top`.
    #[arg(long, value_enum, default_value_t = SortBy::P95)]
    pub by: SortBy,
    /// Show every policy (cascades included) instead of the reference's selection.
    #[arg(long)]
    pub all: bool,
    /// Print the per-round cold-start matrix too.
    #[arg(long)]
    pub matrix: bool,
    /// Print JSON: {"all": [...], "calibration": [...], "evaluation": [...]}, full precision.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV (one row per split and policy).
    #[arg(long)]
    pub csv: bool,
    /// Write an SVG of the shown policies' latency ECDFs with the deadlines marked
    /// (the evaluation split when there is one).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Skip malformed lines (and report how many) instead of failing.
    #[arg(long)]
    pub skip_bad_lines: bool,
    /// Worker threads (default: one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

/// Options of `tailcut report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Live trace files (tailcut_request, hedged_request, state_aware_request,
    /// cascade_request, single_request, validation_index, forced_cancel records).
    #[arg(required = true)]
    pub traces: Vec<PathBuf>,
    /// Deadline for the miss column, seconds.
    #[arg(long, default_value_t = 60.0)]
    pub deadline: f64,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Write an SVG of each arm's latency ECDF.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Skip malformed lines instead of failing.
    #[arg(long)]
    pub skip_bad_lines: bool,
}

/// Options of `tailcut synth`.
#[derive(Debug, Args)]
pub struct SynthArgs {
    /// Number of paired rounds.
    #[arg(long, default_value_t = 1000)]
    pub rounds: u64,
    /// RNG seed; the same seed writes the same file.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Rounds per block (the `block` field).
    #[arg(long, default_value_t = 6)]
    pub rounds_per_block: u64,
    /// Configuration whose simulated providers are drawn from (default: built-in runpod, modal, cerebrium).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Output file (default: standard output).
    #[arg(long, short)]
    pub out: Option<PathBuf>,
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
