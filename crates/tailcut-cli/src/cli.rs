//! Command-line definitions (clap). Only argument shapes and help text live here.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// Largest number of seconds a flag accepts (11.6 days, the trace readers' bound on
/// one request): a larger deadline or delay is a typo, and infinities and NaN would
/// print as `miss>NaNs` or poison every comparison.
pub const MAX_FLAG_SECONDS: f64 = 1e6;

fn finite(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("`{s}` is not a number"))?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(format!("`{s}` is not a finite number"))
    }
}

/// Seconds in (0, [`MAX_FLAG_SECONDS`]]: deadlines.
pub fn positive_seconds(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if v > 0.0 && v <= MAX_FLAG_SECONDS {
        Ok(v)
    } else {
        Err(format!("expected seconds above 0 and at most {MAX_FLAG_SECONDS:e}"))
    }
}

/// Seconds in [0, [`MAX_FLAG_SECONDS`]]: delays.
pub fn seconds(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if (0.0..=MAX_FLAG_SECONDS).contains(&v) {
        Ok(v)
    } else {
        Err(format!("expected seconds between 0 and {MAX_FLAG_SECONDS:e}"))
    }
}

/// A probability in [0, 1].
pub fn probability(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err("expected a probability between 0 and 1".to_string())
    }
}

/// A positive finite factor or rate, at most 1e6.
pub fn positive(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if v > 0.0 && v <= 1e6 {
        Ok(v)
    } else {
        Err("expected a number above 0 and at most 1e6".to_string())
    }
}

/// A non-negative finite fraction, at most 1e6.
pub fn non_negative(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if (0.0..=1e6).contains(&v) {
        Ok(v)
    } else {
        Err("expected a number between 0 and 1e6".to_string())
    }
}

/// Worker threads: 0 (one per core) to 1024.
pub fn threads(s: &str) -> Result<usize, String> {
    let v: usize = s.trim().parse().map_err(|_| format!("`{s}` is not a thread count"))?;
    if v <= 1024 {
        Ok(v)
    } else {
        Err("expected at most 1024 threads".to_string())
    }
}

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
}

/// `tailcut model ...`
#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Build a model from paired-round traces (reference `round`, `tailcut_round`) and
    /// tailcut request traces (`tailcut_request`), in file order.
    Fit(ModelFitArgs),
    /// Print a saved model: per-provider quantiles, failure rates, P(warm) against idle
    /// gap, and the pairs' slow-together lift.
    Show(ModelShowArgs),
}

/// Options of `tailcut model fit`.
#[derive(Debug, Args)]
pub struct ModelFitArgs {
    /// Trace files, read in order.
    #[arg(required = true)]
    pub traces: Vec<PathBuf>,
    /// Configuration with the providers and their rates (default: built-in).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Where to write the model (JSON).
    #[arg(short = 'o', long, default_value = "model.json")]
    pub out: PathBuf,
    /// Observations per provider after which an old one counts half.
    #[arg(long, default_value_t = 64.0)]
    pub half_life: f64,
}

/// Options of `tailcut model show`.
#[derive(Debug, Args)]
pub struct ModelShowArgs {
    /// The saved model.
    #[arg(default_value = "model.json")]
    pub model: PathBuf,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// `tailcut scenario ...`
#[derive(Debug, Subcommand)]
pub enum ScenarioCommand {
    /// List the scenario families.
    List,
    /// Run one scenario: every fixed policy of the standard sweep, `tuned:` (the fixed
    /// policy the reference's ranking picks on the first half) and the learned policies,
    /// evaluated on the second half of the stream.
    Run(ScenarioRunArgs),
}

/// Options of `tailcut scenario run`.
#[derive(Debug, Args)]
pub struct ScenarioRunArgs {
    /// Scenario name (see `tailcut scenario list`).
    pub name: String,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Requests in the stream (both halves).
    #[arg(long, default_value_t = 4000)]
    pub requests: usize,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Write an SVG: latency ECDFs, or for `straggler` p99 against extra load.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Show every row (default: the best fixed rows by p95, tuned and learned).
    #[arg(long)]
    pub all: bool,
}

/// Which cost `auto` minimises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CostArg {
    /// Execution seconds × rate.
    Active,
    /// Active plus billed idle windows.
    Billed,
}

/// Options of the learned rows (`--learned`).
#[derive(Debug, Clone, Args)]
pub struct LearnedArgs {
    /// Add the learned policies, replayed causally: `auto`, and `adaptive` and `singler`
    /// for every provider pair. Round i is decided by a model that saw only the
    /// calibration rounds (for the evaluation split) and rounds before i.
    #[arg(long)]
    pub learned: bool,
    /// `auto`'s deadline, s.
    #[arg(long, default_value_t = 60.0, value_name = "S")]
    pub auto_deadline: f64,
    /// `auto`'s target miss rate at the deadline.
    #[arg(long, default_value_t = 0.05, value_name = "P")]
    pub auto_miss: f64,
    /// `auto`'s most extra attempts per request.
    #[arg(long, default_value_t = 0.35, value_name = "X")]
    pub auto_max_extra: f64,
    /// The cost `auto` minimises.
    #[arg(long, value_enum, default_value_t = CostArg::Active)]
    pub auto_cost: CostArg,
    /// Extra-load budget of `adaptive` and `singler` (extra attempts per request).
    #[arg(long, default_value_t = 0.05, value_name = "B")]
    pub hedge_budget: f64,
    /// Model half-life, in observations per provider.
    #[arg(long, default_value_t = 32.0)]
    pub half_life: f64,
}

/// `tailcut contend ...`
#[derive(Debug, Subcommand)]
pub enum ContendCommand {
    /// Run agents solo and co-located over interleaved trials and report the damage.
    Run(ContendRunArgs),
    /// Run one agent (started by `contend run`, or by a Kubernetes Job) and emit its samples.
    Agent(ContendAgentArgs),
    /// Build the report from sample files written by `contend agent --out` (e.g. from Kubernetes Jobs).
    Report(ContendReportArgs),
    /// Put two `contend run --json` results side by side (e.g. time-slicing vs MIG).
    Compare(ContendCompareArgs),
    /// Emit Kubernetes manifests: device-plugin sharing config or MIG layout, results volume, agent Jobs.
    K8s(ContendK8sArgs),
    /// Plan placements meeting every agent's p99 objective with the fewest GPUs.
    Plan(ContendPlanArgs),
}

/// Options of `tailcut contend run`.
#[derive(Debug, Args)]
pub struct ContendRunArgs {
    /// An agent: fft, gemm, membw, cuda-fft, cuda-gemm or http, optionally `kind:size` or
    /// `fft:size x batch` (e.g. `gemm:512`, `fft:4096x8`). Repeat for each agent.
    #[arg(long = "agent", required = true)]
    pub agents: Vec<String>,
    /// same-core, separate-cores or solo (CPU); time-slicing, mps, mig or dedicated (CUDA).
    #[arg(long, default_value = "same-core")]
    pub mode: String,
    /// Trials; each runs every agent solo and all together, arm order alternating.
    #[arg(long, default_value_t = 3)]
    pub trials: u32,
    /// Warm-up per run (samples discarded).
    #[arg(long, default_value = "300ms", value_parser = humantime::parse_duration)]
    pub warmup: Duration,
    /// Measurement window per run.
    #[arg(long, default_value = "1500ms", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// Stop each run after this many measured iterations, if that comes before the window ends.
    #[arg(long)]
    pub iterations: Option<u64>,
    /// CUDA devices: one shared device (time-slicing, mps) or one per agent (mig: MIG UUIDs, dedicated: indices).
    #[arg(long, value_delimiter = ',')]
    pub devices: Vec<String>,
    /// Base URL of the OpenAI-compatible server (http agents).
    #[arg(long)]
    pub url: Option<String>,
    /// Model name for http agents.
    #[arg(long)]
    pub model: Option<String>,
    /// Requests per second for http agents.
    #[arg(long, default_value_t = 5.0, value_parser = positive)]
    pub rate: f64,
    /// Bootstrap resamples for the degradation intervals.
    #[arg(long, default_value_t = 300)]
    pub bootstrap: usize,
    /// "Median barely moves" tolerance for the verdict (0.10 = ±10%).
    #[arg(long, default_value_t = 0.10, value_parser = non_negative)]
    pub median_tolerance: f64,
    /// "Tail moves" threshold on the p99 factor for the verdict.
    #[arg(long, default_value_t = 1.25, value_parser = positive)]
    pub tail_factor: f64,
    /// Seed of the bootstrap.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Include the pooled samples in the JSON.
    #[arg(long)]
    pub include_samples: bool,
    /// Write an SVG: per-agent latency tails (P(latency > x), log axes) solo vs shared and degradation bars.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
}

/// Options of `tailcut contend agent`.
#[derive(Debug, Args)]
pub struct ContendAgentArgs {
    /// fft, gemm, membw, cuda-fft, cuda-gemm or http.
    #[arg(long)]
    pub kind: String,
    /// Problem size (FFT points / FFT side, matrix side, MiB copied); default per kind.
    #[arg(long)]
    pub size: Option<usize>,
    /// FFTs per iteration (fft; default 64).
    #[arg(long)]
    pub batch: Option<usize>,
    /// Pin to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// CUDA device index or GPU-/MIG- UUID.
    #[arg(long)]
    pub device: Option<String>,
    /// Unix time (ms) to start the warm-up at (default: now).
    #[arg(long)]
    pub start_at_ms: Option<u64>,
    /// Warm-up, ms.
    #[arg(long, default_value_t = 300)]
    pub warmup_ms: u64,
    /// Measurement window, ms.
    #[arg(long, default_value_t = 1500)]
    pub duration_ms: u64,
    /// Stop after this many measured iterations, if that comes first.
    #[arg(long)]
    pub iterations: Option<u64>,
    /// Agent name recorded with the samples.
    #[arg(long)]
    pub name: Option<String>,
    /// Arm recorded with the samples (`solo` or `shared`).
    #[arg(long)]
    pub arm: Option<String>,
    /// Trial recorded with the samples.
    #[arg(long)]
    pub trial: Option<u32>,
    /// Write the samples here instead of standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Base URL (http).
    #[arg(long)]
    pub url: Option<String>,
    /// Model (http).
    #[arg(long)]
    pub model: Option<String>,
    /// Requests per second (http).
    #[arg(long, default_value_t = 5.0, value_parser = positive)]
    pub rate: f64,
}

/// Options of `tailcut contend report`.
#[derive(Debug, Args)]
pub struct ContendReportArgs {
    /// Sample files or directories of them.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Write an SVG.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Bootstrap resamples.
    #[arg(long, default_value_t = 300)]
    pub bootstrap: usize,
}

/// Options of `tailcut contend compare`.
#[derive(Debug, Args)]
pub struct ContendCompareArgs {
    /// First `contend run --json` output.
    pub a: PathBuf,
    /// Second one.
    pub b: PathBuf,
}

/// Options of `tailcut contend k8s`.
#[derive(Debug, Args)]
pub struct ContendK8sArgs {
    /// time-slicing, mps, mig or dedicated.
    #[arg(long)]
    pub mode: String,
    /// Replicas advertised per GPU (time-slicing, mps; at least 2).
    #[arg(long, default_value_t = 4)]
    pub replicas: u32,
    /// Agents (cuda-fft, cuda-gemm, http; `kind:size` allowed). Repeat.
    #[arg(long = "agent", required = true)]
    pub agents: Vec<String>,
    /// GPU model for MIG: a100-40gb, a100-80gb, h100-80gb, h200-141gb.
    #[arg(long)]
    pub gpu: Option<String>,
    /// MIG layout, e.g. `3g.40gb,2g.20gb,1g.10gb` or `1g.10gb=7`.
    #[arg(long)]
    pub mig_layout: Option<String>,
    /// Namespace of the Jobs.
    #[arg(long, default_value = "tailcut")]
    pub namespace: String,
    /// Namespace of the NVIDIA device plugin.
    #[arg(long, default_value = "nvidia-device-plugin")]
    pub plugin_namespace: String,
    /// Image containing `tailcut` built with `--features cuda`; nothing publishes one: build
    /// and push it from this repository (`docker build --build-arg FEATURES=cuda -t IMAGE .`),
    /// as the manifest's header repeats.
    #[arg(long, default_value = "ghcr.io/tailcut/tailcut:cuda")]
    pub image: String,
    /// Warm-up per agent run.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub warmup: Duration,
    /// Measurement window per agent run.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// Pin the Jobs to this node.
    #[arg(long)]
    pub node: Option<String>,
    /// Base URL (http agents).
    #[arg(long)]
    pub url: Option<String>,
    /// Write here instead of standard output.
    #[arg(long, short)]
    pub out: Option<PathBuf>,
}

/// Options of `tailcut contend plan`.
#[derive(Debug, Args)]
pub struct ContendPlanArgs {
    /// TOML: [[agents]] name, kind, memory_gb, p99_objective_ms, solo_p99_ms, mig_scaling; [interference.<mode>] "victim<-aggressor" = factor.
    #[arg(long)]
    pub agents: PathBuf,
    /// TOML: model, count, modes, max_share.
    #[arg(long)]
    pub gpus: PathBuf,
    /// Fill interference factors from a `contend run --json` result of a GPU mode (repeatable).
    #[arg(long)]
    pub measured: Vec<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Write the plan's Kubernetes configuration here.
    #[arg(long, value_name = "FILE")]
    pub k8s: Option<PathBuf>,
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
    /// Worker threads (default: one per core).
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
    /// Write an SVG of the arms' latency tails (P(latency > x) on a log axis), the fastest
    /// single-provider arm dashed as the baseline.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Also write one self-contained HTML file: the tables and the plot.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
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
    /// Send this many requests, one after another.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Wait between repeated requests (e.g. long enough for workers to scale to zero).
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    pub wait: Duration,
    /// Requests in flight at once (a load test: `--repeat 1000 --concurrency 1000`);
    /// reports peak open sockets.
    #[arg(long, default_value_t = 1)]
    pub concurrency: usize,
    /// Append trace records here (default: the config's [trace] path).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Print each request's trace record as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Options of `tailcut login-check`.
#[derive(Debug, Args)]
pub struct LoginCheckArgs {
    /// Configuration file.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Options of `tailcut bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Configuration file (its providers are benchmarked).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Paired rounds.
    #[arg(long, default_value_t = 6)]
    pub rounds: u64,
    /// Rounds per block.
    #[arg(long, default_value_t = 6)]
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
    /// Configuration file.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Providers to audit (default: all).
    #[arg(long, value_delimiter = ',')]
    pub providers: Vec<String>,
    /// Repeats per provider and phase.
    #[arg(long, default_value_t = 2)]
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
    /// Real seconds per simulated second (0.01 makes a 100 s cold start take 1 s).
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
