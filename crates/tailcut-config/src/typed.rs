//! Stage two: validated, typed configuration, and construction of engine objects.

use crate::bounds::{self, Lo, MAX_USD, MAX_USD_PER_S, WEEK_MS, WEEK_S};
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
use tailcut_core::{MicroUsd, Pricing, Provider, RateNanoUsdPerSec};
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
    /// Whether callers must present a key (`auth = "keys"`, the default) or no route is
    /// authenticated (`auth = "none"`, which must be chosen explicitly).
    pub auth: AuthMode,
    /// API keys (with `auth = "keys"`: at least one is needed to serve).
    pub keys: Vec<ApiKey>,
    /// Whether job webhooks may target loopback, private, link-local or metadata addresses.
    pub webhook_allow_private: bool,
    /// Longest time a client may take to send a request's head.
    pub header_read_timeout: Duration,
    /// Longest time a client may take to send a request's body.
    pub body_read_timeout: Duration,
    /// How long an idle keep-alive connection is kept open.
    pub idle_timeout: Duration,
    /// Most client connections at once; None derives it from the open-file limit at start.
    pub max_connections: Option<usize>,
}

/// Who may call the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthMode {
    /// Every request needs a configured key (`Authorization: Bearer KEY`).
    #[default]
    Keys,
    /// No authentication: every route is open to anyone who can reach the listener.
    None,
}

impl AuthMode {
    /// The config spelling.
    pub fn name(self) -> &'static str {
        match self {
            AuthMode::Keys => "keys",
            AuthMode::None => "none",
        }
    }
}

impl GatewayConfig {
    /// Whether this gateway may start serving: with `auth = "keys"` (the default) it
    /// needs at least one key, because an empty key list used to mean "no
    /// authentication" silently. `file` names the configuration in the error.
    pub fn check_serving(&self, file: &str) -> Result<(), ConfigError> {
        if self.auth == AuthMode::Keys && self.keys.is_empty() {
            return Err(ConfigError::invalid(
                file,
                "gateway.keys",
                "no API keys configured and `gateway.auth` is \"keys\" (the default): add a key \
                 (`keys = [{ name = \"team-a\", sha256 = \"...\" }]`, sha256 from `printf %s KEY | sha256sum`) \
                 or serve without authentication by setting `auth = \"none\"` in [gateway]",
            ));
        }
        Ok(())
    }

    /// The start-up warning for an unauthenticated gateway, if it is one.
    pub fn auth_warning(&self) -> Option<String> {
        (self.auth == AuthMode::None).then(|| {
            "warning: [gateway] auth = \"none\": every route is unauthenticated; anyone who can reach the gateway can use it and spend its budget"
                .to_string()
        })
    }
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
    /// May open the gateway's status page (`/ui`: every route, key budget and recent
    /// request).
    pub admin: bool,
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

    fn float(&self, key: &str, v: Option<f64>, default: f64, lo: Lo, hi: f64, unit: &str) -> Result<f64, ConfigError> {
        bounds::float(self.file, key, v, default, lo, hi, unit)
    }

    fn seconds(&self, key: &str, v: Option<f64>, default: f64, lo: Lo, hi: f64) -> Result<Duration, ConfigError> {
        bounds::seconds(self.file, key, v, default, lo, hi)
    }

    fn int(&self, key: &str, v: Option<i64>, default: i64, lo: i64, hi: i64, unit: &str) -> Result<i64, ConfigError> {
        bounds::int(self.file, key, v, default, lo, hi, unit)
    }

    /// A policy or route timer: 0 to one week in milliseconds.
    fn millis(&self, key: &str, v: Option<i64>, default: u64) -> Result<Duration, ConfigError> {
        bounds::millis(self.file, key, v, default.min(WEEK_MS as u64) as i64, 0, WEEK_MS)
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

        let max_live = cx.int("race.max_live", raw.race.max_live, 2, 1, 64, "attempts")? as usize;
        let race = RaceSettings { max_live, cap: cx.seconds("race.cap_s", raw.race.cap_s, 300.0, Lo::Excl(0.0), WEEK_S)? };

        let soft = cx.float("budget.soft_stop_usd", raw.budget.soft_stop_usd, 45.0, Lo::Incl(0.0), MAX_USD, "dollars")?;
        let hard = cx.float("budget.hard_stop_usd", raw.budget.hard_stop_usd, 50.0, Lo::Incl(0.0), MAX_USD, "dollars")?;
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
        let entries: Vec<Provider> = providers.iter().map(ProviderConfig::entry).collect();

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
                .map(|x| u32::try_from(x).ok().filter(|x| *x > 0 && f64::from(*x) <= WEEK_S))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| cx.err("replay.deadlines_s", format!("expected whole seconds from 1 to {WEEK_S}")))?,
        };
        let delays_s = match raw.replay.delays_s {
            None => d.delays_s,
            Some(v) => {
                for (i, x) in v.iter().enumerate() {
                    cx.float(&format!("replay.delays_s[{i}]"), Some(*x), 0.0, Lo::Incl(0.0), WEEK_S, "seconds")?;
                }
                v
            }
        };
        let calibration_rounds =
            cx.int("replay.calibration_rounds", raw.replay.calibration_rounds, d.calibration_rounds as i64, 0, i64::from(u32::MAX), "")?
                as u64;
        let cap = cx.float("replay.cap_s", raw.replay.cap_s, d.cap_s, Lo::Incl(0.0), WEEK_S, "seconds")?;
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
            for (i, m) in r.models.iter().enumerate() {
                let earlier = routes.iter().find(|x: &&RouteConfig| x.models.contains(m)).map(|x| x.name.as_str());
                let earlier = earlier.or_else(|| r.models[..i].contains(m).then_some(name.as_str()));
                if let Some(other) = earlier {
                    return Err(cx.err(
                        format!("{key}.models"),
                        format!("model `{m}` is already served by route `{other}`: a model selects one route"),
                    ));
                }
            }
            routes.push(RouteConfig { name, kind, models: r.models, policy: r.policy, first_token_hedge });
        }
        for (i, k) in gateway.keys.iter().enumerate() {
            for r in k.routes.iter().flatten() {
                if !routes.iter().any(|x| x.name == *r) {
                    let known: Vec<&str> = routes.iter().map(|x| x.name.as_str()).collect();
                    return Err(cx.err(
                        format!("gateway.keys[{i}].routes"),
                        format!(
                            "no route `{r}` in [routes] (configured: {})",
                            if known.is_empty() { "none".into() } else { known.join(", ") }
                        ),
                    ));
                }
            }
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

    /// Checks that every file the configuration writes can be written: the ledger, the
    /// trace and (`gateway`: for `tailcut serve`) the job store. A file that does not exist
    /// yet needs its nearest existing parent directory to be writable (missing
    /// directories are created at start); SQLite files also need their directory writable
    /// for their journal. Nothing is created or changed.
    pub fn check_writable(&self, gateway: bool) -> Result<(), ConfigError> {
        let mut files: Vec<(&str, &Path)> = Vec::new();
        if let Some(p) = &self.budget.ledger {
            files.push(("budget.ledger", p));
        }
        if let Some(p) = &self.trace_path {
            files.push(("trace.path", p));
        }
        if gateway {
            if let Some(p) = &self.gateway.store {
                files.push(("gateway.store", p));
            }
        }
        files.into_iter().try_for_each(|(key, path)| self.writable(key, path))
    }

    /// Checks that the ledger file (if any) can be written (see [`Config::check_writable`]).
    pub fn check_ledger_writable(&self) -> Result<(), ConfigError> {
        self.budget.ledger.as_deref().map_or(Ok(()), |p| self.writable("budget.ledger", p))
    }

    fn writable(&self, key: &str, path: &Path) -> Result<(), ConfigError> {
        crate::paths::writable(path).map_err(|why| ConfigError::invalid(&self.source, key, format!("`{}`: {why}", path.display())))
    }

    /// Engine provider entries, in file order (credentials not required).
    pub fn provider_entries(&self) -> Vec<Provider> {
        self.providers.iter().map(ProviderConfig::entry).collect()
    }

    /// Engine provider entries for live use: every paid provider's credential must resolve.
    pub fn live_entries(&self) -> Result<Vec<Provider>, ConfigError> {
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
    let k = |name: &str| format!("gateway.{name}");
    let auth = match g.auth.as_deref() {
        None | Some("keys") => AuthMode::Keys,
        Some("none") => AuthMode::None,
        Some(other) => return Err(cx.err(k("auth"), format!("`{other}`: expected \"keys\" or \"none\""))),
    };
    if auth == AuthMode::None && !g.keys.is_empty() {
        return Err(cx.err(k("auth"), "\"none\" turns authentication off, yet keys are configured: remove `auth` or the keys"));
    }
    let mut keys: Vec<ApiKey> = Vec::new();
    for (i, key) in g.keys.into_iter().enumerate() {
        let at = |field: &str| format!("gateway.keys[{i}].{field}");
        let hex = key.sha256.to_ascii_lowercase();
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(cx.err(at("sha256"), "expected 64 hex digits (sha256 of the key: `printf %s KEY | sha256sum`)"));
        }
        if key.name.trim().is_empty() {
            return Err(cx.err(at("name"), "expected a non-empty name (per-key spend is kept under it)"));
        }
        if let Some(j) = keys.iter().position(|other| other.sha256 == hex) {
            return Err(cx.err(at("sha256"), format!("the same key as gateway.keys[{j}] (`{}`): each key must be distinct", keys[j].name)));
        }
        if let Some(j) = keys.iter().position(|other| other.name == key.name) {
            return Err(cx.err(at("name"), format!("`{}` is already gateway.keys[{j}]'s name: per-key spend is kept by name", key.name)));
        }
        // NaN would turn a limit off; zero or less would lock the key out for good.
        let budget_usd = match key.budget_usd {
            None => None,
            b => Some(cx.float(&at("budget_usd"), b, 0.0, Lo::Excl(0.0), MAX_USD, "dollars")?),
        };
        let rate_per_s = match key.rate_per_s {
            None => None,
            r => Some(cx.float(&at("rate_per_s"), r, 0.0, Lo::Excl(0.0), 1e6, "requests per second")?),
        };
        if key.routes.as_ref().is_some_and(Vec::is_empty) {
            return Err(cx.err(at("routes"), "expected at least one route name (leave `routes` out to allow every route)"));
        }
        keys.push(ApiKey { name: key.name, sha256: hex, budget_usd, rate_per_s, routes: key.routes, admin: key.admin.unwrap_or(false) });
    }
    let hedge_budget_percent =
        cx.float(&k("hedge_budget_percent"), g.hedge_budget_percent, 10.0, Lo::Incl(0.0), 1000.0, "percent of requests")?;
    let max_connections = match g.max_connections {
        None => None,
        m => Some(cx.int(&k("max_connections"), m, 0, 1, 10_000_000, "connections")? as usize),
    };
    Ok(GatewayConfig {
        listen: g.listen.unwrap_or_else(|| "127.0.0.1:8080".into()),
        max_body_bytes: cx.int(&k("max_body_bytes"), g.max_body_bytes, 1 << 20, 1, 1 << 30, "bytes")? as usize,
        max_in_flight: cx.int(&k("max_in_flight"), g.max_in_flight, 10_000, 1, 10_000_000, "requests")? as usize,
        admission_wait: bounds::millis(cx.file, &k("admission_wait_ms"), g.admission_wait_ms, 5000, 0, 600_000)?,
        total_timeout: cx.seconds(&k("total_timeout_s"), g.total_timeout_s, 300.0, Lo::Excl(0.0), WEEK_S)?,
        job_retention: cx.seconds(&k("job_retention_s"), g.job_retention_s, 86_400.0, Lo::Excl(0.0), 30.0 * 86_400.0)?,
        store: match g.store.as_deref() {
            None => Some(PathBuf::from(".tailcut/gateway.sqlite")),
            Some(":memory:") => None,
            Some("") => return Err(cx.err(k("store"), "expected a file path or \":memory:\"")),
            Some(p) => Some(PathBuf::from(p)),
        },
        hedge_budget_percent,
        hedge_budget_burst: cx.int(&k("hedge_budget_burst"), g.hedge_budget_burst, 10, 1, 1_000_000, "attempts")? as u32,
        auth,
        keys,
        webhook_allow_private: g.webhook_allow_private.unwrap_or(false),
        header_read_timeout: cx.seconds(&k("header_read_timeout_s"), g.header_read_timeout_s, 10.0, Lo::Excl(0.0), 3600.0)?,
        body_read_timeout: cx.seconds(&k("body_read_timeout_s"), g.body_read_timeout_s, 30.0, Lo::Excl(0.0), 3600.0)?,
        idle_timeout: cx.seconds(&k("idle_timeout_s"), g.idle_timeout_s, 60.0, Lo::Excl(0.0), 86_400.0)?,
        max_connections,
    })
}

impl ProviderConfig {
    /// Builds the engine entry (for `sim`, a fresh simulator with its seed). HTTP
    /// adapters are built without requiring credentials (for validation and dry runs).
    pub fn entry(&self) -> Provider {
        match self.try_entry("<config>", false) {
            Ok(e) => e,
            Err(_) => Provider {
                name: self.name.clone(),
                api: Arc::new(SimBackend::new(&self.name, SimProfile::instant(), 0)),
                pricing: self.pricing,
            },
        }
    }

    /// Builds the engine entry; with `strict`, a paid provider's missing credential is an error.
    pub fn try_entry(&self, file: &str, strict: bool) -> Result<Provider, ConfigError> {
        let api: Arc<dyn tailcut_core::ProviderApi> = match &self.adapter {
            Adapter::Sim { profile, seed } => Arc::new(SimBackend::new(&self.name, profile.as_ref().clone(), *seed)),
            Adapter::Remote(r) => r.backend(file, &format!("providers.{}", self.name), &self.name, self.pricing.rate, strict)?,
        };
        Ok(Provider { name: self.name.clone(), api, pricing: self.pricing })
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

/// A provider's billed rate, idle window and expected run (with their float forms).
fn pricing(cx: &Ctx<'_>, key: &str, raw: &RawProvider, rate: f64, idle: f64) -> Result<(Pricing, f64, f64), ConfigError> {
    let rate = cx.float(&format!("{key}.rate_usd_per_s"), raw.rate_usd_per_s, rate, Lo::Incl(0.0), MAX_USD_PER_S, "dollars per second")?;
    let idle_key = format!("{key}.idle_window_s");
    let idle = cx.float(&idle_key, raw.idle_window_s, idle, Lo::Incl(0.0), WEEK_S, "seconds")?;
    let idle_window = cx.seconds(&idle_key, Some(idle), idle, Lo::Incl(0.0), WEEK_S)?;
    let expected_run = cx.seconds(&format!("{key}.expected_run_s"), raw.expected_run_s, 30.0, Lo::Incl(0.0), WEEK_S)?;
    let pricing = Pricing { rate: RateNanoUsdPerSec::from_usd_per_s(rate), idle_window, expected_run };
    Ok((pricing, rate, idle))
}

fn provider(cx: &Ctx<'_>, name: &str, value: toml::Value) -> Result<ProviderConfig, ConfigError> {
    let key = format!("providers.{name}");
    let mut raw: RawProvider = cx.typed(&key, value)?;
    if let Some(remote) = crate::remote::parse(cx.file, &key, &raw)? {
        let (pricing, rate, idle) = pricing(cx, &key, &raw, 0.0, 0.0)?;
        return Ok(ProviderConfig {
            name: name.to_string(),
            pricing,
            rate_usd_per_s: rate,
            idle_window_s: idle,
            adapter: Adapter::Remote(Box::new(remote)),
        });
    }
    let adapter = match raw.adapter.as_str() {
        "sim" => {
            let mut table = raw.sim.take().unwrap_or_default();
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
            profile.validate().map_err(|e| match e {
                tailcut_sim::ProfileError::Invalid { key: k, expected } => cx.err(format!("{key}.sim.{k}"), expected),
                other => cx.err(format!("{key}.sim"), other.to_string()),
            })?;
            Adapter::Sim { profile: Box::new(profile), seed }
        }
        other => {
            return Err(cx.err(format!("{key}.adapter"), format!("unknown adapter `{other}`; this build supports: sim")));
        }
    };
    let Adapter::Sim { profile, .. } = &adapter else {
        return Err(cx.err(format!("{key}.adapter"), "internal: expected the simulator"));
    };
    let (pricing, rate, idle) = pricing(cx, &key, &raw, profile.rate_usd_per_s, profile.idle_window_s)?;
    Ok(ProviderConfig { name: name.to_string(), pricing, rate_usd_per_s: rate, idle_window_s: idle, adapter })
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
        assert!(e.contains("expected a number from 0 to 1000 dollars per second, got -1"), "{e}");
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
