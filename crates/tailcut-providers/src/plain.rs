//! A lean HTTP/1.1 client for plain `http://` upstreams on the request path: hyper's
//! pooled client without reqwest's layers (URL re-parsing with IDNA, redirect and
//! retry machinery, header rebuilding). In-cluster inference servers (vLLM, TGI,
//! SGLang behind a Service) are reached this way; `https://` goes through reqwest.

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::time::Duration;

type Pool = Client<HttpConnector, Full<Bytes>>;

/// Pooled keep-alive connections to plain-HTTP upstreams, one pool per thread: a
/// connection's task runs on the runtime that opened it, so a per-core server
/// (`serve_per_core`) keeps each exchange on its own thread.
#[derive(Clone, Debug)]
pub struct PlainHttp {
    id: std::sync::Arc<PoolId>,
    timeout: Duration,
}

/// Names one client's pools; when the last clone of the client is dropped (a config
/// reload replaced it), its id is retired and each thread drops its pool for it the next
/// time that thread opens a new one.
#[derive(Debug)]
struct PoolId(u64);

impl Drop for PoolId {
    fn drop(&mut self) {
        if let Ok(mut retired) = RETIRED.lock() {
            retired.push(self.0);
        }
    }
}

static NEXT_POOL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
static RETIRED: std::sync::Mutex<Vec<u64>> = std::sync::Mutex::new(Vec::new());

thread_local! {
    static POOLS: std::cell::RefCell<std::collections::HashMap<u64, Pool>> = std::cell::RefCell::new(Default::default());
}

fn new_pool() -> Pool {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(Duration::from_secs(10)));
    Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(Duration::from_secs(90))
        // Per thread and upstream: a per-core server keeps up to 256 × cores idle
        // connections to each upstream, which stay out of the open-file budget for
        // requests in flight.
        .pool_max_idle_per_host(256)
        .build(connector)
}

/// Why a plain-HTTP exchange failed, as one line with its causes. hyper's errors and
/// their io causes never carry the URL or headers.
fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    crate::client::cause_chain(e)
}

/// A POST with tailcut's user agent and `headers`.
fn post_request(uri: Uri, headers: &[(HeaderName, HeaderValue)], body: Bytes) -> Result<Request<Full<Bytes>>, String> {
    let mut req = Request::post(uri);
    if let Some(h) = req.headers_mut() {
        h.reserve(headers.len() + 1);
        h.insert(http::header::USER_AGENT, HeaderValue::from_static(concat!("tailcut/", env!("CARGO_PKG_VERSION"))));
        for (k, v) in headers {
            h.insert(k.clone(), v.clone());
        }
    }
    req.body(Full::new(body)).map_err(|e| format!("bad request: {e}"))
}

/// The headers of a JSON POST to an upstream: the content type, the request id when
/// there is one, and the bearer key, marked sensitive so it never shows in debug output.
pub fn json_post_headers(request_id: Option<&str>, key: Option<&crate::secret::Secret>) -> Vec<(HeaderName, HeaderValue)> {
    let mut headers = Vec::with_capacity(3);
    headers.push((http::header::CONTENT_TYPE, HeaderValue::from_static("application/json")));
    if let Some(v) = request_id.and_then(|id| HeaderValue::from_str(id).ok()) {
        headers.push((HeaderName::from_static("x-request-id"), v));
    }
    if let Some(mut v) = key.and_then(|k| HeaderValue::from_str(&format!("Bearer {}", k.expose())).ok()) {
        v.set_sensitive(true);
        headers.push((http::header::AUTHORIZATION, v));
    }
    headers
}

impl PlainHttp {
    /// A client whose exchanges (connect, send, read the whole body) end after `timeout`.
    pub fn new(timeout: Duration) -> PlainHttp {
        PlainHttp { id: std::sync::Arc::new(PoolId(NEXT_POOL.fetch_add(1, std::sync::atomic::Ordering::Relaxed))), timeout }
    }

    /// This client's pool on the current thread.
    fn pool(&self) -> Pool {
        POOLS.with(|pools| {
            let mut pools = pools.borrow_mut();
            if let Some(p) = pools.get(&self.id.0) {
                return p.clone();
            }
            // A new pool on this thread (rare: first use, or after a reload): drop the
            // pools of retired clients here first.
            if let Ok(retired) = RETIRED.lock() {
                pools.retain(|id, _| !retired.contains(id));
            }
            pools.entry(self.id.0).or_insert_with(new_pool).clone()
        })
    }

    /// Pools alive on the current thread (tests).
    #[cfg(test)]
    fn pools_here() -> usize {
        POOLS.with(|p| p.borrow().len())
    }

    /// POSTs `body` and reads the whole reply: `(status, body)`, or a one-line error.
    pub async fn post(&self, uri: Uri, headers: &[(HeaderName, HeaderValue)], body: Bytes) -> Result<(StatusCode, Bytes), String> {
        let req = post_request(uri, headers, body)?;
        let exchange = async {
            let resp = self.pool().request(req).await.map_err(|e| format!("error sending request: {}", describe(&e)))?;
            let status = resp.status();
            let body = resp.into_body().collect().await.map_err(|e| format!("error reading response body: {}", describe(&e)))?;
            Ok((status, body.to_bytes()))
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(r) => r,
            Err(_) => Err(format!("operation timed out after {:.1} s", self.timeout.as_secs_f64())),
        }
    }
}

/// A streamed reply body: chunks as they arrive, or a one-line error.
pub type ByteStream = std::pin::Pin<Box<dyn futures::Stream<Item = Result<Bytes, String>> + Send>>;

impl PlainHttp {
    /// POSTs `body` and returns at the response head (connect and head within the
    /// timeout); the caller reads the body as it streams (server-sent events).
    pub async fn post_streaming(
        &self,
        uri: Uri,
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<(StatusCode, ByteStream), String> {
        let req = post_request(uri, headers, body)?;
        let resp = match tokio::time::timeout(self.timeout, self.pool().request(req)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return Err(format!("error sending request: {}", describe(&e))),
            Err(_) => return Err(format!("operation timed out after {:.1} s", self.timeout.as_secs_f64())),
        };
        let status = resp.status();
        let stream = futures::StreamExt::map(resp.into_body().into_data_stream(), |r| {
            r.map_err(|e| format!("error reading a body from connection: {}", describe(&e)))
        });
        Ok((status, Box::pin(stream)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A one-connection HTTP/1.1 server that answers every request with `reply`.
    async fn server(reply: &'static [u8]) -> String {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut buf = vec![0u8; 65536];
            let mut seen = Vec::new();
            loop {
                let n = s.read(&mut buf).await.unwrap_or(0);
                if n == 0 {
                    return;
                }
                seen.extend_from_slice(&buf[..n]);
                // Headers and a small body arrive together here; answer once per request.
                if seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    seen.clear();
                    s.write_all(reply).await.unwrap();
                }
            }
        });
        format!("http://{addr}/v1/chat/completions")
    }

    #[tokio::test]
    async fn posts_and_reads_the_reply_over_one_kept_alive_connection() {
        let url = server(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await;
        let c = PlainHttp::new(Duration::from_secs(5));
        for _ in 0..3 {
            let (status, body) = c.post(url.parse().unwrap(), &[], Bytes::from_static(b"{}")).await.unwrap();
            assert_eq!((status.as_u16(), &body[..]), (200, &b"ok"[..]));
        }
    }

    #[tokio::test]
    async fn streams_a_chunked_reply_as_it_arrives() {
        let url = server(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n").await;
        let c = PlainHttp::new(Duration::from_secs(5));
        let (status, mut body) = c.post_streaming(url.parse().unwrap(), &[], Bytes::from_static(b"{}")).await.unwrap();
        assert_eq!(status.as_u16(), 200);
        let mut all = Vec::new();
        while let Some(chunk) = futures::StreamExt::next(&mut body).await {
            all.extend_from_slice(&chunk.unwrap());
        }
        assert_eq!(all, b"hello world");
    }

    #[tokio::test]
    async fn a_replaced_client_s_pool_is_dropped_when_the_thread_opens_the_next() {
        let url = server(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await;
        let old = PlainHttp::new(Duration::from_secs(5));
        old.post(url.parse().unwrap(), &[], Bytes::new()).await.unwrap();
        let before = PlainHttp::pools_here();
        drop(old);
        let url2 = server(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await;
        let new = PlainHttp::new(Duration::from_secs(5));
        new.post(url2.parse().unwrap(), &[], Bytes::new()).await.unwrap();
        assert_eq!(PlainHttp::pools_here(), before, "the retired pool was replaced, not kept beside the new one");
    }

    #[tokio::test]
    async fn refused_connections_name_the_cause_but_not_the_url() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let c = PlainHttp::new(Duration::from_secs(5));
        let uri: Uri = format!("http://127.0.0.1:{port}/v1/secret-endpoint").parse().unwrap();
        let e = c.post(uri, &[], Bytes::new()).await.unwrap_err();
        assert!(e.starts_with("error sending request") && e.to_lowercase().contains("refused"), "{e}");
        assert!(!e.contains("secret-endpoint") && !e.contains(&port.to_string()), "{e}");
    }

    #[tokio::test]
    async fn a_silent_upstream_times_out() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let _held = tokio::spawn(async move {
            let (_s, _) = l.accept().await.unwrap();
            std::future::pending::<()>().await;
        });
        let c = PlainHttp::new(Duration::from_millis(200));
        let e = c.post(format!("http://{addr}/x").parse().unwrap(), &[], Bytes::new()).await.unwrap_err();
        assert!(e.contains("timed out"), "{e}");
    }
}
