//! Arguments of the offline trace commands: `tailcut replay`, `report`, `synth`.

use super::model::LearnedArgs;
use super::values::*;
use clap::{Args, ValueEnum};
use std::path::PathBuf;

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
    /// Also evaluate the calibration (round_id <= K) and evaluation (round_id > K) splits
    /// (default: the --config file's [replay] calibration_rounds, if it sets one).
    #[arg(long, value_name = "K")]
    pub calibration_rounds: Option<i64>,
    /// Miss deadlines in seconds, comma-separated (default from config: 30,60,90,120).
    #[arg(long, value_delimiter = ',')]
    pub deadlines: Option<Vec<u32>>,
    /// Fixed-hedge delays in seconds, comma-separated (default from config: 0,5,10,15,20,30,45,60).
    #[arg(long, value_delimiter = ',', value_parser = seconds)]
    pub delays: Option<Vec<f64>>,
    /// Quantile estimator.
    #[arg(long, value_enum, default_value_t = EstimatorArg::Nearest)]
    pub estimator: EstimatorArg,
    /// Multiply the cutover, safety and escalation timers (2.5, 8.5, 25 s) by this, for
    /// rounds recorded against `tailcut sim-provider --time-scale S` (give the same S).
    #[arg(long, default_value_t = 1.0, value_name = "S")]
    pub time_scale: f64,
    /// Show only the N best policies (by `--by`) instead of the reference's selection.
    #[arg(long, value_name = "N", value_parser = count::<usize>)]
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
    /// Write an SVG (the evaluation split when there is one): the latency tails, as
    /// P(latency > x) on a log axis, of the best single provider (the baseline) and of up
    /// to `--top` (default 4) policies along the billed-cost/p95 frontier, beside every
    /// policy's cost against p95 with the frontier marked.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Also write one self-contained HTML file: the tables and the plot.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["json", "csv"])]
    pub html: Option<PathBuf>,
    /// Skip malformed lines (and report how many) instead of failing.
    #[arg(long)]
    pub skip_bad_lines: bool,
    /// Worker threads for reading and sweeping (0: one per core).
    #[arg(long, default_value_t = 0, value_parser = threads)]
    pub threads: usize,
    /// Learned policies.
    #[command(flatten)]
    pub learned: LearnedArgs,
}

/// Options of `tailcut report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Live trace files (tailcut_request, hedged_request, state_aware_request,
    /// cascade_request, single_request, validation_index, forced_cancel records).
    #[arg(required = true)]
    pub traces: Vec<PathBuf>,
    /// Deadline for the miss column, seconds.
    #[arg(long, default_value_t = 60.0, value_parser = positive_seconds)]
    pub deadline: f64,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Write an SVG of the arms' latency tails (P(latency > x) on a log axis), the
    /// single-provider arm with the lowest p95 dashed as the baseline (the other
    /// single-provider arms are left out).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Also write one self-contained HTML file: the tables and the plot.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Skip malformed lines instead of failing.
    #[arg(long)]
    pub skip_bad_lines: bool,
    /// Configuration whose provider rates and idle windows price the realized cost of
    /// learned decisions in the calibration table (default: built-in).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// Options of `tailcut synth`.
#[derive(Debug, Args)]
pub struct SynthArgs {
    /// Number of paired rounds (at least 1).
    #[arg(long, default_value_t = 1000, value_parser = count::<u64>)]
    pub rounds: u64,
    /// RNG seed; the same seed writes the same file.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Rounds per block (the `block` field).
    #[arg(long, default_value_t = 6, value_parser = count::<u64>)]
    pub rounds_per_block: u64,
    /// Configuration whose simulated providers are drawn from (default: built-in runpod, modal, cerebrium).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Output file (default: standard output).
    #[arg(long, short)]
    pub out: Option<PathBuf>,
}
