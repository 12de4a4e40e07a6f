//! Vast.ai serverless: route, then call. `POST` the route endpoint
//! (`https://run.vast.ai/route/`) with the endpoint's name and a cost estimate; it answers
//! either a worker (`url`, `reqnum`, `signature`, `endpoint`, `cost`) or, when no worker
//! is ready, the endpoint's worker counts under `status`. The job is then one request to
//! the worker (`POST {url}{worker_path}` with `{"auth_data": <the route reply>,
//! "payload": <input>}`), whose PyWorker checks the signature and proxies to the model.
//!
//! "No ready worker" is the only queued signal Vast.ai gives, so it is this module's
//! `QUEUED`: the route is asked again every `poll_interval_ms` until a worker is
//! assigned, and a cutover sees the job queued meanwhile. There is no job id, status or
//! cancel call: a cancel closes whichever request is open. While still routing nothing
//! has reached a worker (the receipt says so); once the worker call is open, closing it
//! is all that can be proven. The API key goes to the route endpoint only, never to a
//! worker.
//!
//! Configured by [`Config`] (`adapter = "vast"`), checked into [`Settings`].

use crate::bounds::{self, Lo};
use crate::channel::{correlation_id, ChannelJob};
use crate::client::{HttpClient, Reply};
use crate::config::{no_fallback, trimmed, Build, Check, CheckError, Invalid, ProviderModule};
use crate::secret::Secret;
use async_trait::async_trait;
use futures::FutureExt;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tailcut_core::receipt::Evidence;
use tailcut_core::{
    CancelContext, CancelScope, Capabilities, Job, JobRequest, JobResult, JobState, Payload, ProviderApi, ProviderError, Receipt,
};
use tokio::time::Instant;

/// The route endpoint's documented address.
pub const ROUTE_URL: &str = "https://run.vast.ai/route/";

/// The Vast.ai provider module's client.
#[derive(Debug, Clone)]
pub struct Vast {
    /// Provider key.
    pub name: String,
    /// The route endpoint.
    pub route_url: String,
    /// The serverless endpoint's name.
    pub endpoint: String,
    /// The path called on the worker, e.g. `/v1/completions`.
    pub worker_path: String,
    /// The workload estimate sent to the route (units the PyWorker defines).
    pub cost: f64,
    /// API key (route endpoint only).
    pub key: Secret,
    /// Time between route calls while no worker is ready.
    pub poll: Duration,
    /// Shared client.
    pub http: HttpClient,
}

/// What the route endpoint answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    /// A worker: its URL and the reply itself (sent back to it as `auth_data`).
    Worker {
        /// The worker's base URL.
        url: String,
        /// The route's reply (`url`, `reqnum`, `signature`, `endpoint`, `cost`, ...).
        auth_data: Value,
    },
    /// No ready worker: the endpoint's worker counts by state.
    NoWorker(Value),
}

/// Why routing gave no worker.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    /// The route call failed, or its reply was an error status or not JSON.
    #[error(transparent)]
    Call(#[from] ProviderError),
    /// A worker `url` that is not an http(s) URL.
    #[error("route reply's `url` is not an http(s) URL")]
    NotHttpUrl,
    /// A worker reply without one of the fields the worker checks.
    #[error("route reply without `{key}`")]
    Missing {
        /// `reqnum` or `signature`.
        key: &'static str,
    },
    /// A reply that is neither a worker nor worker counts.
    #[error("route reply with neither `url` nor `status`")]
    Unrecognized,
}

/// Reads the route endpoint's reply.
pub fn read_route(reply: &Reply) -> Result<Route, RouteError> {
    let v = reply.success_json()?;
    if let Some(url) = v.get("url").and_then(Value::as_str) {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(RouteError::NotHttpUrl);
        }
        for key in ["reqnum", "signature"] {
            if v.get(key).is_none() {
                return Err(RouteError::Missing { key });
            }
        }
        return Ok(Route::Worker { url: url.trim_end_matches('/').to_string(), auth_data: v });
    }
    match v.get("status") {
        Some(s) => Ok(Route::NoWorker(s.clone())),
        None => Err(RouteError::Unrecognized),
    }
}

/// Reads the worker's reply for provider `name`: the job's result.
pub fn read_worker(reply: &Reply) -> JobResult {
    if !reply.ok() {
        return JobResult::bare(JobState::Failed, Some(reply.rejected().to_string()));
    }
    match reply.json() {
        Err(e) => JobResult::bare(JobState::Failed, Some(e.to_string())),
        Ok(v) => {
            let mut r = JobResult::bare(JobState::Completed, None);
            r.payload = Some(Payload { bytes: serde_json::to_vec(&v).unwrap_or_default().into(), content_type: "application/json".into() });
            r
        }
    }
}

impl Vast {
    /// Asks the route for a worker until one is ready (or the route fails).
    async fn route(&self) -> Result<(String, Value, u32), RouteError> {
        let body = json!({"endpoint": self.endpoint, "cost": self.cost});
        let mut waits = 0u32;
        loop {
            let reply = self.http.idempotent(|c| c.post(&self.route_url).bearer_auth(self.key.expose()).json(&body)).await?;
            match read_route(&reply)? {
                Route::Worker { url, auth_data } => return Ok((url, auth_data, waits)),
                Route::NoWorker(_) => {
                    waits += 1;
                    tokio::time::sleep(self.poll).await;
                }
            }
        }
    }

    /// Routes, then calls the worker; `routing` is cleared once the worker call is sent.
    async fn call(self, input: Value, routing: Arc<AtomicBool>) -> JobResult {
        let (url, auth_data, waits) = match self.route().await {
            Ok(r) => r,
            Err(e) => {
                let mut r = JobResult::bare(JobState::Failed, Some(format!("route: {e}")));
                r.finished = Instant::now();
                return r;
            }
        };
        let reqnum = auth_data.get("reqnum").cloned();
        let body = json!({"auth_data": auth_data, "payload": input});
        let target = format!("{url}{}", self.worker_path);
        routing.store(false, Ordering::SeqCst);
        let reply = self.http.once(|c| c.post(&target).json(&body)).await;
        let finished = Instant::now();
        let mut r = match reply {
            Err(e) => JobResult::bare(JobState::Failed, Some(format!("worker: {e}"))),
            Ok(reply) => read_worker(&reply),
        };
        if let Some(n) = reqnum {
            r.metrics.insert(format!("{}_reqnum", self.name), n);
        }
        r.metrics.insert(format!("{}_no_ready_worker_routes", self.name), json!(waits));
        r.finished = finished;
        r
    }
}

/// One job: route calls while no worker is ready (`QUEUED`), then the worker call.
#[derive(Debug)]
pub struct VastJob {
    channel: ChannelJob,
    routing: Arc<AtomicBool>,
}

#[async_trait]
impl Job for VastJob {
    fn job_id(&self) -> Option<String> {
        self.channel.job_id()
    }

    async fn status(&self) -> Result<JobState, ProviderError> {
        let s = self.channel.status().await?;
        Ok(if s == JobState::Pending && self.routing.load(Ordering::SeqCst) { JobState::Queued } else { s })
    }

    async fn result(&self, deadline: Instant) -> JobResult {
        self.channel.result(deadline).await
    }

    async fn cancel(&self, ctx: CancelContext) -> Result<Receipt, ProviderError> {
        let routing = self.routing.load(Ordering::SeqCst);
        let mut receipt = self.channel.cancel(ctx).await?;
        if routing && !receipt.note.contains("already ended") {
            receipt.cancel_scope = CancelScope::QueuedJob;
            receipt.was_running = false;
            receipt.note = "stopped while routing: the route had assigned no worker, so nothing reached a worker".into();
        }
        Ok(receipt)
    }
}

#[async_trait]
impl ProviderApi for Vast {
    fn capabilities(&self) -> Capabilities {
        Capabilities { reports_queued: true, cancel_evidence: Evidence::RequestChannelClosed, reports_billed_time: false }
    }

    async fn submit(&self, request: &JobRequest) -> Result<Arc<dyn Job>, ProviderError> {
        let routing = Arc::new(AtomicBool::new(true));
        let fut = self.clone().call(request.input().clone(), routing.clone());
        let channel = ChannelJob::start(
            &self.name,
            correlation_id(&self.name),
            fut.boxed(),
            "worker request closed; Vast.ai has no cancel call, so whether the backend stopped depends on it (vLLM aborts on disconnect)",
        );
        Ok(Arc::new(VastJob { channel, routing }))
    }
}

/// `adapter = "vast"`: the keys as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The serverless endpoint's name (required).
    pub endpoint: Option<String>,
    /// The path to call on the worker, e.g. `/v1/completions` (required: the PyWorker's route).
    pub worker_path: Option<String>,
    /// The route endpoint (default `https://run.vast.ai/route/`).
    pub route_url: Option<String>,
    /// The workload estimate sent to the route, in the PyWorker's units (default 100).
    pub cost: Option<f64>,
    /// Environment variable holding the API key (default `VAST_API_KEY`).
    pub api_key_env: Option<String>,
}

/// `adapter = "vast"`, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Endpoint name.
    pub endpoint: String,
    /// Worker path (starting with `/`).
    pub worker_path: String,
    /// Route endpoint.
    pub route_url: String,
    /// Workload estimate.
    pub cost: f64,
    /// Environment variable holding the API key.
    pub key_env: String,
}

#[async_trait]
impl ProviderModule for Settings {
    type Config = Config;
    const MINIMAL_TABLE: &'static str = "endpoint = \"my-endpoint\"\nworker_path = \"/v1/completions\"";

    fn from_config(c: Config) -> Result<Settings, Invalid> {
        let endpoint = c
            .endpoint
            .filter(|e| !e.trim().is_empty())
            .ok_or_else(|| Invalid::new("endpoint", "required (the serverless endpoint's name)"))?;
        let path = c.worker_path.ok_or_else(|| Invalid::new("worker_path", "required (the PyWorker route, e.g. /v1/completions)"))?;
        if !path.starts_with('/') {
            return Err(Invalid::new("worker_path", "expected a path starting with `/`"));
        }
        let cost = bounds::float("cost", c.cost, 100.0, Lo::Excl(0.0), 1e12, "workload units")?;
        Ok(Settings {
            endpoint,
            worker_path: path,
            route_url: c.route_url.as_deref().map_or_else(|| ROUTE_URL.to_string(), |u| trimmed(u) + "/"),
            cost,
            key_env: c.api_key_env.unwrap_or_else(|| "VAST_API_KEY".into()),
        })
    }

    fn base(&self) -> &str {
        &self.route_url
    }

    fn key_env(&self) -> Option<&str> {
        Some(&self.key_env)
    }

    fn build(&self, cx: &Build<'_>) -> Result<Arc<dyn ProviderApi>, Invalid> {
        let key = cx.secret(&self.key_env, no_fallback)?;
        Ok(Arc::new(Vast {
            name: cx.name.into(),
            route_url: self.route_url.clone(),
            endpoint: self.endpoint.clone(),
            worker_path: self.worker_path.clone(),
            cost: self.cost,
            key,
            poll: cx.settings.poll.interval,
            http: cx.http.clone(),
        }))
    }

    async fn check_credentials(&self, _cx: &Check<'_>) -> Result<String, CheckError> {
        Ok("unverifiable: Vast.ai's route call is the only serverless call, and it assigns a worker".into())
    }
}
