//! The hand-written HTTP/1.1 for proxied calls. A keep-alive connection whose requests
//! are POSTs to the service's fast routes ([`FastService::route`]), each read whole (head
//! and body among the bytes already read), is served here: the head parsed with
//! httparse, the service called with the body as read, the reply written in one write —
//! without hyper's connection machinery (its dispatcher, header map, request and
//! response types: ~9,000 instructions of a proxied call, docs/benchmarks.md).
//!
//! Kept because a same-run measurement still justifies it (docs/benchmarks.md, "One HTTP
//! layer", 2026-12-05): with this path on, a proxied call on a hedged route costs
//! 40,233 instructions against 54,334 with `[gateway] fast_path = false` (hyper serving
//! every request), −26 %; streamed 58,714 against 74,131 (callgrind,
//! `scripts/instructions-per-request.sh`, same build, `TAILCUT_IPR_GATEWAY`).
//!
//! The first request that is anything else — another path or method, HTTP/1.0, a
//! chunked, `Expect` or `Upgrade` request, one without exactly one `Host` field (hyper's
//! path answers it a 400, [`crate::limits`]), a head still arriving or over the limits,
//! a body over the size limit, bytes that are not HTTP — hands the connection, with
//! every byte already read, to hyper ([`Ended::HandOver`]), which serves it from then on
//! with its own parsing and the same [`ServerLimits`]. So this path only answers
//! requests that hyper's path would have answered the same way. While it holds the
//! connection it keeps the same rules: the idle timeout between requests, the body
//! timeout (a 408, [`Refusal::BodyTimeout`]), closing after the request in progress when
//! the service drains or idle connections are asked to make room, and a client that
//! hangs up stops its request ([`Hangup`]) or drops its streamed reply.

use crate::date::http_date;
use crate::hangup::Hangup;
use crate::heartbeat::Heartbeat;
use crate::limits::ServerLimits;
use bytes::{Bytes, BytesMut};
use futures::FutureExt;
use http::{HeaderMap, HeaderName, HeaderValue, Response};
use http_body_util::BodyExt;
use std::future::Future;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;

/// What the fast path serves: a service's routes for whole POSTs, and how it answers.
pub trait FastService: Send + Sync {
    /// What a fast route leads to (the gateway: an OpenAI endpoint).
    type Route: Copy + Send + std::fmt::Debug + PartialEq;
    /// The reply body.
    type Body: http_body::Body<Data = Bytes> + Send + Unpin;
    /// The name of a header field the service reads, given a field's name in any case;
    /// `None` for the others (parsed but not kept).
    fn kept_field(name: &str) -> Option<HeaderName>;

    /// The route of a POST to `path` served here, or `None` (hyper's path serves it).
    fn route(&self, path: &str) -> Option<Self::Route>;

    /// Answers a whole request; `hangup` is set if the client goes away meanwhile.
    fn call(
        &self,
        route: Self::Route,
        headers: HeaderMap,
        body: Bytes,
        hangup: Arc<Hangup>,
    ) -> impl Future<Output = Response<Self::Body>> + Send;

    /// The reply to a request refused on this path.
    fn refuse(&self, refusal: Refusal) -> Response<Self::Body>;

    /// Whether the service is draining (connections close after their request).
    fn draining(&self) -> bool;

    /// An idle connection was closed to make room (for the service's metrics).
    fn shed(&self);
}

/// A request refused on the fast path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The body did not arrive within the body timeout (a 408, as hyper's path answers).
    #[error("the request body did not arrive within {} s", .0.as_secs())]
    BodyTimeout(Duration),
}

/// Room made in the read buffer before each read.
const READ_AT_LEAST: usize = 8 * 1024;
/// Header fields parsed per head; a head with more goes to hyper.
const HEADER_SLOTS: usize = 32;
/// A reply body up to this size goes out in the head's write.
const COALESCE_BODY: usize = 16 * 1024;
/// Most room made ahead of a body's bytes as they arrive.
const BODY_STEP: usize = 64 * 1024;
/// Bytes of a next (pipelined) request read while a reply is pending; past this much,
/// reading waits for the reply.
const MAX_BUFFERED: usize = 64 * 1024;

/// How a connection's time on this path ended.
#[derive(Debug)]
pub enum Ended {
    /// The connection is done: the client closed it or hung up, it idled out, it was
    /// asked to close (drain, room for new connections), or it broke.
    Closed,
    /// A request this path does not answer: hyper serves the connection from here,
    /// starting with these bytes (that request and anything after it).
    HandOver(BytesMut),
}

/// The signals a connection obeys between requests.
#[derive(Debug)]
pub struct Signals<'a> {
    /// Turns true when the service stops accepting (drain).
    pub closing: &'a mut watch::Receiver<bool>,
    /// Bumped when idle connections are asked to make room.
    pub shed: &'a mut watch::Receiver<u64>,
    /// The runtime's timer heartbeat, told of every request.
    pub heartbeat: &'a Heartbeat,
}

/// Serves `tcp`'s requests for as long as each is a whole request to a fast route.
pub async fn serve<S: FastService>(tcp: &mut TcpStream, svc: &S, limits: &ServerLimits, signals: Signals<'_>) -> Ended {
    let Signals { closing, shed, heartbeat } = signals;
    let idle = limits.idle;
    let mut buf = BytesMut::with_capacity(READ_AT_LEAST);
    let mut out = Vec::with_capacity(1024);
    let hangup = Arc::new(Hangup::default());
    // Long-lived waits, polled only while the connection is idle; re-polling a
    // registered wait costs nothing like registering a new one per request.
    let mut idle_at = Instant::now() + idle;
    let mut idle_timer = std::pin::pin!(tokio::time::sleep_until(idle_at));
    let mut closing_now = std::pin::pin!(closing.wait_for(|c| *c));
    let shed_peek = shed.clone();
    // A request to make room counts only if it came while the connection was idle
    // (a busy connection finishes and stays, as with hyper's connections).
    let idle_since_shed = AtomicU64::new(*shed_peek.borrow());
    let mut asked_to_make_room = std::pin::pin!(async {
        loop {
            if shed.changed().await.is_err() {
                return futures::future::pending::<()>().await;
            }
            if *shed.borrow() > idle_since_shed.load(Ordering::Relaxed) {
                return;
            }
        }
    });
    loop {
        // Every whole request already read, in order.
        while !buf.is_empty() {
            let request = match parse(svc, &buf, limits) {
                Parsed::Whole(request) => request,
                Parsed::BodyArriving(total) => match read_body_rest(tcp, &mut buf, total, limits.body_read).await {
                    Ok(()) => continue,
                    Err(Some(refusal)) => {
                        let _ = write_response(tcp, svc.refuse(refusal), true, &mut out, &mut buf).await;
                        let _ = tcp.shutdown().await;
                        return Ended::Closed;
                    }
                    Err(None) => return Ended::Closed,
                },
                Parsed::NotHere => return Ended::HandOver(buf),
            };
            let body = take_request(&mut buf, request.head_len, request.body_len);
            let answer = svc.call(request.route, request.headers, body, hangup.clone());
            let Some(resp) = answer_watching(tcp, &mut buf, answer, &hangup).await else {
                return Ended::Closed;
            };
            let close = request.close || svc.draining();
            if write_response(tcp, resp, close, &mut out, &mut buf).await.is_err() {
                return Ended::Closed;
            }
            if close {
                // A FIN, not a reset: bytes the client sent after this request must not
                // make the kernel discard the reply it has not read yet.
                let _ = tcp.shutdown().await;
                return Ended::Closed;
            }
            idle_at = Instant::now() + idle;
        }
        // Idle: wait for the next request's bytes.
        idle_since_shed.store(*shed_peek.borrow(), Ordering::Relaxed);
        buf.reserve(READ_AT_LEAST);
        loop {
            let read = tokio::select! {
                biased;
                read = tcp.read_buf(&mut buf) => read,
                _ = &mut closing_now => return Ended::Closed,
                () = &mut asked_to_make_room => {
                    svc.shed();
                    return Ended::Closed;
                }
                () = &mut idle_timer => {
                    if Instant::now() >= idle_at {
                        return Ended::Closed;
                    }
                    // Armed for an earlier idle stretch: re-armed only when it fires.
                    idle_timer.as_mut().reset(idle_at);
                    continue;
                }
            };
            match read {
                Ok(0) | Err(_) => return Ended::Closed,
                Ok(_) => {
                    heartbeat.beat();
                    break;
                }
            }
        }
    }
}

/// A whole request this path answers.
#[derive(Debug)]
struct WholeRequest<R> {
    route: R,
    /// The fields the service reads ([`FastService::kept_field`]); the rest are not
    /// looked at past this parse.
    headers: HeaderMap,
    head_len: usize,
    body_len: usize,
    /// The client asked to close after this request.
    close: bool,
}

/// What `buf`'s first request is to this path.
#[derive(Debug)]
enum Parsed<R> {
    /// Read whole: answered here.
    Whole(WholeRequest<R>),
    /// Answered here once its body is read to this many bytes (head and body).
    BodyArriving(usize),
    /// Not answered here: the connection goes to hyper.
    NotHere,
}

/// `buf`'s first request (see the module's doc for which are answered here).
fn parse<S: FastService>(svc: &S, buf: &[u8], limits: &ServerLimits) -> Parsed<S::Route> {
    match parse_head(svc, buf, limits) {
        None => Parsed::NotHere,
        Some(r) if buf.len() - r.head_len < r.body_len => Parsed::BodyArriving(r.head_len + r.body_len),
        Some(r) => Parsed::Whole(r),
    }
}

/// Reads the rest of a request's body (to `total` bytes in `buf`) within the body
/// timeout `limit`. `Err(Some(refusal))`: it did not come in time (a 408, as hyper's
/// path answers); `Err(None)`: the client hung up.
///
/// Room is made as the bytes come ([`BODY_STEP`] at most ahead of them), not for the
/// declared length at once: a head alone must not make the gateway allocate up to
/// `max_body_bytes` (hyper's path held only the bytes that had arrived).
async fn read_body_rest(tcp: &mut TcpStream, buf: &mut BytesMut, total: usize, limit: Duration) -> Result<(), Option<Refusal>> {
    let rest = async {
        while buf.len() < total {
            buf.reserve((total - buf.len()).min(BODY_STEP));
            match tcp.read_buf(buf).await {
                Ok(0) | Err(_) => return Err(None),
                Ok(_) => {}
            }
        }
        Ok(())
    };
    match tokio::time::timeout(limit, rest).await {
        Ok(read) => read,
        Err(_) => Err(Some(Refusal::BodyTimeout(limit))),
    }
}

/// `buf`'s first request head, if this path answers the request (its body may still be
/// arriving); `None` hands the connection to hyper.
fn parse_head<S: FastService>(svc: &S, buf: &[u8], limits: &ServerLimits) -> Option<WholeRequest<S::Route>> {
    let mut slots = [httparse::EMPTY_HEADER; HEADER_SLOTS];
    let mut req = httparse::Request::new(&mut slots);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        _ => return None,
    };
    if head_len > limits.max_header_bytes || req.version != Some(1) || req.method != Some("POST") {
        return None;
    }
    let route = svc.route(req.path?)?;
    let mut headers = HeaderMap::new();
    let mut body_len = None;
    let mut close = false;
    let mut hosts = 0usize;
    for field in req.headers.iter() {
        let name = field.name;
        if is_host(name) {
            hosts += 1;
        } else if name.eq_ignore_ascii_case("content-length") {
            if body_len.is_some() {
                return None;
            }
            body_len = Some(decimal(field.value)?);
        } else if name.eq_ignore_ascii_case("connection") {
            for token in std::str::from_utf8(field.value).ok()?.split(',').map(str::trim) {
                if token.eq_ignore_ascii_case("close") {
                    close = true;
                } else if token.eq_ignore_ascii_case("upgrade") {
                    return None;
                }
            }
        } else if let Some(kept) = S::kept_field(name) {
            headers.append(kept, HeaderValue::from_bytes(field.value).ok()?);
        } else if name.eq_ignore_ascii_case("transfer-encoding")
            || name.eq_ignore_ascii_case("expect")
            || name.eq_ignore_ascii_case("upgrade")
        {
            return None;
        }
    }
    let body_len = body_len.unwrap_or(0);
    // No Host, or more than one: hyper's path refuses it (RFC 9112 §3.2).
    if body_len > limits.max_body() || hosts != 1 {
        return None;
    }
    Some(WholeRequest { route, headers, head_len, body_len, close })
}

/// Whether a field name is `Host`, in any case: one load and compare of four bytes
/// (setting bit 5 lower-cases `H`, `O`, `S`, `T` and leaves only them and their lower
/// case equal to `host`), where a byte-by-byte case-insensitive compare cost ~35
/// instructions a request (callgrind, scripts/instructions-per-request.sh).
fn is_host(name: &str) -> bool {
    match name.as_bytes() {
        &[a, b, c, d] => u32::from_le_bytes([a, b, c, d]) | 0x2020_2020 == u32::from_le_bytes(*b"host"),
        _ => false,
    }
}

/// Takes the first request (`head_len` and `body_len` bytes) off `buf`; returns its
/// body. After a request larger than [`MAX_BUFFERED`] with nothing behind it, `buf`
/// starts afresh: it would otherwise reclaim the large allocation (once the body is
/// dropped) and hold it while the connection idles, where hyper's path kept no more
/// than its read buffer.
fn take_request(buf: &mut BytesMut, head_len: usize, body_len: usize) -> Bytes {
    let mut head = buf.split_to(head_len + body_len);
    let body = head.split_off(head_len).freeze();
    if buf.is_empty() && head_len + body_len > MAX_BUFFERED {
        *buf = BytesMut::new();
    }
    body
}

/// A `Content-Length` value: digits only, as hyper reads it.
fn decimal(value: &[u8]) -> Option<usize> {
    if value.is_empty() || value.len() > 18 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // 18 digits fit a u64; a usize narrower than that (32-bit targets) must not wrap.
    usize::try_from(value.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'))).ok()
}

/// The handler's answer, or `None` if the client hung up first: the race behind the
/// answer is then told to stop ([`Hangup`]), and this waits for it to cancel its
/// attempts with receipts and settle before the connection is closed. Bytes the client
/// sends meanwhile (a pipelined request) are kept in `buf`.
async fn answer_watching<R>(tcp: &mut TcpStream, buf: &mut BytesMut, answer: impl Future<Output = R>, hangup: &Hangup) -> Option<R> {
    let mut answer = std::pin::pin!(answer);
    loop {
        tokio::select! {
            biased;
            resp = &mut answer => return Some(resp),
            read = tcp.read_buf(buf), if buf.len() < MAX_BUFFERED => match read {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            },
        }
    }
    hangup.hang_up();
    answer.await;
    None
}

/// Writes `resp`: a body of known size with `Content-Length` (one write when it is
/// small), any other chunked, each piece as it comes (a stream's events), watching for
/// the client hanging up between pieces.
async fn write_response<B>(
    tcp: &mut TcpStream,
    resp: Response<B>,
    close: bool,
    out: &mut Vec<u8>,
    buf: &mut BytesMut,
) -> std::io::Result<()>
where
    B: http_body::Body<Data = Bytes> + Unpin,
{
    let (parts, mut body) = resp.into_parts();
    out.clear();
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(parts.status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(parts.status.canonical_reason().unwrap_or("Unknown").as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in &parts.headers {
        if matches!(name.as_str(), "content-length" | "transfer-encoding" | "connection" | "date") {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    http_date(out);
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    let broken = || std::io::Error::other("the reply body failed");
    if let Some(len) = http_body::Body::size_hint(&body).exact() {
        out.extend_from_slice(b"content-length: ");
        out.extend_from_slice(itoa::Buffer::new().format(len).as_bytes());
        out.extend_from_slice(b"\r\n\r\n");
        while let Some(frame) = body.frame().await {
            let Ok(data) = frame.map_err(|_| broken())?.into_data() else { continue };
            if out.len() + data.len() <= COALESCE_BODY {
                out.extend_from_slice(&data);
            } else {
                tcp.write_all(out).await?;
                out.clear();
                tcp.write_all(&data).await?;
            }
        }
        return tcp.write_all(out).await;
    }
    out.extend_from_slice(b"transfer-encoding: chunked\r\n\r\n");
    // The pieces already there (a stream's events up to its first token) go out with the head.
    let mut ended = false;
    while let Some(frame) = body.frame().now_or_never() {
        match frame {
            None => {
                ended = true;
                break;
            }
            Some(frame) => chunk(out, &frame.map_err(|_| broken())?.into_data().unwrap_or_default()),
        }
    }
    if !ended {
        tcp.write_all(out).await?;
        loop {
            let frame = tokio::select! {
                biased;
                frame = body.frame() => frame,
                read = tcp.read_buf(buf), if buf.len() < MAX_BUFFERED => match read {
                    Ok(0) | Err(_) => return Err(std::io::ErrorKind::ConnectionAborted.into()),
                    Ok(_) => continue,
                },
            };
            let Some(frame) = frame else { break };
            out.clear();
            chunk(out, &frame.map_err(|_| broken())?.into_data().unwrap_or_default());
            if !out.is_empty() {
                tcp.write_all(out).await?;
            }
        }
        out.clear();
    }
    out.extend_from_slice(b"0\r\n\r\n");
    tcp.write_all(out).await
}

/// Appends `data` as one chunk of a chunked body (nothing for no data: an empty chunk
/// would end the body).
fn chunk(out: &mut Vec<u8>, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    // Writing to a Vec cannot fail.
    let _ = write!(out, "{:x}\r\n", data.len());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::AUTHORIZATION;
    use http_body_util::Full;
    use std::sync::atomic::AtomicUsize;

    const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Endpoint {
        Chat,
        Completions,
        Embeddings,
    }

    /// The gateway's fast routes, answering nothing.
    struct Svc;

    impl FastService for Svc {
        type Route = Endpoint;
        type Body = Full<Bytes>;
        fn kept_field(name: &str) -> Option<HeaderName> {
            [AUTHORIZATION, REQUEST_ID].into_iter().find(|k| name.eq_ignore_ascii_case(k.as_str()))
        }

        fn route(&self, path: &str) -> Option<Endpoint> {
            match path {
                "/v1/chat/completions" => Some(Endpoint::Chat),
                "/v1/completions" => Some(Endpoint::Completions),
                "/v1/embeddings" => Some(Endpoint::Embeddings),
                _ => None,
            }
        }

        async fn call(&self, _: Endpoint, _: HeaderMap, _: Bytes, _: Arc<Hangup>) -> Response<Full<Bytes>> {
            Response::new(Full::default())
        }

        fn refuse(&self, _: Refusal) -> Response<Full<Bytes>> {
            let mut r = Response::new(Full::default());
            *r.status_mut() = http::StatusCode::REQUEST_TIMEOUT;
            r
        }

        fn draining(&self) -> bool {
            false
        }

        fn shed(&self) {}
    }

    fn limits(max_body: usize) -> ServerLimits {
        let t = Duration::from_secs(1);
        ServerLimits::new(t, t, t, Arc::new(AtomicUsize::new(max_body)))
    }

    fn parse_at(buf: &[u8], max_body: usize) -> Parsed<Endpoint> {
        parse(&Svc, buf, &limits(max_body))
    }

    const BODY: &str = r#"{"model":"m","messages":[]}"#;

    fn request(head: &str, body: &str) -> Vec<u8> {
        format!("{head}\r\n\r\n{body}").into_bytes()
    }

    #[test]
    fn a_whole_post_to_an_openai_endpoint_is_answered_here() {
        let bytes = request(
            &format!(
                "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer k\r\nx-request-id: r1\r\ncontent-type: application/json\r\ncontent-length: {}",
                BODY.len()
            ),
            BODY,
        );
        let Parsed::Whole(r) = parse_at(&bytes, 1 << 20) else { panic!("not answered here") };
        assert_eq!(r.route, Endpoint::Chat);
        assert_eq!(r.head_len + r.body_len, bytes.len());
        assert_eq!(r.headers[AUTHORIZATION], "Bearer k");
        assert_eq!(r.headers[REQUEST_ID], "r1");
        assert_eq!(r.headers.len(), 2, "only the fields the handler reads");
        assert!(!r.close);
        let close = request(
            &format!("POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Close\r\nContent-Length: {}", BODY.len()),
            BODY,
        );
        assert!(matches!(parse_at(&close, 1 << 20), Parsed::Whole(r) if r.close));
    }

    #[test]
    fn anything_else_goes_to_hyper() {
        let len = BODY.len();
        let handed_over = [
            request(&format!("GET /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {len}"), BODY),
            request(&format!("POST /v1/jobs HTTP/1.1\r\nhost: x\r\ncontent-length: {len}"), BODY),
            request(&format!("POST /v1/chat/completions?x=1 HTTP/1.1\r\nhost: x\r\ncontent-length: {len}"), BODY),
            request(&format!("POST /v1/chat/completions HTTP/1.0\r\nhost: x\r\ncontent-length: {len}"), BODY),
            request("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked", "1b\r\n"),
            request(&format!("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nexpect: 100-continue\r\ncontent-length: {len}"), ""),
            request(&format!("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\ncontent-length: {len}"), BODY),
            request(&format!("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {len}\r\ncontent-length: {len}"), BODY),
            request("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: +5", "{}123"),
            // The head still arriving, not HTTP.
            b"POST /v1/chat/completions HTTP/1.1\r\ncontent-len".to_vec(),
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03".to_vec(),
            // No Host, or two (hyper's path answers the 400).
            request(&format!("POST /v1/chat/completions HTTP/1.1\r\ncontent-length: {len}"), BODY),
            request(&format!("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nHost: y\r\ncontent-length: {len}"), BODY),
            // More fields than this path parses.
            request(&format!("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n{}content-length: {len}", "x-a: 1\r\n".repeat(40)), BODY),
        ];
        for bytes in handed_over {
            assert!(matches!(parse_at(&bytes, 1 << 20), Parsed::NotHere), "answered here: {}", String::from_utf8_lossy(&bytes));
        }
        // Over the body limit: hyper's path answers the 413.
        let big = request(&format!("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {}", BODY.len()), BODY);
        assert!(matches!(parse_at(&big, BODY.len() - 1), Parsed::NotHere));
        assert!(matches!(parse_at(&big, BODY.len()), Parsed::Whole(_)));
        // A body still arriving is waited for.
        let short = &big[..big.len() - 3];
        assert!(matches!(parse_at(short, BODY.len()), Parsed::BodyArriving(n) if n == big.len()));
    }

    #[test]
    fn host_is_matched_in_any_case_and_nothing_else_is() {
        for name in ["host", "Host", "HOST", "hOsT"] {
            assert!(is_host(name), "{name}");
        }
        // Every other four-byte name that differs from `host` in one byte only.
        for i in 0..4 {
            for b in 0..=255u8 {
                let mut name = *b"host";
                name[i] = b;
                if let Ok(name) = std::str::from_utf8(&name) {
                    assert_eq!(is_host(name), name.eq_ignore_ascii_case("host"), "{name:?}");
                }
            }
        }
        for name in ["hos", "hosts", "", "date", "x-host"] {
            assert!(!is_host(name), "{name}");
        }
    }

    #[test]
    fn pipelined_requests_are_parsed_one_at_a_time() {
        let one = request(&format!("POST /v1/embeddings HTTP/1.1\r\nhost: x\r\ncontent-length: {}", BODY.len()), BODY);
        let two = [one.clone(), one.clone()].concat();
        let Parsed::Whole(r) = parse_at(&two, 1 << 20) else { panic!("not answered here") };
        assert_eq!(r.head_len + r.body_len, one.len());
        assert_eq!(r.route, Endpoint::Embeddings);
    }

    #[tokio::test(start_paused = true)]
    async fn a_declared_body_is_not_allocated_before_it_arrives() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (mut server, _) = l.accept().await.unwrap();
        client.write_all(b"{\"model\":").await.unwrap();
        // A head declared 100 MiB; 10 bytes came, then nothing: a 408, holding little.
        let mut buf = BytesMut::new();
        let total = 100 << 20;
        let read = read_body_rest(&mut server, &mut buf, total, Duration::from_secs(1)).await;
        assert!(matches!(read, Err(Some(Refusal::BodyTimeout(_)))));
        assert_eq!(&buf[..], b"{\"model\":");
        assert!(buf.capacity() <= 2 * BODY_STEP, "{} bytes allocated for 10", buf.capacity());
        // A body that does come is read whole.
        let body = vec![b'x'; 300_000];
        let mut buf = BytesMut::new();
        let (read, wrote) =
            tokio::join!(read_body_rest(&mut server, &mut buf, body.len(), Duration::from_secs(5)), client.write_all(&body));
        wrote.unwrap();
        assert!(read.is_ok());
        assert_eq!(&buf[..], &body[..]);
    }

    #[test]
    fn an_idle_connection_does_not_keep_a_large_request_s_buffer() {
        for (body_len, behind) in [(1 << 20, 0), (1000, 0), (1 << 20, 10)] {
            let mut buf = BytesMut::with_capacity(READ_AT_LEAST);
            buf.extend_from_slice(&vec![b'x'; 100 + body_len + behind]);
            let body = take_request(&mut buf, 100, body_len);
            assert_eq!((body.len(), buf.len()), (body_len, behind));
            drop(body);
            // What the connection does when it goes idle.
            buf.reserve(READ_AT_LEAST);
            if body_len > MAX_BUFFERED && behind == 0 {
                assert!(buf.capacity() < 2 * MAX_BUFFERED, "{} bytes held by an idle connection", buf.capacity());
            }
        }
    }

    #[test]
    fn chunks_are_framed_and_an_empty_piece_writes_nothing() {
        let mut out = Vec::new();
        chunk(&mut out, b"data: hi\n\n");
        chunk(&mut out, b"");
        assert_eq!(out, b"a\r\ndata: hi\n\n\r\n");
        let mut date = Vec::new();
        http_date(&mut date);
        let text = String::from_utf8(date).unwrap();
        assert!(text.starts_with("date: ") && text.ends_with(" GMT\r\n") && text.len() == 37, "{text:?}");
    }
}
