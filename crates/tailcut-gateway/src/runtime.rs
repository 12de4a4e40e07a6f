//! Gateway state, routing and handlers.

use crate::auth::{authenticate, authorize, may_use};
use crate::error::ApiError;
use crate::metrics::{Metrics, RouteSeries, ATTEMPT_RESULTS};
use crate::probe::Field;
use crate::store::JobStore;
use crate::tenancy::{SlidingHedgeGate, Tenant, TenantGate, TENANT_LEDGER};
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tailcut_config::{spec_providers, Adapter, Config, RouteConfig, RouteKind};
use tailcut_core::engine::{Hedger, Outcome};
use tailcut_core::ledger::{BudgetGate, MemoryLedger, SqliteLedger};
use tailcut_core::policy::Policy;
use tailcut_core::trace::TraceWriter;
use tailcut_core::validate::JsonValidator;
use tailcut_core::{JobRequest, Provider};
use tailcut_providers::openai::{OpenAi, Route};
use tailcut_providers::{HttpClient, Secret};
use tokio::sync::{oneshot, Semaphore};

/// An OpenAI-compatible upstream as the streaming hedger sees it.
#[derive(Debug, Clone)]
pub(crate) struct Upstream {
    pub name: String,
    pub base: String,
    pub model: Option<String>,
    pub key: Option<Secret>,
    /// Plain-HTTP connections for streams (per-thread pools).
    pub plain: tailcut_providers::plain::PlainHttp,
}

pub(crate) struct OpenAiRoute {
    pub cfg: RouteConfig,
    pub chat: (Hedger, Arc<dyn Policy>),
    pub completions: (Hedger, Arc<dyn Policy>),
    pub embeddings: (Hedger, Arc<dyn Policy>),
    pub upstreams: Vec<Upstream>,
    pub gate: Arc<SlidingHedgeGate>,
    pub max_live: usize,
    /// The route's name as a response header value.
    pub route_header: HeaderValue,
    /// Each upstream's name as a response header value (the winner header).
    pub upstream_headers: Vec<(String, HeaderValue)>,
    /// The series every request of this route records.
    pub series: RouteSeries,
    /// The streaming hedger's policy label in traces (`stream:a->b@first-token+500ms`).
    pub stream_policy: String,
    /// A whole reply's headers, per-request values to be filled in (see [`reply_headers`]).
    pub reply_headers: HeaderMap,
}

/// The headers of a route's whole (non-streamed) replies: content type and route fixed,
/// request id, winner, attempts and hedge reason filled in per request.
fn reply_headers(route_header: &HeaderValue) -> HeaderMap {
    let mut h = HeaderMap::with_capacity(8);
    h.insert(axum::http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(names::ROUTE, route_header.clone());
    h.insert(names::REQUEST_ID, HeaderValue::from_static("-"));
    h.insert(names::WINNER, HeaderValue::from_static("-"));
    h.insert(names::ATTEMPTS, HeaderValue::from_static("0"));
    h.insert(names::HEDGE_REASON, HeaderValue::from_static("none"));
    h
}

impl OpenAiRoute {
    /// The winner header's value for an upstream of this route.
    fn upstream_header(&self, name: &str) -> HeaderValue {
        self.upstream_headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .or_else(|| HeaderValue::from_str(name).ok())
            .unwrap_or(HeaderValue::from_static("-"))
    }
}

pub(crate) struct JobRoute {
    pub cfg: RouteConfig,
    pub hedger: Hedger,
    pub policy: Arc<dyn Policy>,
    /// The series every job of this route records.
    pub series: RouteSeries,
}

/// Everything derived from one configuration; swapped whole on reload.
pub(crate) struct Runtime {
    pub config: Config,
    pub tenants: HashMap<String, Arc<Tenant>>,
    pub anonymous: Arc<Tenant>,
    pub models: HashMap<String, Arc<OpenAiRoute>>,
    pub jobs: HashMap<String, Arc<JobRoute>>,
    pub trace: Option<Arc<TraceWriter>>,
    pub http: reqwest::Client,
    /// The ledger every route charges (read for the spend gauges and `/ui`).
    pub budget: Arc<dyn BudgetGate>,
}

/// Shared gateway state.
pub struct AppState {
    config_path: Option<PathBuf>,
    pub(crate) runtime: RwLock<Arc<Runtime>>,
    /// Metrics registry.
    pub metrics: Metrics,
    pub(crate) store: JobStore,
    pub(crate) running: Mutex<HashMap<String, oneshot::Sender<()>>>,
    pub(crate) draining: AtomicBool,
    in_flight: Arc<Semaphore>,
    /// Slots in `in_flight` (`max_in_flight` at start).
    in_flight_limit: usize,
    next_id: AtomicU64,
    /// The body limit of the current configuration (read on every request).
    max_body: AtomicUsize,
    /// Open client connections against the cap (fixed at start).
    pub(crate) connections: crate::connection::Connections,
    /// The last requests, for the status page.
    pub(crate) recent: crate::ui::Recent,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").field("config_path", &self.config_path).finish_non_exhaustive()
    }
}

/// This process's id, read once (`getpid` is a system call on every use).
/// This process's id in hex, as ids carry it.
fn process_hex() -> &'static str {
    static PID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PID.get_or_init(|| format!("{:x}", std::process::id()))
}

/// Whether JSON logs are on (`TAILCUT_LOG=off` turns them off).
fn logging() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("TAILCUT_LOG").map_or(true, |v| v != "off"))
}

/// One JSON log line on stderr. The fields are built only when logging is on, so a
/// silenced gateway pays nothing for them on the request path.
pub(crate) fn log(event: &str, fields: impl FnOnce() -> Value) {
    if !logging() {
        return;
    }
    let mut v = json!({"ts": tailcut_core::trace::now_rfc3339(), "event": event});
    if let (Some(m), Value::Object(f)) = (v.as_object_mut(), fields()) {
        m.extend(f);
    }
    eprintln!("{v}");
}

/// One JSON log line for an event outside a request (e.g. from the `serve` command).
pub fn log_event(event: &str, fields: Value) {
    log(event, || fields);
}

/// An OpenAI-compatible backend for the engine. Its replies are judged by a JSON
/// validator requiring `choices`/`data`, which also rejects non-JSON, so the adapter's
/// own syntax check would only scan each reply twice.
fn openai_backend(name: &str, a: &tailcut_config::remote::RemoteAdapter, route: Route, http: HttpClient) -> Arc<OpenAi> {
    let key = a.key_env.as_deref().and_then(Secret::from_env);
    Arc::new(OpenAi {
        name: name.into(),
        base: a.base.clone(),
        model: a.model.clone(),
        key,
        route,
        stream: false,
        check_json: false,
        http,
        prepared: Default::default(),
    })
}

impl Runtime {
    /// Creates every route's alerting series at zero (see [`RouteSeries::zero`]).
    fn zero_series(&self, m: &Metrics) {
        self.models.values().for_each(|r| r.series.zero(m));
        self.jobs.values().for_each(|r| r.series.zero(m));
        for outcome in ["rejected", "waited"] {
            m.add("tailcut_admission_total", &[("outcome", outcome)], 0.0);
        }
    }

    fn build(config: Config) -> Result<Runtime, String> {
        // No keys only with an explicit `auth = "none"` (also on reload).
        config.gateway.check_serving(&config.source).map_err(|e| e.to_string())?;
        let global: Arc<dyn BudgetGate> = match &config.budget.ledger {
            None => Arc::new(MemoryLedger::new(config.budget.limits)),
            Some(p) => {
                if let Some(parent) = p.parent().filter(|x| !x.as_os_str().is_empty()) {
                    let _ = std::fs::create_dir_all(parent);
                }
                Arc::new(SqliteLedger::open(p, config.budget.limits).map_err(|e| e.to_string())?)
            }
        };
        let budget: Arc<dyn BudgetGate> = Arc::new(TenantGate { global });
        let trace = match &config.trace_path {
            Some(p) => Some(Arc::new(TraceWriter::append(p).map_err(|e| e.to_string())?)),
            None => None,
        };
        let g = &config.gateway;
        // The upstream clients' own timeout is a backstop a second past the total
        // timeout: at the total timeout the race stops itself and cancels its live
        // attempts with receipts, which an exchange timing out in the same instant (and
        // so ending unreceipted) would otherwise race.
        let timeout = g.total_timeout.saturating_add(std::time::Duration::from_secs(1));
        let mut models = HashMap::new();
        let mut jobs = HashMap::new();
        for route in &config.routes {
            let spec = config.policy(&route.policy).ok_or_else(|| format!("route {}: no policy {}", route.name, route.policy))?.clone();
            let gate = Arc::new(SlidingHedgeGate::new(g.hedge_budget_percent, g.hedge_budget_burst));
            match route.kind {
                RouteKind::OpenAi => {
                    let mut upstreams = Vec::new();
                    let mut by_route: HashMap<&'static str, Vec<Provider>> = HashMap::new();
                    for name in spec_providers(&spec) {
                        let p = config.provider(&name).ok_or_else(|| format!("no provider {name}"))?;
                        let Adapter::Remote(a) = &p.adapter else { return Err(format!("provider {name} is not an openai adapter")) };
                        // One client per upstream for its three endpoints and its streams:
                        // one connection pool per serving thread, not four.
                        let http =
                            HttpClient::new(timeout, tailcut_providers::client::RetryPolicy::default()).map_err(|e| e.to_string())?;
                        upstreams.push(Upstream {
                            name: name.clone(),
                            base: a.base.clone(),
                            model: a.model.clone(),
                            key: a.key_env.as_deref().and_then(Secret::from_env),
                            plain: http.plain().clone(),
                        });
                        for (k, r) in [("chat", Route::Chat), ("completions", Route::Completions), ("embeddings", Route::Embeddings)] {
                            let api = openai_backend(&name, a, r, http.clone());
                            by_route.entry(k).or_default().push(Provider { name: name.clone(), api, pricing: p.pricing });
                        }
                    }
                    let mut make = |k: &'static str, required: &[&str]| -> Result<(Hedger, Arc<dyn Policy>), String> {
                        let entries = by_route.remove(k).unwrap_or_default();
                        let validator = Arc::new(JsonValidator::requiring(required));
                        let hedger = Hedger::with_gate(entries, validator, budget.clone(), config.race, trace.clone(), Some(gate.clone()));
                        let policy = spec.build(hedger.providers()).map_err(|e| e.to_string())?;
                        Ok((hedger, policy))
                    };
                    let route_header = HeaderValue::from_str(&route.name).unwrap_or(HeaderValue::from_static("-"));
                    let r = OpenAiRoute {
                        cfg: route.clone(),
                        chat: make("chat", &["choices"])?,
                        completions: make("completions", &["choices"])?,
                        embeddings: make("embeddings", &["data"])?,
                        series: RouteSeries::new(&route.name, upstreams.iter().map(|u| u.name.as_str())),
                        stream_policy: format!(
                            "stream:{}@first-token+{}ms",
                            upstreams.iter().map(|u| u.name.as_str()).collect::<Vec<_>>().join("->"),
                            route.first_token_hedge.as_millis()
                        ),
                        upstream_headers: upstreams
                            .iter()
                            .filter_map(|u| Some((u.name.clone(), HeaderValue::from_str(&u.name).ok()?)))
                            .collect(),
                        upstreams,
                        gate: gate.clone(),
                        max_live: config.race.max_live,
                        reply_headers: reply_headers(&route_header),
                        route_header,
                    };
                    let r = Arc::new(r);
                    for m in &route.models {
                        models.insert(m.clone(), r.clone());
                    }
                }
                RouteKind::Jobs => {
                    let entries = config.live_entries().map_err(|e| e.to_string())?;
                    let validator =
                        tailcut_core::validate::ValidatorRegistry::default().build(&config.validator).map_err(|e| e.to_string())?;
                    let hedger = Hedger::with_gate(entries, validator, budget.clone(), config.race, trace.clone(), Some(gate));
                    let policy = spec.build(hedger.providers()).map_err(|e| e.to_string())?;
                    let series = RouteSeries::new(&route.name, hedger.providers().iter().map(|p| p.name.as_str()));
                    jobs.insert(route.name.clone(), Arc::new(JobRoute { cfg: route.clone(), hedger, policy, series }));
                }
            }
        }
        let tenants = g
            .keys
            .iter()
            .map(|k| {
                (
                    k.sha256.clone(),
                    Arc::new(Tenant { admin: k.admin, ..Tenant::new(&k.name, k.rate_per_s, k.budget_usd, k.routes.clone()) }),
                )
            })
            .collect();
        let http = reqwest::Client::builder().pool_max_idle_per_host(1024).build().map_err(|e| e.to_string())?;
        Ok(Runtime { config, tenants, anonymous: Arc::new(Tenant::new("anonymous", None, None, None)), models, jobs, trace, http, budget })
    }
}

impl AppState {
    /// Builds the state from a configuration (and remembers its path for reloads).
    pub fn new(config: Config, config_path: Option<PathBuf>) -> Result<Arc<AppState>, String> {
        let store = JobStore::open(config.gateway.store.as_deref()).map_err(|e| format!("job store: {e}"))?;
        let interrupted = store.mark_interrupted().map_err(|e| e.to_string())?;
        if interrupted > 0 {
            log("jobs_interrupted", || json!({"count": interrupted}));
        }
        let max = config.gateway.max_in_flight;
        let max_body = AtomicUsize::new(config.gateway.max_body_bytes);
        crate::connection::raise_fd_limit();
        let connections = crate::connection::Connections::new(config.gateway.max_connections);
        let runtime = Runtime::build(config)?;
        let metrics = Metrics::default();
        runtime.zero_series(&metrics);
        Ok(Arc::new(AppState {
            config_path,
            runtime: RwLock::new(Arc::new(runtime)),
            metrics,
            store,
            running: Mutex::new(HashMap::new()),
            draining: AtomicBool::new(false),
            in_flight: Arc::new(Semaphore::new(max)),
            in_flight_limit: max,
            next_id: AtomicU64::new(1),
            max_body,
            connections,
            recent: crate::ui::Recent::default(),
        }))
    }

    /// The head and idle timeouts of the current configuration (a reload applies to new
    /// connections).
    pub(crate) fn connection_limits(&self) -> crate::connection::ConnectionLimits {
        let rt = self.rt();
        crate::connection::ConnectionLimits { header_read: rt.config.gateway.header_read_timeout, idle: rt.config.gateway.idle_timeout }
    }

    pub(crate) fn rt(&self) -> Arc<Runtime> {
        self.runtime.read().map(|r| r.clone()).unwrap_or_else(|e| e.into_inner().clone())
    }

    /// Re-reads the config file and swaps the runtime; in-flight requests keep the old one.
    pub fn reload(&self) -> Result<(), String> {
        let Some(path) = &self.config_path else { return Err("no config file to reload".into()) };
        let config = Config::load(path).map_err(|e| e.to_string())?;
        let max_body = config.gateway.max_body_bytes;
        let runtime = Runtime::build(config)?;
        runtime.zero_series(&self.metrics);
        self.max_body.store(max_body, Ordering::Relaxed);
        if let Ok(mut r) = self.runtime.write() {
            *r = Arc::new(runtime);
        }
        Ok(())
    }

    /// A new id, `{kind}-{pid in hex}-{sequence}`, unique within this process's life.
    fn new_id(&self, kind: &str) -> String {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut id = String::with_capacity(kind.len() + 30);
        id.push_str(kind);
        id.push('-');
        id.push_str(process_hex());
        id.push('-');
        id.push_str(itoa::Buffer::new().format(n));
        id
    }

    fn request_id(&self, headers: &HeaderMap) -> String {
        headers
            .get(names::REQUEST_ID)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty() && v.len() <= 128)
            .map_or_else(|| self.new_id("req"), str::to_string)
    }
}

/// An in-flight slot: at once if one is free, else after waiting up to `wait` (a burst
/// queues briefly instead of failing), else 503.
async fn admit(st: &AppState, wait: Duration) -> Result<tokio::sync::OwnedSemaphorePermit, ApiError> {
    if let Ok(p) = st.in_flight.clone().try_acquire_owned() {
        return Ok(p);
    }
    let full = || {
        st.metrics.inc("tailcut_admission_total", &[("outcome", "rejected")]);
        ApiError::Unavailable("too many requests in flight".into())
    };
    if wait.is_zero() {
        return Err(full());
    }
    let started = std::time::Instant::now();
    match tokio::time::timeout(wait, st.in_flight.clone().acquire_owned()).await {
        Ok(Ok(p)) => {
            st.metrics.inc("tailcut_admission_total", &[("outcome", "waited")]);
            st.metrics.observe("tailcut_admission_wait_seconds", &[], started.elapsed().as_secs_f64());
            Ok(p)
        }
        _ => Err(full()),
    }
}

fn parse_json(body: &Bytes) -> Result<Value, ApiError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| ApiError::BadRequest(format!("body is not valid JSON: {e}")))?;
    if !v.is_object() {
        return Err(ApiError::BadRequest("body must be a JSON object".into()));
    }
    Ok(v)
}

pub(crate) fn hedge_reason(d: &tailcut_core::trace::Decisions) -> &'static str {
    if d.cutover_fired {
        "queued_cutover"
    } else if d.safety_hedge_fired {
        "safety_hedge"
    } else if d.escalation_fired {
        "escalation"
    } else if d.hedge_launched {
        "timer"
    } else {
        "none"
    }
}

/// How an attempt ended, as `tailcut_attempt_results_total` counts it: an index into
/// [`ATTEMPT_RESULTS`] (`valid`, `invalid`, `failed`, `cancelled`, `unresolved`).
fn attempt_result(a: &tailcut_core::trace::AttemptTrace) -> usize {
    use crate::metrics::result;
    use tailcut_core::JobState;
    if a.submit_error.is_some() {
        return result::FAILED;
    }
    match (a.outcome, a.valid) {
        (_, Some(true)) => result::VALID,
        (Some(JobState::Completed), Some(false)) => result::INVALID,
        (Some(JobState::Cancelled), _) => result::CANCELLED,
        (Some(JobState::Failed | JobState::TimedOut | JobState::Unknown), _) | (_, Some(false)) => result::FAILED,
        _ => result::UNRESOLVED,
    }
}

/// Counts a race the ledger refused before its first submission, by the limit that
/// refused it.
pub(crate) fn record_refusal(m: &Metrics, route: &str, e: &tailcut_core::ledger::LedgerError) {
    use tailcut_core::ledger::LedgerError;
    let limit = match e {
        LedgerError::BudgetExceeded { limit_name, .. } => limit_name,
        LedgerError::AccountBudgetExceeded { .. } => "key_budget",
        _ => return,
    };
    m.inc("tailcut_budget_refusals_total", &[("route", route), ("limit", limit)]);
}

/// Counts attempts, wins, hedges, cancels and leaks of a settled request.
pub(crate) fn record_metrics(m: &Metrics, series: &RouteSeries, trace: &tailcut_core::trace::RequestTrace) {
    let route = series.route();
    for a in &trace.attempts {
        let spend = a.projected_cost_micro_usd.0 as f64;
        let result = attempt_result(a);
        match series.upstream(&a.provider) {
            Some(u) => {
                m.add_series(&u.attempts, 1.0);
                m.add_series(&u.spend, spend);
                m.add_series(&u.results[result], 1.0);
            }
            None => {
                let labels = [("route", route), ("provider", a.provider.as_str()), ("result", ATTEMPT_RESULTS[result])];
                m.inc("tailcut_attempt_results_total", &labels);
                m.inc("tailcut_attempts_total", &[("route", route), ("provider", &a.provider)]);
                m.add("tailcut_spend_micro_usd_total", &[("route", route), ("provider", &a.provider)], spend);
            }
        }
    }
    if let Some(w) = &trace.winner {
        match series.upstream(w) {
            Some(u) => m.add_series(&u.wins, 1.0),
            None => m.inc("tailcut_wins_total", &[("route", route), ("provider", w)]),
        }
    }
    if trace.decisions.hedged() {
        m.inc("tailcut_hedges_total", &[("route", route), ("reason", hedge_reason(&trace.decisions))]);
    }
    if trace.decisions.hedges_denied > 0 {
        m.add("tailcut_hedges_denied_total", &[("route", route)], f64::from(trace.decisions.hedges_denied));
    }
    for r in &trace.receipts {
        m.inc("tailcut_cancels_total", &[("route", route), ("evidence", r.evidence.wire())]);
        if r.leaked {
            m.inc("tailcut_leaks_total", &[("route", route)]);
        }
    }
}

/// The gateway's response header names, built at compile time (a name given as a
/// string is parsed and checked on every insert).
pub(crate) mod names {
    use axum::http::HeaderName;
    /// The request id, propagated or generated.
    pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
    /// The upstream whose reply the client got.
    pub const WINNER: HeaderName = HeaderName::from_static("x-tailcut-winner");
    /// Attempts launched for the request.
    pub const ATTEMPTS: HeaderName = HeaderName::from_static("x-tailcut-attempts");
    /// Why a hedge launched (`none` when none did).
    pub const HEDGE_REASON: HeaderName = HeaderName::from_static("x-tailcut-hedge-reason");
    /// The route that served the request.
    pub const ROUTE: HeaderName = HeaderName::from_static("x-tailcut-route");
}

/// Names the request id on a reply built elsewhere than a whole proxied reply (errors,
/// the jobs API), whose headers come from the route's template.
fn with_request_id(mut resp: Response, request_id: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(request_id) {
        resp.headers_mut().insert(names::REQUEST_ID, v);
    }
    resp
}

/// The OpenAI-style endpoints.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// `/v1/chat/completions`.
    Chat,
    /// `/v1/completions`.
    Completions,
    /// `/v1/embeddings`.
    Embeddings,
}

/// Serves one OpenAI-style request, with its metrics, log line and headers.
pub(crate) async fn openai(st: Arc<AppState>, headers: HeaderMap, body: Bytes, ep: Endpoint) -> Response {
    let rid = st.request_id(&headers);
    let started = std::time::Instant::now();
    let result = openai_inner(&st, &headers, body, ep, &rid, started).await;
    let (status, route) = match &result {
        Ok((r, route)) => (r.status(), route.cfg.name.as_str()),
        Err(e) => (e.status(), "-"),
    };
    match &result {
        Ok((_, r)) if status == StatusCode::OK => st.metrics.add_series(&r.series.ok, 1.0),
        _ => st.metrics.inc("tailcut_requests_total", &[("route", route), ("status", status.as_str())]),
    }
    log(
        "request",
        || json!({"request_id": rid, "route": route, "status": status.as_u16(), "ms": started.elapsed().as_secs_f64() * 1000.0}),
    );
    match result {
        Ok((r, _)) => r,
        Err(e) => with_request_id(e.into_response(), &rid),
    }
}

/// Serves one OpenAI-style request; the route that served it comes back with the response.
async fn openai_inner(
    st: &Arc<AppState>,
    headers: &HeaderMap,
    body: Bytes,
    ep: Endpoint,
    rid: &str,
    started: std::time::Instant,
) -> Result<(Response, Arc<OpenAiRoute>), ApiError> {
    if st.draining.load(Ordering::Relaxed) {
        return Err(ApiError::Unavailable("the gateway is draining".into()));
    }
    let rt = st.rt();
    // Who is calling comes first: an unauthenticated caller takes no slot and learns
    // nothing about the models served.
    let tenant = authenticate(&rt, headers)?;
    let permit = admit(st, rt.config.gateway.admission_wait).await?;
    let fields = crate::probe::probe(&body)?;
    let Field::Str(model) = &fields.model else { return Err(ApiError::BadRequest("`model` is required".into())) };
    let route = rt
        .models
        .get(model.as_ref())
        .filter(|r| may_use(&tenant, &r.cfg.name))
        .cloned()
        .ok_or_else(|| ApiError::NotFound(format!("model `{model}` is not served here")))?;
    authorize(&tenant, &route.cfg.name)?;
    match ep {
        Endpoint::Chat if fields.messages != Field::Array => return Err(ApiError::BadRequest("`messages` is required".into())),
        Endpoint::Completions if fields.prompt == Field::Absent => return Err(ApiError::BadRequest("`prompt` is required".into())),
        Endpoint::Embeddings if fields.input == Field::Absent => return Err(ApiError::BadRequest("`input` is required".into())),
        _ => {}
    }
    let stream = fields.stream == Field::Bool(true);
    drop(fields);
    let timeout = rt.config.gateway.total_timeout;
    let ledger = tenant.ledger.clone();
    if stream && ep != Endpoint::Embeddings {
        // An upstream that names its own model gets the body rewritten, from the document.
        let v = if route.upstreams.iter().any(|u| u.model.is_some()) { Some(parse_json(&body)?) } else { None };
        let req = crate::stream::StreamRequest { body: v, raw: body, rid: rid.to_string(), chat: ep == Endpoint::Chat, permit };
        let fut = crate::stream::hedged_stream(st.clone(), rt.clone(), route.clone(), req);
        let resp = tokio::time::timeout(timeout, TENANT_LEDGER.scope(ledger, fut)).await.map_err(|_| ApiError::Timeout)??;
        return Ok((resp, route));
    }
    let (hedger, policy) = match ep {
        Endpoint::Chat => &route.chat,
        Endpoint::Completions => &route.completions,
        Endpoint::Embeddings => &route.embeddings,
    };
    // The body is forwarded as sent unless an adapter must rewrite it.
    let _slot = permit; // held until the response is built
    let request = JobRequest::from_raw(rid, body);
    // The total timeout stops the race itself (its live attempts are cancelled with
    // receipts), on the same timer as the policy's own waits.
    let mut outcome: Outcome = match tokio::time::Instant::from_std(started).checked_add(timeout) {
        Some(stop_at) => TENANT_LEDGER.scope(ledger, hedger.run_by(policy.as_ref(), request, stop_at)).await,
        None => TENANT_LEDGER.scope(ledger, hedger.run(policy.as_ref(), request)).await,
    }
    .map_err(|e| {
        if let tailcut_core::engine::RaceError::Budget(b) = &e {
            record_refusal(&st.metrics, &route.cfg.name, b);
        }
        ApiError::TooMany(format!("refused: {e}"))
    })?;
    // Out of time: the race was stopped at the deadline (the upstream clients' own
    // timeout, a second later, never ends an attempt first).
    let timed_out = outcome.winner.is_none() && outcome.decisions.stopped_by_caller;
    st.metrics.observe_series(&route.series.seconds, started.elapsed().as_secs_f64());
    let (winner, attempts, reason) = (outcome.winner.take(), outcome.attempts, hedge_reason(&outcome.decisions));
    let payload = outcome.result.as_ref().and_then(|r| r.payload.as_ref()).map(|p| p.bytes.clone());
    match outcome.settled.ready() {
        Ok(t) => {
            record_metrics(&st.metrics, &route.series, &t);
            st.recent.record(&route.cfg.name, t);
        }
        Err(pending) => {
            let (st2, route) = (st.clone(), route.clone());
            tokio::spawn(async move {
                if let Some(t) = pending.wait().await {
                    record_metrics(&st2.metrics, &route.series, &t);
                    st2.recent.record(&route.cfg.name, t);
                }
            });
        }
    }
    let Some(bytes) = payload else {
        if timed_out {
            return Err(ApiError::Timeout);
        }
        return Err(ApiError::Upstream(format!("no upstream returned a valid response ({attempts} attempt(s))")));
    };
    // The route's header template, with the per-request values set in place: a copy
    // and a walk instead of hashing six header names into a fresh map.
    let mut h = route.reply_headers.clone();
    for (name, value) in h.iter_mut() {
        if name == names::REQUEST_ID {
            if let Ok(v) = HeaderValue::from_str(rid) {
                *value = v;
            }
        } else if name == names::WINNER {
            if let Some(w) = winner.as_deref() {
                *value = route.upstream_header(w);
            }
        } else if name == names::ATTEMPTS {
            *value = HeaderValue::from(attempts as u64);
        } else if name == names::HEDGE_REASON {
            *value = HeaderValue::from_static(reason);
        }
    }
    let mut resp = Response::new(axum::body::Body::from(bytes));
    *resp.headers_mut() = h;
    Ok((resp, route))
}

async fn chat(State(st): State<Arc<AppState>>, headers: HeaderMap, RequestBody(body): RequestBody) -> Response {
    openai(st, headers, body, Endpoint::Chat).await
}

async fn completions(State(st): State<Arc<AppState>>, headers: HeaderMap, RequestBody(body): RequestBody) -> Response {
    openai(st, headers, body, Endpoint::Completions).await
}

async fn embeddings(State(st): State<Arc<AppState>>, headers: HeaderMap, RequestBody(body): RequestBody) -> Response {
    openai(st, headers, body, Endpoint::Embeddings).await
}

async fn models(State(st): State<Arc<AppState>>, headers: HeaderMap) -> Result<Response, ApiError> {
    let rt = st.rt();
    let tenant = authenticate(&rt, &headers)?;
    let mut data: Vec<Value> = rt
        .models
        .iter()
        .filter(|(_, r)| may_use(&tenant, &r.cfg.name))
        .map(|(m, _)| json!({"id": m, "object": "model", "owned_by": "tailcut"}))
        .collect();
    data.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    Ok(Json(json!({"object": "list", "data": data})).into_response())
}

// === Jobs API ===

struct WaitQuery {
    wait: Option<f64>,
}

impl WaitQuery {
    /// `?wait=SECONDS` (other parameters are ignored); a malformed one is a JSON 400.
    fn parse(query: Option<&str>) -> Result<WaitQuery, ApiError> {
        let mut wait = None;
        for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            if k == "wait" {
                let w = v.parse::<f64>().ok().filter(|w| w.is_finite() && (0.0..=3600.0).contains(w));
                wait = Some(w.ok_or_else(|| ApiError::BadRequest("`wait` must be a number of seconds from 0 to 3600".into()))?);
            }
        }
        Ok(WaitQuery { wait })
    }
}

pub(crate) async fn wait_for(st: &AppState, id: &str, max: Duration) -> Option<crate::store::JobRow> {
    let until = tokio::time::Instant::now() + max;
    loop {
        let row = st.store.get(id).ok().flatten();
        if row.as_ref().is_some_and(|r| r.state != "running") || tokio::time::Instant::now() >= until {
            return row;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn create_job(
    State(st): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    RequestBody(body): RequestBody,
) -> Response {
    let rid = st.request_id(&headers);
    let created = match WaitQuery::parse(query.as_deref()) {
        Ok(q) => create_job_inner(&st, q, &headers, body, &rid).await,
        Err(e) => Err(e),
    };
    match created {
        Ok(r) => with_request_id(r, &rid),
        Err(e) => with_request_id(e.into_response(), &rid),
    }
}

async fn create_job_inner(st: &Arc<AppState>, q: WaitQuery, headers: &HeaderMap, body: Bytes, rid: &str) -> Result<Response, ApiError> {
    if st.draining.load(Ordering::Relaxed) {
        return Err(ApiError::Unavailable("the gateway is draining".into()));
    }
    let rt = st.rt();
    let tenant = authenticate(&rt, headers)?;
    let v = parse_json(&body)?;
    let route = match v.get("route").and_then(Value::as_str) {
        Some(r) => rt.jobs.get(r).cloned().ok_or_else(|| ApiError::NotFound(format!("no jobs route `{r}`")))?,
        None if rt.jobs.len() == 1 => rt.jobs.values().next().cloned().ok_or_else(|| ApiError::NotFound("no jobs route".into()))?,
        None => return Err(ApiError::BadRequest("`route` is required (several jobs routes are configured)".into())),
    };
    let input = v.get("input").cloned().ok_or_else(|| ApiError::BadRequest("`input` is required".into()))?;
    let webhook = match v.get("webhook") {
        None | Some(Value::Null) => None,
        Some(Value::String(url)) => Some(
            crate::webhook::check(url, rt.config.gateway.webhook_allow_private)
                .await
                .map_err(|e| ApiError::BadRequest(format!("`webhook`: {e}")))?,
        ),
        Some(_) => return Err(ApiError::BadRequest("`webhook` must be a URL string".into())),
    };
    authorize(&tenant, &route.cfg.name)?;
    let id = new_job_id().map_err(|e| ApiError::Unavailable(format!("no randomness for a job id: {e}")))?;
    st.store.insert(&id, &route.cfg.name, &tenant.name).map_err(|e| ApiError::Unavailable(format!("job store: {e}")))?;
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    if let Ok(mut r) = st.running.lock() {
        r.insert(id.clone(), stop_tx);
    }
    let (st2, id2, rid2) = (st.clone(), id.clone(), rid.to_string());
    let allow_private = rt.config.gateway.webhook_allow_private;
    tokio::spawn(TENANT_LEDGER.scope(tenant.ledger.clone(), async move {
        let request = JobRequest::new(rid2, input);
        let stop = async move {
            let _ = stop_rx.await;
        };
        let outcome = route.hedger.run_until(route.policy.as_ref(), request, stop).await;
        let (state, result, winner, trace, error) = match outcome {
            Err(e) => {
                if let tailcut_core::engine::RaceError::Budget(b) = &e {
                    record_refusal(&st2.metrics, &route.cfg.name, b);
                }
                ("failed", None, None, None, Some(e.to_string()))
            }
            Ok(o) => {
                let result = o.result.as_ref().and_then(|r| r.payload.as_ref()).map(|p| {
                    serde_json::from_slice(&p.bytes).unwrap_or_else(|_| json!({"bytes": p.bytes.len(), "content_type": p.content_type}))
                });
                let stopped = o.decisions.stopped_by_caller;
                let winner = o.winner.clone();
                let trace = o.settled.wait().await;
                if let Some(t) = &trace {
                    record_metrics(&st2.metrics, &route.series, t);
                    st2.recent.record(&route.cfg.name, t.clone());
                }
                let state = if winner.is_some() {
                    "succeeded"
                } else if stopped {
                    "cancelled"
                } else {
                    "failed"
                };
                (
                    state,
                    result,
                    winner,
                    trace.and_then(|t| serde_json::to_value(t).ok()),
                    (state == "failed").then(|| "no valid result".to_string()),
                )
            }
        };
        let _ = st2.store.finish(&id2, state, result.as_ref(), winner.as_deref(), trace.as_ref(), error.as_deref());
        if let Ok(mut r) = st2.running.lock() {
            r.remove(&id2);
        }
        if let Some(url) = webhook {
            if let Ok(Some(row)) = st2.store.get(&id2) {
                if let Err(e) = crate::webhook::deliver(&url, allow_private, &row.to_json()).await {
                    log("webhook_failed", || json!({"job": id2, "error": e.to_string()}));
                }
            }
        }
    }));
    match q.wait {
        Some(w) if w > 0.0 => {
            let row = wait_for(st, &id, Duration::from_secs_f64(w.min(3600.0))).await;
            let row = row.ok_or_else(|| ApiError::NotFound(id.clone()))?;
            let code = if row.state == "running" { StatusCode::ACCEPTED } else { StatusCode::OK };
            Ok((code, Json(row.to_json())).into_response())
        }
        _ => Ok((StatusCode::ACCEPTED, Json(json!({"id": id, "state": "running"}))).into_response()),
    }
}

async fn get_job(State(st): State<Arc<AppState>>, headers: HeaderMap, Path(id): Path<String>) -> Result<Response, ApiError> {
    let row = owned_job(&st, &headers, &id)?;
    Ok(Json(row.to_json()).into_response())
}

/// The caller's job `id`: 401 without a valid key, 404 when it is missing or another
/// tenant's (the same answer, so a job's existence is never revealed).
fn owned_job(st: &AppState, headers: &HeaderMap, id: &str) -> Result<crate::store::JobRow, ApiError> {
    let tenant = authenticate(&st.rt(), headers)?;
    st.store
        .get_owned(id, &tenant.name)
        .map_err(|e| ApiError::Unavailable(format!("job store: {e}")))?
        .ok_or_else(|| ApiError::NotFound(format!("no job `{id}`")))
}

/// Cancels a running job of the caller's (every live attempt stopped, with receipts) and
/// returns it; a finished job is returned as it is, a missing or foreign one is a 404 at
/// once.
async fn delete_job(State(st): State<Arc<AppState>>, headers: HeaderMap, Path(id): Path<String>) -> Result<Response, ApiError> {
    let row = owned_job(&st, &headers, &id)?;
    if row.state != "running" {
        return Ok(Json(row.to_json()).into_response());
    }
    let stop = st.running.lock().ok().and_then(|mut r| r.remove(&id));
    if let Some(tx) = stop {
        let _ = tx.send(());
    }
    let row = wait_for(&st, &id, Duration::from_secs(60)).await.ok_or_else(|| ApiError::NotFound(format!("no job `{id}`")))?;
    Ok(Json(row.to_json()).into_response())
}

/// A job id: `job-` and 128 random bits in hex, so ids cannot be guessed or enumerated.
fn new_job_id() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    let mut id = String::with_capacity(4 + 32);
    id.push_str("job-");
    for b in bytes {
        id.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        id.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
    }
    Ok(id)
}

async fn healthz() -> Response {
    Json(json!({"status": "ok"})).into_response()
}

async fn readyz(State(st): State<Arc<AppState>>) -> Response {
    if st.draining.load(Ordering::Relaxed) {
        return (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"status": "draining"}))).into_response();
    }
    Json(json!({"status": "ready", "routes": st.rt().config.routes.len()})).into_response()
}

async fn metrics(State(st): State<Arc<AppState>>) -> Response {
    let mut text = st.metrics.render();
    let limit = st.in_flight_limit;
    let in_flight = limit.saturating_sub(st.in_flight.available_permits());
    text.push_str(&format!(
        "# TYPE tailcut_in_flight gauge\ntailcut_in_flight {in_flight}\n# TYPE tailcut_in_flight_limit gauge\ntailcut_in_flight_limit {limit}\n"
    ));
    text.push_str(&format!(
        "# TYPE tailcut_connections gauge\ntailcut_connections {}\n# TYPE tailcut_connections_limit gauge\ntailcut_connections_limit {}\n",
        st.connections.open(),
        st.connections.cap()
    ));
    crate::budgets::write_gauges(&st.rt(), &mut text);
    ([("content-type", "text/plain; version=0.0.4")], text).into_response()
}

async fn method_not_allowed() -> Response {
    ApiError::MethodNotAllowed.into_response()
}

async fn not_found() -> Response {
    ApiError::NotFound("no such route".into()).into_response()
}

/// Reads a request body within `max_body_bytes` (the current configuration's: a reload
/// applies at once); over it (declared or streamed), an OpenAI-style 413, and any other
/// read failure a 400, both as JSON bodies.
pub(crate) async fn read_body<B>(st: &AppState, headers: &HeaderMap, body: B) -> Result<Bytes, ApiError>
where
    B: axum::body::HttpBody<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let limit = st.rt().config.gateway.body_read_timeout;
    // A body already here is read without a timer; one that dribbles in must be whole
    // within the body timeout.
    match tokio::time::timeout(limit, read_body_within_limit(st, headers, body)).await {
        Ok(read) => read,
        Err(_) => Err(ApiError::BodyTimeout(limit.as_secs())),
    }
}

async fn read_body_within_limit<B>(st: &AppState, headers: &HeaderMap, body: B) -> Result<Bytes, ApiError>
where
    B: axum::body::HttpBody<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    use http_body_util::BodyExt;
    let max = st.max_body.load(Ordering::Relaxed);
    let declared = headers.get(axum::http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > max) {
        return Err(ApiError::TooLarge(max));
    }
    // A body that arrives as one frame (most: it came with the head) is kept as it is;
    // only a body in pieces is copied into one buffer.
    let mut body = body;
    let mut whole: Option<Bytes> = None;
    let mut pieces = bytes::BytesMut::new();
    let mut len = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::BadRequest(format!("could not read the request body: {e}")))?;
        let Ok(data) = frame.into_data() else { continue }; // trailers
        len += data.len();
        if len > max {
            return Err(ApiError::TooLarge(max));
        }
        match whole.take() {
            None if pieces.is_empty() => whole = Some(data),
            first => {
                if let Some(first) = first {
                    pieces.extend_from_slice(&first);
                }
                pieces.extend_from_slice(&data);
            }
        }
        if axum::body::HttpBody::is_end_stream(&body) {
            break;
        }
    }
    Ok(whole.unwrap_or_else(|| pieces.freeze()))
}

/// A request body, read by [`read_body`].
pub(crate) struct RequestBody(pub Bytes);

impl axum::extract::FromRequest<Arc<AppState>> for RequestBody {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, st: &Arc<AppState>) -> Result<Self, ApiError> {
        let (parts, body) = req.into_parts();
        read_body(st, &parts.headers, body).await.map(RequestBody)
    }
}

/// The gateway's routes.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .route("/v1/embeddings", post(embeddings))
        .route("/v1/models", get(models))
        .route("/v1/jobs", post(create_job))
        .route("/v1/jobs/{id}", get(get_job).delete(delete_job))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/ui", get(crate::ui::page))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
}
