//! The shared HTTP client: pooled connections, timeouts, and bounded retry for
//! idempotent calls (transport errors, 5xx, and 429 honouring `Retry-After`).
//!
//! Every reply body read through reqwest is read here ([`read_body`], [`body_stream`]),
//! and comes out with every configured credential redacted ([`crate::redact`]).

use std::time::Duration;
use tailcut_core::ProviderError;

/// Retry settings for idempotent calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts (1 = no retry).
    pub attempts: u32,
    /// First backoff; doubles each retry.
    pub base_backoff: Duration,
    /// Longest wait, including a `Retry-After`.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { attempts: 4, base_backoff: Duration::from_millis(200), max_backoff: Duration::from_secs(30) }
    }
}

/// A response, read fully.
#[derive(Clone, Debug)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Body bytes.
    pub body: bytes::Bytes,
}

/// Reads a whole reply body, redacted (the only way tailcut reads one from reqwest).
pub async fn read_body(resp: reqwest::Response) -> Result<bytes::Bytes, reqwest::Error> {
    resp.bytes().await.map(crate::redact::bytes)
}

/// A reply body as it streams, redacted (also a secret cut across two chunks).
pub fn body_stream(resp: reqwest::Response) -> crate::transport::ByteStream {
    use futures::TryStreamExt;
    crate::redact::stream(Box::pin(resp.bytes_stream().map_err(crate::transport::HttpError::from)))
}

impl Reply {
    /// Parses the body as JSON.
    pub fn json(&self) -> Result<serde_json::Value, ProviderError> {
        serde_json::from_slice(&self.body).map_err(|e| ProviderError::MalformedResponse { reason: format!("HTTP {}: {e}", self.status) })
    }

    /// Whether the status is 2xx.
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body as JSON if the status is 2xx, else a `Rejected` error: the usual reading
    /// of a provider's reply.
    pub fn success_json(&self) -> Result<serde_json::Value, ProviderError> {
        if !self.ok() {
            return Err(self.rejected());
        }
        self.json()
    }

    /// A `Rejected` error for this reply, with a short body excerpt.
    pub fn rejected(&self) -> ProviderError {
        let text = String::from_utf8_lossy(&self.body);
        let excerpt: String = text.chars().take(200).collect();
        ProviderError::Rejected { status: self.status, message: excerpt }
    }
}

/// One pooled client shared by every provider module.
#[derive(Clone, Debug)]
pub struct HttpClient {
    inner: reqwest::Client,
    plain: crate::plain::PlainHttp,
    retry: RetryPolicy,
}

fn transport(e: reqwest::Error) -> ProviderError {
    ProviderError::Transport { reason: describe(e) }
}

/// A transport error as one line: reqwest's message followed by its causes (so "error
/// sending request" says *why*: refused, reset, too many open files…). Never echoes the
/// URL (it can carry endpoint ids) or headers (credentials); the causes below reqwest are
/// hyper and io errors, which carry neither.
pub fn describe(e: reqwest::Error) -> String {
    tailcut_http::cause::cause_chain(&e.without_url())
}

impl HttpClient {
    /// A client with a per-request timeout.
    pub fn new(timeout: Duration, retry: RetryPolicy) -> Result<HttpClient, ProviderError> {
        let inner = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(Duration::from_secs(10))
            .pool_max_idle_per_host(1024)
            .user_agent(concat!("tailcut/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(transport)?;
        Ok(HttpClient { inner, plain: crate::plain::PlainHttp::new(timeout), retry })
    }

    /// The default client: 30 s per request, 4 attempts for idempotent calls.
    pub fn default_client() -> Result<HttpClient, ProviderError> {
        HttpClient::new(Duration::from_secs(30), RetryPolicy::default())
    }

    /// The underlying reqwest client (for streaming requests).
    pub fn raw(&self) -> &reqwest::Client {
        &self.inner
    }

    /// The per-request timeout: no exchange through this client lasts longer.
    pub fn timeout(&self) -> Duration {
        self.plain.timeout()
    }

    /// The lean client for plain-`http://` request-path calls (same timeout).
    pub fn plain(&self) -> &crate::plain::PlainHttp {
        &self.plain
    }

    /// Sends once (submits and cancels: never retried).
    pub async fn once(&self, build: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder) -> Result<Reply, ProviderError> {
        let resp = build(&self.inner).send().await.map_err(transport)?;
        let status = resp.status().as_u16();
        let body = read_body(resp).await.map_err(transport)?;
        Ok(Reply { status, body })
    }

    /// Sends an idempotent request, retrying transport errors, 5xx and 429.
    pub async fn idempotent(&self, build: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder) -> Result<Reply, ProviderError> {
        let mut backoff = self.retry.base_backoff;
        let mut last: Option<Result<Reply, ProviderError>> = None;
        for attempt in 1..=self.retry.attempts.max(1) {
            let outcome = build(&self.inner).send().await;
            let wait = match outcome {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let retry_after = resp
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(Duration::from_secs);
                    let body = read_body(resp).await.map_err(transport);
                    let reply = body.map(|body| Reply { status, body });
                    let retryable = status == 429 || status >= 500;
                    if !retryable {
                        return reply;
                    }
                    last = Some(reply);
                    if status == 429 {
                        retry_after.unwrap_or(backoff)
                    } else {
                        backoff
                    }
                }
                Err(e) => {
                    last = Some(Err(transport(e)));
                    backoff
                }
            };
            if attempt == self.retry.attempts {
                break;
            }
            tokio::time::sleep(wait.min(self.retry.max_backoff)).await;
            backoff = (backoff * 2).min(self.retry.max_backoff);
        }
        last.unwrap_or_else(|| Err(ProviderError::Transport { reason: "no attempt made".into() }))
    }
}

#[cfg(test)]
mod tests {
    use super::describe;
    use crate::transport::HttpError;

    #[tokio::test]
    async fn transport_errors_name_their_cause_but_not_the_url() {
        // A port that was just free: nothing listens there, so the connect is refused.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let url = format!("http://127.0.0.1:{port}/v2/secret-endpoint-id/run");
        let err = reqwest::Client::new().get(&url).send().await.unwrap_err();
        let line = describe(err);
        assert!(line.starts_with("error sending request"), "{line}");
        assert!(line.to_lowercase().contains("refused"), "the cause is missing: {line}");
        assert!(!line.contains("secret-endpoint-id") && !line.contains(&port.to_string()), "URL leaked: {line}");
        let typed = HttpError::from(reqwest::Client::new().get(&url).send().await.unwrap_err());
        assert_eq!(typed.to_string(), line, "the typed error reads as the one-line text");
    }
}
