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
    /// p99 objective, ms.
    pub p99_objective_ms: f64,
    /// p99 alone on a whole GPU, ms.
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

/// Interference factors per mode: `victim<-aggressor` → p99 factor, plus `default`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Interference {
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
}

/// The planner's input file (`agents.toml`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentsFile {
    /// The agents.
    pub agents: Vec<AgentNeed>,
    /// Interference factors.
    #[serde(default)]
    pub interference: Interference,
}

/// An agent's seat.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Seat {
    /// Agent.
    pub agent: String,
    /// MIG profile, when in a MIG group.
    pub profile: Option<String>,
    /// Predicted p99, ms.
    pub predicted_p99_ms: f64,
    /// Objective, ms.
    pub objective_ms: f64,
    /// Memory, GB.
    pub memory_gb: f64,
}

/// One GPU of the plan.
#[derive(Clone, Debug, PartialEq, Serialize)]
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

/// The whole plan.
#[derive(Clone, Debug, PartialEq, Serialize)]
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
}

/// Why planning failed.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// Bad input.
    #[error("{0}")]
    Invalid(String),
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
