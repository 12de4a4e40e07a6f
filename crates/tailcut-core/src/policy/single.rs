//! [`Single`]: no hedge, one provider.

use super::{resolve, Policy, PolicyError};
use crate::engine::{Launch, Race, RaceError};
use crate::provider::Provider;
use async_trait::async_trait;

/// No hedge: one provider, wait for its result.
#[derive(Debug, Clone)]
pub struct Single {
    provider: usize,
    label: String,
}

impl Single {
    /// Builds the policy for the named provider.
    pub fn try_new(providers: &[Provider], provider: &str) -> Result<Single, PolicyError> {
        Ok(Single { provider: resolve(providers, provider)?, label: format!("single:{provider}") })
    }
}

#[async_trait]
impl Policy for Single {
    fn label(&self) -> &str {
        &self.label
    }

    fn kind(&self) -> crate::PolicyKind {
        crate::PolicyKind::Single
    }

    async fn drive(&self, race: &mut Race) -> Result<(), RaceError> {
        race.launch(self.provider, Launch::Primary).await?;
        race.wait_until(None).await;
        Ok(())
    }
}
