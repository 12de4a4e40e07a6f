//! Placement planning: give every agent a dedicated GPU, a MIG instance, or a seat in a
//! time-sliced / MPS group so that every agent's predicted p99 meets its objective, using
//! the fewest GPUs.
//!
//! Predictions:
//! - dedicated: the agent's solo p99;
//! - MIG: solo p99 × (GPU SMs / instance SMs)^`mig_scaling` (1 = compute-bound, 0 =
//!   insensitive to SM count), and the agent's memory must fit the instance;
//! - time-slicing / MPS: solo p99 × the pairwise interference factors of every
//!   co-located agent (`victim<-aggressor`, measured with `tailcut contend matrix` or
//!   given) composed by the mode's model — multiplicative (Π fᵢ, the default) or additive
//!   (1 + Σ (fᵢ − 1)), as `contend matrix --triples` fitted it on measured triples — and
//!   memory must fit (MPS: each agent within total / group size, the pinned limit the
//!   device plugin sets). Each shared seat carries the table's expected error for its
//!   group size (pairs: the factors' bootstrap half-width; three or more: the model's
//!   error on the measured triples).
//!
//! Small instances (≤ `exact_limit` agents) are solved exactly by branch and bound over
//! set partitions; larger ones by first-fit decreasing plus a pass that tries to empty
//! GPUs, reporting the memory lower bound so the gap is visible.
//!
//! **Confidence.** A placement is admitted when the prediction's upper bound at the
//! planner's confidence (default 0.9) is within the objective, not the prediction alone:
//! [`bound`] turns the table's measured errors (the cells' bootstrap intervals, the
//! composition model's error on triples, the solo runs' spread) into that bound, the
//! probability that each objective holds, and — when the matrix was measured under load —
//! how many more trials would make the bound useful. Confidence 0 plans on the prediction.
//!
//! The parts: `types` (what a plan takes and gives, and why it can fail), `planner`
//! (predictions, the exact search and the heuristic), `bound` (the error bar) and `hints`
//! (the Kubernetes configuration a plan needs).

pub mod bound;
mod hints;
mod planner;
mod types;

pub use hints::plan_k8s;
pub use planner::Planner;
pub use types::{
    AgentNeed, AgentNeedMissing, AgentsFile, BadPlan, Composition, CompositionModel, GpuPlan, GpuPool, GroupMode, Interference, Plan,
    PlanError, Seat, SoloSpread,
};

#[cfg(test)]
mod tests;
