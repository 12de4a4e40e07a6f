//! The first-token hedge chain, the policy of hedged streams: providers are tried in
//! order, the next one starting when no attempt has won `delay` after the last timer
//! launch (for a stream race, when no stream has produced its first content token), or
//! at once when an attempt fails. It drives any race; on a stream race
//! ([`crate::stream`]) its delay is a time-to-first-token deadline.
//!
//! Label: `stream:a->b->c@first-token+500ms`.

use crate::engine::{Launch, Race, RaceError, Wake};
use crate::policy::{Policy, PolicyError};
use crate::provider::Provider;
use async_trait::async_trait;
use std::time::Duration;
use tokio::time::Instant;

/// Tries providers in order: the first at once; the next `delay` after the request
/// started (then `delay` after each timer launch) while none has won, or at once when an
/// attempt fails. Extra attempts pass the live cap, the hedge-load gate and the budget;
/// a timer launch they refuse ends the timer (a later failure still falls through).
#[derive(Debug, Clone)]
pub struct FirstTokenHedge {
    providers: Vec<usize>,
    delay: Duration,
    label: String,
}

impl FirstTokenHedge {
    /// Builds the policy over the named providers, in order of preference.
    pub fn try_new(providers: &[Provider], names: &[&str], delay: Duration) -> Result<FirstTokenHedge, PolicyError> {
        let mut ids: Vec<usize> = Vec::with_capacity(names.len());
        for name in names {
            let id =
                providers.iter().position(|p| p.name == *name).ok_or_else(|| PolicyError::UnknownProvider { name: name.to_string() })?;
            if ids.contains(&id) {
                return Err(PolicyError::DuplicateProvider { name: name.to_string() });
            }
            ids.push(id);
        }
        if ids.is_empty() {
            return Err(PolicyError::NoStreamProvider);
        }
        let label = format!("stream:{}@first-token+{}ms", names.join("->"), delay.as_millis());
        Ok(FirstTokenHedge { providers: ids, delay, label })
    }
}

#[async_trait]
impl Policy for FirstTokenHedge {
    fn label(&self) -> &str {
        &self.label
    }

    fn kind(&self) -> crate::PolicyKind {
        crate::PolicyKind::FirstToken
    }

    async fn drive(&self, race: &mut Race) -> Result<(), RaceError> {
        race.launch(self.providers[0], Launch::Primary).await?;
        let mut next = 1;
        let mut hedge_at = Some(race.t0() + self.delay);
        let mut failures_seen = 0;
        loop {
            if race.is_stopped() || race.winner().is_some() {
                return Ok(());
            }
            // Fall through: one launch for each attempt that failed since the last look.
            if race.attempt_count() - race.pending_count() > failures_seen {
                failures_seen += 1;
                self.launch_next(race, &mut next).await;
                continue;
            }
            let timer = hedge_at.filter(|_| next < self.providers.len() && race.live_count() < race.max_live());
            let fired = if race.pending_count() == 0 {
                // Nothing in flight: only the timer can still launch.
                let Some(at) = timer else { return Ok(()) };
                tokio::time::sleep_until(at).await;
                true
            } else {
                match race.next(timer).await {
                    Wake::Winner | Wake::Stopped => return Ok(()),
                    Wake::Deadline => true,
                    Wake::Progress | Wake::Idle => false,
                }
            };
            if fired {
                hedge_at = Some(Instant::now() + self.delay);
                if !self.launch_next(race, &mut next).await {
                    // The gate or the budget refused the timer hedge: no more timer hedges.
                    hedge_at = None;
                }
            }
        }
    }
}

impl FirstTokenHedge {
    /// Launches the next provider in line, if any and the live cap allows.
    async fn launch_next(&self, race: &mut Race, next: &mut usize) -> bool {
        let Some(&provider) = self.providers.get(*next) else { return false };
        if race.live_count() >= race.max_live() || race.launch_extra(provider, Launch::Hedge).await.is_none() {
            return false;
        }
        *next += 1;
        true
    }
}
