//! [`Cascade`]: cutover, safety hedge, then escalation to a third provider.

use super::queue::{cutover_then_safety, QueueTimers, ThreeTiers};
use super::{secs_label, Policy, PolicyError};
use crate::engine::{Launch, Race, RaceError, Wake};
use crate::provider::Provider;
use async_trait::async_trait;
use tokio::time::Instant;

/// Cutover plus safety hedge plus escalation: at `escalate_at` (or earlier, as soon as
/// nothing is pending) a third provider launches — but only while fewer than `max_live`
/// attempts are live. A cancelled-but-unconfirmed attempt still counts.
#[derive(Debug, Clone)]
pub struct Cascade {
    tiers: ThreeTiers,
    label: String,
}

impl Cascade {
    /// Builds the policy; the primary must be able to report a queued state.
    pub fn try_new(
        providers: &[Provider],
        primary: &str,
        hedge: &str,
        fallback: &str,
        timers: QueueTimers,
    ) -> Result<Cascade, PolicyError> {
        let tiers = ThreeTiers::resolve(providers, primary, hedge, fallback, timers)?;
        let label = format!(
            "cascade:{primary}->{hedge}->{fallback}@q{}s+s{}s+e{}s",
            secs_label(timers.poll_after),
            secs_label(timers.safety_at),
            secs_label(timers.escalate_at)
        );
        Ok(Cascade { tiers, label })
    }
}

#[async_trait]
impl Policy for Cascade {
    fn label(&self) -> &str {
        &self.label
    }

    fn kind(&self) -> crate::PolicyKind {
        crate::PolicyKind::Cascade
    }

    async fn drive(&self, race: &mut Race) -> Result<(), RaceError> {
        let ThreeTiers { primary, hedge, fallback, timers } = self.tiers;
        if cutover_then_safety(race, primary, hedge, timers).await? {
            return Ok(());
        }
        let escalate = race.t0() + timers.escalate_at;
        let mut fallback_tried = false;
        loop {
            if race.winner().is_some() || race.is_stopped() {
                return Ok(());
            }
            let pending = race.pending_count();
            if !fallback_tried && (pending == 0 || Instant::now() >= escalate) {
                let room = race.live_count() < race.max_live();
                // At the cap the race refuses it and records the skip; it is retried
                // once a slot frees.
                race.launch_extra(fallback, Launch::Escalation).await;
                if room {
                    fallback_tried = true;
                    continue;
                }
            }
            if pending == 0 {
                return Ok(());
            }
            let deadline = (!fallback_tried && Instant::now() < escalate).then_some(escalate);
            if race.next(deadline).await == Wake::Winner {
                return Ok(());
            }
        }
    }
}
