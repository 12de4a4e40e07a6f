//! `[policies.NAME]`: which policy, over which providers, with which timers; and the
//! construction of the engine's policy from it.

use crate::bounds::Lo;
use crate::context::Ctx;
use crate::error::ConfigError;
use crate::raw::{RawAdaptive, RawAuto, RawCost, RawPolicy, RawSingler};
use std::sync::Arc;
use std::time::Duration;
use tailcut_core::policy::learned::LearnedPolicy;
use tailcut_core::policy::{Cascade, Cutover, DeadlineTier, FixedHedge, ImmediateRace, Policy, PolicyError, QueueTimers, Single};
use tailcut_core::{PolicyKind, Provider};
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

    /// Its kind (`kind = "hedge"`).
    pub fn kind(&self) -> PolicyKind {
        match self {
            PolicySpec::Single { .. } => PolicyKind::Single,
            PolicySpec::Race { .. } => PolicyKind::Race,
            PolicySpec::Hedge { .. } => PolicyKind::Hedge,
            PolicySpec::Cutover { .. } => PolicyKind::Cutover,
            PolicySpec::Cascade { .. } => PolicyKind::Cascade,
            PolicySpec::Deadline { .. } => PolicyKind::Deadline,
            PolicySpec::Learned(l) => match l.kind {
                LearnedKind::Adaptive(_) => PolicyKind::Adaptive,
                LearnedKind::Singler(_) => PolicyKind::Singler,
                LearnedKind::Auto(_) => PolicyKind::Auto,
            },
        }
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
    let kind = p.kind();
    let k = |f: &str| format!("{key}.{f}");
    let need = |field: &str, v: Option<String>| v.ok_or_else(|| cx.err(k(field), format!("required for kind = \"{kind}\"")));
    let timers = |poll: Option<i64>, safety: Option<i64>, escalate: Option<i64>| -> Result<QueueTimers, ConfigError> {
        let poll = cx.millis(&k("poll_after_ms"), poll, 2500)?;
        let safety = cx.millis(&k("safety_at_ms"), safety, 8500)?;
        let escalate = cx.millis(&k("escalate_at_ms"), escalate, 25_000)?;
        QueueTimers::try_new(poll, safety, escalate).map_err(|e| cx.err(key, e.to_string()))
    };
    Ok(match p {
        RawPolicy::Single(r) => PolicySpec::Single { provider: need("provider", r.provider)? },
        RawPolicy::Race(r) => {
            PolicySpec::Race { providers: r.providers.ok_or_else(|| cx.err(k("providers"), "required for kind = \"race\""))? }
        }
        RawPolicy::Hedge(r) => {
            let delay = cx.millis(&k("delay_ms"), r.delay_ms, 10_000)?;
            PolicySpec::Hedge { primary: need("primary", r.primary)?, hedge: need("hedge", r.hedge)?, delay }
        }
        RawPolicy::Cutover(r) => {
            let timers = timers(r.poll_after_ms, r.safety_at_ms, None)?;
            PolicySpec::Cutover { primary: need("primary", r.primary)?, hedge: need("hedge", r.hedge)?, timers }
        }
        RawPolicy::Cascade(r) => {
            let timers = timers(r.poll_after_ms, r.safety_at_ms, r.escalate_at_ms)?;
            PolicySpec::Cascade {
                primary: need("primary", r.primary)?,
                hedge: need("hedge", r.hedge)?,
                fallback: need("fallback", r.fallback)?,
                timers,
            }
        }
        RawPolicy::Deadline(r) => {
            let timers = timers(r.poll_after_ms, r.safety_at_ms, None)?;
            PolicySpec::Deadline {
                primary: need("primary", r.primary)?,
                hedge: need("hedge", r.hedge)?,
                fallback: need("fallback", r.fallback)?,
                timers,
            }
        }
        RawPolicy::Adaptive(r) => PolicySpec::Learned(adaptive(cx, key, r)?),
        RawPolicy::Singler(r) => PolicySpec::Learned(singler(cx, key, r)?),
        RawPolicy::Auto(r) => PolicySpec::Learned(auto(cx, key, r)?),
    })
}

/// The settings every learned kind shares, each range-checked.
struct Shared<'a> {
    cx: &'a Ctx<'a>,
    key: &'a str,
}

impl Shared<'_> {
    fn k(&self, f: &str) -> String {
        format!("{}.{f}", self.key)
    }

    fn half_life(&self, v: Option<f64>) -> Result<f64, ConfigError> {
        self.cx.float(&self.k("half_life"), v, 64.0, Lo::Incl(1.0), 1e9, "observations")
    }

    fn burst(&self, v: Option<f64>) -> Result<f64, ConfigError> {
        self.cx.float(&self.k("extra_load_burst"), v, 5.0, Lo::Incl(1.0), 1e6, "extra attempts")
    }

    fn extra(&self, v: Option<f64>, default: f64) -> Result<f64, ConfigError> {
        Ok(self.cx.float(&self.k("extra_load_percent"), v, default, Lo::Incl(0.0), 100.0, "percent of requests")? / 100.0)
    }

    fn min_samples(&self, v: Option<i64>, default: i64) -> Result<u64, ConfigError> {
        self.cx.int(&self.k("min_samples"), v, default, 1, 1_000_000_000, "samples").map(|n| n as u64)
    }

    /// `primary` and `hedge`, both required and distinct.
    fn pair(&self, kind: PolicyKind, primary: Option<String>, hedge: Option<String>) -> Result<Vec<String>, ConfigError> {
        let need = |f: &str, v: Option<String>| v.ok_or_else(|| self.cx.err(self.k(f), format!("required for kind = \"{kind}\"")));
        let providers = vec![need("primary", primary)?, need("hedge", hedge)?];
        self.distinct(&providers, "hedge")?;
        Ok(providers)
    }

    fn distinct(&self, providers: &[String], field: &str) -> Result<(), ConfigError> {
        for (i, name) in providers.iter().enumerate() {
            if providers[..i].contains(name) {
                return Err(self.cx.err(self.k(field), format!("provider `{name}` is named twice")));
            }
        }
        Ok(())
    }
}

/// Reads an `adaptive` policy; every number range-checked.
fn adaptive(cx: &Ctx<'_>, key: &str, r: RawAdaptive) -> Result<LearnedSpec, ConfigError> {
    let s = Shared { cx, key };
    let (half_life, extra_burst) = (s.half_life(r.half_life)?, s.burst(r.extra_load_burst)?);
    let providers = s.pair(PolicyKind::Adaptive, r.primary, r.hedge)?;
    let min_delay = cx.millis(&s.k("min_delay_ms"), r.min_delay_ms, 0)?;
    let max_delay = cx.millis(&s.k("max_delay_ms"), r.max_delay_ms, 60_000)?;
    if max_delay < min_delay {
        return Err(cx.err(s.k("max_delay_ms"), format!("expected at least min_delay_ms ({} ms)", min_delay.as_millis())));
    }
    let settings = AdaptiveSettings {
        primary: 0,
        hedge: 1,
        quantile: cx.float(&s.k("quantile"), r.quantile, 0.95, Lo::Excl(0.0), 0.9999, "(a quantile level, below 1)")?,
        min_samples: s.min_samples(r.min_samples, 20)?,
        min_delay_s: min_delay.as_secs_f64(),
        max_delay_s: max_delay.as_secs_f64(),
        budget: s.extra(r.extra_load_percent, 5.0)?,
    };
    Ok(LearnedSpec { providers, kind: LearnedKind::Adaptive(settings), half_life, extra_burst })
}

/// Reads a `singler` policy; every number range-checked.
fn singler(cx: &Ctx<'_>, key: &str, r: RawSingler) -> Result<LearnedSpec, ConfigError> {
    let s = Shared { cx, key };
    let (half_life, extra_burst) = (s.half_life(r.half_life)?, s.burst(r.extra_load_burst)?);
    let providers = s.pair(PolicyKind::Singler, r.primary, r.hedge)?;
    let settings = SingleRSettings {
        primary: 0,
        hedge: 1,
        budget: s.extra(r.extra_load_percent, 5.0)?,
        level: cx.float(&s.k("level"), r.level, 0.99, Lo::Excl(0.0), 0.9999, "(the tail level minimised, below 1)")?,
        min_samples: s.min_samples(r.min_samples, 20)?,
    };
    Ok(LearnedSpec { providers, kind: LearnedKind::Singler(settings), half_life, extra_burst })
}

/// Reads an `auto` policy; every number range-checked.
fn auto(cx: &Ctx<'_>, key: &str, r: RawAuto) -> Result<LearnedSpec, ConfigError> {
    let s = Shared { cx, key };
    let (half_life, extra_burst) = (s.half_life(r.half_life)?, s.burst(r.extra_load_burst)?);
    let providers = r.providers.ok_or_else(|| cx.err(s.k("providers"), "required for kind = \"auto\""))?;
    if providers.is_empty() || providers.len() > 8 {
        return Err(cx.err(s.k("providers"), "expected 1 to 8 provider names"));
    }
    let deadline = cx.millis(&s.k("deadline_ms"), r.deadline_ms, 60_000)?;
    if deadline.is_zero() {
        return Err(cx.err(s.k("deadline_ms"), "expected a deadline of at least 1 ms"));
    }
    // The cutover and cascade timers default to the same shares of the deadline as
    // the built-in ones of a 60 s deadline (2.5 s, 8.5 s, 25 s), so a 250 ms deadline
    // weighs plans on a grid fine enough for it.
    let d = AutoSettings::default();
    let share = |x: f64| (x / d.deadline_s * deadline.as_secs_f64() * 1000.0).round().max(1.0) as u64;
    let poll = cx.millis(&s.k("poll_after_ms"), r.poll_after_ms, share(d.poll_s))?;
    let safety = cx.millis(&s.k("safety_at_ms"), r.safety_at_ms, share(d.safety_s))?;
    let escalate = cx.millis(&s.k("escalate_at_ms"), r.escalate_at_ms, share(d.escalate_s))?;
    QueueTimers::try_new(poll, safety, escalate).map_err(|e| cx.err(key, e.to_string()))?;
    let cost = match r.cost.unwrap_or_default() {
        RawCost::Active => CostBasis::Active,
        RawCost::Billed => CostBasis::Billed,
    };
    let settings = AutoSettings {
        deadline_s: deadline.as_secs_f64(),
        target_miss: cx.float(&s.k("target_miss"), r.target_miss, 0.05, Lo::Incl(0.0), 1.0, "(a share of requests)")?,
        max_extra: s.extra(r.extra_load_percent, 10.0)?,
        poll_s: poll.as_secs_f64(),
        safety_s: safety.as_secs_f64(),
        escalate_s: escalate.as_secs_f64(),
        cost,
        ..d
    };
    s.distinct(&providers, "providers")?;
    Ok(LearnedSpec { providers, kind: LearnedKind::Auto(settings), half_life, extra_burst })
}
