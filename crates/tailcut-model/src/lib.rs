//! # tailcut-model
//!
//! What tailcut learns online about its providers, and the learned policies' decisions.
//! No I/O beyond saving and loading a model; no async. It owns:
//!
//! - [`sketch`]: a decayed log-bucket quantile sketch and a decayed rate counter;
//! - [`model`]: the per-provider model (latency, time to start, P(warm | idle gap),
//!   failure and invalid rates) and the pairwise both-slow statistics, fed by
//!   per-attempt [`Observation`]s, saved and restored as versioned JSON;
//! - [`pair`]: how two providers are slow together, and their joint survival;
//! - [`plan`]: the candidate plans and what a prediction of one holds;
//! - [`predict`]: the tables that predict a plan's miss rate, cost and extra load, and
//!   `auto`'s choice;
//! - [`budget`]: the token bucket every extra attempt is paid from;
//! - [`field`]: a loaded number's range check, and its error naming the field;
//! - [`guard`]: the miss controller, the experts (Hedge) and the realized tallies that
//!   hold `auto` to its target and near the best fixed plan whatever the model says;
//! - [`learner`]: `adaptive`, `singler` and `auto` decisions with an extra-load budget.

#![warn(missing_docs)]
// Unit tests spawn and read the wall clock freely (clippy.toml).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod budget;
pub mod field;
pub mod guard;
pub mod learner;
pub mod model;
pub mod pair;
pub mod plan;
pub mod predict;
pub mod sketch;

pub use field::{FieldError, FieldPath};
pub use learner::{AdaptiveSettings, Decision, HedgeBudget, LearnedKind, Learner, PolicyState, SingleRFit, SingleRSettings, Why};
pub use model::{Model, ModelCheckError, ModelConfig, ModelError, ModelFormatError, Observation, Outcome};
pub use plan::{AutoSettings, Choice, CostBasis, Plan, Prediction};
pub use predict::Predictor;
