//! What the queue-state policies ([`Cutover`](super::Cutover), [`Cascade`](super::Cascade),
//! [`DeadlineTier`](super::DeadlineTier)) share: their timers, and their opening, written
//! once: launch the primary, poll it at the cutover time, cut over if it is still queued
//! and the hedge may launch, else keep it until the safety time.

use super::{distinct, require_queue_signal, resolve, PolicyError};
use crate::engine::{Launch, Race, RaceError, Wake};
use crate::job::JobState;
use crate::provider::Provider;
use std::time::Duration;

/// Timer settings shared by the queue-state policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueTimers {
    /// Poll the primary this long after its submit returned.
    pub poll_after: Duration,
    /// If the primary was kept, launch the safety hedge at t0 + this.
    pub safety_at: Duration,
    /// Escalate to the fallback at t0 + this (cascade only).
    pub escalate_at: Duration,
}

impl Default for QueueTimers {
    fn default() -> Self {
        QueueTimers {
            poll_after: Duration::from_millis(2500),
            safety_at: Duration::from_millis(8500),
            escalate_at: Duration::from_secs(25),
        }
    }
}

impl QueueTimers {
    /// Validates the ordering poll ≤ safety ≤ escalate.
    pub fn try_new(poll_after: Duration, safety_at: Duration, escalate_at: Duration) -> Result<QueueTimers, PolicyError> {
        if poll_after > safety_at {
            return Err(PolicyError::TimersOutOfOrder {
                earlier: "the cutover poll",
                earlier_at: poll_after,
                later: "the safety hedge",
                later_at: safety_at,
            });
        }
        if safety_at > escalate_at {
            return Err(PolicyError::TimersOutOfOrder {
                earlier: "the safety hedge",
                earlier_at: safety_at,
                later: "escalation",
                later_at: escalate_at,
            });
        }
        Ok(QueueTimers { poll_after, safety_at, escalate_at })
    }
}

/// What a three-tier policy ([`super::Cascade`], [`super::DeadlineTier`]) holds: its
/// providers (primary, hedge, fallback) and its timers.
#[derive(Debug, Clone, Copy)]
pub(super) struct ThreeTiers {
    pub(super) primary: usize,
    pub(super) hedge: usize,
    pub(super) fallback: usize,
    pub(super) timers: QueueTimers,
}

impl ThreeTiers {
    /// Resolves the providers: each configured, all distinct, and the primary able to
    /// report its queue state.
    pub(super) fn resolve(
        providers: &[Provider],
        primary: &str,
        hedge: &str,
        fallback: &str,
        timers: QueueTimers,
    ) -> Result<ThreeTiers, PolicyError> {
        let ids = [resolve(providers, primary)?, resolve(providers, hedge)?, resolve(providers, fallback)?];
        distinct(providers, &ids)?;
        require_queue_signal(providers, ids[0])?;
        Ok(ThreeTiers { primary: ids[0], hedge: ids[1], fallback: ids[2], timers })
    }
}

/// How the shared opening ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Opening {
    /// A valid result already won.
    Won,
    /// The primary was still queued at the poll and the race cut over: the hedge is
    /// submitted, and the primary is being cancelled (it stays in the race until the
    /// cancel is confirmed).
    CutOver,
    /// The primary was kept (running, unknown, already finished invalid, or queued but
    /// the cutover was refused) and the safety time came with no winner.
    SafetyDue,
}

/// Launches the primary and polls it `poll_after` after its submit returned: still
/// queued, it is cut over to `hedge` ([`Race::cut_over`]: the hedge is asked for and
/// submitted before the primary is given up); otherwise, or when the cutover is
/// refused, it is kept until t0 + `safety_at`.
pub(super) async fn open(race: &mut Race, primary: usize, hedge: usize, timers: QueueTimers) -> Result<Opening, RaceError> {
    let p = race.launch(primary, Launch::Primary).await?;
    let poll_at = race.submit_returned(p) + timers.poll_after;
    if race.wait_until(Some(poll_at)).await == Wake::Winner {
        return Ok(Opening::Won);
    }
    if !race.is_resolved(p) && race.poll_status(p).await == JobState::Queued && race.cut_over(p, hedge).await.is_some() {
        return Ok(Opening::CutOver);
    }
    let safety = race.t0() + timers.safety_at;
    if race.wait_until(Some(safety)).await == Wake::Winner {
        return Ok(Opening::Won);
    }
    Ok(Opening::SafetyDue)
}

/// The opening, then, if the primary was kept, the safety hedge (as the live cap,
/// budget and hedge gate allow). Returns whether the race is already won.
pub(super) async fn cutover_then_safety(race: &mut Race, primary: usize, hedge: usize, timers: QueueTimers) -> Result<bool, RaceError> {
    match open(race, primary, hedge, timers).await? {
        Opening::Won => return Ok(true),
        Opening::CutOver => {}
        Opening::SafetyDue => {
            race.launch_extra(hedge, Launch::SafetyHedge).await;
        }
    }
    Ok(false)
}
