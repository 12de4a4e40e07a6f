//! Cerebrium REST inference: one synchronous `POST /v4/{project}/{app}/{function}`.
//! There is no run-status or run-cancel API, so this provider module never looks runs up in a
//! list: each job is its own request, correlated by an id this client sends
//! (`X-Request-Id`), and cancelling closes that request — safe under any concurrency,
//! and honest that nothing stronger than a closed channel can be proven.
//!
//! Configured by [`Config`] (`adapter = "cerebrium"`), checked into [`Settings`], which builds
//! the provider and checks its credential ([`crate::ProviderModule`]).

use crate::channel::{correlation_id, ChannelJob};
use crate::client::{HttpClient, Reply};
use crate::config::{no_fallback, trimmed, Build, Check, CheckError, Invalid, ProviderModule};
use crate::secret::Secret;
use async_trait::async_trait;
use futures::FutureExt;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use tailcut_core::receipt::Evidence;
use tailcut_core::{Capabilities, Job, JobRequest, JobResult, JobState, Payload, ProviderApi, ProviderError};
use tokio::time::Instant;

/// The Cerebrium provider module's client.
#[derive(Debug, Clone)]
pub struct Cerebrium {
    /// Provider key.
    pub name: String,
    /// Function URL, e.g. `https://api.aws.us-east-1.cerebrium.ai/v4/p-xxxx/app/predict`.
    pub url: String,
    /// JWT.
    pub token: Secret,
    /// Shared client.
    pub http: HttpClient,
}

/// Reads the synchronous call's reply for provider `name`: the job's result.
pub fn read_reply(reply: &Reply, name: &str) -> JobResult {
    if !reply.ok() {
        return JobResult::bare(JobState::Failed, Some(reply.rejected().to_string()));
    }
    let v = match reply.json() {
        Err(e) => return JobResult::bare(JobState::Failed, Some(e.to_string())),
        Ok(v) => v,
    };
    let Some(result) = v.get("result") else {
        return JobResult::bare(JobState::Failed, Some("response without `result`".into()));
    };
    let mut r = JobResult::bare(JobState::Completed, None);
    r.payload = Some(Payload { bytes: serde_json::to_vec(result).unwrap_or_default().into(), content_type: "application/json".into() });
    if let Some(ms) = v.get("run_time_ms") {
        r.metrics.insert(format!("{name}_run_time_ms"), ms.clone());
    }
    if let Some(run) = v.get("run_id").and_then(Value::as_str) {
        r.metrics.insert(format!("{name}_run_id"), json!(run));
    }
    r
}

#[async_trait]
impl ProviderApi for Cerebrium {
    fn capabilities(&self) -> Capabilities {
        Capabilities { reports_queued: false, cancel_evidence: Evidence::RequestChannelClosed, reports_billed_time: true }
    }

    async fn submit(&self, request: &JobRequest) -> Result<Arc<dyn Job>, ProviderError> {
        let id = correlation_id(&self.name);
        let (http, url, token, name, body, rid) =
            (self.http.clone(), self.url.clone(), self.token.clone(), self.name.clone(), request.input().clone(), id.clone());
        let fut = async move {
            let reply = http.once(|c| c.post(&url).bearer_auth(token.expose()).header("X-Request-Id", &rid).json(&body)).await;
            let finished = Instant::now();
            let mut r = match reply {
                Err(e) => JobResult::bare(JobState::Failed, Some(e.to_string())),
                Ok(reply) => read_reply(&reply, &name),
            };
            r.finished = finished;
            r
        };
        Ok(Arc::new(ChannelJob::start(
            &self.name,
            id,
            fut.boxed(),
            "request closed; Cerebrium has no run-cancel or status API, so whether the container stopped cannot be confirmed",
        )))
    }
}

/// `adapter = "cerebrium"`: the keys as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// API host when the URL is built from `project_id` and `app` (default
    /// `https://api.aws.us-east-1.cerebrium.ai`).
    pub base_url: Option<String>,
    /// The function's full URL (or `project_id` and `app`).
    pub url: Option<String>,
    /// Project id.
    pub project_id: Option<String>,
    /// App name.
    pub app: Option<String>,
    /// Function (default `predict`).
    pub function: Option<String>,
    /// Environment variable holding the JWT (default `CEREBRIUM_TOKEN`).
    pub api_key_env: Option<String>,
}

/// `adapter = "cerebrium"`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Function URL.
    pub url: String,
    /// Environment variable holding the JWT.
    pub key_env: String,
}

#[async_trait]
impl ProviderModule for Settings {
    type Config = Config;
    const MINIMAL_TABLE: &'static str = "url = \"https://api.aws.us-east-1.cerebrium.ai/v4/p-1/app/predict\"";

    fn from_config(c: Config) -> Result<Settings, Invalid> {
        let url = match (&c.url, &c.project_id, &c.app) {
            (Some(u), _, _) => trimmed(u),
            (None, Some(p), Some(app)) => {
                let base = trimmed(c.base_url.as_deref().unwrap_or("https://api.aws.us-east-1.cerebrium.ai"));
                format!("{base}/v4/{p}/{app}/{}", c.function.as_deref().unwrap_or("predict"))
            }
            _ => return Err(Invalid::new("url", "required (or project_id and app)")),
        };
        Ok(Settings { url, key_env: c.api_key_env.unwrap_or_else(|| "CEREBRIUM_TOKEN".into()) })
    }

    fn base(&self) -> &str {
        &self.url
    }

    fn key_env(&self) -> Option<&str> {
        Some(&self.key_env)
    }

    fn build(&self, cx: &Build<'_>) -> Result<Arc<dyn ProviderApi>, Invalid> {
        let token = cx.secret(&self.key_env, no_fallback)?;
        Ok(Arc::new(Cerebrium { name: cx.name.into(), url: self.url.clone(), token, http: cx.http.clone() }))
    }

    async fn check_credentials(&self, _cx: &Check<'_>) -> Result<String, CheckError> {
        Ok("unverifiable: Cerebrium has no read-only API (a check would run the function)".into())
    }
}
