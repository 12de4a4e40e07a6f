//! A generic HTTP job API described in configuration: submit / status / result / cancel
//! with URL templates, JSON bodies with `"{request}"` substitution, dotted paths to the
//! job id, state, result and metrics, a state map onto tailcut's states, and `${ENV}`
//! substitution in headers and URLs. The reference tool's YAML field names are accepted
//! too (`job_id_path`, `audio_b64_path`, `metrics_path`, `state_map` with member names).
//!
//! Configured by [`Config`] (`adapter = "http"`), checked into [`Settings`], which builds
//! the provider and checks its credential ([`crate::ProviderModule`]).

use crate::bounds::{self, Lo};
use crate::client::{HttpClient, Reply};
use crate::config::{Build, Check, CheckError, Invalid, ProviderModule};
use crate::polling::{json_payload, path, CancelReply, Observation, PollingApi, Remote};
use async_trait::async_trait;
use base64::Engine;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use tailcut_core::receipt::Evidence;
use tailcut_core::{Capabilities, JobRequest, JobState, Payload, ProviderApi, ProviderError};

/// One call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Call {
    /// HTTP method (default POST for submit, GET for status/result, POST for cancel).
    #[serde(default)]
    pub method: Option<String>,
    /// URL template (`{job_id}`, `${ENV}`).
    pub url: String,
    /// Body template; a value equal to `"{request}"` becomes the request input.
    #[serde(default)]
    pub body: Option<Value>,
    /// (Reference layout) job-id path inside `submit`.
    #[serde(default)]
    pub job_id_path: Option<String>,
    /// (Reference layout) state path inside `status`.
    #[serde(default)]
    pub state_path: Option<String>,
    /// (Reference layout) state map inside `status`.
    #[serde(default)]
    pub state_map: Option<BTreeMap<String, String>>,
    /// (Reference layout) base64 payload path inside `result`.
    #[serde(default)]
    pub audio_b64_path: Option<String>,
    /// (Reference layout) sample-rate path inside `result` (read, unused).
    #[serde(default)]
    pub sample_rate_path: Option<String>,
    /// (Reference layout) metrics path inside `result`.
    #[serde(default)]
    pub metrics_path: Option<String>,
    /// (Reference layout) result poll interval inside `result`, seconds.
    #[serde(default)]
    pub poll_interval_s: Option<f64>,
}

/// The whole API description.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenericSpec {
    /// Headers on every call (`${ENV}` substituted).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Submit call.
    pub submit: Call,
    /// Dotted path to the job id in the submit reply.
    #[serde(default = "default_id_path", alias = "job_id_path")]
    pub id_path: String,
    /// Status call.
    pub status: Option<Call>,
    /// Dotted path to the state in the status reply.
    #[serde(default = "default_state_path")]
    pub state_path: String,
    /// Service state (case-insensitive) → tailcut state (`queued`, `running`,
    /// `completed`, `failed`, `cancelled`, or the reference's `IN_QUEUE`, `IN_PROGRESS`, ...).
    #[serde(default)]
    pub state_map: BTreeMap<String, String>,
    /// Result call (else the result is read from the status reply).
    pub result: Option<Call>,
    /// Dotted path to the result in the result (or status) reply.
    #[serde(default, alias = "output_path")]
    pub result_path: Option<String>,
    /// Dotted path to a base64 payload (the reference's audio field).
    #[serde(default)]
    pub audio_b64_path: Option<String>,
    /// Dotted path to a metrics object.
    #[serde(default)]
    pub metrics_path: Option<String>,
    /// Cancel call.
    pub cancel: Option<Call>,
}

impl GenericSpec {
    /// Lifts the reference tool's per-call fields (`submit.job_id_path`,
    /// `status.state_path` / `state_map`, `result.audio_b64_path` / `metrics_path`) to
    /// the top level, so its configs work unchanged.
    pub fn normalized(mut self) -> GenericSpec {
        if let Some(p) = self.submit.job_id_path.take() {
            self.id_path = p;
        }
        if let Some(st) = self.status.as_mut() {
            if let Some(p) = st.state_path.take() {
                self.state_path = p;
            }
            if let Some(m) = st.state_map.take() {
                self.state_map.extend(m);
            }
        }
        if let Some(r) = self.result.as_mut() {
            if let Some(p) = r.audio_b64_path.take() {
                self.audio_b64_path = Some(p);
            }
            if let Some(p) = r.metrics_path.take() {
                self.metrics_path = Some(p);
            }
        }
        self
    }
}

fn default_id_path() -> String {
    "id".into()
}

fn default_state_path() -> String {
    "status".into()
}

/// The generic provider module's API client (its [`PollingApi`]).
#[derive(Debug, Clone)]
pub struct Generic {
    /// Provider key.
    pub name: String,
    /// The description.
    pub spec: GenericSpec,
}

/// Replaces `${VAR}` from the environment; an unset variable is an error naming it.
pub fn substitute_env(text: &str) -> Result<String, ProviderError> {
    substitute(text, |_| false)
}

/// Whether a variable's name says it holds a credential (`API_KEY`, `TOKEN`, ...).
fn names_a_credential(var: &str) -> bool {
    let up = var.to_ascii_uppercase();
    ["KEY", "TOKEN", "SECRET", "PASS", "AUTH", "CRED"].iter().any(|w| up.contains(w))
}

/// [`substitute_env`], registering for redaction ([`crate::redact`]) the value of each
/// variable `secret` picks.
fn substitute(text: &str, secret: impl Fn(&str) -> bool) -> Result<String, ProviderError> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let var = &after[..end];
        let value = std::env::var(var)
            .map_err(|_| ProviderError::Rejected { status: 0, message: format!("environment variable `{var}` is not set") })?;
        if secret(var) {
            crate::redact::register(&value);
        }
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn fill(body: &Value, request: &Value) -> Value {
    match body {
        Value::String(s) if s == "{request}" => request.clone(),
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), fill(v, request))).collect()),
        Value::Array(a) => Value::Array(a.iter().map(|v| fill(v, request)).collect()),
        other => other.clone(),
    }
}

/// Maps a state through the configured map, then the built-in one.
pub fn map_state(raw: &str, map: &BTreeMap<String, String>) -> JobState {
    let up = raw.to_ascii_uppercase();
    let target = map.iter().find(|(k, _)| k.to_ascii_uppercase() == up).map(|(_, v)| v.to_ascii_uppercase()).unwrap_or(up);
    match target.as_str() {
        "QUEUED" | "IN_QUEUE" | "PENDING_QUEUE" => JobState::Queued,
        "RUNNING" | "IN_PROGRESS" | "PROCESSING" => JobState::Running,
        "PENDING" => JobState::Pending,
        "COMPLETED" | "SUCCEEDED" | "SUCCESS" => JobState::Completed,
        "FAILED" | "ERROR" => JobState::Failed,
        "CANCELLED" | "CANCELED" => JobState::Cancelled,
        _ => JobState::Unknown,
    }
}

impl Generic {
    fn request(
        &self,
        c: &reqwest::Client,
        call: &Call,
        default: &str,
        job_id: &str,
        body: Option<Value>,
    ) -> Result<reqwest::RequestBuilder, ProviderError> {
        // What goes into headers is a credential as a rule; in a URL, only a variable
        // named like one (a host or a path is not, and redacting it would mangle replies).
        let url = substitute(&call.url, names_a_credential)?.replace("{job_id}", job_id);
        let method = call.method.clone().unwrap_or_else(|| default.into()).to_ascii_uppercase();
        let m = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|_| ProviderError::Rejected { status: 0, message: format!("bad method {method}") })?;
        let mut r = c.request(m.clone(), url);
        for (k, v) in &self.spec.headers {
            r = r.header(k, substitute(v, |_| true)?);
        }
        if let Some(b) = body {
            if matches!(method.as_str(), "POST" | "PUT" | "PATCH") {
                r = r.json(&b);
            }
        }
        Ok(r)
    }

    /// Reads a submit reply: the job id at `id_path`.
    pub fn read_submit(&self, reply: &Reply) -> Result<Remote, ProviderError> {
        let v = reply.success_json()?;
        let id = path(&v, &self.spec.id_path)
            .and_then(|x| x.as_str().map(str::to_string).or_else(|| x.as_i64().map(|n| n.to_string())))
            .ok_or_else(|| ProviderError::MalformedResponse { reason: format!("no job id at `{}`", self.spec.id_path) })?;
        Ok(Remote { id, ..Remote::default() })
    }

    /// Reads a status reply: the state at `state_path` through the state map, the
    /// metrics at `metrics_path`, and the reply itself as the output of a completed job
    /// when no result call is configured.
    pub fn read_status(&self, reply: &Reply) -> Result<Observation, ProviderError> {
        let v = reply.success_json()?;
        let raw = path(&v, &self.spec.state_path)
            .and_then(Value::as_str)
            .ok_or_else(|| ProviderError::MalformedResponse { reason: format!("no state at `{}`", self.spec.state_path) })?;
        let mut obs = Observation::state(map_state(raw, &self.spec.state_map));
        if let Some(Value::Object(m)) = self.spec.metrics_path.as_deref().and_then(|p| path(&v, p)) {
            obs.metrics = m.clone();
        }
        if obs.state == JobState::Completed && self.spec.result.is_none() {
            obs.output = Some(v);
        }
        Ok(obs)
    }

    /// Reads a result reply: the payload.
    pub fn read_result(&self, reply: &Reply) -> Result<Payload, ProviderError> {
        self.payload(&reply.success_json()?)
    }

    /// The payload in a result (or status) document.
    pub fn payload(&self, v: &Value) -> Result<Payload, ProviderError> {
        if let Some(p) = &self.spec.audio_b64_path {
            let b64 = path(v, p)
                .and_then(Value::as_str)
                .ok_or_else(|| ProviderError::MalformedResponse { reason: format!("no base64 payload at `{p}`") })?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|e| ProviderError::MalformedResponse { reason: format!("bad base64 at `{p}`: {e}") })?;
            return Ok(Payload { bytes: bytes.into(), content_type: "application/octet-stream".into() });
        }
        let p = self.spec.result_path.as_deref().unwrap_or("$");
        path(v, p)
            .filter(|x| !x.is_null())
            .map(json_payload)
            .ok_or_else(|| ProviderError::MalformedResponse { reason: format!("no result at `{p}`") })
    }
}

#[async_trait]
impl PollingApi for Generic {
    fn provider(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        let queued = self.spec.status.is_some() && self.spec.state_map.values().any(|v| map_state(v, &BTreeMap::new()) == JobState::Queued);
        Capabilities {
            reports_queued: queued,
            cancel_evidence: if self.spec.cancel.is_some() { Evidence::ConfirmedTerminal } else { Evidence::NoEvidence },
            reports_billed_time: false,
        }
    }

    async fn submit(&self, http: &HttpClient, request: &JobRequest) -> Result<Remote, ProviderError> {
        let body = self.spec.submit.body.as_ref().map_or_else(|| request.input().clone(), |b| fill(b, request.input()));
        let call = self.spec.submit.clone();
        // Validate the template (methods, ${ENV}) once, so the retry closure cannot fail.
        drop(self.request(http.raw(), &call, "POST", "", Some(body.clone()))?);
        let reply = http
            .once(|c| self.request(c, &call, "POST", "", Some(body.clone())).unwrap_or_else(|_| c.get("http://invalid.invalid")))
            .await?;
        self.read_submit(&reply)
    }

    async fn poll(&self, http: &HttpClient, job: &Remote) -> Result<Observation, ProviderError> {
        let Some(call) = &self.spec.status else {
            return Ok(Observation::state(JobState::Pending));
        };
        drop(self.request(http.raw(), call, "GET", &job.id, None)?);
        let reply =
            http.idempotent(|c| self.request(c, call, "GET", &job.id, None).unwrap_or_else(|_| c.get("http://invalid.invalid"))).await?;
        self.read_status(&reply)
    }

    async fn fetch(&self, http: &HttpClient, job: &Remote, obs: &Observation) -> Result<Payload, ProviderError> {
        match &self.spec.result {
            None => obs
                .output
                .as_ref()
                .ok_or_else(|| ProviderError::MalformedResponse { reason: "no result".into() })
                .and_then(|v| self.payload(v)),
            Some(call) => {
                drop(self.request(http.raw(), call, "GET", &job.id, None)?);
                let reply = http
                    .idempotent(|c| self.request(c, call, "GET", &job.id, None).unwrap_or_else(|_| c.get("http://invalid.invalid")))
                    .await?;
                self.read_result(&reply)
            }
        }
    }

    async fn cancel(&self, http: &HttpClient, job: &Remote) -> Result<CancelReply, ProviderError> {
        let Some(call) = &self.spec.cancel else {
            return Ok(CancelReply { acknowledged: false, note: "no cancel endpoint configured".into() });
        };
        drop(self.request(http.raw(), call, "POST", &job.id, None)?);
        let reply = http.once(|c| self.request(c, call, "POST", &job.id, None).unwrap_or_else(|_| c.get("http://invalid.invalid"))).await?;
        if !reply.ok() {
            return Err(reply.rejected());
        }
        Ok(CancelReply { acknowledged: true, note: String::new() })
    }
}

/// `adapter = "http"`: the keys as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The job API description (required).
    pub http: Option<Box<GenericSpec>>,
}

/// `adapter = "http"`, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The description, with the reference tool's per-call fields lifted.
    pub spec: Box<GenericSpec>,
}

#[async_trait]
impl ProviderModule for Settings {
    type Config = Config;
    const MINIMAL_TABLE: &'static str = "http = { submit = { url = \"https://x/jobs\" } }";

    fn from_config(c: Config) -> Result<Settings, Invalid> {
        let spec = c.http.ok_or_else(|| Invalid::new("http", "required: the job API description (submit, status, result, cancel)"))?;
        for (call, c) in [
            ("submit", Some(&spec.submit)),
            ("status", spec.status.as_ref()),
            ("result", spec.result.as_ref()),
            ("cancel", spec.cancel.as_ref()),
        ] {
            if let Some(v) = c.and_then(|c| c.poll_interval_s) {
                bounds::float(&format!("http.{call}.poll_interval_s"), Some(v), 0.0, Lo::Excl(0.0), 3600.0, "seconds")?;
            }
        }
        Ok(Settings { spec: Box::new(spec.normalized()) })
    }

    fn base(&self) -> &str {
        &self.spec.submit.url
    }

    fn key_env(&self) -> Option<&str> {
        None
    }

    fn build(&self, cx: &Build<'_>) -> Result<Arc<dyn ProviderApi>, Invalid> {
        Ok(cx.polling(Generic { name: cx.name.into(), spec: self.spec.as_ref().clone() }))
    }

    async fn check_credentials(&self, _cx: &Check<'_>) -> Result<String, CheckError> {
        Ok("unverifiable: no read-only call is configured for this job API".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_map_accepts_reference_member_names() {
        let mut m = BTreeMap::new();
        m.insert("waiting".to_string(), "QUEUED".to_string());
        m.insert("working".to_string(), "in_progress".to_string());
        assert_eq!(map_state("WAITING", &m), JobState::Queued);
        assert_eq!(map_state("working", &m), JobState::Running);
        assert_eq!(map_state("succeeded", &m), JobState::Completed);
        assert_eq!(map_state("weird", &m), JobState::Unknown);
    }

    #[test]
    fn request_template_substitutes_the_input() {
        let t = serde_json::json!({"payload": "{request}", "meta": {"k": 1}});
        let v = fill(&t, &serde_json::json!({"text": "hi"}));
        assert_eq!(v["payload"]["text"], "hi");
    }

    #[test]
    fn env_substitution_names_missing_variables() {
        let e = substitute_env("Bearer ${TAILCUT_SURELY_UNSET_VAR}").unwrap_err();
        assert!(e.to_string().contains("TAILCUT_SURELY_UNSET_VAR"));
        assert_eq!(substitute_env("plain").unwrap(), "plain");
    }

    #[test]
    fn reference_nested_layout_is_lifted() {
        let spec: GenericSpec = serde_json::from_value(serde_json::json!({
            "submit": {"method": "POST", "url": "http://x/jobs", "job_id_path": "job.id"},
            "status": {"url": "http://x/jobs/{job_id}", "state_path": "state", "state_map": {"waiting": "QUEUED"}},
            "result": {"url": "http://x/r/{job_id}", "audio_b64_path": "audio", "metrics_path": "m", "poll_interval_s": 1.0}
        }))
        .unwrap();
        let n = spec.normalized();
        assert_eq!((n.id_path.as_str(), n.state_path.as_str()), ("job.id", "state"));
        assert_eq!(n.audio_b64_path.as_deref(), Some("audio"));
        assert_eq!(n.state_map["waiting"], "QUEUED");
    }

    #[test]
    fn reference_field_names_parse() {
        let spec: GenericSpec = serde_json::from_value(serde_json::json!({
            "submit": {"method": "POST", "url": "http://x/jobs", "body": {"input": "{request}"}},
            "job_id_path": "job.id",
            "status": {"url": "http://x/jobs/{job_id}"},
            "state_path": "state",
            "state_map": {"done": "COMPLETED"},
            "result": {"url": "http://x/jobs/{job_id}/result"},
            "audio_b64_path": "audio",
            "metrics_path": "metrics",
            "cancel": {"method": "DELETE", "url": "http://x/jobs/{job_id}"}
        }))
        .unwrap();
        assert_eq!(spec.id_path, "job.id");
    }
}
