//! [`FixedHedge`]: a plain timer hedge.

use super::{distinct, resolve, secs_label, Policy, PolicyError};
use crate::engine::{Launch, Race, RaceError, Wake};
use crate::provider::Provider;
use async_trait::async_trait;
use std::time::Duration;

/// A plain timer hedge: if the primary has no valid result `delay` after its submit
/// returned, launch the hedge. A fast invalid primary triggers the hedge at once.
#[derive(Debug, Clone)]
pub struct FixedHedge {
    primary: usize,
    hedge: usize,
    delay: Duration,
    label: String,
}

impl FixedHedge {
    /// Builds the policy.
    pub fn try_new(providers: &[Provider], primary: &str, hedge: &str, delay: Duration) -> Result<FixedHedge, PolicyError> {
        let (p, h) = (resolve(providers, primary)?, resolve(providers, hedge)?);
        distinct(providers, &[p, h])?;
        Ok(FixedHedge { primary: p, hedge: h, delay, label: format!("hedge:{primary}->{hedge}@{}s", secs_label(delay)) })
    }
}

#[async_trait]
impl Policy for FixedHedge {
    fn label(&self) -> &str {
        &self.label
    }

    fn kind(&self) -> crate::PolicyKind {
        crate::PolicyKind::Hedge
    }

    async fn drive(&self, race: &mut Race) -> Result<(), RaceError> {
        let p = race.launch(self.primary, Launch::Primary).await?;
        let hedge_at = race.submit_returned(p) + self.delay;
        if race.wait_until(Some(hedge_at)).await == Wake::Winner {
            return Ok(());
        }
        race.launch_extra(self.hedge, Launch::Hedge).await;
        race.wait_until(None).await;
        Ok(())
    }
}
