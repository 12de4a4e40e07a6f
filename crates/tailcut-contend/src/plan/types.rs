//! What a plan takes (agents, their interference factors, the GPU pool) and what it
//! gives (GPUs, each with its sharing mode and seats), and why planning can fail.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One agent to place.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentNeed {
    /// Name.
    pub name: String,
    /// Interference class (e.g. `fft`, `gemm`, `llm-decode`).
    pub kind: String,
    /// GPU memory needed, GB.
    pub memory_gb: f64,
    /// p99 objective, ms; 0 or absent: `objective_x_solo` × solo p99.
    #[serde(default)]
    pub p99_objective_ms: f64,
    /// The objective as a multiple of the solo p99 (e.g. 2.5), for inputs written before
    /// the device was measured; used when `p99_objective_ms` is not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objective_x_solo: Option<f64>,
    /// p99 alone on a whole GPU, ms; 0 or absent: taken from a measured table's
    /// `[solo_p99_ms]` for this kind (`contend plan --table`).
    #[serde(default)]
    pub solo_p99_ms: f64,
    /// Exponent of the MIG slowdown model.
    #[serde(default = "one")]
    pub mig_scaling: f64,
}

fn one() -> f64 {
    1.0
}

/// A sharing mode a group can use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GroupMode {
    /// One agent, whole GPU.
    Dedicated,
    /// MIG instances.
    Mig,
    /// MPS.
    Mps,
    /// Time-slicing.
    TimeSlicing,
}

impl GroupMode {
    /// Kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            GroupMode::Dedicated => "dedicated",
            GroupMode::Mig => "mig",
            GroupMode::Mps => "mps",
            GroupMode::TimeSlicing => "time-slicing",
        }
    }
}

/// The GPUs available.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuPool {
    /// Model key (`h100-80gb`, ...).
    pub model: String,
    /// GPUs available (the plan fails if it needs more).
    pub count: usize,
    /// Modes allowed, default all.
    #[serde(default = "all_modes")]
    pub modes: Vec<GroupMode>,
    /// Most agents per time-sliced or MPS GPU.
    #[serde(default = "four")]
    pub max_share: usize,
}

pub(super) fn all_modes() -> Vec<GroupMode> {
    vec![GroupMode::Dedicated, GroupMode::Mig, GroupMode::Mps, GroupMode::TimeSlicing]
}

fn four() -> usize {
    4
}

/// How one agent's pairwise factors compose when several aggressors share its GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CompositionModel {
    /// p99 × Π fᵢ: each aggressor slows what the others left (the default when nothing was
    /// measured: the pessimistic choice).
    #[default]
    Multiplicative,
    /// p99 × (1 + Σ (fᵢ − 1)): each aggressor adds its own delay (a time-sliced processor
    /// hands each co-runner its slice in turn).
    Additive,
}

impl CompositionModel {
    /// Both models, in the order `contend matrix` fits them.
    pub const ALL: [CompositionModel; 2] = [CompositionModel::Multiplicative, CompositionModel::Additive];

    /// The victim's p99 factor from the factors of each co-located aggressor.
    pub fn combine(self, factors: &[f64]) -> f64 {
        match self {
            CompositionModel::Multiplicative => factors.iter().product(),
            CompositionModel::Additive => 1.0 + factors.iter().map(|f| f - 1.0).sum::<f64>(),
        }
    }

    /// Kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            CompositionModel::Multiplicative => "multiplicative",
            CompositionModel::Additive => "additive",
        }
    }
}

/// A mode's composition model and the expected error of its predictions, as fitted and
/// checked by `contend matrix --triples` (relative errors on p99: 0.1 = ±10%).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Composition {
    /// The model.
    #[serde(default)]
    pub model: CompositionModel,
    /// Expected relative error of a pair's p99 prediction (the measured factors' median
    /// bootstrap 95% half-width).
    #[serde(default)]
    pub pair_error: Option<f64>,
    /// Expected relative error of a prediction for three or more agents (the model's mean
    /// absolute error on the measured triples).
    #[serde(default)]
    pub group_error: Option<f64>,
    /// How many (victim, two aggressors) cells the model was checked on.
    #[serde(default)]
    pub groups_checked: usize,
    /// Trials of the matrix that measured these errors (0: not stated). A one-trial
    /// matrix has no error bar: its bootstrap resamples one value.
    #[serde(default)]
    pub trials: u32,
}

/// Interference factors per mode: `victim<-aggressor` → p99 factor, plus `default`; per
/// mode, how factors compose (`[interference.composition.<mode>]`); and per mode and
/// cell, the factor's measured error (`[interference.errors.<mode>]`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Interference {
    /// Composition per mode name; absent: multiplicative, errors unknown.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub composition: BTreeMap<String, Composition>,
    /// Per mode name, `victim<-aggressor` → the factor's bootstrap 95% half-width over
    /// trials, relative to the factor (0.05 = ±5%), as `contend matrix` measured it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, BTreeMap<String, f64>>,
    /// Per mode name (`time-slicing`, `mps`).
    #[serde(flatten)]
    pub modes: BTreeMap<String, BTreeMap<String, f64>>,
}

impl Interference {
    /// Factor on `victim`'s p99 from one co-located `aggressor`; None when the mode has no
    /// data at all (then the mode cannot be predicted and is not used).
    pub fn factor(&self, mode: GroupMode, victim: &str, aggressor: &str) -> Option<f64> {
        let m = self.modes.get(mode.name())?;
        m.get(&format!("{victim}<-{aggressor}")).or_else(|| m.get("default")).copied()
    }

    /// The relative 95% half-width of `victim<-aggressor`'s factor, if measured.
    pub fn error(&self, mode: GroupMode, victim: &str, aggressor: &str) -> Option<f64> {
        self.errors.get(mode.name())?.get(&format!("{victim}<-{aggressor}")).copied()
    }

    /// The mode's composition (multiplicative, errors unknown, when none was given).
    pub fn composition(&self, mode: GroupMode) -> Composition {
        self.composition.get(mode.name()).cloned().unwrap_or_default()
    }

    /// Overlays a measured table: its factors and compositions replace these.
    pub fn merge(&mut self, other: &Interference) {
        for (mode, table) in &other.modes {
            self.modes.entry(mode.clone()).or_default().extend(table.iter().map(|(k, v)| (k.clone(), *v)));
        }
        self.composition.extend(other.composition.iter().map(|(k, v)| (k.clone(), v.clone())));
        for (mode, table) in &other.errors {
            self.errors.entry(mode.clone()).or_default().extend(table.iter().map(|(k, v)| (k.clone(), *v)));
        }
    }
}

/// The planner's input file (`agents.toml`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentsFile {
    /// The agents (none in a measured table written by `contend matrix`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<AgentNeed>,
    /// Interference factors.
    #[serde(default)]
    pub interference: Interference,
    /// Solo p99 per kind, ms, for agents that give none (written by `contend matrix`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub solo_p99_ms: BTreeMap<String, f64>,
    /// Per kind, how much the solo runs' p99 spread from run to run (written by `contend
    /// matrix`): the solo part of every prediction's error bar, and the sign of a matrix
    /// measured under load.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub solo_p99_spread: BTreeMap<String, SoloSpread>,
}

/// The run-to-run spread of one kind's solo p99 in a matrix.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SoloSpread {
    /// Solo runs measured.
    pub runs: u32,
    /// Standard deviation of ln(p99) over those runs (0.05 ≈ ±5%).
    pub log_sd: f64,
}

impl AgentsFile {
    /// Overlays a measured table (`contend matrix --table`): its interference factors and
    /// compositions replace these, and its solo p99s fill agents that give none.
    pub fn apply_table(&mut self, table: &AgentsFile) {
        self.interference.merge(&table.interference);
        self.solo_p99_ms.extend(table.solo_p99_ms.iter().map(|(k, v)| (k.clone(), *v)));
        self.solo_p99_spread.extend(table.solo_p99_spread.iter().map(|(k, v)| (k.clone(), v.clone())));
        for a in &mut self.agents {
            if a.solo_p99_ms <= 0.0 {
                if let Some(v) = self.solo_p99_ms.get(&a.kind) {
                    a.solo_p99_ms = *v;
                }
            }
        }
    }
}

/// An agent's seat.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Seat {
    /// Agent.
    pub agent: String,
    /// Its kind (interference class; on the CPU, the agent `contend verify` runs).
    #[serde(default)]
    pub kind: String,
    /// MIG profile, when in a MIG group.
    pub profile: Option<String>,
    /// Predicted p99, ms.
    pub predicted_p99_ms: f64,
    /// The solo p99 the prediction scales, ms (predicted / solo is the predicted
    /// interference factor; `contend verify` rebases it on a solo run of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solo_p99_ms: Option<f64>,
    /// Objective, ms.
    pub objective_ms: f64,
    /// Memory, GB.
    pub memory_gb: f64,
    /// Expected relative error of the prediction (0.1 = ±10%), when a measured table states
    /// one for this group size.
    #[serde(default)]
    pub expected_error: Option<f64>,
    /// Log-SD of the prediction (solo spread, factor error and the outcome's own spread in
    /// quadrature; `plan::bound`); absent when a part is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction_sd: Option<f64>,
    /// The prediction's upper bound at the plan's confidence, ms: what the planner held
    /// within the objective (the prediction itself at confidence 0 or without an error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_p99_ms: Option<f64>,
    /// The stated band, ms: prediction ÷ and × the bound's factor; `contend verify` checks
    /// the outcome against it. Absent at confidence 0 or without an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub band_ms: Option<[f64; 2]>,
    /// Headroom at the bound: objective / bound − 1 (≥ 0 for every admitted seat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub margin: Option<f64>,
    /// Estimated probability that the measured p99 meets the objective.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_objective: Option<f64>,
}

/// One GPU of the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuPlan {
    /// GPU number in the plan.
    pub gpu: usize,
    /// Mode.
    pub mode: GroupMode,
    /// Seats.
    pub seats: Vec<Seat>,
    /// Why this mode for this group.
    pub why: String,
}

/// The whole plan (`contend plan --json`, the input of `contend verify`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// GPU model.
    pub model: String,
    /// GPUs used.
    pub gpus_used: usize,
    /// Memory lower bound on GPUs.
    pub lower_bound: usize,
    /// `exact` or `heuristic`.
    pub method: String,
    /// Proven minimal.
    pub optimal: bool,
    /// Per GPU.
    pub gpus: Vec<GpuPlan>,
    /// One line per agent explaining its placement.
    pub explanations: Vec<String>,
    /// The confidence the plan was made at (`--confidence`): each admitted prediction's
    /// upper bound at it is within the objective.
    #[serde(default)]
    pub confidence: f64,
    /// What makes the error bars wide (a matrix measured under load), and how many more
    /// trials would make the bound useful; empty when nothing does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub noise: Vec<String>,
}

/// Why planning failed.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// Bad input.
    #[error("{0}")]
    Invalid(#[from] BadPlan),
    /// The pool's GPU model is not known.
    #[error("{0}")]
    Mig(#[from] crate::mig::MigError),
    /// An agent cannot meet its objective anywhere.
    #[error("agent `{agent}` cannot meet its objective on any allowed placement: {why}")]
    Infeasible {
        /// Agent.
        agent: String,
        /// Why.
        why: String,
    },
    /// More GPUs needed than available.
    #[error("the plan needs {needed} GPUs but only {available} are available")]
    NotEnoughGpus {
        /// Needed.
        needed: usize,
        /// Available.
        available: usize,
    },
}

/// Agents or settings no plan can be made for, naming the value.
#[derive(Debug, thiserror::Error)]
pub enum BadPlan {
    /// `objective_x_solo` is not positive.
    #[error("agent `{agent}`: objective_x_solo must be a positive number")]
    ObjectiveFactor {
        /// The agent.
        agent: String,
    },
    /// More agents than a plan takes.
    #[error("at most 128 agents per plan")]
    TooManyAgents,
    /// An agent lacks a number the planner needs, or has one out of range.
    #[error("agent `{agent}`: {need}")]
    Agent {
        /// The agent.
        agent: String,
        /// What to give.
        need: AgentNeedMissing,
    },
    /// Two agents share a name.
    #[error("agent name `{name}` appears twice")]
    DuplicateName {
        /// The name.
        name: String,
    },
    /// The confidence is outside [0, 1).
    #[error("confidence must be at least 0 and below 1, got {confidence}")]
    Confidence {
        /// The value given.
        confidence: f64,
    },
}

/// The first of an agent's numbers that fails (NaN fails each).
#[derive(Debug, thiserror::Error)]
pub enum AgentNeedMissing {
    /// No positive solo p99.
    #[error("no solo p99: give solo_p99_ms, or a --table whose [solo_p99_ms] measures kind `{kind}`")]
    SoloP99 {
        /// The agent's kind.
        kind: String,
    },
    /// No positive p99 objective.
    #[error("no p99 objective: give p99_objective_ms, or objective_x_solo")]
    Objective,
    /// Negative memory.
    #[error("memory_gb must be 0 or more, got {0}")]
    MemoryGb(f64),
    /// Negative MIG scaling.
    #[error("mig_scaling must be 0 or more, got {0}")]
    MigScaling(f64),
}
