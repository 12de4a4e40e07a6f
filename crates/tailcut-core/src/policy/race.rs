//! [`ImmediateRace`]: several providers at once, up to the live-attempt cap.

use super::{distinct, resolve, Policy, PolicyError};
use crate::engine::{Launch, Race, RaceError, Wake};
use crate::provider::Provider;
use async_trait::async_trait;

/// Launches up to the live cap at once; when one resolves invalid, the next in line
/// launches. The first valid result wins.
#[derive(Debug, Clone)]
pub struct ImmediateRace {
    providers: Vec<usize>,
    label: String,
}

impl ImmediateRace {
    /// Builds the policy over the named providers, in order of preference.
    pub fn try_new(providers: &[Provider], names: &[&str]) -> Result<ImmediateRace, PolicyError> {
        if names.len() < 2 {
            return Err(PolicyError::TooFewProviders);
        }
        let ids = names.iter().map(|n| resolve(providers, n)).collect::<Result<Vec<_>, _>>()?;
        distinct(providers, &ids)?;
        Ok(ImmediateRace { providers: ids, label: format!("race:{}", names.join("+")) })
    }
}

#[async_trait]
impl Policy for ImmediateRace {
    fn label(&self) -> &str {
        &self.label
    }

    fn kind(&self) -> crate::PolicyKind {
        crate::PolicyKind::Race
    }

    async fn drive(&self, race: &mut Race) -> Result<(), RaceError> {
        race.launch(self.providers[0], Launch::Racer).await?;
        let mut queue = self.providers[1..].iter().copied();
        loop {
            if race.is_stopped() {
                return Ok(());
            }
            while race.live_count() < race.max_live() {
                let Some(next) = queue.next() else { break };
                race.launch_extra(next, Launch::Racer).await;
            }
            match race.next(None).await {
                Wake::Winner => return Ok(()),
                Wake::Idle if queue.len() == 0 => return Ok(()),
                _ => {}
            }
        }
    }
}
