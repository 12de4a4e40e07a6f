//! A lean HTTP/1.1 client for plain `http://` servers on the request path. In-cluster
//! inference servers (vLLM, TGI, SGLang behind a Service) are reached this way;
//! `https://` goes through reqwest.
//!
//! The exchange runs inside the calling task: the request is written on a kept-alive
//! connection from this thread's pool and the reply read back by the same task, with
//! httparse for the head. hyper's pooled client, which this replaced, runs every
//! connection in a task of its own behind channels, and a URL-keyed pool behind a lock:
//! about 36,000 instructions per request on the gateway's path against about 6,000 here
//! (callgrind, `README.md` → Gateway). What the replaced client did and this one keeps:
//! TCP_NODELAY, connect and total timeouts, keep-alive with at most 256 idle
//! connections per thread and server (closed after 4 s idle), `Content-Length`,
//! chunked and read-to-close bodies, interim 1xx replies skipped, and errors that carry
//! their cause but never the URL. A pooled connection the server closed while idle is
//! seen before use (from the readiness the runtime already has) and replaced; a request
//! is sent again, on a fresh connection, only when writing it failed, never once it may
//! have reached the server. Errors are typed ([`ClientError`]).
//!
//! Bodies come out as the server sent them: `tailcut-providers` wraps this client so
//! that every reply it reads is redacted of the configured credentials.

mod error;
mod pool;
mod wire;

pub use error::{BodyError, ClientError, HeadError};

use bytes::Bytes;
use http::{HeaderName, HeaderValue, StatusCode, Uri};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use wire::{Conn, Head, WireError};

/// Bodies up to this size are copied behind the head and sent in one write.
const COALESCE_BODY: usize = 16 * 1024;
/// The largest whole reply body read (embedding batches can be tens of MiB).
const MAX_BODY: usize = 256 * 1024 * 1024;
/// Opening a connection gives up after this (within the exchange's own timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Plain-HTTP keep-alive connections to servers, pooled per thread.
#[derive(Clone, Debug)]
pub struct PlainHttp {
    id: Arc<pool::PoolId>,
    timeout: Duration,
}

/// The headers of a JSON POST to a provider: the content type, the request id when
/// there is one, and the authorization when there is one.
pub fn json_post_headers(request_id: Option<&str>, authorization: Option<&HeaderValue>) -> Vec<(HeaderName, HeaderValue)> {
    let mut headers = Vec::with_capacity(3);
    headers.push((http::header::CONTENT_TYPE, HeaderValue::from_static("application/json")));
    if let Some(v) = request_id.and_then(|id| HeaderValue::from_str(id).ok()) {
        headers.push((HeaderName::from_static("x-request-id"), v));
    }
    if let Some(v) = authorization {
        headers.push((http::header::AUTHORIZATION, v.clone()));
    }
    headers
}

/// A streamed reply body: chunks as they arrive, or why it broke off
/// ([`ClientError::Stream`]).
pub type ByteStream = std::pin::Pin<Box<dyn futures::Stream<Item = Result<Bytes, ClientError>> + Send>>;

/// How long reading a stream's last bytes after `[DONE]` may take ([`drain`]).
pub const DRAIN_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);
/// How many bytes after `[DONE]` are read at most ([`drain`]).
pub const DRAIN_AT_MOST: usize = 64 * 1024;

/// Reads what is left of a streamed reply after `[DONE]` (a chunked body's terminator)
/// so that its connection goes back to the pool instead of being closed: a new
/// connection per stream costs a connect, an accept and a close on the way to the next
/// stream's first token. Within [`DRAIN_WITHIN`] and [`DRAIN_AT_MOST`]; past either, the
/// stream is dropped and its connection closed.
pub async fn drain<S, E>(mut stream: S)
where
    S: futures::Stream<Item = Result<Bytes, E>> + Unpin,
{
    use futures::StreamExt;
    let rest = async {
        let mut left = DRAIN_AT_MOST;
        while let Some(Ok(chunk)) = stream.next().await {
            left = left.checked_sub(chunk.len())?;
        }
        Some(())
    };
    let _ = tokio::time::timeout(DRAIN_WITHIN, rest).await;
}

/// Where a request goes: `host:port` for the connection and `Host`, and the path (in
/// pieces, so a base URL and a route need not be joined into a new string).
struct Target<'a> {
    authority: &'a str,
    path: &'a [&'a str],
}

fn target<'a>(uri: &'a Uri, path: &'a mut [&'a str; 1]) -> Result<Target<'a>, ClientError> {
    if uri.scheme_str() != Some("http") {
        return Err(ClientError::NotHttp);
    }
    let authority = uri.authority().map(|a| a.as_str()).filter(|a| !a.is_empty());
    let authority = authority.ok_or(ClientError::NoHost)?;
    path[0] = uri.path_and_query().map_or("/", |p| p.as_str());
    Ok(Target { authority, path })
}

/// Splits a plain-HTTP base URL (`http://host:port/base`) into its authority and base
/// path without building a URI; `None` for anything else (another scheme, user info, a
/// query or fragment, or bytes a request line cannot carry), which then goes through
/// [`PlainHttp::post`]'s full parse.
pub fn split_http_base(base: &str) -> Option<(&str, &str)> {
    let rest = base.strip_prefix("http://")?;
    let (authority, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
    let plain = |s: &str| s.bytes().all(|b| b.is_ascii_graphic() && !matches!(b, b'?' | b'#' | b'@'));
    (!authority.is_empty() && plain(authority) && plain(path)).then_some((authority, path.trim_end_matches('/')))
}

impl PlainHttp {
    /// A client whose exchanges (connect, send, read the whole body) end after `timeout`.
    pub fn new(timeout: Duration) -> PlainHttp {
        PlainHttp { id: Arc::new(pool::PoolId::fresh()), timeout }
    }

    /// The timeout of each exchange.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// A new connection to `authority` (`host:port`; port 80 when absent).
    async fn connect(authority: &str) -> Result<Conn, ClientError> {
        let addr = if authority.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) && !authority.ends_with(']') {
            authority.to_string()
        } else {
            format!("{authority}:80")
        };
        let stream = match tokio::time::timeout(CONNECT_TIMEOUT, connect_any(&addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(source)) => return Err(ClientError::Connect { source }),
            Err(_) => return Err(ClientError::ConnectTimedOut),
        };
        let _ = stream.set_nodelay(true);
        Ok(Conn::new(stream))
    }

    /// Sends the request on a pooled connection (sent again on a fresh one only when
    /// writing to the pooled one failed) or a fresh one, and reads the reply head.
    async fn send(&self, to: &Target<'_>, headers: &[(HeaderName, HeaderValue)], body: &Bytes) -> Result<(Conn, Head), ClientError> {
        let mut head_bytes = Vec::with_capacity(256 + if body.len() <= COALESCE_BODY { body.len() } else { 0 });
        wire::encode_post(&mut head_bytes, to.path, to.authority, headers, body.len());
        let coalesced = body.len() <= COALESCE_BODY;
        if coalesced {
            head_bytes.extend_from_slice(body);
        }
        if let Some(mut conn) = pool::checkout(self.id.0, to.authority) {
            match exchange(&mut conn, &head_bytes, (!coalesced).then_some(body)).await {
                Ok(head) => return Ok((conn, head)),
                Err(WireError::Unsent(_)) => {} // the server had closed it: a fresh one
                Err(e) => return Err(e.into()),
            }
        }
        let mut conn = PlainHttp::connect(to.authority).await?;
        match exchange(&mut conn, &head_bytes, (!coalesced).then_some(body)).await {
            Ok(head) => Ok((conn, head)),
            Err(e) => Err(e.into()),
        }
    }

    /// POSTs `body` and reads the whole reply: `(status, body)`, or a one-line error.
    pub async fn post(&self, uri: Uri, headers: &[(HeaderName, HeaderValue)], body: Bytes) -> Result<(StatusCode, Bytes), ClientError> {
        let mut path = [""];
        let to = target(&uri, &mut path)?;
        self.post_to(&to, headers, body).await
    }

    /// POSTs `body` to `authority` (`host:port`) at the path made of `path`'s pieces, and
    /// reads the whole reply: the request path's way in, with no URI built per request.
    pub async fn post_parts(
        &self,
        authority: &str,
        path: &[&str],
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<(StatusCode, Bytes), ClientError> {
        self.post_to(&Target { authority, path }, headers, body).await
    }

    async fn post_to(
        &self,
        to: &Target<'_>,
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<(StatusCode, Bytes), ClientError> {
        let whole = async {
            let (mut conn, mut head) = self.send(to, headers, &body).await?;
            let reply = conn.read_body(&mut head, MAX_BODY).await.map_err(|source| ClientError::Body { source })?;
            if head.reusable() && !conn.has_unread() {
                pool::checkin(self.id.0, to.authority, conn);
            }
            Ok((head.status, reply))
        };
        match tokio::time::timeout(self.timeout, whole).await {
            Ok(r) => r,
            Err(_) => Err(ClientError::TimedOut { after: self.timeout }),
        }
    }

    /// POSTs `body` and returns at the reply head (connect and head within the
    /// timeout); the caller reads the body as it streams (server-sent events). Dropping
    /// the stream closes the connection; a stream read to its end returns it to the pool.
    pub async fn post_streaming(
        &self,
        uri: Uri,
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<(StatusCode, ByteStream), ClientError> {
        let mut path = [""];
        let to = target(&uri, &mut path)?;
        self.stream_from(&to, headers, body).await
    }

    /// [`PlainHttp::post_streaming`] to `authority` at the path made of `path`'s pieces,
    /// with no URI built per request.
    pub async fn post_streaming_parts(
        &self,
        authority: &str,
        path: &[&str],
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<(StatusCode, ByteStream), ClientError> {
        self.stream_from(&Target { authority, path }, headers, body).await
    }

    async fn stream_from(
        &self,
        to: &Target<'_>,
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<(StatusCode, ByteStream), ClientError> {
        let (conn, head) = match tokio::time::timeout(self.timeout, self.send(to, headers, &body)).await {
            Ok(r) => r?,
            Err(_) => return Err(ClientError::TimedOut { after: self.timeout }),
        };
        let status = head.status;
        let state = Some((conn, head, self.id.clone(), to.authority.to_string()));
        let stream = futures::stream::unfold(state, |state| async move {
            let (mut conn, mut head, id, authority) = state?;
            match conn.next_data(&mut head).await {
                Ok(Some(data)) => Some((Ok(data), Some((conn, head, id, authority)))),
                Ok(None) => {
                    if head.reusable() && !conn.has_unread() {
                        pool::checkin(id.0, &authority, conn);
                    }
                    None
                }
                Err(source) => Some((Err(ClientError::Stream { source }), None)),
            }
        });
        Ok((status, Box::pin(stream)))
    }
}

/// Resolves `addr` and connects to the first address that accepts.
async fn connect_any(addr: &str) -> std::io::Result<tokio::net::TcpStream> {
    let mut last = None;
    for a in tokio::net::lookup_host(addr).await? {
        match tokio::net::TcpStream::connect(a).await {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no address for the upstream host")))
}

impl From<WireError> for ClientError {
    fn from(e: WireError) -> ClientError {
        match e {
            WireError::Unsent(source) => ClientError::Unsent { source },
            WireError::Failed(source) => ClientError::Reply { source },
        }
    }
}

/// Writes the request (head, and the body when it was not coalesced into the head's
/// write) and reads the reply head.
async fn exchange(conn: &mut Conn, head: &[u8], body: Option<&Bytes>) -> Result<Head, WireError> {
    conn.stream.write_all(head).await.map_err(WireError::Unsent)?;
    if let Some(body) = body {
        conn.stream.write_all(body).await.map_err(WireError::Unsent)?;
    }
    conn.read_head().await
}

#[cfg(test)]
mod tests;
