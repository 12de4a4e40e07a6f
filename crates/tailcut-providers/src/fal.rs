//! fal queue API: submit returns the status, result and cancel URLs to use; status is
//! `IN_QUEUE` (with `queue_position`), `IN_PROGRESS` or `COMPLETED` — there is no
//! cancelled state, so a cancelled request is only ever seen as `COMPLETED`, and the
//! receipt says exactly that.
//!
//! Configured by [`Config`] (`adapter = "fal"`), checked into [`Settings`], which builds
//! the provider and checks its credential ([`crate::ProviderModule`]).

use crate::client::{HttpClient, Reply};
use crate::config::{no_fallback, trimmed, Build, Check, CheckError, Invalid, ProviderModule};
use crate::polling::{required_str, CancelReply, Observation, PollingApi, Remote};
use crate::secret::Secret;
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use tailcut_core::receipt::Evidence;
use tailcut_core::{Capabilities, JobRequest, JobState, ProviderApi, ProviderError};

/// The fal provider module's API client (its [`PollingApi`]).
#[derive(Debug, Clone)]
pub struct Fal {
    /// Provider key.
    pub name: String,
    /// Queue host, `https://queue.fal.run`.
    pub base: String,
    /// Model id, e.g. `fal-ai/flux/dev`.
    pub model: String,
    /// `FAL_KEY`.
    pub key: Secret,
}

impl Fal {
    fn auth(&self, r: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        r.header("Authorization", format!("Key {}", self.key.expose()))
    }

    fn url(&self, job: &Remote, which: &str) -> String {
        job.urls.get(which).cloned().unwrap_or_else(|| {
            let app: Vec<&str> = self.model.split('/').take(2).collect();
            let base = format!("{}/{}/requests/{}", self.base, app.join("/"), job.id);
            match which {
                "status_url" => format!("{base}/status"),
                "cancel_url" => format!("{base}/cancel"),
                _ => base,
            }
        })
    }
}

#[async_trait]
impl PollingApi for Fal {
    fn provider(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { reports_queued: true, cancel_evidence: Evidence::ConfirmedTerminal, reports_billed_time: false }
    }

    async fn submit(&self, http: &HttpClient, request: &JobRequest) -> Result<Remote, ProviderError> {
        let url = format!("{}/{}", self.base, self.model);
        let body = request.input().clone();
        let reply = http.once(|c| self.auth(c.post(&url)).json(&body)).await?;
        read_submit(&reply)
    }

    async fn poll(&self, http: &HttpClient, job: &Remote) -> Result<Observation, ProviderError> {
        let url = self.url(job, "status_url");
        let reply = http.idempotent(|c| self.auth(c.get(&url))).await?;
        read_status(&reply, &self.name)
    }

    async fn fetch(&self, http: &HttpClient, job: &Remote, _obs: &Observation) -> Result<tailcut_core::Payload, ProviderError> {
        let url = self.url(job, "response_url");
        let reply = http.idempotent(|c| self.auth(c.get(&url))).await?;
        read_result(&reply)
    }

    async fn cancel(&self, http: &HttpClient, job: &Remote) -> Result<CancelReply, ProviderError> {
        let url = self.url(job, "cancel_url");
        let reply = http.once(|c| self.auth(c.put(&url))).await?;
        read_cancel(&reply)
    }

    fn execution_metric(&self) -> Option<String> {
        Some(format!("{}_inference_ms", self.name))
    }
}

/// Reads a submit reply: the request id and the URLs to use for it.
pub fn read_submit(reply: &Reply) -> Result<Remote, ProviderError> {
    let v = reply.success_json()?;
    let id = required_str(&v, "request_id", "submit reply")?;
    let mut remote = Remote { id: id.to_string(), ..Remote::default() };
    for k in ["status_url", "response_url", "cancel_url"] {
        if let Some(u) = v.get(k).and_then(Value::as_str) {
            remote.urls.insert(k.to_string(), u.to_string());
        }
    }
    Ok(remote)
}

/// Reads a status reply for provider `name`.
pub fn read_status(reply: &Reply, name: &str) -> Result<Observation, ProviderError> {
    let v = reply.success_json()?;
    let status = v.get("status").and_then(Value::as_str).unwrap_or("");
    let mut obs = Observation::state(match status {
        "IN_QUEUE" => JobState::Queued,
        "IN_PROGRESS" => JobState::Running,
        "COMPLETED" => JobState::Completed,
        _ => JobState::Unknown,
    });
    if let Some(p) = v.get("queue_position") {
        obs.metrics.insert(format!("{name}_queue_position"), p.clone());
    }
    if let Some(t) = v.pointer("/metrics/inference_time").and_then(Value::as_f64) {
        obs.metrics.insert(format!("{name}_inference_ms"), json!(t * 1000.0));
    }
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        // A failed or cancelled request still ends COMPLETED, with an error.
        obs.state = if obs.state == JobState::Completed { JobState::Failed } else { obs.state };
        obs.error = Some(crate::polling::error_text(e));
    }
    Ok(obs)
}

/// Reads a result reply.
pub fn read_result(reply: &Reply) -> Result<tailcut_core::Payload, ProviderError> {
    reply.success_json().map(|v| crate::polling::json_payload(&v))
}

/// Reads a cancel reply.
pub fn read_cancel(reply: &Reply) -> Result<CancelReply, ProviderError> {
    let status = reply.json().ok().and_then(|v| v.get("status").and_then(Value::as_str).map(str::to_string)).unwrap_or_default();
    match status.as_str() {
        "OK" => Ok(CancelReply { acknowledged: true, note: "fal removed the request from the queue".into() }),
        "CANCELLATION_REQUESTED" => Ok(CancelReply {
            acknowledged: true,
            note: "fal forwarded the cancel to the running app; fal has no cancelled state, so a terminal COMPLETED is all that can be observed".into(),
        }),
        "ALREADY_COMPLETED" => Ok(CancelReply { acknowledged: true, note: "already completed".into() }),
        _ if reply.ok() => Ok(CancelReply { acknowledged: true, note: String::new() }),
        _ => Err(reply.rejected()),
    }
}

/// `adapter = "fal"`: the keys as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Queue host (default `https://queue.fal.run`).
    pub base_url: Option<String>,
    /// Model id, e.g. `fal-ai/flux/dev` (required).
    pub model: Option<String>,
    /// Environment variable holding the key (default `FAL_KEY`).
    pub api_key_env: Option<String>,
}

/// `adapter = "fal"`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Queue host.
    pub base: String,
    /// Model id.
    pub model: String,
    /// Environment variable holding the key.
    pub key_env: String,
}

#[async_trait]
impl ProviderModule for Settings {
    type Config = Config;
    const MINIMAL_TABLE: &'static str = "model = \"fal-ai/flux/dev\"";

    fn from_config(c: Config) -> Result<Settings, Invalid> {
        let model = c.model.ok_or_else(|| Invalid::new("model", "required (e.g. fal-ai/flux/dev)"))?;
        Ok(Settings {
            base: trimmed(c.base_url.as_deref().unwrap_or("https://queue.fal.run")),
            model,
            key_env: c.api_key_env.unwrap_or_else(|| "FAL_KEY".into()),
        })
    }

    fn base(&self) -> &str {
        &self.base
    }

    fn key_env(&self) -> Option<&str> {
        Some(&self.key_env)
    }

    fn build(&self, cx: &Build<'_>) -> Result<Arc<dyn ProviderApi>, Invalid> {
        let key = cx.secret(&self.key_env, no_fallback)?;
        Ok(cx.polling(Fal { name: cx.name.into(), base: self.base.clone(), model: self.model.clone(), key }))
    }

    async fn check_credentials(&self, cx: &Check<'_>) -> Result<String, CheckError> {
        // No read-only endpoint: ask for an unknown request's status; 404 means the key was accepted.
        let key = cx.secret(&self.key_env, no_fallback)?;
        let app: Vec<&str> = self.model.split('/').take(2).collect();
        let url = format!("{}/{}/requests/00000000-0000-0000-0000-000000000000/status", self.base, app.join("/"));
        let reply = cx.http.idempotent(|c| c.get(&url).header("Authorization", format!("Key {}", key.expose()))).await?;
        match reply.status {
            401 | 403 => Err(CheckError::Rejected { status: reply.status }),
            _ => Ok(format!("key accepted (HTTP {} for an unknown request)", reply.status)),
        }
    }
}
