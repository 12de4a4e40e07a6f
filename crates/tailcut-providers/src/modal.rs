//! Modal has no public REST job API. This provider module speaks the documented pattern of a
//! user-deployed web endpoint that spawns a function call and polls it by call id —
//! `examples/modal_job_endpoint.py` ships one: `POST /submit` → `{"call_id"}`,
//! `GET /status/{id}` → call-graph status (`PENDING` covers queued and running),
//! `GET /result/{id}` → 202 while pending, `POST /cancel/{id}` → `FunctionCall.cancel()`.
//!
//! Configured by [`Config`] (`adapter = "modal"`), checked into [`Settings`], which builds
//! the provider and checks its credential ([`crate::ProviderModule`]).

use crate::client::{HttpClient, Reply};
use crate::config::{trimmed, Build, Check, CheckError, Invalid, ProviderModule};
use crate::polling::{required_str, CancelReply, Observation, PollingApi, Remote};
use crate::secret::Secret;
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;
use tailcut_core::receipt::Evidence;
use tailcut_core::{Capabilities, JobRequest, JobState, ProviderApi, ProviderError};

/// The Modal web-endpoint provider module's API client (its [`PollingApi`]).
#[derive(Debug, Clone)]
pub struct Modal {
    /// Provider key.
    pub name: String,
    /// Your endpoint, `https://<workspace>--<label>.modal.run`.
    pub base: String,
    /// Proxy-auth token id and secret (`Modal-Key`, `Modal-Secret`), if enabled.
    pub proxy_auth: Option<(Secret, Secret)>,
}

/// Reads a `/submit` reply: the call id.
pub fn read_submit(reply: &Reply) -> Result<Remote, ProviderError> {
    let v = reply.success_json()?;
    let id = required_str(&v, "call_id", "reply")?;
    Ok(Remote { id: id.to_string(), ..Remote::default() })
}

/// Reads a `/status/{id}` reply.
pub fn read_status(reply: &Reply) -> Result<Observation, ProviderError> {
    let v = reply.success_json()?;
    let s = v.get("status").and_then(Value::as_str).unwrap_or("");
    Ok(Observation::state(match s {
        "PENDING" => JobState::Pending,
        "SUCCESS" => JobState::Completed,
        "FAILURE" | "INIT_FAILURE" | "EXPIRED" => JobState::Failed,
        "TERMINATED" => JobState::Cancelled,
        "TIMEOUT" => JobState::Failed,
        _ => JobState::Unknown,
    }))
}

/// Reads a `/result/{id}` reply (202 while pending is not a result).
pub fn read_result(reply: &Reply) -> Result<tailcut_core::Payload, ProviderError> {
    if reply.status != 200 {
        return Err(reply.rejected());
    }
    let v = reply.json()?;
    v.get("result")
        .map(crate::polling::json_payload)
        .ok_or_else(|| ProviderError::MalformedResponse { reason: "result reply without `result`".into() })
}

impl Modal {
    fn auth(&self, r: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.proxy_auth {
            Some((k, s)) => r.header("Modal-Key", k.expose()).header("Modal-Secret", s.expose()),
            None => r,
        }
    }

    /// Read-only check (`GET /health`).
    pub async fn health(&self, http: &HttpClient) -> Result<Value, ProviderError> {
        let url = format!("{}/health", self.base);
        let reply = http.idempotent(|c| self.auth(c.get(&url))).await?;
        reply.success_json()
    }
}

#[async_trait]
impl PollingApi for Modal {
    fn provider(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { reports_queued: false, cancel_evidence: Evidence::ConfirmedTerminal, reports_billed_time: false }
    }

    async fn submit(&self, http: &HttpClient, request: &JobRequest) -> Result<Remote, ProviderError> {
        let url = format!("{}/submit", self.base);
        let body = request.input().clone();
        let reply = http.once(|c| self.auth(c.post(&url)).json(&body)).await?;
        read_submit(&reply)
    }

    async fn poll(&self, http: &HttpClient, job: &Remote) -> Result<Observation, ProviderError> {
        let url = format!("{}/status/{}", self.base, job.id);
        let reply = http.idempotent(|c| self.auth(c.get(&url))).await?;
        read_status(&reply)
    }

    async fn fetch(&self, http: &HttpClient, job: &Remote, _obs: &Observation) -> Result<tailcut_core::Payload, ProviderError> {
        let url = format!("{}/result/{}", self.base, job.id);
        let reply = http.idempotent(|c| self.auth(c.get(&url))).await?;
        read_result(&reply)
    }

    async fn cancel(&self, http: &HttpClient, job: &Remote) -> Result<CancelReply, ProviderError> {
        let url = format!("{}/cancel/{}", self.base, job.id);
        let reply = http.once(|c| self.auth(c.post(&url))).await?;
        if !reply.ok() {
            return Err(reply.rejected());
        }
        Ok(CancelReply {
            acknowledged: true,
            note: "Modal cancel stops the input; the container idles until its scale-down window and may keep billing".into(),
        })
    }
}

/// `adapter = "modal"`: the keys as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The URL of your deployed job endpoint (required).
    pub url: Option<String>,
    /// Environment variable holding the proxy-auth token id (with `proxy_secret_env`).
    pub proxy_key_env: Option<String>,
    /// Environment variable holding the proxy-auth token secret.
    pub proxy_secret_env: Option<String>,
}

/// `adapter = "modal"`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Your endpoint.
    pub base: String,
    /// Environment variables holding the proxy-auth token id and secret, if enabled.
    pub proxy_env: Option<(String, String)>,
}

#[async_trait]
impl ProviderModule for Settings {
    type Config = Config;
    const MINIMAL_TABLE: &'static str = "url = \"https://ws--app.modal.run\"";

    fn from_config(c: Config) -> Result<Settings, Invalid> {
        let url = c
            .url
            .ok_or_else(|| Invalid::new("url", "required: the URL of your deployed job endpoint (see examples/modal_job_endpoint.py)"))?;
        let proxy_env = match (c.proxy_key_env, c.proxy_secret_env) {
            (Some(k), Some(s)) => Some((k, s)),
            (None, None) => None,
            _ => return Err(Invalid::new("proxy_key_env", "set both proxy_key_env and proxy_secret_env, or neither")),
        };
        Ok(Settings { base: trimmed(&url), proxy_env })
    }

    fn base(&self) -> &str {
        &self.base
    }

    fn key_env(&self) -> Option<&str> {
        None
    }

    fn build(&self, cx: &Build<'_>) -> Result<Arc<dyn ProviderApi>, Invalid> {
        let proxy_auth = match &self.proxy_env {
            None => None,
            Some((k, s)) => match (Secret::from_env(k), Secret::from_env(s)) {
                (Some(k), Some(s)) => Some((k, s)),
                _ if cx.strict => {
                    return Err(Invalid::new("proxy_key_env", format!("environment variables `{k}` and `{s}` must be set")));
                }
                _ => None,
            },
        };
        Ok(cx.polling(Modal { name: cx.name.into(), base: self.base.clone(), proxy_auth }))
    }

    async fn check_credentials(&self, cx: &Check<'_>) -> Result<String, CheckError> {
        let api = Modal { name: cx.name.into(), base: self.base.clone(), proxy_auth: None };
        api.health(&cx.http).await.map(|_| "endpoint reachable".to_string()).map_err(CheckError::from)
    }
}
