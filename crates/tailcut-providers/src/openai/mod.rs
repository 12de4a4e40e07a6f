//! OpenAI-compatible servers (vLLM, TGI, SGLang, hosted APIs): chat and text
//! completions, non-streaming or streaming (SSE). The job is the request; cancelling
//! closes the connection (vLLM and TGI abort the generation at once, SGLang within ~4 s).
//! Streaming responses are read by the one SSE reader ([`sse`]): assembled into one
//! completion for `tailcut run` ([`assemble`], the time to the first content token
//! recorded as a metric), or raced on their first content token by the gateway
//! ([`stream`]).

pub mod assemble;
pub mod event;
pub mod sse;
pub mod stream;

pub use assemble::StreamAssembly;
pub use stream::OpenAiStream;

use crate::channel::{correlation_id, ChannelJob};
use crate::client::HttpClient;
use crate::secret::Secret;
use async_trait::async_trait;
use futures::FutureExt;
use http::HeaderValue;
use serde_json::json;
use std::sync::Arc;
use tailcut_core::receipt::Evidence;
use tailcut_core::{Capabilities, Job, JobRequest, JobResult, JobState, Payload, ProviderApi, ProviderError};
use tokio::time::Instant;

/// Which OpenAI endpoint a call goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/v1/chat/completions`.
    Chat,
    /// `/v1/completions`.
    Completions,
    /// `/v1/embeddings` (never streamed).
    Embeddings,
}

/// The OpenAI-compatible provider module's client.
#[derive(Debug, Clone)]
pub struct OpenAi {
    /// Provider key.
    pub name: String,
    /// Base URL including `/v1`.
    pub base: String,
    /// Model name sent to this provider (replaces the request's).
    pub model: Option<String>,
    /// Bearer key, if the server wants one.
    pub key: Option<Secret>,
    /// The endpoint called.
    pub endpoint: Endpoint,
    /// Stream (SSE) and assemble.
    pub stream: bool,
    /// Check that a whole reply is JSON before calling it completed. A caller whose
    /// validator parses the reply anyway (the gateway's) turns this off to scan it once.
    pub check_json: bool,
    /// Shared client.
    pub http: HttpClient,
    /// What a whole-reply exchange over plain HTTP needs, worked out on first use (build
    /// with `Default::default()`).
    pub prepared: std::sync::OnceLock<Option<Arc<PlainCall>>>,
}

/// A whole-reply exchange with a plain-HTTP upstream, prepared once per provider: where
/// it goes and with what headers. Each request then moves only an `Arc` into its task
/// (no copy of the provider's strings, no URL split, no key formatted).
#[derive(Debug)]
pub struct PlainCall {
    authority: String,
    path: String,
    authorization: Option<HeaderValue>,
    check_json: bool,
    plain: crate::plain::PlainHttp,
}

impl PlainCall {
    /// `None` where the plain client does not apply (TLS, streamed replies, a base URL
    /// it cannot carry as is).
    fn prepare(cfg: &OpenAi) -> Option<Arc<PlainCall>> {
        if cfg.stream && cfg.endpoint != Endpoint::Embeddings {
            return None;
        }
        let (authority, base_path) = crate::plain::split_http_base(&cfg.base)?;
        let path = format!("{base_path}/{}", cfg.endpoint.path());
        let authorization = match &cfg.key {
            None => None,
            // A key that cannot be a header value goes the TLS client's way, which says so.
            Some(k) => Some(crate::plain::bearer(k)?),
        };
        Some(Arc::new(PlainCall {
            authority: authority.to_string(),
            path,
            authorization,
            check_json: cfg.check_json,
            plain: cfg.http.plain().clone(),
        }))
    }

    async fn run(self: Arc<Self>, body: bytes::Bytes, id: String, started: Instant) -> JobResult {
        let headers = crate::plain::json_post_headers(Some(&id), self.authorization.as_ref());
        match self.plain.post_parts(&self.authority, &[self.path.as_str()], &headers, body).await {
            Ok((status, bytes)) => whole_reply(status.as_u16(), bytes, self.check_json, started),
            Err(e) => ended(JobState::Failed, Some(ProviderError::Transport { reason: e.to_string() }.to_string()), started),
        }
    }
}

impl Endpoint {
    /// The endpoint's path under the base URL (`chat/completions`, ...).
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Chat => "chat/completions",
            Endpoint::Completions => "completions",
            Endpoint::Embeddings => "embeddings",
        }
    }
}

fn finish(mut r: JobResult, started: Instant) -> JobResult {
    r.finished = Instant::now();
    r.started = Some(started);
    r
}

/// A whole (non-streamed) reply: a JSON document, or why not.
pub fn whole_reply(status: u16, bytes: bytes::Bytes, check_json: bool, started: Instant) -> JobResult {
    if !(200..300).contains(&status) {
        let text: String = String::from_utf8_lossy(&bytes).chars().take(200).collect();
        return ended(JobState::Failed, Some(format!("HTTP {status}: {text}")), started);
    }
    // Syntax only (no document is built): validators judge the content.
    if check_json && serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_err() {
        return ended(JobState::Failed, Some("malformed response: not JSON".into()), started);
    }
    let mut r = ended(JobState::Completed, None, started);
    r.payload = Some(Payload { bytes, content_type: "application/json".into() });
    r
}

/// A result that ends now (one clock read, where `finish(JobResult::bare(..))` takes two).
fn ended(state: JobState, error: Option<String>, started: Instant) -> JobResult {
    JobResult { state, payload: None, metrics: serde_json::Map::new(), started: Some(started), finished: Instant::now(), error }
}

async fn run(cfg: OpenAi, body: bytes::Bytes, id: String, started: Instant) -> JobResult {
    let path = cfg.endpoint.path();
    let streamed = cfg.stream && cfg.endpoint != Endpoint::Embeddings;
    let url = format!("{}/{path}", cfg.base.trim_end_matches('/'));
    let mut req = cfg.http.raw().post(&url).header("X-Request-Id", &id).header("content-type", "application/json").body(body);
    if let Some(k) = &cfg.key {
        req = req.bearer_auth(k.expose());
    }
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) => {
            return finish(
                JobResult::bare(JobState::Failed, Some(ProviderError::Transport { reason: crate::client::describe(e) }.to_string())),
                started,
            )
        }
    };
    let status = resp.status();
    if !streamed || !status.is_success() {
        return match crate::client::read_body(resp).await {
            Ok(b) => whole_reply(status.as_u16(), b, cfg.check_json, started),
            Err(e) => finish(JobResult::bare(JobState::Failed, Some(crate::client::describe(e))), started),
        };
    }
    let mut stream = crate::client::body_stream(resp);
    let result = assemble::assemble(&mut stream, started, cfg.endpoint, &cfg.name).await;
    if result.state == JobState::Completed {
        // The result is whole at `[DONE]`; the reply's last bytes are read apart from it,
        // so that the connection serves the next job. Bounded by the body and the client
        // timeout, and holding nothing a drain must wait for.
        #[allow(clippy::disallowed_methods)]
        tokio::spawn(crate::plain::drain(stream));
    }
    finish(result, started)
}

/// The body a provider gets, for whole replies and streams alike: the client's bytes as
/// sent, unless the provider names its own `model` (which replaces the request's) or the
/// stream must be asked for (`stream_to`: `stream` and the usage chunk set); the body is
/// then rewritten from the request's document. A document that is not a JSON object is
/// refused (400).
pub fn request_body(request: &JobRequest, model: Option<&str>, stream_to: bool) -> Result<bytes::Bytes, ProviderError> {
    if let Some(raw) = request.raw() {
        // Nothing to rewrite: the input is neither parsed nor re-encoded.
        if model.is_none() && !stream_to && raw.trim_ascii_start().starts_with(b"{") {
            return Ok(raw.clone());
        }
    }
    let input = request.input();
    if !input.is_object() {
        return Err(ProviderError::Rejected { status: 400, message: "an OpenAI-compatible request must be a JSON object".into() });
    }
    let mut body = input.clone();
    if let Some(m) = model {
        body["model"] = json!(m);
    }
    if stream_to {
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
    }
    Ok(serde_json::to_vec(&body).unwrap_or_default().into())
}

#[async_trait]
impl ProviderApi for OpenAi {
    fn capabilities(&self) -> Capabilities {
        Capabilities { reports_queued: false, cancel_evidence: Evidence::RequestChannelClosed, reports_billed_time: false }
    }

    async fn submit(&self, request: &JobRequest) -> Result<Arc<dyn Job>, ProviderError> {
        let streamed = self.stream && self.endpoint != Endpoint::Embeddings;
        let body = request_body(request, self.model.as_deref(), streamed)?;
        let id = correlation_id(&self.name);
        // Both clients end the exchange at their timeout, so the request bounds itself.
        let now = Instant::now();
        let ends_by = now + self.http.timeout() + std::time::Duration::from_secs(1);
        let fut = match self.prepared.get_or_init(|| PlainCall::prepare(self)) {
            Some(call) => call.clone().run(body, id.clone(), now).boxed(),
            None => run(self.clone(), body, id.clone(), now).boxed(),
        };
        Ok(Arc::new(ChannelJob::start_bounded(
            &self.name,
            id,
            fut,
            "connection closed: vLLM and TGI abort the request at once, SGLang within ~4 s",
            Some(ends_by),
        )))
    }
}

/// `adapter = "openai"`: the keys as written.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Base URL including `/v1` (required).
    pub base_url: Option<String>,
    /// Model name sent to this provider (replaces the request's `model`).
    pub model: Option<String>,
    /// Environment variable holding the bearer key, if the server wants one.
    pub api_key_env: Option<String>,
    /// `chat` (default) or `completions`: the endpoint `tailcut run` sends jobs to.
    pub route: Option<String>,
    /// Stream (SSE) and assemble (default false).
    pub stream: Option<bool>,
}

/// `adapter = "openai"`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Base URL including `/v1`.
    pub base: String,
    /// Model name sent to this provider (replaces the request's `model`).
    pub model: Option<String>,
    /// Environment variable holding the bearer key.
    pub key_env: Option<String>,
    /// The endpoint jobs go to (the TOML key `route`).
    pub endpoint: Endpoint,
    /// Stream and assemble.
    pub stream: bool,
}

/// Who reads an OpenAI-compatible provider's replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// The engine (`tailcut run`): streams as configured, and checks that a whole reply
    /// is JSON before calling it completed.
    Engine,
    /// The gateway, which streams by itself and validates the JSON it relays.
    Gateway,
}

impl Settings {
    /// The one builder of an OpenAI-compatible provider: the client named `name` for
    /// `endpoint`, read by `reader`, over `http`, with the key from `api_key_env` (none
    /// when unset: a local server needs none).
    pub fn provider(&self, name: &str, endpoint: Endpoint, reader: Reader, http: HttpClient) -> OpenAi {
        OpenAi {
            name: name.into(),
            base: self.base.clone(),
            model: self.model.clone(),
            key: self.key_env.as_deref().and_then(Secret::from_env),
            endpoint,
            stream: reader == Reader::Engine && self.stream,
            check_json: reader == Reader::Engine,
            http,
            prepared: Default::default(),
        }
    }
}

#[async_trait]
impl crate::config::ProviderModule for Settings {
    type Config = Config;
    const MINIMAL_TABLE: &'static str = "base_url = \"http://127.0.0.1:8000/v1\"";

    fn from_config(c: Config) -> Result<Settings, crate::config::Invalid> {
        use crate::config::Invalid;
        let base = c.base_url.ok_or_else(|| Invalid::new("base_url", "required (e.g. http://127.0.0.1:8000/v1)"))?;
        let endpoint = match c.route.as_deref() {
            None | Some("chat") => Endpoint::Chat,
            Some("completions") => Endpoint::Completions,
            Some(other) => return Err(Invalid::new("route", format!("`{other}`: expected chat or completions"))),
        };
        Ok(Settings {
            base: crate::config::trimmed(&base),
            model: c.model,
            key_env: c.api_key_env,
            endpoint,
            stream: c.stream.unwrap_or(false),
        })
    }

    fn base(&self) -> &str {
        &self.base
    }

    fn key_env(&self) -> Option<&str> {
        self.key_env.as_deref()
    }

    fn build(&self, cx: &crate::config::Build<'_>) -> Result<Arc<dyn ProviderApi>, crate::config::Invalid> {
        Ok(Arc::new(self.provider(cx.name, self.endpoint, Reader::Engine, cx.http.clone())))
    }

    async fn check_credentials(&self, cx: &crate::config::Check<'_>) -> Result<String, crate::config::CheckError> {
        let key = self.key_env.as_deref().and_then(Secret::from_env);
        let url = format!("{}/models", self.base);
        let reply = cx
            .http
            .idempotent(|c| match &key {
                Some(k) => c.get(&url).bearer_auth(k.expose()),
                None => c.get(&url),
            })
            .await?;
        if reply.ok() {
            Ok(format!("{} model(s)", reply.json().ok().and_then(|v| v["data"].as_array().map(Vec::len)).unwrap_or(0)))
        } else {
            Err(reply.rejected().into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::RetryPolicy;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// The next whole request on `s` (head and a `content-length` body) as text; `None`
    /// once the client closes. (Requests are read one at a time: nothing is pipelined.)
    async fn next_request(s: &mut tokio::net::TcpStream) -> Option<String> {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let n = s.read(&mut chunk).await.unwrap_or(0);
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&buf).to_string();
            let Some((head, body)) = text.split_once("\r\n\r\n") else { continue };
            let len = head.lines().find_map(|l| l.strip_prefix("content-length: ")).map_or(0, |v| v.parse::<usize>().unwrap());
            if body.len() >= len {
                return Some(text);
            }
        }
    }

    /// A plain-HTTP upstream that records each request's bytes and answers a completion.
    async fn recording_upstream() -> (String, tokio::sync::mpsc::UnboundedReceiver<String>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = l.accept().await else { return };
                let tx = tx.clone();
                tokio::spawn(async move {
                    while let Some(text) = next_request(&mut s).await {
                        let _ = tx.send(text);
                        let reply = r#"{"choices":[{"message":{"role":"assistant","content":"ok"}}]}"#;
                        let _ = s.write_all(format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{reply}", reply.len()).as_bytes()).await;
                    }
                });
            }
        });
        (format!("http://{addr}/v1"), rx)
    }

    /// A streaming upstream on keep-alive connections that sends each reply's events,
    /// `[DONE]` included, in one chunk, and the chunked body's terminator a moment later;
    /// counts the connections it accepts.
    async fn streaming_upstream() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = l.accept().await else { return };
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(async move {
                    while next_request(&mut s).await.is_some() {
                        let events = "data: {\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}\n\ndata: [DONE]\n\n";
                        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                        let _ = s.write_all(format!("{head}{:x}\r\n{events}\r\n", events.len()).as_bytes()).await;
                        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                        let _ = s.write_all(b"0\r\n\r\n").await;
                    }
                });
            }
        });
        (format!("http://{addr}/v1"), accepted)
    }

    #[tokio::test]
    async fn streamed_jobs_read_their_replies_to_the_end_and_share_one_connection() {
        let (base, accepted) = streaming_upstream().await;
        let http = HttpClient::new(std::time::Duration::from_secs(5), RetryPolicy::default()).unwrap();
        let backend = OpenAi {
            name: "up".into(),
            base,
            model: Some("m".into()),
            key: None,
            endpoint: Endpoint::Chat,
            stream: true,
            check_json: true,
            http,
            prepared: Default::default(),
        };
        for _ in 0..3 {
            let request = JobRequest::new("r1", json!({"messages": [{"role": "user", "content": "hi"}]}));
            let job = backend.submit(&request).await.unwrap();
            let r = job.result(Instant::now() + std::time::Duration::from_secs(5)).await;
            assert_eq!(r.state, JobState::Completed, "{:?}", r.error);
            // The terminator comes 20 ms after `[DONE]`; the next job starts after it.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        let n = accepted.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(n, 1, "{n} connections for 3 sequential streamed jobs");
    }

    #[tokio::test]
    async fn a_plain_upstream_gets_the_body_as_sent_with_its_key_and_request_id() {
        let (base, mut seen) = recording_upstream().await;
        let http = HttpClient::new(std::time::Duration::from_secs(5), RetryPolicy::default()).unwrap();
        let backend = OpenAi {
            name: "up".into(),
            base,
            model: None,
            key: Some(Secret::new("sk-test")),
            endpoint: Endpoint::Chat,
            stream: false,
            check_json: true,
            http,
            prepared: Default::default(),
        };
        let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
        for _ in 0..2 {
            let job = backend.submit(&JobRequest::from_raw("r1", bytes::Bytes::from_static(body.as_bytes()))).await.unwrap();
            let r = job.result(Instant::now() + std::time::Duration::from_secs(5)).await;
            assert_eq!(r.state, JobState::Completed, "{:?}", r.error);
            assert!(r.payload.unwrap().bytes.starts_with(b"{\"choices\""));
            let request = seen.recv().await.unwrap();
            let (head, sent) = request.split_once("\r\n\r\n").unwrap();
            assert!(head.starts_with("POST /v1/chat/completions HTTP/1.1\r\n"), "{head}");
            assert!(head.contains("\r\nauthorization: Bearer sk-test\r\n"), "{head}");
            assert!(head.contains("\r\ncontent-type: application/json\r\n"), "{head}");
            let id = head.lines().find_map(|l| l.strip_prefix("x-request-id: ")).expect("a request id");
            assert!(id.starts_with("tailcut-up-") && Some(id.to_string()) == job.job_id(), "{id}");
            assert_eq!(sent, body);
        }
        assert!(backend.prepared.get().is_some_and(Option::is_some), "prepared once, on the plain path");
    }
}
