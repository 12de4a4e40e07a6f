//! Gateway state: the [`Runtime`] built from one configuration (tenants, routes with
//! their hedgers and policies, the trace writer), swapped whole on reload, and the
//! [`AppState`] that lives as long as the process (metrics, job store, in-flight slots,
//! connections, ids).

use crate::learning::{LiveModel, LiveModels, ModelStore};
use crate::metrics::{Metrics, RouteSeries};
use crate::observe::{log, names};
use crate::store::JobStore;
use crate::tenancy::{SlidingHedgeGate, Tenant};
use axum::http::{HeaderMap, HeaderValue};
use serde_json::json;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tailcut_config::{spec_providers, Config, LearnedSpec, RouteConfig, RouteKind};
use tailcut_core::engine::Hedger;
use tailcut_core::ledger::{BudgetGate, MemoryLedger};
use tailcut_core::policy::first_token::FirstTokenHedge;
use tailcut_core::policy::Policy;
use tailcut_core::stream::FirstEvent;
use tailcut_core::trace::TraceWriter;
use tailcut_core::validate::JsonValidator;
use tailcut_core::Provider;
use tailcut_providers::openai::{Endpoint, Reader};
use tailcut_providers::HttpClient;
use tailcut_state::ledger::SqliteLedger;
use tokio::sync::{oneshot, Semaphore};

mod error;
mod routes;
pub use error::SetupError;
use routes::Shared;

/// A policy and the hedger it drives: how one kind of request of a route is raced.
pub(crate) struct Raced {
    pub hedger: Hedger,
    pub policy: Arc<dyn Policy>,
    /// The live model, when the policy learns: fed every settled race of this slot.
    pub learned: Option<Arc<LiveModel>>,
}

/// An `openai` route: its providers raced per endpoint, whole replies and streams.
pub(crate) struct OpenAiRoute {
    pub cfg: RouteConfig,
    pub chat: Raced,
    pub completions: Raced,
    pub embeddings: Raced,
    /// Streamed chat completions: stream providers under the first-token hedge chain.
    pub chat_stream: Raced,
    /// Streamed text completions.
    pub completions_stream: Raced,
    /// Each provider's name as a response header value (the winner header).
    pub provider_headers: Vec<(String, HeaderValue)>,
    /// The series every request of this route records.
    pub series: RouteSeries,
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
    /// The winner header's value for a provider of this route.
    pub(crate) fn provider_header(&self, name: &str) -> HeaderValue {
        self.provider_headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .or_else(|| HeaderValue::from_str(name).ok())
            .unwrap_or(HeaderValue::from_static("-"))
    }

    /// How a request to `endpoint` is raced, streamed or not (embeddings never stream).
    pub(crate) fn raced(&self, endpoint: Endpoint, stream: bool) -> &Raced {
        match (endpoint, stream) {
            (Endpoint::Chat, false) => &self.chat,
            (Endpoint::Chat, true) => &self.chat_stream,
            (Endpoint::Completions, false) => &self.completions,
            (Endpoint::Completions, true) => &self.completions_stream,
            (Endpoint::Embeddings, _) => &self.embeddings,
        }
    }
}

impl AsRef<RouteSeries> for OpenAiRoute {
    fn as_ref(&self) -> &RouteSeries {
        &self.series
    }
}

/// A `jobs` route.
pub(crate) struct JobRoute {
    pub cfg: RouteConfig,
    pub hedger: Hedger,
    pub policy: Arc<dyn Policy>,
    /// The live model, when the policy learns.
    pub learned: Option<Arc<LiveModel>>,
    /// The series every job of this route records.
    pub series: RouteSeries,
}

impl AsRef<RouteSeries> for JobRoute {
    fn as_ref(&self) -> &RouteSeries {
        &self.series
    }
}

/// Everything derived from one configuration; swapped whole on reload.
pub(crate) struct Runtime {
    pub config: Config,
    pub tenants: HashMap<String, Arc<Tenant>>,
    pub anonymous: Arc<Tenant>,
    pub models: HashMap<String, Arc<OpenAiRoute>>,
    pub jobs: HashMap<String, Arc<JobRoute>>,
    /// The global ledger every route charges (read for the spend gauges and `/ui`).
    pub budget: Arc<dyn BudgetGate>,
    /// The learned policies of every route (saved, exported on `/metrics`).
    pub learned: LiveModels,
}

impl Runtime {
    fn build(
        config: Config,
        store: &Arc<JobStore>,
        pg: Option<&SharedState>,
        models: Arc<dyn ModelStore>,
        tasks: &crate::tasks::Tasks,
    ) -> Result<Runtime, SetupError> {
        // No keys only with an explicit `auth = "none"` (also on reload).
        config.gateway.check_serving(&config.source)?;
        let global: Arc<dyn BudgetGate> = match (&config.budget.ledger, pg) {
            #[cfg(feature = "postgres")]
            (_, Some(pg)) => Arc::new(tailcut_state::ledger::PgLedger::new(pg.clone(), config.budget.limits)),
            #[cfg(not(feature = "postgres"))]
            (_, Some(_)) => return Err(SetupError::NoPostgres),
            (None, None) => Arc::new(MemoryLedger::new(config.budget.limits)),
            (Some(p), None) => {
                if let Some(parent) = p.parent().filter(|x| !x.as_os_str().is_empty()) {
                    let _ = std::fs::create_dir_all(parent);
                }
                Arc::new(SqliteLedger::open(p, config.budget.limits)?)
            }
        };
        let trace = match &config.trace_path {
            Some(p) => Some(Arc::new(TraceWriter::append(p)?)),
            None => None,
        };
        let replicas = live_replicas(pg);
        let shared = Shared {
            config: &config,
            store,
            replicas: replicas.clone(),
            budget: global.clone(),
            trace,
            // The provider clients' own timeout is a backstop a second past the total
            // timeout: at the total timeout the race stops itself and cancels its live
            // attempts with receipts, which an exchange timing out in the same instant
            // (and so ending unreceipted) would otherwise race.
            timeout: config.gateway.total_timeout.saturating_add(Duration::from_secs(1)),
            tls: reqwest::Client::builder().pool_max_idle_per_host(1024).build()?,
            learned: RefCell::new(LiveModels::new(models)),
            tasks: tasks.tracker.clone(),
        };
        let mut models = HashMap::new();
        let mut jobs = HashMap::new();
        for route in &config.routes {
            let spec = config
                .policy(&route.policy)
                .ok_or_else(|| SetupError::NoPolicy { route: route.name.clone(), policy: route.policy.clone() })?;
            match route.kind {
                RouteKind::OpenAi => {
                    let r = Arc::new(shared.openai_route(route, spec)?);
                    for m in &route.models {
                        models.insert(m.clone(), r.clone());
                    }
                }
                RouteKind::Jobs => {
                    jobs.insert(route.name.clone(), Arc::new(shared.job_route(route, spec)?));
                }
            }
        }
        let tenants = config
            .gateway
            .keys
            .iter()
            .map(|k| {
                let tenant = Tenant {
                    admin: k.admin,
                    max_running_jobs: k.max_running_jobs.or(config.gateway.max_running_jobs_per_key),
                    ..Tenant::shared(&k.name, k.rate_per_s, k.budget_usd, k.routes.clone(), &replicas)
                };
                (k.sha256.clone(), Arc::new(tenant))
            })
            .collect();
        let learned = shared.learned.into_inner();
        let anonymous =
            Arc::new(Tenant { max_running_jobs: config.gateway.max_running_jobs_per_key, ..Tenant::new("anonymous", None, None, None) });
        Ok(Runtime { config, tenants, anonymous, models, jobs, budget: global, learned })
    }

    /// Creates every route's alerting series at zero (see [`RouteSeries::zero`]).
    fn zero_series(&self, m: &Metrics) {
        self.models.values().for_each(|r| r.series.zero(m));
        self.jobs.values().for_each(|r| r.series.zero(m));
        for outcome in ["rejected", "waited", "key_jobs_cap"] {
            m.add("tailcut_admission_total", &[("outcome", outcome)], 0.0);
        }
    }
}

/// Shared gateway state.
pub struct AppState {
    config_path: Option<PathBuf>,
    runtime: RwLock<Arc<Runtime>>,
    /// Metrics registry.
    pub metrics: Arc<Metrics>,
    pub(crate) store: Arc<JobStore>,
    /// The replicas' shared state on PostgreSQL (`[state] url = "postgres://..."`), kept
    /// across reloads.
    #[cfg(feature = "postgres")]
    pub(crate) pg: Option<SharedState>,
    pub(crate) running: Mutex<HashMap<String, oneshot::Sender<()>>>,
    /// Each key's running jobs, against its `max_running_jobs`.
    pub(crate) running_per_key: Arc<crate::tenancy::RunningJobs>,
    pub(crate) draining: AtomicBool,
    pub(crate) in_flight: Arc<Semaphore>,
    /// Slots in `in_flight` (`max_in_flight` at start).
    pub(crate) in_flight_limit: usize,
    next_id: AtomicU64,
    /// The body limit of the current configuration (read on every request; shared with
    /// every connection's [`tailcut_http::ServerLimits`]).
    pub(crate) max_body: Arc<AtomicUsize>,
    /// Open client connections against the cap (fixed at start).
    pub(crate) connections: tailcut_http::Connections,
    /// Where settled races are recorded: `metrics` and the status page's recent requests.
    pub(crate) sinks: crate::observe::Sinks,
    /// Where learned models are saved (the ledger's file, or memory), and that file.
    model_store: Mutex<(Option<PathBuf>, Arc<dyn ModelStore>)>,
    /// Provider jobs the previous process left running, found at start; the serving loop
    /// cancels them by id once it runs (`replicas::cancel_startup_orphans`).
    pub(crate) orphans: Mutex<Vec<crate::store::Orphan>>,
    /// The one task tracker and stop token every spawned task runs under (`tasks`).
    pub(crate) tasks: crate::tasks::Tasks,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").field("config_path", &self.config_path).finish_non_exhaustive()
    }
}

/// The replicas' shared state (PostgreSQL), or a stand-in without the `postgres` feature.
#[cfg(feature = "postgres")]
pub(crate) type SharedState = Arc<tailcut_state::pg::PgState>;
/// The replicas' shared state (PostgreSQL), or a stand-in without the `postgres` feature.
#[cfg(not(feature = "postgres"))]
pub(crate) type SharedState = std::convert::Infallible;

/// The live replica count the limits are shared by: the state's, updated at each
/// heartbeat, on PostgreSQL; 1 otherwise.
fn live_replicas(pg: Option<&SharedState>) -> crate::tenancy::Replicas {
    #[cfg(feature = "postgres")]
    if let Some(pg) = pg {
        return pg.live_replicas();
    }
    let _ = pg;
    crate::tenancy::single_replica()
}

/// Connects to PostgreSQL when `[state] url` names it (migrations applied, this replica
/// registered); `None` for the embedded SQLite state.
fn connect_state(config: &Config) -> Result<Option<SharedState>, SetupError> {
    match &config.state.backend {
        tailcut_config::StateBackend::Embedded => Ok(None),
        #[cfg(feature = "postgres")]
        tailcut_config::StateBackend::Postgres { url } => {
            let settings = tailcut_state::pg::PgSettings {
                url: url.resolve()?,
                pool_size: config.state.pool_size,
                lease_ttl: config.state.lease_ttl,
                lease_slice: config.state.lease_slice,
                write_behind: config.state.charge_rows == tailcut_config::ChargeRows::WriteBehind,
            };
            let pg = tailcut_state::pg::PgState::connect(settings)?;
            log("state_connected", || json!({"backend": "postgres", "replica": pg.replica()}));
            Ok(Some(pg))
        }
        #[cfg(not(feature = "postgres"))]
        tailcut_config::StateBackend::Postgres { .. } => Err(SetupError::NoPostgres),
    }
}

/// This process's id in hex, as ids carry it, read once (`getpid` is a system call on
/// every use).
fn process_hex() -> &'static str {
    static PID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PID.get_or_init(|| format!("{:x}", std::process::id()))
}

impl AppState {
    /// Builds the state from a configuration (and remembers its path for reloads).
    pub fn new(config: Config, config_path: Option<PathBuf>) -> Result<Arc<AppState>, SetupError> {
        let pg = connect_state(&config)?;
        let store = Arc::new(match &pg {
            #[cfg(feature = "postgres")]
            Some(pg) => JobStore::postgres(pg.clone()),
            _ => JobStore::open(config.gateway.store.as_deref(), config.state.lease_ttl)?,
        });
        // On SQLite: the jobs of dead processes on the same file (this gateway's previous
        // process, say), whose provider jobs are cancelled by id once serving starts.
        let (interrupted, orphans) = store.take_over_dead()?;
        if interrupted > 0 {
            log("jobs_interrupted", || json!({"count": interrupted, "provider_jobs_to_cancel": orphans.len()}));
        }
        let max = config.gateway.max_in_flight;
        let max_body = Arc::new(AtomicUsize::new(config.gateway.max_body_bytes));
        tailcut_http::raise_fd_limit();
        let connections = tailcut_http::Connections::new(config.gateway.max_connections);
        let ledger = config.budget.ledger.clone();
        let model_store = match &pg {
            #[cfg(feature = "postgres")]
            Some(pg) => crate::learning::pg_store(pg.clone()),
            _ => crate::learning::open_store(ledger.as_deref())?,
        };
        let tasks = crate::tasks::Tasks::default();
        let runtime = Runtime::build(config, &store, pg.as_ref(), model_store.clone(), &tasks)?;
        let metrics = Arc::new(Metrics::default());
        runtime.zero_series(&metrics);
        let sinks = crate::observe::Sinks { metrics: metrics.clone(), recent: Arc::default(), tasks: tasks.tracker.clone() };
        let state = Arc::new(AppState {
            config_path,
            runtime: RwLock::new(Arc::new(runtime)),
            metrics,
            sinks,
            store,
            #[cfg(feature = "postgres")]
            pg,
            running: Mutex::new(HashMap::new()),
            running_per_key: Arc::default(),
            draining: AtomicBool::new(false),
            in_flight: Arc::new(Semaphore::new(max)),
            in_flight_limit: max,
            next_id: AtomicU64::new(1),
            max_body,
            connections,
            model_store: Mutex::new((ledger, model_store)),
            orphans: Mutex::new(orphans),
            tasks,
        });
        Ok(state)
    }

    /// Whether a learned model changed since it was last saved.
    pub(crate) fn models_changed(&self) -> bool {
        self.rt().learned.any_changed()
    }

    /// Saves every learned model that changed since its last save (the saver calls it
    /// about once a second, the drain once more at the end); returns how many it saved.
    pub fn save_models(&self) -> usize {
        self.rt().learned.save_changed()
    }

    /// The limits and timeouts both server paths read: the current configuration's head,
    /// idle and body timeouts (a reload applies to new connections) and its body limit
    /// (a reload applies at once).
    pub(crate) fn server_limits(&self) -> tailcut_http::ServerLimits {
        let rt = self.rt();
        let g = &rt.config.gateway;
        tailcut_http::ServerLimits::new(g.header_read_timeout, g.idle_timeout, g.body_read_timeout, self.max_body.clone())
    }

    /// The current runtime (a request keeps the one it started with).
    pub(crate) fn rt(&self) -> Arc<Runtime> {
        self.runtime.read().map(|r| r.clone()).unwrap_or_else(|e| e.into_inner().clone())
    }

    /// Re-reads the config file and swaps the runtime; in-flight requests keep the old one.
    pub fn reload(&self) -> Result<(), SetupError> {
        let Some(path) = &self.config_path else { return Err(SetupError::NoConfigFile) };
        let config = Config::load(path)?;
        let max_body = config.gateway.max_body_bytes;
        #[cfg(feature = "postgres")]
        let pg = self.pg.as_ref();
        #[cfg(not(feature = "postgres"))]
        let pg = None;
        if pg.is_some() != matches!(config.state.backend, tailcut_config::StateBackend::Postgres { .. }) {
            return Err(SetupError::BackendMoved);
        }
        // The new runtime's learned policies start from what the current ones learned.
        self.save_models();
        let models = {
            let mut s = self.model_store.lock().map_err(|_| SetupError::ModelStoreLock)?;
            if s.0 != config.budget.ledger && pg.is_none() {
                let opened = crate::learning::open_store(config.budget.ledger.as_deref())?;
                *s = (config.budget.ledger.clone(), opened);
            }
            s.1.clone()
        };
        let runtime = Runtime::build(config, &self.store, pg, models, &self.tasks)?;
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

    /// The request's id: the caller's `x-request-id` when usable, else a new one.
    pub(crate) fn request_id(&self, headers: &HeaderMap) -> String {
        headers
            .get(names::REQUEST_ID)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty() && v.len() <= 128)
            .map_or_else(|| self.new_id("req"), str::to_string)
    }

    /// Job `id` once it is no longer running, or as it is after `max` (woken by the
    /// job's end: [`JobStore::wait_ended`]).
    pub(crate) async fn wait_for_job(&self, id: &str, max: Duration) -> Option<crate::store::JobRow> {
        self.store.wait_ended(id, max).await
    }
}
