//! `[policies.NAME]`: which policy, over which providers, with which timers; and the
//! construction of the engine's policy from it.

use crate::context::Ctx;
use crate::error::ConfigError;
use crate::raw::RawPolicy;
use std::sync::Arc;
use std::time::Duration;
use tailcut_core::policy::{Cascade, Cutover, DeadlineTier, FixedHedge, ImmediateRace, Policy, PolicyError, QueueTimers, Single};
use tailcut_core::Provider;

/// A policy as configured.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicySpec {
    /// No hedge.
    Single {
        /// Provider.
        provider: String,
    },
    /// Immediate race.
    Race {
        /// Providers in preference order.
        providers: Vec<String>,
    },
    /// Timer hedge.
    Hedge {
        /// Primary.
        primary: String,
        /// Hedge.
        hedge: String,
        /// Delay after the primary's submit returned.
        delay: Duration,
    },
    /// Queue-state cutover.
    Cutover {
        /// Primary (must report queued).
        primary: String,
        /// Hedge.
        hedge: String,
        /// Timers.
        timers: QueueTimers,
    },
    /// Cutover + safety hedge + escalation.
    Cascade {
        /// Primary (must report queued).
        primary: String,
        /// Hedge.
        hedge: String,
        /// Fallback.
        fallback: String,
        /// Timers.
        timers: QueueTimers,
    },
    /// Critical tier.
    Deadline {
        /// Primary (must report queued).
        primary: String,
        /// Hedge.
        hedge: String,
        /// Fallback.
        fallback: String,
        /// Timers.
        timers: QueueTimers,
    },
}

impl PolicySpec {
    /// Builds the policy over these providers.
    pub fn build(&self, providers: &[Provider]) -> Result<Arc<dyn Policy>, PolicyError> {
        Ok(match self {
            PolicySpec::Single { provider } => Arc::new(Single::try_new(providers, provider)?),
            PolicySpec::Race { providers: names } => {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                Arc::new(ImmediateRace::try_new(providers, &names)?)
            }
            PolicySpec::Hedge { primary, hedge, delay } => Arc::new(FixedHedge::try_new(providers, primary, hedge, *delay)?),
            PolicySpec::Cutover { primary, hedge, timers } => Arc::new(Cutover::try_new(providers, primary, hedge, *timers)?),
            PolicySpec::Cascade { primary, hedge, fallback, timers } => {
                Arc::new(Cascade::try_new(providers, primary, hedge, fallback, *timers)?)
            }
            PolicySpec::Deadline { primary, hedge, fallback, timers } => {
                Arc::new(DeadlineTier::try_new(providers, primary, hedge, fallback, *timers)?)
            }
        })
    }
}

/// The providers a policy uses, in order.
pub fn spec_providers(spec: &PolicySpec) -> Vec<String> {
    match spec {
        PolicySpec::Single { provider } => vec![provider.clone()],
        PolicySpec::Race { providers } => providers.clone(),
        PolicySpec::Hedge { primary, hedge, .. } | PolicySpec::Cutover { primary, hedge, .. } => vec![primary.clone(), hedge.clone()],
        PolicySpec::Cascade { primary, hedge, fallback, .. } | PolicySpec::Deadline { primary, hedge, fallback, .. } => {
            vec![primary.clone(), hedge.clone(), fallback.clone()]
        }
    }
}

pub(crate) fn policy(cx: &Ctx<'_>, key: &str, p: RawPolicy) -> Result<PolicySpec, ConfigError> {
    let need =
        |field: &str, v: Option<String>| v.ok_or_else(|| cx.err(format!("{key}.{field}"), format!("required for kind = \"{}\"", p.kind)));
    let timers = |p: &RawPolicy| -> Result<QueueTimers, ConfigError> {
        let poll = cx.millis(&format!("{key}.poll_after_ms"), p.poll_after_ms, 2500)?;
        let safety = cx.millis(&format!("{key}.safety_at_ms"), p.safety_at_ms, 8500)?;
        let escalate = cx.millis(&format!("{key}.escalate_at_ms"), p.escalate_at_ms, 25_000)?;
        QueueTimers::try_new(poll, safety, escalate).map_err(|e| cx.err(key, e.to_string()))
    };
    let allowed: &[&str] = match p.kind.as_str() {
        "single" => &["provider"],
        "race" => &["providers"],
        "hedge" => &["primary", "hedge", "delay_ms"],
        "cutover" => &["primary", "hedge", "poll_after_ms", "safety_at_ms"],
        "cascade" => &["primary", "hedge", "fallback", "poll_after_ms", "safety_at_ms", "escalate_at_ms"],
        "deadline" => &["primary", "hedge", "fallback", "poll_after_ms", "safety_at_ms"],
        other => {
            return Err(cx.err(
                format!("{key}.kind"),
                format!("unknown policy kind `{other}`; expected one of single, race, hedge, cutover, cascade, deadline"),
            ))
        }
    };
    let present = [
        ("provider", p.provider.is_some()),
        ("providers", p.providers.is_some()),
        ("primary", p.primary.is_some()),
        ("hedge", p.hedge.is_some()),
        ("fallback", p.fallback.is_some()),
        ("delay_ms", p.delay_ms.is_some()),
        ("poll_after_ms", p.poll_after_ms.is_some()),
        ("safety_at_ms", p.safety_at_ms.is_some()),
        ("escalate_at_ms", p.escalate_at_ms.is_some()),
    ];
    if let Some((field, _)) = present.iter().find(|(f, set)| *set && !allowed.contains(f)) {
        return Err(cx.err(format!("{key}.{field}"), format!("not used by kind = \"{}\" (it takes: {})", p.kind, allowed.join(", "))));
    }
    let t = timers(&p)?;
    Ok(match p.kind.as_str() {
        "single" => PolicySpec::Single { provider: need("provider", p.provider)? },
        "race" => {
            PolicySpec::Race { providers: p.providers.ok_or_else(|| cx.err(format!("{key}.providers"), "required for kind = \"race\""))? }
        }
        "hedge" => {
            let delay = cx.millis(&format!("{key}.delay_ms"), p.delay_ms, 10_000)?;
            PolicySpec::Hedge { primary: need("primary", p.primary)?, hedge: need("hedge", p.hedge)?, delay }
        }
        "cutover" => PolicySpec::Cutover { primary: need("primary", p.primary)?, hedge: need("hedge", p.hedge)?, timers: t },
        "cascade" => PolicySpec::Cascade {
            primary: need("primary", p.primary)?,
            hedge: need("hedge", p.hedge)?,
            fallback: need("fallback", p.fallback)?,
            timers: t,
        },
        _ => PolicySpec::Deadline {
            primary: need("primary", p.primary)?,
            hedge: need("hedge", p.hedge)?,
            fallback: need("fallback", p.fallback)?,
            timers: t,
        },
    })
}
