//! [`DeadlineTier`]: the critical tier, racing hedge and fallback after the opening.

use super::queue::{open, Opening, QueueTimers, ThreeTiers};
use super::{secs_label, Policy, PolicyError};
use crate::engine::{Launch, Race, RaceError, Wake};
use crate::provider::Provider;
use async_trait::async_trait;

/// The critical tier: poll the primary at `poll_after`; if it is still queued, cut over
/// to the hedge (submitted before the primary is cancelled) and race the fallback beside
/// it as soon as the live cap allows (when the queued cancel is confirmed, or with
/// `max_live` ≥ 3). A running primary is kept, as is a queued one whose cutover was
/// refused, and at `safety_at` the hedge and then the fallback join it as capacity allows.
#[derive(Debug, Clone)]
pub struct DeadlineTier {
    tiers: ThreeTiers,
    label: String,
}

impl DeadlineTier {
    /// Builds the policy; the primary must be able to report a queued state.
    pub fn try_new(
        providers: &[Provider],
        primary: &str,
        hedge: &str,
        fallback: &str,
        timers: QueueTimers,
    ) -> Result<DeadlineTier, PolicyError> {
        let tiers = ThreeTiers::resolve(providers, primary, hedge, fallback, timers)?;
        let label =
            format!("deadline:{primary}->{hedge}+{fallback}@q{}s+s{}s", secs_label(timers.poll_after), secs_label(timers.safety_at));
        Ok(DeadlineTier { tiers, label })
    }
}

#[async_trait]
impl Policy for DeadlineTier {
    fn label(&self) -> &str {
        &self.label
    }

    fn kind(&self) -> crate::PolicyKind {
        crate::PolicyKind::Deadline
    }

    async fn drive(&self, race: &mut Race) -> Result<(), RaceError> {
        let ThreeTiers { primary, hedge, fallback, timers } = self.tiers;
        match open(race, primary, hedge, timers).await? {
            Opening::Won => {}
            Opening::CutOver => race_with_waiting(race, &[(fallback, Launch::Escalation)]).await,
            Opening::SafetyDue => {
                race_with_waiting(race, &[(hedge, Launch::SafetyHedge), (fallback, Launch::Escalation)]).await;
            }
        }
        Ok(())
    }
}

/// Launches each provider in `waiting` as soon as the live cap allows, until a winner
/// arrives or nothing is pending and nothing is left to launch.
async fn race_with_waiting(race: &mut Race, waiting: &[(usize, Launch)]) {
    let mut queue = waiting.iter().copied();
    loop {
        if race.is_stopped() {
            return;
        }
        while race.live_count() < race.max_live() && race.winner().is_none() {
            let Some((provider, launch)) = queue.next() else { break };
            race.launch_extra(provider, launch).await;
        }
        match race.next(None).await {
            Wake::Winner => return,
            Wake::Idle if queue.len() == 0 => return,
            _ => {}
        }
    }
}
