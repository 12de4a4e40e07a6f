//! `[policies.NAME]`: which policy, over which providers, with which timers; and the
//! construction of the engine's policy from it.

use crate::bounds::Lo;
use crate::context::Ctx;
use crate::error::ConfigError;
use crate::raw::RawPolicy;
use std::sync::Arc;
use std::time::Duration;
use tailcut_core::policy::learned::LearnedPolicy;
use tailcut_core::policy::{Cascade, Cutover, DeadlineTier, FixedHedge, ImmediateRace, Policy, PolicyError, QueueTimers, Single};
use tailcut_core::Provider;
use tailcut_model::{AdaptiveSettings, AutoSettings, CostBasis, LearnedKind, Model, ModelConfig, SingleRSettings};

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
    /// A policy that learns: `adaptive`, `singler` or `auto`.
    Learned(LearnedSpec),
}

/// A learned policy as configured: which providers its model covers and its settings.
#[derive(Debug, Clone, PartialEq)]
pub struct LearnedSpec {
    /// The providers it decides between, in the model's order (`adaptive`, `singler`:
    /// primary then hedge).
    pub providers: Vec<String>,
    /// The policy and its settings; provider indices refer to `providers`.
    pub kind: LearnedKind,
    /// Observations per provider after which an old one counts half.
    pub half_life: f64,
    /// The burst of the policy's own extra-load bucket (its rate is the kind's budget).
    pub extra_burst: f64,
}

impl LearnedSpec {
    /// A label for traces and metrics (`auto:a,b@250ms/miss1%`).
    pub fn label(&self) -> String {
        let pct = |x: f64| format!("{}%", (x * 1000.0).round() / 10.0);
        match self.kind {
            LearnedKind::Auto(a) => {
                format!("auto:{}@{}ms/miss{}", self.providers.join(","), (a.deadline_s * 1000.0).round(), pct(a.target_miss))
            }
            LearnedKind::Adaptive(a) => format!("adaptive:{}@p{}", self.providers.join("->"), (a.quantile * 1000.0).round() / 10.0),
            LearnedKind::Singler(s) => format!("singler:{}@extra{}", self.providers.join("->"), pct(s.budget)),
        }
    }

    /// The live policy over the hedger's `providers`, starting from `model` when it
    /// covers exactly this policy's providers (else cold). `max_live` is the race's cap
    /// (`auto` never chooses a plan needing more).
    pub fn build(&self, providers: &[Provider], max_live: usize, model: Option<Model>) -> Result<LearnedPolicy, PolicyError> {
        let names: Vec<&str> = self.providers.iter().map(String::as_str).collect();
        let kind = match self.kind {
            LearnedKind::Auto(a) => LearnedKind::Auto(AutoSettings { max_live: max_live.max(1), ..a }),
            k => k,
        };
        let config = ModelConfig { half_life: self.half_life, ..ModelConfig::live() };
        Ok(LearnedPolicy::try_new_over(providers, &names, &self.label(), kind, model, config, 1)?.with_burst(self.extra_burst))
    }
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
            PolicySpec::Learned(l) => Arc::new(l.build(providers, 2, None)?),
        })
    }

    /// The learned policy's spec, if this is one.
    pub fn learned(&self) -> Option<&LearnedSpec> {
        match self {
            PolicySpec::Learned(l) => Some(l),
            _ => None,
        }
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
        PolicySpec::Learned(l) => l.providers.clone(),
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
        "adaptive" => &[
            "primary",
            "hedge",
            "quantile",
            "min_samples",
            "min_delay_ms",
            "max_delay_ms",
            "extra_load_percent",
            "extra_load_burst",
            "half_life",
        ],
        "singler" => &["primary", "hedge", "level", "min_samples", "extra_load_percent", "extra_load_burst", "half_life"],
        "auto" => &[
            "providers",
            "deadline_ms",
            "target_miss",
            "extra_load_percent",
            "extra_load_burst",
            "poll_after_ms",
            "safety_at_ms",
            "escalate_at_ms",
            "cost",
            "half_life",
        ],
        other => {
            return Err(cx.err(
                format!("{key}.kind"),
                format!(
                "unknown policy kind `{other}`; expected one of single, race, hedge, cutover, cascade, deadline, adaptive, singler, auto"
            ),
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
        ("quantile", p.quantile.is_some()),
        ("min_samples", p.min_samples.is_some()),
        ("min_delay_ms", p.min_delay_ms.is_some()),
        ("max_delay_ms", p.max_delay_ms.is_some()),
        ("level", p.level.is_some()),
        ("deadline_ms", p.deadline_ms.is_some()),
        ("target_miss", p.target_miss.is_some()),
        ("extra_load_percent", p.extra_load_percent.is_some()),
        ("extra_load_burst", p.extra_load_burst.is_some()),
        ("half_life", p.half_life.is_some()),
        ("cost", p.cost.is_some()),
    ];
    if let Some((field, _)) = present.iter().find(|(f, set)| *set && !allowed.contains(f)) {
        return Err(cx.err(format!("{key}.{field}"), format!("not used by kind = \"{}\" (it takes: {})", p.kind, allowed.join(", "))));
    }
    if matches!(p.kind.as_str(), "adaptive" | "singler" | "auto") {
        return learned(cx, key, p).map(PolicySpec::Learned);
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

/// Reads an `adaptive`, `singler` or `auto` policy; every number range-checked.
fn learned(cx: &Ctx<'_>, key: &str, p: RawPolicy) -> Result<LearnedSpec, ConfigError> {
    let k = |f: &str| format!("{key}.{f}");
    let half_life = cx.float(&k("half_life"), p.half_life, 64.0, Lo::Incl(1.0), 1e9, "observations")?;
    let extra_burst = cx.float(&k("extra_load_burst"), p.extra_load_burst, 5.0, Lo::Incl(1.0), 1e6, "extra attempts")?;
    let extra = |default: f64| -> Result<f64, ConfigError> {
        Ok(cx.float(&k("extra_load_percent"), p.extra_load_percent, default, Lo::Incl(0.0), 100.0, "percent of requests")? / 100.0)
    };
    let min_samples = |default: i64| cx.int(&k("min_samples"), p.min_samples, default, 1, 1_000_000_000, "samples").map(|n| n as u64);
    let pair = |p: &RawPolicy| -> Result<Vec<String>, ConfigError> {
        let need = |f: &str, v: &Option<String>| v.clone().ok_or_else(|| cx.err(k(f), format!("required for kind = \"{}\"", p.kind)));
        Ok(vec![need("primary", &p.primary)?, need("hedge", &p.hedge)?])
    };
    let (providers, kind) = match p.kind.as_str() {
        "adaptive" => {
            let providers = pair(&p)?;
            let min_delay = cx.millis(&k("min_delay_ms"), p.min_delay_ms, 0)?;
            let max_delay = cx.millis(&k("max_delay_ms"), p.max_delay_ms, 60_000)?;
            if max_delay < min_delay {
                return Err(cx.err(k("max_delay_ms"), format!("expected at least min_delay_ms ({} ms)", min_delay.as_millis())));
            }
            let settings = AdaptiveSettings {
                primary: 0,
                hedge: 1,
                quantile: cx.float(&k("quantile"), p.quantile, 0.95, Lo::Excl(0.0), 0.9999, "(a quantile level, below 1)")?,
                min_samples: min_samples(20)?,
                min_delay_s: min_delay.as_secs_f64(),
                max_delay_s: max_delay.as_secs_f64(),
                budget: extra(5.0)?,
            };
            (providers, LearnedKind::Adaptive(settings))
        }
        "singler" => {
            let providers = pair(&p)?;
            let settings = SingleRSettings {
                primary: 0,
                hedge: 1,
                budget: extra(5.0)?,
                level: cx.float(&k("level"), p.level, 0.99, Lo::Excl(0.0), 0.9999, "(the tail level minimised, below 1)")?,
                min_samples: min_samples(20)?,
            };
            (providers, LearnedKind::Singler(settings))
        }
        _ => {
            let providers = p.providers.clone().ok_or_else(|| cx.err(k("providers"), "required for kind = \"auto\""))?;
            if providers.is_empty() || providers.len() > 8 {
                return Err(cx.err(k("providers"), "expected 1 to 8 provider names"));
            }
            let deadline = cx.millis(&k("deadline_ms"), p.deadline_ms, 60_000)?;
            if deadline.is_zero() {
                return Err(cx.err(k("deadline_ms"), "expected a deadline of at least 1 ms"));
            }
            // The cutover and cascade timers default to the same shares of the deadline as
            // the built-in ones of a 60 s deadline (2.5 s, 8.5 s, 25 s), so a 250 ms deadline
            // weighs plans on a grid fine enough for it.
            let d = AutoSettings::default();
            let share = |x: f64| (x / d.deadline_s * deadline.as_secs_f64() * 1000.0).round().max(1.0) as u64;
            let poll = cx.millis(&k("poll_after_ms"), p.poll_after_ms, share(d.poll_s))?;
            let safety = cx.millis(&k("safety_at_ms"), p.safety_at_ms, share(d.safety_s))?;
            let escalate = cx.millis(&k("escalate_at_ms"), p.escalate_at_ms, share(d.escalate_s))?;
            QueueTimers::try_new(poll, safety, escalate).map_err(|e| cx.err(key, e.to_string()))?;
            let cost = match p.cost.as_deref() {
                None | Some("active") => CostBasis::Active,
                Some("billed") => CostBasis::Billed,
                Some(other) => return Err(cx.err(k("cost"), format!("`{other}`: expected \"active\" or \"billed\""))),
            };
            let settings = AutoSettings {
                deadline_s: deadline.as_secs_f64(),
                target_miss: cx.float(&k("target_miss"), p.target_miss, 0.05, Lo::Incl(0.0), 1.0, "(a share of requests)")?,
                max_extra: extra(10.0)?,
                poll_s: poll.as_secs_f64(),
                safety_s: safety.as_secs_f64(),
                escalate_s: escalate.as_secs_f64(),
                cost,
                ..d
            };
            (providers, LearnedKind::Auto(settings))
        }
    };
    for (i, name) in providers.iter().enumerate() {
        if providers[..i].contains(name) {
            return Err(cx.err(k(if p.kind == "auto" { "providers" } else { "hedge" }), format!("provider `{name}` is named twice")));
        }
    }
    Ok(LearnedSpec { providers, kind, half_life, extra_burst })
}
