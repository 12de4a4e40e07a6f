//! Arguments of the commands that send jobs to providers or serve them: `tailcut demo`,
//! `config`, `run`, `login-check`, `bench`, `cancel-audit`, `sim-provider`, `serve`.

use super::values::*;
use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// Options of `tailcut demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Requests per policy (at least 1).
    #[arg(long, default_value_t = 1000, value_parser = count::<usize>)]
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
    #[arg(long, default_value_t = 60.0, value_parser = positive_seconds)]
    pub deadline: f64,
    /// Probability that a running cancel is acknowledged but ineffective (on every
    /// simulated provider); shows how leaks are reported.
    #[arg(long, value_parser = probability)]
    pub leak_p: Option<f64>,
    /// Configuration file (defaults to the built-in simulated providers and policies).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Append every request's trace record (JSONL) to this file (records already there are
    /// kept, and `tailcut report` reads them all: use a new file per run).
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
    /// Convert a GPUHedge YAML config (providers with rates and idle windows, http job
    /// APIs, the hedge policy, SLO deadlines, budget) into a tailcut.toml on stdout.
    ImportGpuhedge {
        /// The GPUHedge YAML file (e.g. config/benchmark.yaml).
        file: PathBuf,
    },
}

/// Options of `tailcut run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Policy name from the config's [policies] table.
    #[arg(long)]
    pub policy: String,
    /// Configuration file (default: the built-in simulated providers).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Job input as JSON.
    #[arg(long, default_value = "{\"text\": \"hello\"}")]
    pub input: String,
    /// Allow submitting to paid providers (anything not simulated or on loopback).
    #[arg(long)]
    pub go: bool,
    /// Send this many requests (at least 1), one after another (or `--concurrency` at a time).
    #[arg(long, default_value_t = 1, value_parser = count::<usize>)]
    pub repeat: usize,
    /// Wait between repeated requests (e.g. long enough for workers to scale to zero).
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    pub wait: Duration,
    /// Requests in flight at once (a load test: `--repeat 1000 --concurrency 1000`);
    /// reports peak open sockets.
    #[arg(long, default_value_t = 1, value_parser = count::<usize>)]
    pub concurrency: usize,
    /// Append trace records here (default: the config's [trace] path).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Print each request's trace record as JSON, one line per request (with
    /// `--concurrency` above 1: one JSON summary of the load run instead).
    #[arg(long)]
    pub json: bool,
    /// Learned policies (`adaptive`, `singler`, `auto`): start from this saved model
    /// (`tailcut model fit` writes one) when it exists and covers the policy's
    /// providers, and save what the requests taught it back to it at the end.
    #[arg(long)]
    pub model: Option<PathBuf>,
}

/// Options of `tailcut login-check`.
#[derive(Debug, Args)]
pub struct LoginCheckArgs {
    /// Configuration file (default: the built-in simulated providers, which need none).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Options of `tailcut bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Configuration file (its providers are benchmarked; default: the built-in simulated ones).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Paired rounds (at least 1).
    #[arg(long, default_value_t = 6, value_parser = count::<u64>)]
    pub rounds: u64,
    /// Rounds per block (the `block` field of each round record: rounds 1–6 are block 1
    /// with the default).
    #[arg(long, default_value_t = 6, value_parser = count::<u64>)]
    pub rounds_per_block: u64,
    /// Wait between rounds so workers scale to zero (cold starts).
    #[arg(long, default_value = "130s", value_parser = humantime::parse_duration)]
    pub wait: Duration,
    /// Also send a warm follow-up request to each provider that answered.
    #[arg(long)]
    pub warm: bool,
    /// Job input as JSON.
    #[arg(long, default_value = "{\"text\": \"hello\"}")]
    pub input: String,
    /// Round traces are appended here.
    #[arg(long, default_value = "rounds.jsonl")]
    pub out: PathBuf,
    /// Allow submitting to paid providers.
    #[arg(long)]
    pub go: bool,
}

/// Options of `tailcut cancel-audit`.
#[derive(Debug, Args)]
pub struct CancelAuditArgs {
    /// Configuration file (default: the built-in simulated providers).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Providers to audit (default: all).
    #[arg(long, value_delimiter = ',')]
    pub providers: Vec<String>,
    /// Repeats per provider and phase (at least 1).
    #[arg(long, default_value_t = 2, value_parser = count::<u32>)]
    pub repeats: u32,
    /// Early cancel: this long after submit.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub early: Duration,
    /// Late cancel: once running is seen (or at this time at the latest).
    #[arg(long, default_value = "25s", value_parser = humantime::parse_duration)]
    pub late: Duration,
    /// Wait between jobs.
    #[arg(long, default_value = "130s", value_parser = humantime::parse_duration)]
    pub wait: Duration,
    /// Records are appended here.
    #[arg(long, default_value = "cancel_audit.jsonl")]
    pub out: PathBuf,
    /// Allow submitting to paid providers.
    #[arg(long)]
    pub go: bool,
}

/// Options of `tailcut sim-provider`.
#[derive(Debug, Args)]
pub struct SimProviderArgs {
    /// Simulator profile: runpod, cerebrium, modal or instant.
    #[arg(long, default_value = "runpod")]
    pub profile: String,
    /// Name used in job ids and metrics (default: the profile).
    #[arg(long)]
    pub name: Option<String>,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,
    /// Port (0 picks a free one and prints it).
    #[arg(long, default_value_t = 8001)]
    pub port: u16,
    /// Real seconds per simulated second, above 0 and at most 1000 (0.01 makes a 100 s
    /// cold start take 1 s).
    #[arg(long, default_value_t = 1.0, value_parser = positive)]
    pub time_scale: f64,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Probability a running cancel is acknowledged but ignored.
    #[arg(long, value_parser = probability)]
    pub leak_p: Option<f64>,
    /// Most workers at once (default: the profile's; raise it for load tests).
    #[arg(long)]
    pub max_workers: Option<usize>,
}

/// Options of `tailcut serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Configuration file ([gateway], [routes.*], providers and policies). SIGHUP reloads it.
    #[arg(long)]
    pub config: PathBuf,
    /// Listen address (overrides [gateway] listen; port 0 picks one and prints it).
    #[arg(long)]
    pub listen: Option<String>,
    /// Request-serving threads, each with its own single-threaded runtime and its own
    /// SO_REUSEPORT socket, as nginx runs a worker per core. Default: one per CPU core.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub workers: Option<u16>,
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
