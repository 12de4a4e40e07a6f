//! HTTP provider adapters as configured: which fields each adapter takes, their
//! defaults, and how credentials are found (environment variables named in the config,
//! or the provider CLI's config file). Secrets are resolved only when a live command
//! builds the providers, never printed, and a missing one is an error naming the key
//! and the variable.

use crate::bounds::{self, Lo};
use crate::raw::RawProvider;
use crate::ConfigError;
use std::sync::Arc;
use std::time::Duration;
use tailcut_core::{ProviderApi, RateNanoUsdPerSec};
use tailcut_providers::baseten::Baseten;
use tailcut_providers::cerebrium::Cerebrium;
use tailcut_providers::fal::Fal;
use tailcut_providers::generic::{Generic, GenericSpec};
use tailcut_providers::modal::Modal;
use tailcut_providers::openai::{Endpoint, OpenAi};
use tailcut_providers::replicate::{Replicate, Target};
use tailcut_providers::runpod::RunPod;
use tailcut_providers::{HttpClient, PollSettings, PollingBackend, Secret};

/// Which HTTP adapter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteKind {
    /// RunPod serverless queue API.
    RunPod,
    /// Replicate predictions.
    Replicate,
    /// fal queue.
    Fal,
    /// Baseten async predict.
    Baseten,
    /// Modal web-endpoint pattern.
    Modal,
    /// Cerebrium REST inference.
    Cerebrium,
    /// OpenAI-compatible server.
    OpenAi,
    /// Generic JSON job API.
    Http,
}

impl RemoteKind {
    fn parse(s: &str) -> Option<RemoteKind> {
        Some(match s {
            "runpod" => RemoteKind::RunPod,
            "replicate" => RemoteKind::Replicate,
            "fal" => RemoteKind::Fal,
            "baseten" => RemoteKind::Baseten,
            "modal" => RemoteKind::Modal,
            "cerebrium" => RemoteKind::Cerebrium,
            "openai" => RemoteKind::OpenAi,
            "http" => RemoteKind::Http,
            _ => return None,
        })
    }

    /// The config name.
    pub fn name(self) -> &'static str {
        match self {
            RemoteKind::RunPod => "runpod",
            RemoteKind::Replicate => "replicate",
            RemoteKind::Fal => "fal",
            RemoteKind::Baseten => "baseten",
            RemoteKind::Modal => "modal",
            RemoteKind::Cerebrium => "cerebrium",
            RemoteKind::OpenAi => "openai",
            RemoteKind::Http => "http",
        }
    }
}

/// A configured HTTP adapter (credentials not yet resolved).
#[derive(Clone, Debug)]
pub struct RemoteAdapter {
    /// Which.
    pub kind: RemoteKind,
    /// Resolved base URL (or the full URL for Modal/Cerebrium).
    pub base: String,
    /// Environment variable holding the credential.
    pub key_env: Option<String>,
    /// Replicate target.
    pub target: Option<Target>,
    /// fal model / OpenAI model.
    pub model: Option<String>,
    /// Baseten environment.
    pub environment: String,
    /// Baseten webhook and collector.
    pub webhook: Option<String>,
    /// Baseten collector URL template.
    pub result_url: Option<String>,
    /// OpenAI route.
    pub route: Endpoint,
    /// OpenAI streaming.
    pub stream: bool,
    /// Modal proxy auth env vars.
    pub proxy_env: Option<(String, String)>,
    /// Replicate `Prefer: wait`.
    pub prefer_wait_s: Option<u32>,
    /// Generic spec.
    pub spec: Option<GenericSpec>,
    /// Polling.
    pub poll: PollSettings,
    /// Per-request timeout.
    pub timeout: Duration,
}

const ALLOWED_COMMON: &[&str] =
    &["adapter", "rate_usd_per_s", "idle_window_s", "expected_run_s", "poll_interval_ms", "cancel_window_ms", "timeout_s"];

fn present(r: &RawProvider) -> Vec<(&'static str, bool)> {
    vec![
        ("sim", r.sim.is_some()),
        ("base_url", r.base_url.is_some()),
        ("url", r.url.is_some()),
        ("endpoint_id", r.endpoint_id.is_some()),
        ("api_key_env", r.api_key_env.is_some()),
        ("version", r.version.is_some()),
        ("model", r.model.is_some()),
        ("deployment", r.deployment.is_some()),
        ("model_id", r.model_id.is_some()),
        ("environment", r.environment.is_some()),
        ("webhook", r.webhook.is_some()),
        ("result_url", r.result_url.is_some()),
        ("route", r.route.is_some()),
        ("stream", r.stream.is_some()),
        ("project_id", r.project_id.is_some()),
        ("app", r.app.is_some()),
        ("function", r.function.is_some()),
        ("proxy_key_env", r.proxy_key_env.is_some()),
        ("proxy_secret_env", r.proxy_secret_env.is_some()),
        ("prefer_wait_s", r.prefer_wait_s.is_some()),
        ("http", r.http.is_some()),
    ]
}

/// Validates an HTTP adapter's keys and fills in defaults.
pub(crate) fn parse(file: &str, key: &str, raw: &RawProvider) -> Result<Option<RemoteAdapter>, ConfigError> {
    let err = |k: &str, e: String| ConfigError::invalid(file, format!("{key}.{k}"), e);
    let Some(kind) = RemoteKind::parse(&raw.adapter) else {
        if raw.adapter == "sim" {
            return Ok(None);
        }
        return Err(err(
            "adapter",
            format!("unknown adapter `{}`; expected sim, runpod, replicate, fal, baseten, modal, cerebrium, openai or http", raw.adapter),
        ));
    };
    let allowed: &[&str] = match kind {
        RemoteKind::RunPod => &["base_url", "endpoint_id", "api_key_env"],
        RemoteKind::Replicate => &["base_url", "version", "model", "deployment", "api_key_env", "prefer_wait_s"],
        RemoteKind::Fal => &["base_url", "model", "api_key_env"],
        RemoteKind::Baseten => &["base_url", "model_id", "environment", "api_key_env", "webhook", "result_url"],
        RemoteKind::Modal => &["url", "proxy_key_env", "proxy_secret_env"],
        RemoteKind::Cerebrium => &["base_url", "url", "project_id", "app", "function", "api_key_env"],
        RemoteKind::OpenAi => &["base_url", "model", "api_key_env", "route", "stream"],
        RemoteKind::Http => &["http"],
    };
    if let Some((f, _)) = present(raw).into_iter().find(|(f, set)| *set && !allowed.contains(f) && !ALLOWED_COMMON.contains(f)) {
        return Err(err(f, format!("not used by adapter = \"{}\" (it takes: {})", kind.name(), allowed.join(", "))));
    }
    if raw.rate_usd_per_s.is_none() {
        return Err(err("rate_usd_per_s", "required for a real provider: money is real, so tailcut needs its billed rate ($/s)".into()));
    }
    let at = |k: &str| format!("{key}.{k}");
    let poll = PollSettings {
        interval: bounds::millis(file, &at("poll_interval_ms"), raw.poll_interval_ms, 1000, 1, 3_600_000)?,
        cancel_window: bounds::millis(file, &at("cancel_window_ms"), raw.cancel_window_ms, 20_000, 1, 3_600_000)?,
        max_poll_failures: 5,
    };
    let timeout = bounds::seconds(file, &at("timeout_s"), raw.timeout_s, 30.0, Lo::Excl(0.0), 86_400.0)?;
    let trim = |s: &str| s.trim_end_matches('/').to_string();
    let mut a = RemoteAdapter {
        kind,
        base: String::new(),
        key_env: raw.api_key_env.clone(),
        target: None,
        model: raw.model.clone(),
        environment: raw.environment.clone().unwrap_or_else(|| "production".into()),
        webhook: raw.webhook.clone(),
        result_url: raw.result_url.clone(),
        route: Endpoint::Chat,
        stream: raw.stream.unwrap_or(false),
        proxy_env: None,
        prefer_wait_s: None,
        spec: None,
        poll,
        timeout,
    };
    match kind {
        RemoteKind::RunPod => {
            let base = trim(raw.base_url.as_deref().unwrap_or("https://api.runpod.ai/v2"));
            let ep = raw.endpoint_id.as_deref().ok_or_else(|| err("endpoint_id", "required (your serverless endpoint id)".into()))?;
            a.base = format!("{base}/{ep}");
            a.key_env.get_or_insert_with(|| "RUNPOD_API_KEY".into());
        }
        RemoteKind::Replicate => {
            a.base = trim(raw.base_url.as_deref().unwrap_or("https://api.replicate.com/v1"));
            a.target = Some(match (&raw.version, &raw.model, &raw.deployment) {
                (Some(v), None, None) => Target::Version(v.clone()),
                (None, Some(m), None) => Target::Model(m.clone()),
                (None, None, Some(d)) => Target::Deployment(d.clone()),
                _ => return Err(err("version", "set exactly one of version, model or deployment".into())),
            });
            a.model = None;
            a.prefer_wait_s = match raw.prefer_wait_s {
                None => None,
                w => Some(bounds::int(file, &at("prefer_wait_s"), w, 1, 1, 60, "seconds")? as u32),
            };
            a.key_env.get_or_insert_with(|| "REPLICATE_API_TOKEN".into());
        }
        RemoteKind::Fal => {
            a.base = trim(raw.base_url.as_deref().unwrap_or("https://queue.fal.run"));
            if raw.model.is_none() {
                return Err(err("model", "required (e.g. fal-ai/flux/dev)".into()));
            }
            a.key_env.get_or_insert_with(|| "FAL_KEY".into());
        }
        RemoteKind::Baseten => {
            a.base = match (&raw.base_url, &raw.model_id) {
                (Some(b), _) => trim(b),
                (None, Some(m)) => format!("https://model-{m}.api.baseten.co"),
                (None, None) => return Err(err("model_id", "required (or base_url)".into())),
            };
            a.key_env.get_or_insert_with(|| "BASETEN_API_KEY".into());
        }
        RemoteKind::Modal => {
            a.base = trim(raw.url.as_deref().ok_or_else(|| {
                err("url", "required: the URL of your deployed job endpoint (see examples/modal_job_endpoint.py)".into())
            })?);
            a.key_env = None;
            a.proxy_env = match (&raw.proxy_key_env, &raw.proxy_secret_env) {
                (Some(k), Some(s)) => Some((k.clone(), s.clone())),
                (None, None) => None,
                _ => return Err(err("proxy_key_env", "set both proxy_key_env and proxy_secret_env, or neither".into())),
            };
        }
        RemoteKind::Cerebrium => {
            a.base = match (&raw.url, &raw.project_id, &raw.app) {
                (Some(u), _, _) => trim(u),
                (None, Some(p), Some(app)) => {
                    let base = trim(raw.base_url.as_deref().unwrap_or("https://api.aws.us-east-1.cerebrium.ai"));
                    format!("{base}/v4/{p}/{app}/{}", raw.function.as_deref().unwrap_or("predict"))
                }
                _ => return Err(err("url", "required (or project_id and app)".into())),
            };
            a.key_env.get_or_insert_with(|| "CEREBRIUM_TOKEN".into());
        }
        RemoteKind::OpenAi => {
            a.base = trim(raw.base_url.as_deref().ok_or_else(|| err("base_url", "required (e.g. http://127.0.0.1:8000/v1)".into()))?);
            a.route = match raw.route.as_deref() {
                None | Some("chat") => Endpoint::Chat,
                Some("completions") => Endpoint::Completions,
                Some(other) => return Err(err("route", format!("`{other}`: expected chat or completions"))),
            };
        }
        RemoteKind::Http => {
            let table =
                raw.http.clone().ok_or_else(|| err("http", "required: the job API description (submit, status, result, cancel)".into()))?;
            let spec: GenericSpec = serde_path_to_error::deserialize(toml::Value::Table(table))
                .map_err(|e| err(&format!("http.{}", e.path()), e.into_inner().to_string()))?;
            for (call, c) in [
                ("submit", Some(&spec.submit)),
                ("status", spec.status.as_ref()),
                ("result", spec.result.as_ref()),
                ("cancel", spec.cancel.as_ref()),
            ] {
                if let Some(v) = c.and_then(|c| c.poll_interval_s) {
                    bounds::float(file, &at(&format!("http.{call}.poll_interval_s")), Some(v), 0.0, Lo::Excl(0.0), 3600.0, "seconds")?;
                }
            }
            let spec = spec.normalized();
            a.base = spec.submit.url.clone();
            a.spec = Some(spec);
        }
    }
    Ok(Some(a))
}

/// Credentials from the RunPod CLI's config file (`~/.runpod/config.toml`, `[default] api_key`).
fn runpod_cli_key() -> Option<Secret> {
    let home = std::env::var_os("HOME")?;
    let text = std::fs::read_to_string(std::path::Path::new(&home).join(".runpod/config.toml")).ok()?;
    let t: toml::Table = text.parse().ok()?;
    t.get("default")?.get("api_key")?.as_str().map(Secret::new)
}

impl RemoteAdapter {
    /// Whether submitting here costs money: anything not on a loopback address.
    pub fn is_paid(&self) -> bool {
        let host = self.base.split("://").nth(1).unwrap_or(&self.base).split(['/', ':']).next().unwrap_or("");
        !(host == "127.0.0.1" || host == "localhost" || host == "[" || host.starts_with("[::1") || self.base.contains("://[::1]"))
    }

    fn secret(&self, file: &str, key: &str, strict: bool) -> Result<Option<Secret>, ConfigError> {
        let Some(var) = &self.key_env else { return Ok(None) };
        if let Some(s) = Secret::from_env(var) {
            return Ok(Some(s));
        }
        if self.kind == RemoteKind::RunPod {
            if let Some(s) = runpod_cli_key() {
                return Ok(Some(s));
            }
        }
        if !strict || !self.is_paid() || self.kind == RemoteKind::OpenAi {
            return Ok(if self.kind == RemoteKind::OpenAi { None } else { Some(Secret::new("")) });
        }
        Err(ConfigError::invalid(
            file,
            format!("{key}.api_key_env"),
            format!("environment variable `{var}` is not set (the {} credential)", self.kind.name()),
        ))
    }

    /// Builds the backend. `strict` requires credentials to be present.
    pub fn backend(
        &self,
        file: &str,
        key: &str,
        name: &str,
        rate: RateNanoUsdPerSec,
        strict: bool,
    ) -> Result<Arc<dyn ProviderApi>, ConfigError> {
        let http = HttpClient::new(self.timeout, tailcut_providers::client::RetryPolicy::default())
            .map_err(|e| ConfigError::invalid(file, key, format!("cannot build the HTTP client: {e}")))?;
        let secret = self.secret(file, key, strict)?;
        let key_or_empty = || secret.clone().unwrap_or_else(|| Secret::new(""));
        Ok(match self.kind {
            RemoteKind::RunPod => Arc::new(PollingBackend::new(
                RunPod { name: name.into(), base: self.base.clone(), key: key_or_empty() },
                http,
                self.poll,
                rate,
            )),
            RemoteKind::Replicate => Arc::new(PollingBackend::new(
                Replicate {
                    name: name.into(),
                    base: self.base.clone(),
                    token: key_or_empty(),
                    target: self.target.clone().unwrap_or(Target::Model(String::new())),
                    prefer_wait_s: self.prefer_wait_s,
                },
                http,
                self.poll,
                rate,
            )),
            RemoteKind::Fal => Arc::new(PollingBackend::new(
                Fal { name: name.into(), base: self.base.clone(), model: self.model.clone().unwrap_or_default(), key: key_or_empty() },
                http,
                self.poll,
                rate,
            )),
            RemoteKind::Baseten => Arc::new(PollingBackend::new(
                Baseten {
                    name: name.into(),
                    base: self.base.clone(),
                    environment: self.environment.clone(),
                    key: key_or_empty(),
                    webhook: self.webhook.clone(),
                    result_url: self.result_url.clone(),
                },
                http,
                self.poll,
                rate,
            )),
            RemoteKind::Modal => {
                let proxy = match &self.proxy_env {
                    None => None,
                    Some((k, s)) => match (Secret::from_env(k), Secret::from_env(s)) {
                        (Some(k), Some(s)) => Some((k, s)),
                        _ if strict => {
                            return Err(ConfigError::invalid(
                                file,
                                format!("{key}.proxy_key_env"),
                                format!("environment variables `{k}` and `{s}` must be set"),
                            ))
                        }
                        _ => None,
                    },
                };
                Arc::new(PollingBackend::new(
                    Modal { name: name.into(), base: self.base.clone(), proxy_auth: proxy },
                    http,
                    self.poll,
                    rate,
                ))
            }
            RemoteKind::Cerebrium => Arc::new(Cerebrium { name: name.into(), url: self.base.clone(), token: key_or_empty(), http }),
            RemoteKind::OpenAi => Arc::new(OpenAi {
                name: name.into(),
                base: self.base.clone(),
                model: self.model.clone(),
                key: secret,
                endpoint: self.route,
                stream: self.stream,
                check_json: true,
                http,
                prepared: Default::default(),
            }),
            RemoteKind::Http => Arc::new(PollingBackend::new(
                Generic {
                    name: name.into(),
                    spec: self.spec.clone().ok_or_else(|| ConfigError::invalid(file, format!("{key}.http"), "missing"))?,
                },
                http,
                self.poll,
                rate,
            )),
        })
    }
}

impl RemoteAdapter {
    /// A read-only credential check (never submits work). `Ok(detail)` when the provider
    /// accepted the credential, `Err(why)` otherwise; `Ok` with "unverifiable" where no
    /// read-only call exists.
    pub async fn check(&self, name: &str) -> Result<String, String> {
        let http = HttpClient::new(
            self.timeout.min(Duration::from_secs(20)),
            tailcut_providers::client::RetryPolicy { attempts: 2, ..Default::default() },
        )
        .map_err(|e| e.to_string())?;
        let secret = self.key_env.as_deref().and_then(Secret::from_env).or_else(|| {
            if self.kind == RemoteKind::RunPod {
                runpod_cli_key()
            } else {
                None
            }
        });
        if self.key_env.is_some() && secret.is_none() && self.is_paid() && self.kind != RemoteKind::OpenAi {
            return Err(format!("credential missing: set {}", self.key_env.as_deref().unwrap_or("?")));
        }
        let key = secret.clone().unwrap_or_else(|| Secret::new(""));
        let outcome = match self.kind {
            RemoteKind::RunPod => RunPod { name: name.into(), base: self.base.clone(), key }
                .health(&http)
                .await
                .map(|v| format!("health ok: {}", v["workers"]))
                .map_err(|e| e.to_string()),
            RemoteKind::Replicate => Replicate {
                name: name.into(),
                base: self.base.clone(),
                token: key,
                target: Target::Model(String::new()),
                prefer_wait_s: None,
            }
            .account(&http)
            .await
            .map(|v| format!("account {}", v.get("username").and_then(serde_json::Value::as_str).unwrap_or("?")))
            .map_err(|e| e.to_string()),
            RemoteKind::Baseten => Baseten {
                name: name.into(),
                base: self.base.clone(),
                environment: self.environment.clone(),
                key,
                webhook: None,
                result_url: None,
            }
            .queue_status(&http)
            .await
            .map(|v| format!("queue: {} queued, {} in progress", v["num_queued_requests"], v["num_in_progress_requests"]))
            .map_err(|e| e.to_string()),
            RemoteKind::Modal => Modal { name: name.into(), base: self.base.clone(), proxy_auth: None }
                .health(&http)
                .await
                .map(|_| "endpoint reachable".to_string())
                .map_err(|e| e.to_string()),
            RemoteKind::Fal => {
                // No read-only endpoint: ask for an unknown request's status; 404 means the key was accepted.
                let app: Vec<&str> = self.model.as_deref().unwrap_or("").split('/').take(2).collect();
                let url = format!("{}/{}/requests/00000000-0000-0000-0000-000000000000/status", self.base, app.join("/"));
                let reply = http
                    .idempotent(|c| c.get(&url).header("Authorization", format!("Key {}", key.expose())))
                    .await
                    .map_err(|e| e.to_string())?;
                match reply.status {
                    401 | 403 => Err(format!("credential rejected (HTTP {})", reply.status)),
                    _ => Ok(format!("key accepted (HTTP {} for an unknown request)", reply.status)),
                }
            }
            RemoteKind::OpenAi => {
                let url = format!("{}/models", self.base);
                let reply = http
                    .idempotent(|c| match &secret {
                        Some(k) => c.get(&url).bearer_auth(k.expose()),
                        None => c.get(&url),
                    })
                    .await
                    .map_err(|e| e.to_string())?;
                if reply.ok() {
                    Ok(format!("{} model(s)", reply.json().ok().and_then(|v| v["data"].as_array().map(Vec::len)).unwrap_or(0)))
                } else {
                    Err(reply.rejected().to_string())
                }
            }
            RemoteKind::Cerebrium => return Ok("unverifiable: Cerebrium has no read-only API (a check would run the function)".into()),
            RemoteKind::Http => return Ok("unverifiable: no read-only call is configured for this job API".into()),
        };
        outcome
    }
}
