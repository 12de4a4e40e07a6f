//! Replicate predictions: create by version, by model or by deployment; poll; cancel.
//! `starting` mixes queued and booting, so it is reported as `PENDING`, never as queued.
//!
//! Configured by [`Config`] (`adapter = "replicate"`), checked into [`Settings`], which builds
//! the provider and checks its credential ([`crate::ProviderModule`]).

use crate::bounds;
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

/// What a prediction is created against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `POST /predictions` with `version`.
    Version {
        /// `owner/name:version` or a version id.
        version: String,
    },
    /// `POST /models/{owner}/{name}/predictions`.
    Model {
        /// `owner/name`.
        model: String,
    },
    /// `POST /deployments/{owner}/{name}/predictions`.
    Deployment {
        /// `owner/name`.
        deployment: String,
    },
}

/// The Replicate provider module's API client (its [`PollingApi`]).
#[derive(Debug, Clone)]
pub struct Replicate {
    /// Provider key.
    pub name: String,
    /// API base, `https://api.replicate.com/v1`.
    pub base: String,
    /// API token.
    pub token: Secret,
    /// What to run.
    pub target: Target,
    /// Ask the API to hold the create call up to N s (`Prefer: wait=N`).
    pub prefer_wait_s: Option<u32>,
}

/// Maps a prediction status.
pub fn state(s: &str) -> JobState {
    match s {
        "starting" => JobState::Pending,
        "processing" => JobState::Running,
        "succeeded" => JobState::Completed,
        "failed" => JobState::Failed,
        "canceled" | "aborted" => JobState::Cancelled,
        _ => JobState::Unknown,
    }
}

/// Reads a prediction (a status reply) for provider `name`.
pub fn observe(v: &Value, name: &str) -> Result<Observation, ProviderError> {
    let status = required_str(v, "status", "prediction")?;
    let mut obs = Observation::state(state(status));
    if let Some(t) = v.pointer("/metrics/predict_time").and_then(Value::as_f64) {
        obs.metrics.insert(format!("{name}_execution_ms"), json!(t * 1000.0));
    }
    obs.output = v.get("output").filter(|o| !o.is_null()).cloned();
    obs.error = v.get("error").and_then(Value::as_str).map(crate::polling::error_text);
    if obs.state == JobState::Completed && v.get("data_removed").and_then(Value::as_bool) == Some(true) {
        obs.state = JobState::Failed;
        obs.error = Some("prediction output was removed (retention expired)".into());
    }
    Ok(obs)
}

/// Reads a create-prediction reply: the prediction id.
pub fn read_submit(reply: &Reply) -> Result<Remote, ProviderError> {
    let v = reply.success_json()?;
    let id = required_str(&v, "id", "prediction")?;
    Ok(Remote { id: id.to_string(), ..Remote::default() })
}

/// Reads a status reply for provider `name`.
pub fn read_status(reply: &Reply, name: &str) -> Result<Observation, ProviderError> {
    observe(&reply.success_json()?, name)
}

/// Reads a cancel reply.
pub use crate::polling::read_acknowledged as read_cancel;

impl Replicate {
    fn auth(&self, r: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        r.bearer_auth(self.token.expose())
    }

    /// Read-only credential check (`GET /account`).
    pub async fn account(&self, http: &HttpClient) -> Result<Value, ProviderError> {
        let url = format!("{}/account", self.base);
        let reply = http.idempotent(|c| self.auth(c.get(&url))).await?;
        reply.success_json()
    }
}

#[async_trait]
impl PollingApi for Replicate {
    fn provider(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { reports_queued: false, cancel_evidence: Evidence::ConfirmedTerminal, reports_billed_time: true }
    }

    async fn submit(&self, http: &HttpClient, request: &JobRequest) -> Result<Remote, ProviderError> {
        let (url, body) = match &self.target {
            Target::Version { version } => (format!("{}/predictions", self.base), json!({"version": version, "input": request.input()})),
            Target::Model { model } => (format!("{}/models/{model}/predictions", self.base), json!({"input": request.input()})),
            Target::Deployment { deployment } => {
                (format!("{}/deployments/{deployment}/predictions", self.base), json!({"input": request.input()}))
            }
        };
        let reply = http
            .once(|c| {
                let mut r = self.auth(c.post(&url)).json(&body);
                if let Some(w) = self.prefer_wait_s {
                    r = r.header("Prefer", format!("wait={}", w.clamp(1, 60)));
                }
                r
            })
            .await?;
        read_submit(&reply)
    }

    async fn poll(&self, http: &HttpClient, job: &Remote) -> Result<Observation, ProviderError> {
        let url = format!("{}/predictions/{}", self.base, job.id);
        let reply = http.idempotent(|c| self.auth(c.get(&url))).await?;
        read_status(&reply, &self.name)
    }

    async fn cancel(&self, http: &HttpClient, job: &Remote) -> Result<CancelReply, ProviderError> {
        let url = format!("{}/predictions/{}/cancel", self.base, job.id);
        let reply = http.once(|c| self.auth(c.post(&url))).await?;
        read_cancel(&reply)
    }

    fn execution_metric(&self) -> Option<String> {
        Some(format!("{}_execution_ms", self.name))
    }
}

/// `adapter = "replicate"`: the keys as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// API base (default `https://api.replicate.com/v1`).
    pub base_url: Option<String>,
    /// Run this version (exactly one of `version`, `model`, `deployment`).
    pub version: Option<String>,
    /// Run this model's latest version.
    pub model: Option<String>,
    /// Run on this deployment.
    pub deployment: Option<String>,
    /// Environment variable holding the API token (default `REPLICATE_API_TOKEN`).
    pub api_key_env: Option<String>,
    /// Ask the API to hold the create call up to N seconds (1 to 60).
    pub prefer_wait_s: Option<i64>,
}

/// `adapter = "replicate"`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// API base.
    pub base: String,
    /// What to run.
    pub target: Target,
    /// `Prefer: wait=N`.
    pub prefer_wait_s: Option<u32>,
    /// Environment variable holding the API token.
    pub key_env: String,
}

#[async_trait]
impl ProviderModule for Settings {
    type Config = Config;
    const MINIMAL_TABLE: &'static str = "model = \"owner/model\"";

    fn from_config(c: Config) -> Result<Settings, Invalid> {
        let target = match (c.version, c.model, c.deployment) {
            (Some(version), None, None) => Target::Version { version },
            (None, Some(model), None) => Target::Model { model },
            (None, None, Some(deployment)) => Target::Deployment { deployment },
            _ => return Err(Invalid::new("version", "set exactly one of version, model or deployment")),
        };
        let prefer_wait_s = match c.prefer_wait_s {
            None => None,
            w => Some(u32::try_from(bounds::int("prefer_wait_s", w, 1, 1, 60, "seconds")?).unwrap_or(1)),
        };
        Ok(Settings {
            base: trimmed(c.base_url.as_deref().unwrap_or("https://api.replicate.com/v1")),
            target,
            prefer_wait_s,
            key_env: c.api_key_env.unwrap_or_else(|| "REPLICATE_API_TOKEN".into()),
        })
    }

    fn base(&self) -> &str {
        &self.base
    }

    fn key_env(&self) -> Option<&str> {
        Some(&self.key_env)
    }

    fn build(&self, cx: &Build<'_>) -> Result<Arc<dyn ProviderApi>, Invalid> {
        let token = cx.secret(&self.key_env, no_fallback)?;
        Ok(cx.polling(Replicate {
            name: cx.name.into(),
            base: self.base.clone(),
            token,
            target: self.target.clone(),
            prefer_wait_s: self.prefer_wait_s,
        }))
    }

    async fn check_credentials(&self, cx: &Check<'_>) -> Result<String, CheckError> {
        let token = cx.secret(&self.key_env, no_fallback)?;
        let api = Replicate { name: cx.name.into(), base: self.base.clone(), token, target: self.target.clone(), prefer_wait_s: None };
        let account = api.account(&cx.http).await?;
        Ok(format!("account {}", account.get("username").and_then(Value::as_str).unwrap_or("?")))
    }
}
