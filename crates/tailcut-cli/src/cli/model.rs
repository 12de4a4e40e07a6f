//! Arguments of `tailcut model` and `tailcut scenario` (fitted models and what-if runs),
//! and the learned-policy options they share with `replay`.

use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;

/// `tailcut model ...`
#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Build a model from paired-round traces (reference `round`, `tailcut_round`),
    /// tailcut request traces (`tailcut_request`) and the reference tool's live request
    /// records (`hedged_request`, `state_aware_request`, `single_request`: winners exact,
    /// cancelled losers right-censored), in file order.
    Fit(ModelFitArgs),
    /// Print a saved model: per-provider quantiles, failure rates, P(warm) against idle
    /// gap, and the pairs' slow-together lift.
    Show(ModelShowArgs),
    /// How well a learned policy's predictions held: its recorded decisions grouped by
    /// predicted miss into deciles against the realized miss rate (Wilson intervals),
    /// the Brier score and the expected calibration error, and predicted against
    /// realized cost. Reads request traces whose `learned` objects carry predictions
    /// (`auto` policies, via `run`, `demo` or the gateway); exits 2 when there are none.
    Calibration(ModelCalibrationArgs),
}

/// Options of `tailcut model calibration`.
#[derive(Debug, Args)]
pub struct ModelCalibrationArgs {
    /// Request trace files (`tailcut_request` records).
    #[arg(required = true)]
    pub traces: Vec<PathBuf>,
    /// Count misses over this many seconds instead of the deadline in each `auto`
    /// policy's label (`auto:a,b@250ms/...`); needed for labels that name none.
    #[arg(long, value_name = "S")]
    pub deadline: Option<f64>,
    /// Configuration whose provider rates and idle windows price the realized cost
    /// (default: built-in).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Write the reliability diagram (SVG) of the policy with the most predictions:
    /// predicted against realized miss per decile with the diagonal, interval whiskers
    /// and counts, and predicted against realized cost.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Skip malformed lines instead of failing.
    #[arg(long)]
    pub skip_bad_lines: bool,
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
    /// The saved model (ignored with --from-gateway); when it does not exist, the error
    /// says how to fit one or read a running gateway's.
    #[arg(default_value = "model.json")]
    pub model: PathBuf,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Print the live models of a running gateway's learned routes instead (its
    /// `GET /admin/models`, e.g. `http://127.0.0.1:8080`), one per route and slot.
    #[arg(long, value_name = "URL")]
    pub from_gateway: Option<String>,
    /// The gateway's admin key (`admin = true` in gateway.keys), sent as a bearer token;
    /// default: the TAILCUT_ADMIN_KEY environment variable. Not needed with `auth = "none"`.
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,
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
    /// Draw N random worlds (warm/cold mixes, regime shifts and drifts, shared slow
    /// regimes, outages, price changes, straggler modes, arrival cadences) and compare
    /// `auto` in each with the fixed plan frozen from the world's first half (fewest
    /// misses, then cheapest) and the hindsight-best fixed plan, on the second half.
    Sweep(ScenarioSweepArgs),
}

/// Options of `tailcut scenario sweep`.
#[derive(Debug, Args)]
pub struct ScenarioSweepArgs {
    /// Worlds to draw.
    #[arg(long, default_value_t = 100)]
    pub worlds: usize,
    /// Seed of the draw (world i of seed s is always the same world).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Requests per world (both halves).
    #[arg(long, default_value_t = 800)]
    pub requests: usize,
    /// Worker threads (0 = one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Print JSON: the summary and every world's rows.
    #[arg(long)]
    pub json: bool,
    /// Also print one line per world.
    #[arg(long)]
    pub each: bool,
    /// How `auto` learns: `model` (its model alone), `guarded` (also
    /// its miss controller and its plans' realized records, from what it launched), or
    /// `paired`, the default (also the experts over the fixed plans, each priced on its
    /// own run of the stream, as a paired benchmark runs them).
    #[arg(long, value_enum, default_value_t = AutoModeArg::Paired)]
    pub auto: AutoModeArg,
}

/// `scenario run --auto` and `scenario sweep --auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AutoModeArg {
    /// The model alone.
    Model,
    /// Miss controller and plan records (partial information).
    Guarded,
    /// Also the experts, every fixed plan priced on its own run (paired).
    Paired,
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
    /// Show every row (default: the best single provider, the best fixed rows by p95, the
    /// cheapest within the miss target, tuned and learned).
    #[arg(long)]
    pub all: bool,
    /// With `--plot` on `straggler`: also print, per learned family and load, its p99
    /// against the fixed-delay envelope (stderr).
    #[arg(short, long)]
    pub verbose: bool,
    /// How `auto` learns: `paired`, the default (as `scenario sweep`: its experts over
    /// the fixed plans, each priced on its own run of the stream once the request is
    /// decided, with its miss controller and plan records), `guarded` (controller and
    /// records, from what it launched) or `model` (its model alone; the rows before the
    /// paired learner, for comparison).
    #[arg(long, value_enum, default_value_t = AutoModeArg::Paired)]
    pub auto: AutoModeArg,
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
    /// `auto`'s most extra attempts per request (1: every plan of at most two live
    /// attempts always fits, as the fixed rows it is compared with have no cap).
    #[arg(long, default_value_t = 1.0, value_name = "X")]
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
