//! Baseten async predict: `POST …/async_predict`, `GET /async_request/{id}`,
//! `DELETE /async_request/{id}` — which only cancels while `QUEUED`. Baseten does not
//! store async outputs: they go to your webhook, and this provider module reads them back from
//! your collector at `result_url` (`{request_id}` substituted).
//!
//! Configured by [`Config`] (`adapter = "baseten"`), checked into [`Settings`], which builds
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

/// The Baseten provider module's API client (its [`PollingApi`]).
#[derive(Debug, Clone)]
pub struct Baseten {
    /// Provider key.
    pub name: String,
    /// Model base, `https://model-{id}.api.baseten.co`.
    pub base: String,
    /// Environment (`production`).
    pub environment: String,
    /// API key.
    pub key: Secret,
    /// Webhook the model's output is delivered to.
    pub webhook: Option<String>,
    /// Where the delivered output can be read back (`{request_id}` substituted).
    pub result_url: Option<String>,
}

/// Maps an async status.
pub fn state(s: &str) -> JobState {
    match s {
        "QUEUED" => JobState::Queued,
        "IN_PROGRESS" => JobState::Running,
        "SUCCEEDED" => JobState::Completed,
        "FAILED" | "EXPIRED" | "WEBHOOK_FAILED" => JobState::Failed,
        "CANCELED" => JobState::Cancelled,
        _ => JobState::Unknown,
    }
}

impl Baseten {
    fn auth(&self, r: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        r.header("Authorization", format!("Api-Key {}", self.key.expose()))
    }

    /// Read-only credential check (`GET …/async_queue_status`).
    pub async fn queue_status(&self, http: &HttpClient) -> Result<Value, ProviderError> {
        let url = format!("{}/environments/{}/async_queue_status", self.base, self.environment);
        let reply = http.idempotent(|c| self.auth(c.get(&url))).await?;
        reply.success_json()
    }
}

#[async_trait]
impl PollingApi for Baseten {
    fn provider(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { reports_queued: true, cancel_evidence: Evidence::ConfirmedTerminal, reports_billed_time: false }
    }

    async fn submit(&self, http: &HttpClient, request: &JobRequest) -> Result<Remote, ProviderError> {
        let url = format!("{}/environments/{}/async_predict", self.base, self.environment);
        let mut body = json!({"model_input": request.input()});
        if let Some(w) = &self.webhook {
            body["webhook_endpoint"] = json!(w);
        }
        let reply = http.once(|c| self.auth(c.post(&url)).json(&body)).await?;
        read_submit(&reply)
    }

    async fn poll(&self, http: &HttpClient, job: &Remote) -> Result<Observation, ProviderError> {
        let url = format!("{}/async_request/{}", self.base, job.id);
        let reply = http.idempotent(|c| self.auth(c.get(&url))).await?;
        read_status(&reply)
    }

    async fn fetch(&self, http: &HttpClient, job: &Remote, _obs: &Observation) -> Result<tailcut_core::Payload, ProviderError> {
        let Some(template) = &self.result_url else {
            return Err(ProviderError::Unsupported("Baseten keeps no async outputs: configure result_url (your webhook collector)"));
        };
        let url = template.replace("{request_id}", &job.id);
        let reply = http.idempotent(|c| c.get(&url)).await?;
        read_result(&reply)
    }

    async fn cancel(&self, http: &HttpClient, job: &Remote) -> Result<CancelReply, ProviderError> {
        let url = format!("{}/async_request/{}", self.base, job.id);
        let reply = http.once(|c| self.auth(c.delete(&url))).await?;
        read_cancel(&reply)
    }
}

/// Reads an async-predict reply: the request id.
pub fn read_submit(reply: &Reply) -> Result<Remote, ProviderError> {
    let v = reply.success_json()?;
    let id = required_str(&v, "request_id", "reply")?;
    Ok(Remote { id: id.to_string(), ..Remote::default() })
}

/// Reads an async-request status reply.
pub fn read_status(reply: &Reply) -> Result<Observation, ProviderError> {
    let v = reply.success_json()?;
    let s = required_str(&v, "status", "status")?;
    let mut obs = Observation::state(state(s));
    if let Some(errs) = v.get("errors").and_then(Value::as_array).filter(|e| !e.is_empty()) {
        let joined = errs.iter().filter_map(|e| e.get("message").and_then(Value::as_str)).collect::<Vec<_>>().join("; ");
        obs.error = Some(crate::polling::error_text(&joined));
    }
    Ok(obs)
}

/// Reads what the webhook collector kept (its `data`, or the whole document).
pub fn read_result(reply: &Reply) -> Result<tailcut_core::Payload, ProviderError> {
    let v = reply.success_json()?;
    Ok(crate::polling::json_payload(v.get("data").unwrap_or(&v)))
}

/// Reads a cancel reply (Baseten cancels only while queued).
pub fn read_cancel(reply: &Reply) -> Result<CancelReply, ProviderError> {
    let v = reply.success_json()?;
    let canceled = v.get("canceled").and_then(Value::as_bool).unwrap_or(false);
    let message = crate::polling::error_text(v.get("message").and_then(Value::as_str).unwrap_or(""));
    Ok(if canceled {
        CancelReply { acknowledged: true, note: message }
    } else {
        CancelReply { acknowledged: false, note: format!("Baseten refused: {message} (an IN_PROGRESS async request cannot be cancelled)") }
    })
}

/// `adapter = "baseten"`: the keys as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Model base (default `https://model-{model_id}.api.baseten.co`).
    pub base_url: Option<String>,
    /// Model id (required unless `base_url` is set).
    pub model_id: Option<String>,
    /// Environment (default `production`).
    pub environment: Option<String>,
    /// Environment variable holding the API key (default `BASETEN_API_KEY`).
    pub api_key_env: Option<String>,
    /// Webhook the model's output is delivered to.
    pub webhook: Option<String>,
    /// Where the delivered output can be read back (`{request_id}` substituted).
    pub result_url: Option<String>,
}

/// `adapter = "baseten"`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Model base.
    pub base: String,
    /// Environment.
    pub environment: String,
    /// Webhook.
    pub webhook: Option<String>,
    /// Collector URL template.
    pub result_url: Option<String>,
    /// Environment variable holding the API key.
    pub key_env: String,
}

impl Settings {
    fn api(&self, name: &str, key: Secret) -> Baseten {
        Baseten {
            name: name.into(),
            base: self.base.clone(),
            environment: self.environment.clone(),
            key,
            webhook: self.webhook.clone(),
            result_url: self.result_url.clone(),
        }
    }
}

#[async_trait]
impl ProviderModule for Settings {
    type Config = Config;
    const MINIMAL_TABLE: &'static str = "model_id = \"abc\"";

    fn from_config(c: Config) -> Result<Settings, Invalid> {
        let base = match (&c.base_url, &c.model_id) {
            (Some(b), _) => trimmed(b),
            (None, Some(m)) => format!("https://model-{m}.api.baseten.co"),
            (None, None) => return Err(Invalid::new("model_id", "required (or base_url)")),
        };
        Ok(Settings {
            base,
            environment: c.environment.unwrap_or_else(|| "production".into()),
            webhook: c.webhook,
            result_url: c.result_url,
            key_env: c.api_key_env.unwrap_or_else(|| "BASETEN_API_KEY".into()),
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
        Ok(cx.polling(self.api(cx.name, key)))
    }

    async fn check_credentials(&self, cx: &Check<'_>) -> Result<String, CheckError> {
        let key = cx.secret(&self.key_env, no_fallback)?;
        let api = Baseten { webhook: None, result_url: None, ..self.api(cx.name, key) };
        let v = api.queue_status(&cx.http).await?;
        Ok(format!("queue: {} queued, {} in progress", v["num_queued_requests"], v["num_in_progress_requests"]))
    }
}
