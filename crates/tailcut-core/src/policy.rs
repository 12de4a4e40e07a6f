//! Hedging policies behind one small trait, one module per policy.
//!
//! The [`Policy`] trait itself is the engine's (re-exported here). A policy only decides
//! *when* to launch, poll and cancel, and names why it launches
//! ([`Launch`](crate::engine::Launch)); the [`Race`](crate::engine::Race) enforces the
//! invariants (first valid result wins, live cap, receipts) and records the decisions.
//! Built in:
//!
//! | policy | file | label |
//! |---|---|---|
//! | [`Single`] | `policy/single.rs` | `single:P` |
//! | [`ImmediateRace`] | `policy/race.rs` | `race:A+B(+C…)` |
//! | [`FixedHedge`] | `policy/hedge.rs` | `hedge:P->H@10s` |
//! | [`Cutover`] | `policy/cutover.rs` | `cutover:P->H@q2.5s+s8.5s` |
//! | [`Cascade`] | `policy/cascade.rs` | `cascade:P->H->F@q2.5s+s8.5s+e25s` |
//! | [`DeadlineTier`] | `policy/deadline.rs` | `deadline:P->H+F@q2.5s+s8.5s` |
//! | [`learned::LearnedPolicy`] | `policy/learned.rs` | `adaptive:…`, `singler:…`, `auto:…` |
//!
//! The queue-state policies share their timers ([`QueueTimers`]) and their opening
//! (cutover poll, then safety hedge) in `policy/queue.rs`.
//!
//! Timer bases follow the reference tool: the hedge delay and the cutover poll count
//! from the moment the primary's submit *returned*; safety and escalation deadlines
//! count from the request's start (t0).

mod cascade;
mod cutover;
mod deadline;
pub mod first_token;
mod hedge;
pub mod learned;
mod queue;
mod race;
mod single;

pub use cascade::Cascade;
pub use cutover::Cutover;
pub use deadline::DeadlineTier;
pub use hedge::FixedHedge;
pub use queue::QueueTimers;
pub use race::ImmediateRace;
pub use single::Single;

pub use crate::engine::Policy;

use crate::provider::Provider;
use std::time::Duration;

/// Why a policy could not be built.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum PolicyError {
    /// The policy names a provider that is not configured.
    #[error("unknown provider `{name}`")]
    UnknownProvider {
        /// The name the policy gave.
        name: String,
    },
    /// A model refers to a provider slot the policy does not have.
    #[error("unknown provider `#{index}`")]
    UnknownSlot {
        /// The slot's index among the policy's providers.
        index: usize,
    },
    /// The same provider appears twice.
    #[error("provider `{name}` appears more than once in the policy")]
    DuplicateProvider {
        /// The repeated name.
        name: String,
    },
    /// The primary of a queue-state policy cannot report a queued state.
    #[error("provider `{name}` cannot tell queued from running, so it cannot be a cutover primary")]
    NoQueueSignal {
        /// The would-be primary.
        name: String,
    },
    /// Two timers are out of order: `earlier` must not come after `later`.
    #[error("{earlier} ({earlier_at:?}) must come no later than {later} ({later_at:?})")]
    TimersOutOfOrder {
        /// The timer that must come first, as the message names it.
        earlier: &'static str,
        /// Its setting.
        earlier_at: Duration,
        /// The timer that must come second.
        later: &'static str,
        /// Its setting.
        later_at: Duration,
    },
    /// A first-token hedge was given no provider.
    #[error("a first-token hedge needs at least one provider")]
    NoStreamProvider,
    /// An `auto` policy's targets are out of range.
    #[error("auto needs a positive deadline, a miss target in [0, 1] and a non-negative extra load")]
    AutoTargetsOutOfRange,
    /// The policy needs more providers.
    #[error("an immediate race needs at least two providers")]
    TooFewProviders,
}

/// Formats seconds like Python's `:g` for labels: `10`, `2.5`, `0`.
pub fn secs_label(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{}", s as u64)
    } else {
        let mut t = format!("{s:.3}");
        while t.ends_with('0') {
            t.pop();
        }
        t
    }
}

fn resolve(providers: &[Provider], name: &str) -> Result<usize, PolicyError> {
    providers.iter().position(|p| p.name == name).ok_or_else(|| PolicyError::UnknownProvider { name: name.to_string() })
}

fn distinct(providers: &[Provider], ids: &[usize]) -> Result<(), PolicyError> {
    for (i, a) in ids.iter().enumerate() {
        if ids[..i].contains(a) {
            return Err(PolicyError::DuplicateProvider { name: providers[*a].name.clone() });
        }
    }
    Ok(())
}

fn require_queue_signal(providers: &[Provider], id: usize) -> Result<(), PolicyError> {
    if providers[id].api.capabilities().reports_queued {
        Ok(())
    } else {
        Err(PolicyError::NoQueueSignal { name: providers[id].name.clone() })
    }
}
