//! RunPod serverless queue API: `POST /run`, `GET /status/{id}`, `POST /cancel/{id}`,
//! `GET /health`, `POST /purge-queue`. `IN_QUEUE` vs `IN_PROGRESS` tells queued from
//! running; `delayTime` is the queue delay and `executionTime` the billed execution.
//!
//! Configured by [`Config`] (`adapter = "runpod"`), checked into [`Settings`], which builds
//! the provider and checks its credential ([`crate::ProviderModule`]).

use crate::client::{HttpClient, Reply};
use crate::config::{trimmed, Build, Check, CheckError, Invalid, ProviderModule};
use crate::polling::{metric, required_str, CancelReply, Observation, PollingApi, Remote};
use crate::secret::Secret;
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use tailcut_core::receipt::Evidence;
use tailcut_core::{Capabilities, JobRequest, JobState, ProviderApi, ProviderError};

/// The RunPod provider module's API client (its [`PollingApi`]).
#[derive(Debug, Clone)]
pub struct RunPod {
    /// Provider key.
    pub name: String,
    /// Base URL including the endpoint, e.g. `https://api.runpod.ai/v2/{endpoint_id}`.
    pub base: String,
    /// API key.
    pub key: Secret,
}

/// Maps a RunPod status string.
pub fn state(s: &str) -> JobState {
    match s {
        "IN_QUEUE" => JobState::Queued,
        "IN_PROGRESS" | "RUNNING" => JobState::Running,
        "COMPLETED" => JobState::Completed,
        "FAILED" | "TIMED_OUT" => JobState::Failed,
        "CANCELLED" => JobState::Cancelled,
        _ => JobState::Unknown,
    }
}

/// Reads a `/run` reply: the job id.
pub fn read_submit(reply: &Reply) -> Result<Remote, ProviderError> {
    let v = reply.success_json()?;
    let id = required_str(&v, "id", "submit reply")?;
    Ok(Remote { id: id.to_string(), ..Remote::default() })
}

/// Reads a `/status/{id}` reply for provider `name` (metric keys are prefixed with it).
pub fn read_status(reply: &Reply, name: &str) -> Result<Observation, ProviderError> {
    let v = reply.success_json()?;
    let status = required_str(&v, "status", "status reply")?;
    let mut obs = Observation::state(state(status));
    metric(&mut obs.metrics, &format!("{name}_delay_ms"), v.get("delayTime"));
    metric(&mut obs.metrics, &format!("{name}_execution_ms"), v.get("executionTime"));
    obs.output = v.get("output").cloned();
    obs.error = v.get("error").and_then(Value::as_str).map(crate::polling::error_text);
    Ok(obs)
}

/// Reads a `/cancel/{id}` reply.
pub use crate::polling::read_acknowledged as read_cancel;

/// Reads a `/stream/{id}` reply: the status and the batch of `stream` items.
pub fn read_stream(reply: &Reply) -> Result<(JobState, Vec<Value>), ProviderError> {
    let v = reply.success_json()?;
    let status = v.get("status").and_then(Value::as_str).map_or(JobState::Unknown, state);
    let items = v.get("stream").and_then(Value::as_array).cloned().unwrap_or_default();
    Ok((status, items))
}

impl RunPod {
    fn auth(&self, r: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        r.bearer_auth(self.key.expose())
    }

    /// Read-only credential check (`GET /health`).
    pub async fn health(&self, http: &HttpClient) -> Result<Value, ProviderError> {
        let url = format!("{}/health", self.base);
        let reply = http.idempotent(|c| self.auth(c.get(&url))).await?;
        reply.success_json()
    }

    /// Incremental output of a generator handler (`GET /stream/{id}`): the status and the
    /// batch of `stream` items produced since the last call.
    pub async fn stream(&self, http: &HttpClient, job_id: &str) -> Result<(JobState, Vec<Value>), ProviderError> {
        let url = format!("{}/stream/{job_id}", self.base);
        let reply = http.idempotent(|c| self.auth(c.get(&url))).await?;
        read_stream(&reply)
    }

    /// Drops queued jobs (best effort scale-to-zero helper).
    pub async fn purge_queue(&self, http: &HttpClient) -> Result<(), ProviderError> {
        let url = format!("{}/purge-queue", self.base);
        let reply = http.once(|c| self.auth(c.post(&url))).await?;
        if reply.ok() {
            Ok(())
        } else {
            Err(reply.rejected())
        }
    }
}

#[async_trait]
impl PollingApi for RunPod {
    fn provider(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { reports_queued: true, cancel_evidence: Evidence::ConfirmedTerminal, reports_billed_time: true }
    }

    async fn submit(&self, http: &HttpClient, request: &JobRequest) -> Result<Remote, ProviderError> {
        let url = format!("{}/run", self.base);
        let body = json!({"input": request.input()});
        let reply = http.once(|c| self.auth(c.post(&url)).json(&body)).await?;
        read_submit(&reply)
    }

    async fn poll(&self, http: &HttpClient, job: &Remote) -> Result<Observation, ProviderError> {
        let url = format!("{}/status/{}", self.base, job.id);
        let reply = http.idempotent(|c| self.auth(c.get(&url))).await?;
        read_status(&reply, &self.name)
    }

    async fn cancel(&self, http: &HttpClient, job: &Remote) -> Result<CancelReply, ProviderError> {
        let url = format!("{}/cancel/{}", self.base, job.id);
        let reply = http.once(|c| self.auth(c.post(&url))).await?;
        read_cancel(&reply)
    }

    fn execution_metric(&self) -> Option<String> {
        Some(format!("{}_execution_ms", self.name))
    }
}

/// `adapter = "runpod"`: the keys as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// API base (default `https://api.runpod.ai/v2`).
    pub base_url: Option<String>,
    /// Your serverless endpoint id (required).
    pub endpoint_id: Option<String>,
    /// Environment variable holding the API key (default `RUNPOD_API_KEY`; when it is
    /// unset, the RunPod CLI's `~/.runpod/config.toml` is read).
    pub api_key_env: Option<String>,
}

/// `adapter = "runpod"`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Base URL including the endpoint.
    pub base: String,
    /// Environment variable holding the API key.
    pub key_env: String,
}

#[async_trait]
impl ProviderModule for Settings {
    type Config = Config;
    const MINIMAL_TABLE: &'static str = "endpoint_id = \"e\"";

    fn from_config(c: Config) -> Result<Settings, Invalid> {
        let base = trimmed(c.base_url.as_deref().unwrap_or("https://api.runpod.ai/v2"));
        let ep = c.endpoint_id.ok_or_else(|| Invalid::new("endpoint_id", "required (your serverless endpoint id)"))?;
        Ok(Settings { base: format!("{base}/{ep}"), key_env: c.api_key_env.unwrap_or_else(|| "RUNPOD_API_KEY".into()) })
    }

    fn base(&self) -> &str {
        &self.base
    }

    fn key_env(&self) -> Option<&str> {
        Some(&self.key_env)
    }

    fn build(&self, cx: &Build<'_>) -> Result<Arc<dyn ProviderApi>, Invalid> {
        let key = cx.secret(&self.key_env, cli_key)?;
        Ok(cx.polling(RunPod { name: cx.name.into(), base: self.base.clone(), key }))
    }

    async fn check_credentials(&self, cx: &Check<'_>) -> Result<String, CheckError> {
        let key = cx.secret(&self.key_env, cli_key)?;
        let api = RunPod { name: cx.name.into(), base: self.base.clone(), key };
        api.health(&cx.http).await.map(|v| format!("health ok: {}", v["workers"])).map_err(CheckError::from)
    }
}

/// Credentials from the RunPod CLI's config file (`~/.runpod/config.toml`, `[default] api_key`).
fn cli_key() -> Option<Secret> {
    let home = std::env::var_os("HOME")?;
    let text = std::fs::read_to_string(std::path::Path::new(&home).join(".runpod/config.toml")).ok()?;
    let t: toml::Table = text.parse().ok()?;
    t.get("default")?.get("api_key")?.as_str().map(Secret::new)
}
