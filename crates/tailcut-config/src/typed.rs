//! Stage two: validated, typed configuration, and construction of engine objects.

use crate::raw::{RawConfig, RawPolicy, RawProvider};
use crate::ConfigError;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tailcut_core::engine::RaceSettings;
use tailcut_core::ledger::BudgetLimits;
use tailcut_core::policy::{Cascade, Cutover, DeadlineTier, FixedHedge, ImmediateRace, Policy, PolicyError, QueueTimers, Single};
use tailcut_core::validate::{ValidatorRegistry, ValidatorSpec};
use tailcut_core::{MicroUsd, Pricing, ProviderEntry, RateNanoUsdPerSec};
use tailcut_sim::{SimBackend, SimProfile};

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where it came from (a path, or `<built-in>`).
    pub source: String,
    /// Live-attempt cap and per-attempt cap.
    pub race: RaceSettings,
    /// Spending limits and where the ledger lives.
    pub budget: BudgetConfig,
    /// Where request traces are appended, if anywhere.
    pub trace_path: Option<PathBuf>,
    /// The result validator.
    pub validator: ValidatorSpec,
    /// Providers, in file order.
    pub providers: Vec<ProviderConfig>,
    /// Named policies, in file order.
    pub policies: Vec<(String, PolicySpec)>,
    /// Replay settings.
    pub replay: ReplayConfig,
    /// Gateway settings (`tailcut serve`).
    pub gateway: GatewayConfig,
    /// Gateway routes, in file order.
    pub routes: Vec<RouteConfig>,
}

/// `tailcut serve` settings.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewayConfig {
    /// Listen address.
    pub listen: String,
    /// Largest request body.
    pub max_body_bytes: usize,
    /// Most requests in flight; more wait for a slot up to `admission_wait`, then get 503.
    pub max_in_flight: usize,
    /// How long a request waits for an in-flight slot before a 503.
    pub admission_wait: Duration,
    /// Deadline for a whole request.
    pub total_timeout: Duration,
    /// How long finished jobs are kept.
    pub job_retention: Duration,
    /// Job store (SQLite); None keeps jobs in memory.
    pub store: Option<PathBuf>,
    /// Extra attempts allowed, as a percentage of requests over the recent window.
    pub hedge_budget_percent: f64,
    /// Extra attempts always allowed before the percentage applies (a burst allowance).
    pub hedge_budget_burst: u32,
    /// API keys.
    pub keys: Vec<ApiKey>,
    /// Whether requests must carry a configured key (`auth = "keys"`, the default) or
    /// none is checked (`auth = "none"`, which must be said explicitly).
    pub auth: AuthMode,
    /// Whether job webhooks may target loopback, private, link-local and metadata
    /// addresses (default false).
    pub webhook_allow_private: bool,
    /// Longest wait for a complete request head, from its first byte.
    pub header_read_timeout: Duration,
    /// Longest wait for a complete request body, from the end of its head.
    pub body_read_timeout: Duration,
    /// How long an idle keep-alive connection is kept.
    pub idle_timeout: Duration,
    /// Most client connections at once (None: derived from the file-descriptor limit).
    pub max_connections: Option<usize>,
}

/// How the gateway authenticates callers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthMode {
    /// Every request carries one of the configured keys.
    #[default]
    Keys,
    /// No authentication (explicitly configured).
    None,
}

/// One API key, stored as the SHA-256 of the key.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiKey {
    /// Name (tenant).
    pub name: String,
    /// Lowercase hex SHA-256 of the key.
    pub sha256: String,
    /// Spending hard stop for this key.
    pub budget_usd: Option<f64>,
    /// Requests per second.
    pub rate_per_s: Option<f64>,
    /// Routes this key may use (None: all).
    pub routes: Option<Vec<String>>,
}

/// What a route serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKind {
    /// OpenAI-compatible proxy (chat, completions, embeddings) by model name.
    OpenAi,
    /// The jobs API.
    Jobs,
}

/// A gateway route.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteConfig {
    /// Name.
    pub name: String,
    /// Kind.
    pub kind: RouteKind,
    /// Model names that select this route (OpenAI routes).
    pub models: Vec<String>,
    /// Policy name.
    pub policy: String,
    /// Streaming: launch the next upstream if no first token by then.
    pub first_token_hedge: Duration,
}

/// Budget settings.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetConfig {
    /// The two stops.
    pub limits: BudgetLimits,
    /// SQLite file; `None` keeps the ledger in memory.
    pub ledger: Option<PathBuf>,
}

/// Replay settings (deadlines, hedge-delay grid, calibration split, censoring cap).
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayConfig {
    /// Deadlines whose misses are counted, seconds.
    pub deadlines_s: Vec<u32>,
    /// Fixed-hedge delay grid, seconds.
    pub delays_s: Vec<f64>,
    /// Rounds with `round_id <= this` form the calibration split.
    pub calibration_rounds: u64,
    /// Billed seconds assumed for a provider missing from a round.
    pub cap_s: f64,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig {
            deadlines_s: vec![30, 60, 90, 120],
            delays_s: vec![0.0, 5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0],
            calibration_rounds: 18,
            cap_s: 300.0,
        }
    }
}

/// One provider.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// Its key.
    pub name: String,
    /// Billed rate, idle window, expected run.
    pub pricing: Pricing,
    /// Rate as decimal dollars per second (for float models such as replay).
    pub rate_usd_per_s: f64,
    /// Idle window in seconds (for float models such as replay).
    pub idle_window_s: f64,
    /// How to reach it.
    pub adapter: Adapter,
}

/// The adapter behind a provider.
#[derive(Debug, Clone)]
pub enum Adapter {
    /// The in-process simulator.
    Sim {
        /// Behaviour.
        profile: Box<SimProfile>,
        /// RNG seed.
        seed: u64,
    },
    /// An HTTP provider.
    Remote(Box<crate::remote::RemoteAdapter>),
}

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
    pub fn build(&self, providers: &[ProviderEntry]) -> Result<Arc<dyn Policy>, PolicyError> {
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

fn name_seed(name: &str) -> u64 {
    // FNV-1a: distinct, stable default seeds per provider name.
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

struct Ctx<'a> {
    file: &'a str,
}

impl Ctx<'_> {
    fn err(&self, key: impl Into<String>, expected: impl Into<String>) -> ConfigError {
        ConfigError::invalid(self.file, key, expected)
    }

    fn typed<T: for<'de> Deserialize<'de>>(&self, prefix: &str, value: toml::Value) -> Result<T, ConfigError> {
        serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            let key = match (prefix.is_empty(), path == ".") {
                (true, _) => path,
                (false, true) => prefix.to_string(),
                (false, false) => format!("{prefix}.{path}"),
            };
            self.err(key, e.into_inner().to_string())
        })
    }

    fn non_negative(&self, key: &str, v: Option<f64>, default: f64) -> Result<f64, ConfigError> {
        match v {
            None => Ok(default),
            Some(x) if x.is_finite() && x >= 0.0 => Ok(x),
            Some(_) => Err(self.err(key, "expected a non-negative number")),
        }
    }

    fn millis(&self, key: &str, v: Option<i64>, default: u64) -> Result<Duration, ConfigError> {
        match v {
            None => Ok(Duration::from_millis(default)),
            Some(x) if x >= 0 => Ok(Duration::from_millis(x as u64)),
            Some(_) => Err(self.err(key, "expected a non-negative number of milliseconds")),
        }
    }
}

impl Config {
    /// Reads and validates a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { file: file.clone(), source })?;
        Config::parse(&text, &file)
    }

    /// The built-in demo configuration.
    pub fn built_in() -> Config {
        match Config::parse(crate::BUILT_IN, "<built-in>") {
            Ok(c) => c,
            // The built-in file is covered by tests; failing here is a build defect.
            Err(e) => unreachable!("built-in configuration is invalid: {e}"),
        }
    }

    /// Parses and validates configuration text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
        let cx = Ctx { file };
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::Syntax { file: file.into(), message: e.to_string().trim().to_string() })?;
        let raw: RawConfig = cx.typed("", toml::Value::Table(table))?;

        let max_live = match raw.race.max_live {
            None => 2,
            Some(n) if n >= 1 => n as usize,
            Some(_) => return Err(cx.err("race.max_live", "expected an integer of at least 1")),
        };
        let cap_s = cx.non_negative("race.cap_s", raw.race.cap_s, 300.0)?;
        if cap_s == 0.0 {
            return Err(cx.err("race.cap_s", "expected a positive number of seconds"));
        }
        let race = RaceSettings { max_live, cap: Duration::from_secs_f64(cap_s) };

        let soft = cx.non_negative("budget.soft_stop_usd", raw.budget.soft_stop_usd, 45.0)?;
        let hard = cx.non_negative("budget.hard_stop_usd", raw.budget.hard_stop_usd, 50.0)?;
        if soft > hard {
            return Err(cx.err("budget.soft_stop_usd", format!("expected at most budget.hard_stop_usd ({hard})")));
        }
        let ledger = match raw.budget.ledger.as_deref() {
            None => Some(PathBuf::from(".tailcut/ledger.sqlite")),
            Some(":memory:") => None,
            Some("") => return Err(cx.err("budget.ledger", "expected a file path or \":memory:\"")),
            Some(p) => Some(PathBuf::from(p)),
        };
        let budget =
            BudgetConfig { limits: BudgetLimits { soft_stop: MicroUsd::from_usd(soft), hard_stop: MicroUsd::from_usd(hard) }, ledger };

        let validator = match raw.validator {
            None => ValidatorSpec::named("nonempty"),
            Some(t) => {
                let spec: ValidatorSpec = cx.typed("validator", toml::Value::Table(t))?;
                ValidatorRegistry::default().build(&spec).map_err(|e| cx.err("validator", e.to_string()))?;
                spec
            }
        };

        let mut providers = Vec::new();
        for (name, value) in raw.providers {
            providers.push(provider(&cx, &name, value)?);
        }
        let entries: Vec<ProviderEntry> = providers.iter().map(ProviderConfig::entry).collect();

        let mut policies = Vec::new();
        for (name, value) in raw.policies {
            let key = format!("policies.{name}");
            let rp: RawPolicy = cx.typed(&key, value)?;
            let spec = policy(&cx, &key, rp)?;
            spec.build(&entries).map_err(|e| cx.err(&key, e.to_string()))?;
            policies.push((name, spec));
        }

        let d = ReplayConfig::default();
        let deadlines_s = match raw.replay.deadlines_s {
            None => d.deadlines_s,
            Some(v) => v
                .into_iter()
                .map(|x| u32::try_from(x).ok().filter(|x| *x > 0))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| cx.err("replay.deadlines_s", "expected positive whole seconds"))?,
        };
        let delays_s = match raw.replay.delays_s {
            None => d.delays_s,
            Some(v) if v.iter().all(|x| x.is_finite() && *x >= 0.0) => v,
            Some(_) => return Err(cx.err("replay.delays_s", "expected non-negative seconds")),
        };
        let calibration_rounds = match raw.replay.calibration_rounds {
            None => d.calibration_rounds,
            Some(x) if x >= 0 => x as u64,
            Some(_) => return Err(cx.err("replay.calibration_rounds", "expected a non-negative integer")),
        };
        let cap = cx.non_negative("replay.cap_s", raw.replay.cap_s, d.cap_s)?;
        let replay = ReplayConfig { deadlines_s, delays_s, calibration_rounds, cap_s: cap };

        let gateway = gateway(&cx, raw.gateway)?;
        let mut routes = Vec::new();
        for (name, value) in raw.routes {
            let key = format!("routes.{name}");
            let r: crate::raw::RawRoute = cx.typed(&key, value)?;
            let kind = match r.kind.as_str() {
                "openai" => RouteKind::OpenAi,
                "jobs" => RouteKind::Jobs,
                other => return Err(cx.err(format!("{key}.kind"), format!("`{other}`: expected openai or jobs"))),
            };
            let Some(spec) = policies.iter().find(|(n, _)| *n == r.policy).map(|(_, p)| p.clone()) else {
                return Err(cx.err(format!("{key}.policy"), format!("no policy `{}` in [policies]", r.policy)));
            };
            if kind == RouteKind::OpenAi {
                if r.models.is_empty() {
                    return Err(cx.err(format!("{key}.models"), "an openai route needs at least one model name"));
                }
                for p in spec_providers(&spec) {
                    let ok = providers
                        .iter()
                        .find(|x: &&ProviderConfig| x.name == p)
                        .is_some_and(|x| matches!(&x.adapter, Adapter::Remote(a) if a.kind == crate::remote::RemoteKind::OpenAi));
                    if !ok {
                        return Err(
                            cx.err(format!("{key}.policy"), format!("provider `{p}` of policy `{}` is not an openai adapter", r.policy))
                        );
                    }
                }
            }
            let default_hedge = match &spec {
                PolicySpec::Hedge { delay, .. } => *delay,
                _ => Duration::from_millis(1000),
            };
            let first_token_hedge =
                cx.millis(&format!("{key}.first_token_hedge_ms"), r.first_token_hedge_ms, default_hedge.as_millis() as u64)?;
            routes.push(RouteConfig { name, kind, models: r.models, policy: r.policy, first_token_hedge });
        }
        Ok(Config {
            source: file.to_string(),
            race,
            budget,
            trace_path: raw.trace.path.map(PathBuf::from),
            validator,
            providers,
            policies,
            replay,
            gateway,
            routes,
        })
    }

    /// Engine provider entries, in file order (credentials not required).
    pub fn provider_entries(&self) -> Vec<ProviderEntry> {
        self.providers.iter().map(ProviderConfig::entry).collect()
    }

    /// Engine provider entries for live use: every paid provider's credential must resolve.
    pub fn live_entries(&self) -> Result<Vec<ProviderEntry>, ConfigError> {
        self.providers.iter().map(|p| p.try_entry(&self.source, true)).collect()
    }

    /// A named policy's spec.
    pub fn policy(&self, name: &str) -> Option<&PolicySpec> {
        self.policies.iter().find(|(n, _)| n == name).map(|(_, p)| p)
    }

    /// A provider by key.
    pub fn provider(&self, name: &str) -> Option<&ProviderConfig> {
        self.providers.iter().find(|p| p.name == name)
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

fn gateway(cx: &Ctx<'_>, raw: Option<toml::Table>) -> Result<GatewayConfig, ConfigError> {
    let g: crate::raw::RawGateway = match raw {
        None => crate::raw::RawGateway::default(),
        Some(t) => cx.typed("gateway", toml::Value::Table(t))?,
    };
    let pos = |k: &str, v: Option<i64>, d: i64| -> Result<i64, ConfigError> {
        match v {
            None => Ok(d),
            Some(x) if x > 0 => Ok(x),
            Some(_) => Err(cx.err(format!("gateway.{k}"), "expected a positive integer")),
        }
    };
    let secs = |k: &str, v: Option<f64>, d: f64| -> Result<Duration, ConfigError> {
        match v {
            None => Ok(Duration::from_secs_f64(d)),
            Some(x) if x > 0.0 && x.is_finite() => Ok(Duration::from_secs_f64(x)),
            Some(_) => Err(cx.err(format!("gateway.{k}"), "expected a positive number of seconds")),
        }
    };
    let mut keys = Vec::new();
    for (i, k) in g.keys.into_iter().enumerate() {
        let hex = k.sha256.to_ascii_lowercase();
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(
                cx.err(format!("gateway.keys[{i}].sha256"), "expected 64 hex digits (sha256 of the key: `printf %s KEY | sha256sum`)")
            );
        }
        keys.push(ApiKey { name: k.name, sha256: hex, budget_usd: k.budget_usd, rate_per_s: k.rate_per_s, routes: k.routes });
    }
    let pct = g.hedge_budget_percent.unwrap_or(10.0);
    if !(0.0..=1000.0).contains(&pct) {
        return Err(cx.err("gateway.hedge_budget_percent", "expected 0 to 1000 (percent of requests)"));
    }
    Ok(GatewayConfig {
        listen: g.listen.unwrap_or_else(|| "127.0.0.1:8080".into()),
        max_body_bytes: pos("max_body_bytes", g.max_body_bytes, 1 << 20)? as usize,
        max_in_flight: pos("max_in_flight", g.max_in_flight, 10_000)? as usize,
        admission_wait: match g.admission_wait_ms {
            None => Duration::from_millis(5000),
            Some(ms) if (0..=600_000).contains(&ms) => Duration::from_millis(ms as u64),
            Some(_) => return Err(cx.err("gateway.admission_wait_ms", "expected 0 to 600000 (milliseconds; 0 answers 503 at once)")),
        },
        total_timeout: secs("total_timeout_s", g.total_timeout_s, 300.0)?,
        job_retention: secs("job_retention_s", g.job_retention_s, 86_400.0)?,
        store: match g.store.as_deref() {
            None => Some(PathBuf::from(".tailcut/gateway.sqlite")),
            Some(":memory:") => None,
            Some(p) => Some(PathBuf::from(p)),
        },
        hedge_budget_percent: pct,
        hedge_budget_burst: pos("hedge_budget_burst", g.hedge_budget_burst, 10)? as u32,
        keys,
        auth: match g.auth.as_deref() {
            None | Some("keys") => AuthMode::Keys,
            Some("none") => AuthMode::None,
            Some(_) => return Err(cx.err("gateway.auth", "expected \"keys\" or \"none\"")),
        },
        webhook_allow_private: g.webhook_allow_private.unwrap_or(false),
        header_read_timeout: secs("header_read_timeout_s", g.header_read_timeout_s, 10.0)?,
        body_read_timeout: secs("body_read_timeout_s", g.body_read_timeout_s, 30.0)?,
        idle_timeout: secs("idle_timeout_s", g.idle_timeout_s, 60.0)?,
        max_connections: g.max_connections.map(|_| pos("max_connections", g.max_connections, 1)).transpose()?.map(|n| n as usize),
    })
}

impl ProviderConfig {
    /// Builds the engine entry (for `sim`, a fresh simulator with its seed). HTTP
    /// adapters are built without requiring credentials (for validation and dry runs).
    pub fn entry(&self) -> ProviderEntry {
        match self.try_entry("<config>", false) {
            Ok(e) => e,
            Err(_) => ProviderEntry {
                name: self.name.clone(),
                backend: Arc::new(SimBackend::new(&self.name, SimProfile::instant(), 0)),
                pricing: self.pricing,
            },
        }
    }

    /// Builds the engine entry; with `strict`, a paid provider's missing credential is an error.
    pub fn try_entry(&self, file: &str, strict: bool) -> Result<ProviderEntry, ConfigError> {
        let backend: Arc<dyn tailcut_core::Backend> = match &self.adapter {
            Adapter::Sim { profile, seed } => Arc::new(SimBackend::new(&self.name, profile.as_ref().clone(), *seed)),
            Adapter::Remote(r) => r.backend(file, &format!("providers.{}", self.name), &self.name, self.pricing.rate, strict)?,
        };
        Ok(ProviderEntry { name: self.name.clone(), backend, pricing: self.pricing })
    }

    /// Whether submitting to it can cost money (an HTTP adapter not on loopback).
    pub fn is_paid(&self) -> bool {
        match &self.adapter {
            Adapter::Sim { .. } => false,
            Adapter::Remote(r) => r.is_paid(),
        }
    }

    /// The simulator profile, for simulated providers.
    pub fn sim_profile(&self) -> Option<(&SimProfile, u64)> {
        match &self.adapter {
            Adapter::Sim { profile, seed } => Some((profile.as_ref(), *seed)),
            Adapter::Remote(_) => None,
        }
    }
}

fn provider(cx: &Ctx<'_>, name: &str, value: toml::Value) -> Result<ProviderConfig, ConfigError> {
    let key = format!("providers.{name}");
    let raw: RawProvider = cx.typed(&key, value)?;
    if let Some(remote) = crate::remote::parse(cx.file, &key, &raw)? {
        let rate = cx.non_negative(&format!("{key}.rate_usd_per_s"), raw.rate_usd_per_s, 0.0)?;
        let idle = cx.non_negative(&format!("{key}.idle_window_s"), raw.idle_window_s, 0.0)?;
        let expected = cx.non_negative(&format!("{key}.expected_run_s"), raw.expected_run_s, 30.0)?;
        return Ok(ProviderConfig {
            name: name.to_string(),
            pricing: Pricing {
                rate: RateNanoUsdPerSec::from_usd_per_s(rate),
                idle_window: Duration::from_secs_f64(idle),
                expected_run: Duration::from_secs_f64(expected),
            },
            rate_usd_per_s: rate,
            idle_window_s: idle,
            adapter: Adapter::Remote(Box::new(remote)),
        });
    }
    let adapter = match raw.adapter.as_str() {
        "sim" => {
            let mut table = raw.sim.unwrap_or_default();
            let profile_name = match table.remove("profile") {
                None => name.to_string(),
                Some(toml::Value::String(s)) => s,
                Some(_) => return Err(cx.err(format!("{key}.sim.profile"), "expected a profile name (runpod, cerebrium, modal, instant)")),
            };
            let seed = match table.remove("seed") {
                None => name_seed(name),
                Some(toml::Value::Integer(s)) if s >= 0 => s as u64,
                Some(_) => return Err(cx.err(format!("{key}.sim.seed"), "expected a non-negative integer")),
            };
            let base = SimProfile::named(&profile_name).map_err(|e| cx.err(format!("{key}.sim.profile"), e.to_string()))?;
            let mut merged = match toml::Value::try_from(&base) {
                Ok(toml::Value::Table(t)) => t,
                _ => return Err(cx.err(format!("{key}.sim"), "internal error: profile is not a table")),
            };
            for (k, v) in table {
                if !merged.contains_key(&k) {
                    return Err(cx.err(format!("{key}.sim.{k}"), "unknown simulator setting"));
                }
                merged.insert(k, v);
            }
            let profile: SimProfile = cx.typed(&format!("{key}.sim"), toml::Value::Table(merged))?;
            profile.validate().map_err(|e| cx.err(format!("{key}.sim"), e.to_string()))?;
            Adapter::Sim { profile: Box::new(profile), seed }
        }
        other => {
            return Err(cx.err(format!("{key}.adapter"), format!("unknown adapter `{other}`; this build supports: sim")));
        }
    };
    let Adapter::Sim { profile, .. } = &adapter else {
        return Err(cx.err(format!("{key}.adapter"), "internal: expected the simulator"));
    };
    let rate = cx.non_negative(&format!("{key}.rate_usd_per_s"), raw.rate_usd_per_s, profile.rate_usd_per_s)?;
    let idle = cx.non_negative(&format!("{key}.idle_window_s"), raw.idle_window_s, profile.idle_window_s)?;
    let expected = cx.non_negative(&format!("{key}.expected_run_s"), raw.expected_run_s, 30.0)?;
    Ok(ProviderConfig {
        name: name.to_string(),
        pricing: Pricing {
            rate: RateNanoUsdPerSec::from_usd_per_s(rate),
            idle_window: Duration::from_secs_f64(idle),
            expected_run: Duration::from_secs_f64(expected),
        },
        rate_usd_per_s: rate,
        idle_window_s: idle,
        adapter,
    })
}

fn policy(cx: &Ctx<'_>, key: &str, p: RawPolicy) -> Result<PolicySpec, ConfigError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        Config::parse(text, "t.toml").unwrap_err().to_string()
    }

    #[test]
    fn built_in_config_is_valid_and_ordered() {
        let c = Config::built_in();
        let names: Vec<_> = c.providers.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["runpod", "modal", "cerebrium"]);
        assert_eq!(c.policies.len(), 6);
        assert_eq!(c.race.max_live, 2);
        assert_eq!(c.budget.ledger, None);
        assert_eq!(c.providers[0].pricing.rate, RateNanoUsdPerSec(306_000));
        assert_eq!(c.replay.calibration_rounds, 18);
    }

    #[test]
    fn unknown_top_level_key_is_rejected_with_its_name() {
        let e = err("colour = 1");
        assert!(e.starts_with("t.toml: key `colour`"), "{e}");
        assert!(e.contains("unknown field"), "{e}");
    }

    #[test]
    fn unknown_provider_key_names_the_path() {
        let e = err("[providers.runpod]\nadapter = \"sim\"\nrate = 1\n");
        assert!(e.contains("key `providers.runpod.rate`"), "{e}");
    }

    #[test]
    fn wrong_type_names_the_path_and_expectation() {
        let e = err("[providers.runpod]\nadapter = \"sim\"\nrate_usd_per_s = \"cheap\"\n");
        assert!(e.contains("providers.runpod.rate_usd_per_s"), "{e}");
        assert!(e.contains("expected f64"), "{e}");
        let e = err("[providers.runpod]\nadapter = \"sim\"\nrate_usd_per_s = -1.0\n");
        assert!(e.contains("expected a non-negative number"), "{e}");
    }

    #[test]
    fn unknown_adapter_and_sim_setting_are_rejected() {
        assert!(err("[providers.x]\nadapter = \"aws\"\n").contains("providers.x.adapter"));
        let e = err("[providers.x]\nadapter = \"runpod\"\nendpoint_id = \"e\"\n");
        assert!(e.contains("providers.x.rate_usd_per_s") && e.contains("money is real"), "{e}");
        let e = err("[providers.x]\nadapter = \"runpod\"\nrate_usd_per_s = 0.0003\n");
        assert!(e.contains("providers.x.endpoint_id"), "{e}");
        let e = err("[providers.x]\nadapter = \"runpod\"\nrate_usd_per_s = 0.0003\nendpoint_id = \"e\"\nmodel = \"m\"\n");
        assert!(e.contains("providers.x.model") && e.contains("not used"), "{e}");
        let e = err("[providers.x]\nadapter = \"replicate\"\nrate_usd_per_s = 0.0003\n");
        assert!(e.contains("exactly one of version"), "{e}");
        let e = err("[providers.x]\nadapter = \"sim\"\nsim = { profile = \"runpod\", warp = 9 }\n");
        assert!(e.contains("providers.x.sim.warp"), "{e}");
        let e = err("[providers.x]\nadapter = \"sim\"\nsim = { profile = \"runpod\", leak_p = 3.0 }\n");
        assert!(e.contains("leak_p"), "{e}");
    }

    #[test]
    fn remote_adapters_parse_and_know_when_they_cost_money() {
        let text = r#"
[providers.rp]
adapter = "runpod"
endpoint_id = "abc"
rate_usd_per_s = 0.000306
idle_window_s = 60
[providers.local]
adapter = "runpod"
base_url = "http://127.0.0.1:8001/v2"
endpoint_id = "sim"
rate_usd_per_s = 0.000306
[providers.vllm]
adapter = "openai"
base_url = "http://localhost:8000/v1"
model = "m"
stream = true
rate_usd_per_s = 0.0
[providers.api]
adapter = "http"
rate_usd_per_s = 0.001
http = { submit = { url = "https://x/jobs" }, status = { url = "https://x/jobs/{job_id}" }, state_map = { waiting = "QUEUED" } }
[policies.c]
kind = "cutover"
primary = "local"
hedge = "vllm"
"#;
        let c = Config::parse(text, "t").unwrap();
        assert!(c.provider("rp").unwrap().is_paid());
        assert!(!c.provider("local").unwrap().is_paid());
        assert!(!c.provider("vllm").unwrap().is_paid());
        assert!(c.provider("api").unwrap().is_paid());
        // The local RunPod-API server needs no credential.
        assert!(c.provider("local").unwrap().try_entry("t", true).is_ok());
    }

    #[test]
    fn sim_overrides_apply() {
        let c = Config::parse("[providers.x]\nadapter = \"sim\"\nsim = { profile = \"runpod\", leak_p = 0.25, seed = 9 }\n", "t").unwrap();
        let (profile, seed) = c.providers[0].sim_profile().unwrap();
        assert_eq!(profile.leak_p, 0.25);
        assert_eq!(seed, 9);
    }

    #[test]
    fn policy_errors_name_the_policy() {
        let base = "[providers.runpod]\nadapter = \"sim\"\n[providers.modal]\nadapter = \"sim\"\n";
        let e = err(&format!("{base}[policies.p]\nkind = \"cutover\"\nprimary = \"modal\"\nhedge = \"runpod\"\n"));
        assert!(e.contains("key `policies.p`") && e.contains("cannot tell queued from running"), "{e}");
        let e = err(&format!("{base}[policies.p]\nkind = \"hedge\"\nprimary = \"runpod\"\n"));
        assert!(e.contains("policies.p.hedge") && e.contains("required"), "{e}");
        let e = err(&format!("{base}[policies.p]\nkind = \"hedge\"\nprimary = \"runpod\"\nhedge = \"nope\"\n"));
        assert!(e.contains("unknown provider `nope`"), "{e}");
        let e = err(&format!("{base}[policies.p]\nkind = \"single\"\nprovider = \"runpod\"\ndelay_ms = 5\n"));
        assert!(e.contains("policies.p.delay_ms") && e.contains("not used"), "{e}");
        let e = err(&format!("{base}[policies.p]\nkind = \"magic\"\n"));
        assert!(e.contains("policies.p.kind"), "{e}");
    }

    #[test]
    fn unknown_validator_is_a_config_error() {
        let e = err("[validator]\nname = \"psychic\"\n");
        assert!(e.contains("key `validator`") && e.contains("unknown validator `psychic`"), "{e}");
    }

    #[test]
    fn syntax_errors_name_the_file() {
        let e = err("[providers\n");
        assert!(e.starts_with("t.toml: invalid TOML"), "{e}");
    }

    #[test]
    fn budget_stops_are_ordered() {
        let e = err("[budget]\nsoft_stop_usd = 60\nhard_stop_usd = 50\n");
        assert!(e.contains("budget.soft_stop_usd"), "{e}");
        let c = Config::parse("[budget]\nsoft_stop_usd = 1.5\nhard_stop_usd = 2\nledger = \"x.sqlite\"\n", "t").unwrap();
        assert_eq!(c.budget.limits.hard_stop, MicroUsd(2_000_000));
        assert_eq!(c.budget.ledger, Some(PathBuf::from("x.sqlite")));
    }

    #[test]
    fn load_reports_missing_file() {
        let e = Config::load(Path::new("/nonexistent/tailcut.toml")).unwrap_err().to_string();
        assert!(e.starts_with("/nonexistent/tailcut.toml: cannot read"), "{e}");
    }
}
