//! Arguments of `tailcut contend` (GPU sharing measurements).

use super::values::*;
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

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
    /// Measure the interference matrix: every agent solo, every ordered pair (victim <- aggressor), optionally every triple; writes the table `contend plan --table` reads.
    Matrix(ContendMatrixArgs),
    /// Run a plan's co-locations (CPU: each planned device is a core) and check measured p99 against objective and prediction; exits 1 when an objective is missed.
    Verify(ContendVerifyArgs),
}

/// Options of `tailcut contend run`.
#[derive(Debug, Args)]
pub struct ContendRunArgs {
    /// An agent: fft, gemm, membw, llm-prefill, llm-decode, agent-loop, cuda-fft, cuda-gemm or
    /// http, optionally `kind:size` or `fft:size x batch` (e.g. `gemm:512`, `fft:4096x8`,
    /// `llm-prefill:32` prompt tokens, `llm-decode:512` context, `agent-loop:16` output tokens
    /// per call). Repeat for each agent.
    #[arg(long = "agent", required = true)]
    pub agents: Vec<String>,
    /// same-core, separate-cores or solo (CPU); time-slicing, mps, mig or dedicated (CUDA).
    #[arg(long, default_value = "same-core")]
    pub mode: String,
    /// Trials; each runs every agent solo and all together, arm order alternating. Each
    /// factor is the median of the trials' own shared/solo ratios and its 95% interval is
    /// over trials (a bootstrap widened to the t interval), so it shows how much a factor
    /// moves from run to run; with one trial the interval only resamples that run's samples.
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
    #[command(flatten)]
    pub http: HttpAgentArgs,
    /// Bootstrap resamples for the degradation intervals (over trials).
    #[arg(long, default_value_t = 300)]
    pub bootstrap: usize,
    /// "Median barely moves" tolerance for the verdict (0.10 = ±10%). The verdict reads the
    /// intervals: when one straddles a threshold it says "unstable".
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
    /// Think time between model calls of agent-loop agents, ms.
    #[arg(long, default_value_t = 10)]
    pub think_ms: u64,
    /// The share of the device each agent was configured (e.g. 0.3 for a 30% slice): one
    /// for every agent, or one per agent in --agent order. The run then checks each
    /// agent's measured share (shared throughput / solo throughput) against it and exits 1
    /// when one is off by more than --share-tolerance: a share that is not enforced.
    #[arg(long, value_delimiter = ',', value_parser = positive)]
    pub expect_share: Vec<f64>,
    /// Allowed absolute difference between measured and configured share.
    #[arg(long, default_value_t = 0.1, value_parser = non_negative)]
    pub share_tolerance: f64,
}

/// Options of `tailcut contend matrix`.
#[derive(Debug, Args)]
pub struct ContendMatrixArgs {
    /// An agent (as for `contend run`: `kind` or `kind:size`). At least two; give one twice
    /// to measure it against itself (`x<-x`).
    #[arg(long = "agent", required_unless_present = "from")]
    pub agents: Vec<String>,
    /// Measure nothing: read an earlier result (`--json` / `--json-out`) and write its text,
    /// table and heatmap again.
    #[arg(long, value_name = "FILE", conflicts_with = "agents")]
    pub from: Option<PathBuf>,
    /// same-core (fills the plan's time-slicing table) or separate-cores (fills mps) on the
    /// CPU; time-slicing or mps on CUDA.
    #[arg(long, default_value = "same-core")]
    pub mode: String,
    /// Also measure every agent with every two others, fit the composition model on them
    /// and state its error (adds one run per triple per trial).
    #[arg(long)]
    pub triples: bool,
    /// Trials; each runs every pair (and triple) once as a block — each member alone, then
    /// the group, back to back — in a rotating order. A cell's factor is the median of the
    /// trials' own shared/solo ratios, so three or more trials outvote one spoiled by a
    /// load burst.
    #[arg(long, default_value_t = 3)]
    pub trials: u32,
    #[command(flatten)]
    pub window: BlockRunArgs,
    /// CUDA device shared by the agents (time-slicing, mps).
    #[arg(long, value_delimiter = ',')]
    pub devices: Vec<String>,
    /// Bootstrap resamples per cell.
    #[arg(long, default_value_t = 200)]
    pub bootstrap: usize,
    /// Seed of the bootstrap.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the interference table (TOML, the schema `contend plan --table` reads) here.
    #[arg(long, value_name = "FILE")]
    pub table: Option<PathBuf>,
    /// Write an SVG heatmap of the p99 factors here.
    #[arg(long, value_name = "FILE")]
    pub heatmap: Option<PathBuf>,
    #[command(flatten)]
    pub output: JsonOutArgs,
}

/// Options of `tailcut contend verify`.
#[derive(Debug, Args)]
pub struct ContendVerifyArgs {
    /// A plan: the output of `contend plan --json`.
    pub plan: PathBuf,
    /// Run CUDA agents on CUDA devices (device g of the plan = --devices[g], or g).
    #[arg(long)]
    pub gpu: bool,
    /// CUDA devices, one per planned device (with --gpu).
    #[arg(long, value_delimiter = ',')]
    pub devices: Vec<String>,
    /// Trials; each runs every planned device once, in a rotating order. An agent's
    /// measured p99 is the median of the trials' own p99s.
    #[arg(long, default_value_t = 3)]
    pub trials: u32,
    /// Run the whole check N times and score the plan's promise: the share of (agent, run)
    /// objectives met against the confidence the plan was made at, and how many outcomes
    /// fell inside their stated bands. With N > 1 it exits 1 when the share met is below
    /// that confidence (at confidence 0: when any objective is missed).
    #[arg(long, default_value_t = 1, value_parser = count::<u32>)]
    pub repeat: u32,
    /// Skip the solo runs: by default each trial also runs every sharing agent alone,
    /// back to back with its group, and reports the measured interference factor against
    /// the plan's (the prediction rebased on today's solo p99). Without them the run is
    /// shorter and only the absolute p99 is compared with the prediction.
    #[arg(long)]
    pub no_solo: bool,
    #[command(flatten)]
    pub window: BlockRunArgs,
    #[command(flatten)]
    pub output: JsonOutArgs,
}

/// Where http agents send their requests (`contend run`, `contend agent`).
#[derive(Debug, Args)]
pub struct HttpAgentArgs {
    /// Base URL of the OpenAI-compatible server (http agents).
    #[arg(long)]
    pub url: Option<String>,
    /// Model name for http agents.
    #[arg(long)]
    pub model: Option<String>,
    /// Requests per second for http agents.
    #[arg(long, default_value_t = 5.0, value_parser = positive)]
    pub rate: f64,
}

/// Each run of `contend matrix` and `contend verify`: its warm-up, its window and the
/// agent-loop agents' think time.
#[derive(Debug, Args)]
pub struct BlockRunArgs {
    /// Warm-up per run (samples discarded).
    #[arg(long, default_value = "150ms", value_parser = humantime::parse_duration)]
    pub warmup: Duration,
    /// Measurement window per run.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// Think time of agent-loop agents, ms.
    #[arg(long, default_value_t = 10)]
    pub think_ms: u64,
}

/// Where a result goes: JSON or text on standard output, and optionally a JSON file.
#[derive(Debug, Args)]
pub struct JsonOutArgs {
    /// Print the whole result as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON result to this file (with the text report on standard output).
    #[arg(long, value_name = "FILE")]
    pub json_out: Option<PathBuf>,
}

/// Options of `tailcut contend agent`.
#[derive(Debug, Args)]
pub struct ContendAgentArgs {
    /// fft, gemm, membw, llm-prefill, llm-decode, agent-loop, cuda-fft, cuda-gemm or http.
    #[arg(long)]
    pub kind: String,
    /// Problem size (FFT points / FFT side, matrix side, MiB copied, prompt tokens, context
    /// length, output tokens per call); default per kind.
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
    #[command(flatten)]
    pub http: HttpAgentArgs,
    /// Think time between model calls, ms (agent-loop).
    #[arg(long)]
    pub think_ms: Option<u64>,
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
    /// Overlay a measured interference table written by `contend matrix --table`: its factors,
    /// composition model and expected errors, and solo p99 for agents that give none (repeatable).
    #[arg(long)]
    pub table: Vec<PathBuf>,
    /// Admit a placement only when the prediction's upper bound at this confidence — from
    /// the table's measured errors: the factors' bootstrap intervals, the composition
    /// model's error on triples and the solo runs' spread — is within the objective. 0
    /// plans on the predictions alone; predictions without a measured error are admitted
    /// on the prediction and the plan says so.
    #[arg(long, default_value_t = 0.9, value_parser = confidence)]
    pub confidence: f64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Write the plan's Kubernetes configuration here.
    #[arg(long, value_name = "FILE")]
    pub k8s: Option<PathBuf>,
}

/// A confidence in [0, 1) (1 would need an infinite bound).
fn confidence(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("`{s}` is not a number"))?;
    if (0.0..1.0).contains(&v) {
        Ok(v)
    } else {
        Err("expected a confidence of at least 0 and below 1 (e.g. 0.9)".to_string())
    }
}
