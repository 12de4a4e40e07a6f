//! [`Cutover`]: queue-state cutover with a safety hedge.

use super::queue::{cutover_then_safety, QueueTimers};
use super::{distinct, require_queue_signal, resolve, secs_label, Policy, PolicyError};
use crate::engine::{Race, RaceError};
use crate::provider::Provider;
use async_trait::async_trait;

/// Queue-state cutover: poll the primary at `poll_after`; if it is still queued, switch
/// to the hedge at once and cancel the primary (it stays in the race until the cancel is
/// confirmed); otherwise, or when the hedge may not launch (hedge-load cap, budget, live
/// cap), keep it and arm a safety hedge at `safety_at`.
#[derive(Debug, Clone)]
pub struct Cutover {
    primary: usize,
    hedge: usize,
    timers: QueueTimers,
    label: String,
}

impl Cutover {
    /// Builds the policy; the primary must be able to report a queued state.
    pub fn try_new(providers: &[Provider], primary: &str, hedge: &str, timers: QueueTimers) -> Result<Cutover, PolicyError> {
        let (p, h) = (resolve(providers, primary)?, resolve(providers, hedge)?);
        distinct(providers, &[p, h])?;
        require_queue_signal(providers, p)?;
        let label = format!("cutover:{primary}->{hedge}@q{}s+s{}s", secs_label(timers.poll_after), secs_label(timers.safety_at));
        Ok(Cutover { primary: p, hedge: h, timers, label })
    }
}

#[async_trait]
impl Policy for Cutover {
    fn label(&self) -> &str {
        &self.label
    }

    fn kind(&self) -> crate::PolicyKind {
        crate::PolicyKind::Cutover
    }

    async fn drive(&self, race: &mut Race) -> Result<(), RaceError> {
        if !cutover_then_safety(race, self.primary, self.hedge, self.timers).await? {
            race.wait_until(None).await;
        }
        Ok(())
    }
}
