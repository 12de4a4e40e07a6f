//! `[gateway]` and `[routes.NAME]`: what `tailcut serve` listens on, who may call it,
//! and which route (policy and providers) a request selects.

use crate::bounds::{self, Lo, MAX_USD, WEEK_S};
use crate::context::Ctx;
use crate::error::ConfigError;
use crate::policy::{spec_providers, PolicySpec};
use crate::provider::ProviderConfig;
use std::path::PathBuf;
use std::time::Duration;

/// The largest per-key cap on running jobs (`max_in_flight`'s own ceiling).
const MAX_RUNNING_JOBS: i64 = 10_000_000;

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
    /// Whether whole proxied calls are served by the hand-written HTTP/1.1 fast path
    /// (`fast_path = true`, the default) or every request by hyper (`false`).
    pub fast_path: bool,
    /// Most client connections at once; None derives it from the open-file limit at start.
    pub max_connections: Option<usize>,
    /// Most jobs one key may have running at once, for keys that set no
    /// `max_running_jobs` of their own (and for every caller with `auth = "none"`); None:
    /// only `max_in_flight` bounds them.
    pub max_running_jobs_per_key: Option<usize>,
    /// How long a drain (SIGTERM) waits for in-flight races, their loser cancels and
    /// receipts before it writes the trace and saves models regardless.
    pub drain_timeout: Duration,
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
    /// Most jobs this key may have running at once (None: `max_running_jobs_per_key`).
    pub max_running_jobs: Option<usize>,
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
    /// Streaming: launch the next provider if no first token by then.
    pub first_token_hedge: Duration,
}

pub(crate) fn gateway(cx: &Ctx<'_>, raw: Option<toml::Table>) -> Result<GatewayConfig, ConfigError> {
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
        let max_running_jobs = match key.max_running_jobs {
            None => None,
            m => Some(cx.int(&at("max_running_jobs"), m, 0, 1, MAX_RUNNING_JOBS, "jobs")? as usize),
        };
        keys.push(ApiKey {
            name: key.name,
            sha256: hex,
            budget_usd,
            rate_per_s,
            routes: key.routes,
            admin: key.admin.unwrap_or(false),
            max_running_jobs,
        });
    }
    let hedge_budget_percent =
        cx.float(&k("hedge_budget_percent"), g.hedge_budget_percent, 10.0, Lo::Incl(0.0), 1000.0, "percent of requests")?;
    let max_connections = match g.max_connections {
        None => None,
        m => Some(cx.int(&k("max_connections"), m, 0, 1, 10_000_000, "connections")? as usize),
    };
    let max_running_jobs_per_key = match g.max_running_jobs_per_key {
        None => None,
        m => Some(cx.int(&k("max_running_jobs_per_key"), m, 0, 1, MAX_RUNNING_JOBS, "jobs")? as usize),
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
        fast_path: g.fast_path.unwrap_or(true),
        max_connections,
        max_running_jobs_per_key,
        drain_timeout: cx.seconds(&k("drain_timeout_s"), g.drain_timeout_s, 30.0, Lo::Excl(0.0), 3600.0)?,
    })
}

/// Reads `[routes]`: each route's kind, policy and models (an OpenAI route only over
/// OpenAI-compatible providers, a model on one route only); then checks that every
/// key's route list names configured routes.
pub(crate) fn routes(
    cx: &Ctx<'_>,
    raw: toml::Table,
    policies: &[(String, PolicySpec)],
    providers: &[ProviderConfig],
    gateway: &GatewayConfig,
) -> Result<Vec<RouteConfig>, ConfigError> {
    let mut routes = Vec::new();
    for (name, value) in raw {
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
                let ok = providers.iter().find(|x: &&ProviderConfig| x.name == p).is_some_and(|x| x.openai().is_some());
                if !ok {
                    return Err(cx.err(
                        format!("{key}.policy"),
                        format!("provider `{p}` of policy `{}` is not an OpenAI-compatible provider (adapter = \"openai\")", r.policy),
                    ));
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
                return Err(
                    cx.err(format!("{key}.models"), format!("model `{m}` is already served by route `{other}`: a model selects one route"))
                );
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
                    format!("no route `{r}` in [routes] (configured: {})", if known.is_empty() { "none".into() } else { known.join(", ") }),
                ));
            }
        }
    }
    Ok(routes)
}
