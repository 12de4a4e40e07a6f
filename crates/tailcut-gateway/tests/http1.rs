//! The gateway's own HTTP/1.1 for proxied calls, as a client meets it over raw TCP:
//! pipelined requests are answered in order, a body that arrives in pieces is waited for
//! (and one that stalls gets a 408), `Connection: close` is honoured, and a connection
//! can go from proxied calls to any other request (which hyper then serves).
//!
//! Then the fast path case by case against what hyper's path did and RFC 9112: hand-overs
//! in the middle of pipelined bytes, streamed replies read back by a strict chunked
//! decoder, a client hanging up mid-race, heads and bodies around the read sizes and the
//! body limit, the header-count limits, authentication, `Transfer-Encoding` with
//! `Content-Length`, HTTP/1.0, half-closes, `Expect: 100-continue`, the idle timeout and
//! drain; every reply with one `Date` and no repeated framing fields.
//!
//! Every case runs twice (`on_both_paths!`): `CASE::fast_path` with `[gateway] fast_path
//! = true` and `CASE::hyper_path` with `false`, where hyper serves every request. Both
//! must answer the same.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

mod common;

use axum::routing::post;
use axum::Router;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tailcut_testkit::config::{hedged_chat_route, openai_provider, MEMORY_GATEWAY, OPEN_GATEWAY};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const REPLY: &str = r#"{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}"#;
const BODY: &str = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;

/// An OpenAI-compatible upstream answering every chat completion at once.
async fn upstream() -> String {
    let app = Router::new().route("/v1/chat/completions", post(|| async { ([("content-type", "application/json")], REPLY) }));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await });
    format!("http://{addr}/v1")
}

/// A gateway in front of [`upstream`]; returns its `host:port`.
async fn gateway(lines: &str) -> String {
    let toml = tailcut_testkit::config::one_provider_gateway(&upstream().await, lines);
    let url = common::serve_config(&toml).await;
    url.trim_start_matches("http://").trim_end_matches("/v1/chat/completions").to_string()
}

fn chat(request_id: &str, extra: &str) -> String {
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-request-id: {request_id}\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\n\r\n{BODY}",
        BODY.len()
    )
}

/// One response off `tcp` (`Content-Length` framed): its head, lower-cased, and body.
async fn response(tcp: &mut TcpStream, pending: &mut Vec<u8>) -> Option<(String, String)> {
    loop {
        if let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&pending[..end]).to_lowercase();
            let len: usize = head.lines().find_map(|l| l.strip_prefix("content-length:")).map_or(0, |v| v.trim().parse().unwrap());
            if pending.len() >= end + 4 + len {
                let body = String::from_utf8_lossy(&pending[end + 4..end + 4 + len]).to_string();
                pending.drain(..end + 4 + len);
                return Some((head, body));
            }
        }
        let mut buf = [0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf)).await.ok()?.ok()?;
        if n == 0 {
            return None;
        }
        pending.extend_from_slice(&buf[..n]);
    }
}

async fn pipelined_requests_are_answered_in_order_on_one_connection() {
    let addr = gateway("").await;
    let mut tcp = TcpStream::connect(&addr).await.unwrap();
    tcp.write_all(format!("{}{}{}", chat("first", ""), chat("second", ""), chat("third", "")).as_bytes()).await.unwrap();
    let mut pending = Vec::new();
    for id in ["first", "second", "third"] {
        let (head, body) = response(&mut tcp, &mut pending).await.expect("a response");
        assert!(head.starts_with("http/1.1 200 ok"), "{head}");
        assert!(head.contains(&format!("x-request-id: {id}")), "out of order: {head}");
        assert!(head.contains("\r\ndate: "), "{head}");
        assert!(head.contains("x-tailcut-winner: up"), "{head}");
        assert_eq!(body, REPLY);
    }
}

async fn a_body_in_pieces_is_waited_for_and_a_stalled_one_gets_a_408() {
    let addr = gateway("body_read_timeout_s = 1").await;
    let request = chat("pieces", "");
    let (head, rest) = request.split_at(request.len() - 20);
    let mut tcp = TcpStream::connect(&addr).await.unwrap();
    tcp.write_all(head.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    tcp.write_all(rest.as_bytes()).await.unwrap();
    let mut pending = Vec::new();
    let (head, body) = response(&mut tcp, &mut pending).await.expect("a response");
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert_eq!(body, REPLY);

    // The same connection, then a body that never comes whole.
    tcp.write_all(&chat("stalled", "").as_bytes()[..request.len() - 20]).await.unwrap();
    let started = std::time::Instant::now();
    let (head, body) = response(&mut tcp, &mut pending).await.expect("a response");
    assert!(head.starts_with("http/1.1 408"), "{head}");
    assert!(head.contains("connection: close"), "{head}");
    let error: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["error"]["code"], "body_timeout");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(response(&mut tcp, &mut pending).await.is_none(), "the connection stayed open");
}

async fn connection_close_is_honoured_after_the_reply() {
    let addr = gateway("").await;
    let mut tcp = TcpStream::connect(&addr).await.unwrap();
    tcp.write_all(chat("bye", "connection: close\r\n").as_bytes()).await.unwrap();
    let mut pending = Vec::new();
    let (head, body) = response(&mut tcp, &mut pending).await.expect("a response");
    assert!(head.starts_with("http/1.1 200") && head.contains("connection: close"), "{head}");
    assert_eq!(body, REPLY);
    assert!(response(&mut tcp, &mut pending).await.is_none(), "the connection stayed open");
}

async fn a_connection_goes_from_proxied_calls_to_any_other_request() {
    let addr = gateway("").await;
    let mut tcp = TcpStream::connect(&addr).await.unwrap();
    let mut pending = Vec::new();
    tcp.write_all(chat("one", "").as_bytes()).await.unwrap();
    let (head, _) = response(&mut tcp, &mut pending).await.expect("a response");
    assert!(head.starts_with("http/1.1 200"), "{head}");
    // A health check, then a malformed model, then a proxied call again: hyper serves
    // the connection from the health check on.
    let bad = r#"{"model":7}"#;
    let next = format!(
        "GET /healthz HTTP/1.1\r\nhost: x\r\n\r\nPOST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n{bad}{}",
        bad.len(),
        chat("two", "")
    );
    tcp.write_all(next.as_bytes()).await.unwrap();
    let (head, _) = response(&mut tcp, &mut pending).await.expect("a response");
    assert!(head.starts_with("http/1.1 200"), "healthz: {head}");
    let (head, body) = response(&mut tcp, &mut pending).await.expect("a response");
    assert!(head.starts_with("http/1.1 400"), "{head}");
    assert!(serde_json::from_str::<serde_json::Value>(&body).unwrap()["error"].is_object(), "{body}");
    let (head, body) = response(&mut tcp, &mut pending).await.expect("a response");
    assert!(head.starts_with("http/1.1 200") && head.contains("x-request-id: two"), "{head}");
    assert_eq!(body, REPLY);
}

const ROLE: &str = r#"data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#;

fn token(t: &str) -> String {
    format!(r#"data: {{"choices":[{{"index":0,"delta":{{"content":"{t}"}}}}]}}"#)
}

/// An upstream that reads each request and never answers; counts the connections the
/// gateway then closed (an attempt it gave up on).
async fn silent_upstream() -> (String, Arc<AtomicUsize>) {
    let closed = Arc::new(AtomicUsize::new(0));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let c = closed.clone();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = l.accept().await {
            let c = c.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                while let Ok(n) = tcp.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                }
                c.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    (format!("http://{addr}/v1"), closed)
}

/// A completion of about 100 KB.
fn big_reply() -> String {
    REPLY.replace("\"hi\"", &format!("\"{}\"", "h".repeat(100_000)))
}

/// An upstream with a behaviour per path prefix: `/ok` answers [`REPLY`] at once,
/// `/delay` after 400 ms, `/big` with a reply of about 100 KB,
/// `/stream` streams two tokens 20 ms apart.
async fn upstreams() -> String {
    use axum::body::Body;
    use axum::response::Response;
    let app = Router::new()
        .route("/ok/v1/chat/completions", post(|| async { ([("content-type", "application/json")], REPLY) }))
        .route(
            "/delay/v1/chat/completions",
            post(|| async {
                tokio::time::sleep(Duration::from_millis(400)).await;
                ([("content-type", "application/json")], REPLY)
            }),
        )
        .route("/big/v1/chat/completions", post(|| async { ([("content-type", "application/json")], big_reply()) }))
        .route(
            "/stream/v1/chat/completions",
            post(|| async {
                let events = vec![ROLE.to_string(), token("a"), token("b"), "data: [DONE]".to_string()];
                let stream = futures::stream::unfold(events.into_iter(), |mut it| async move {
                    let next = it.next()?;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    Some((Ok::<_, std::io::Error>(bytes::Bytes::from(format!("{next}\n\n"))), it))
                });
                Response::builder().header("content-type", "text/event-stream").body(Body::from_stream(stream)).unwrap()
            }),
        );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await });
    format!("http://{addr}")
}

/// A gateway (open unless `gateway_lines` says otherwise) serving model `m` from the
/// upstream at `base` (ending in `/v1`); returns its `host:port`.
async fn gateway_to(base: &str, gateway_lines: &str) -> String {
    let toml = tailcut_testkit::config::one_provider_gateway(base, gateway_lines);
    let url = common::serve_config(&toml).await;
    url.trim_start_matches("http://").trim_end_matches("/v1/chat/completions").to_string()
}

/// One reply read strictly: the status line and fields (names lower-cased), and the
/// body, framed by `Content-Length` or by chunked coding (which must end in
/// `0\r\n\r\n`, no trailers, every chunk's size in plain hex and followed by CRLF).
#[derive(Debug)]
struct Reply {
    status: u16,
    fields: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    fn count(&self, name: &str) -> usize {
        self.fields.iter().filter(|(n, _)| n == name).count()
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|_| panic!("not JSON: {}", self.text()))
    }

    /// The framing fields appear at most once each, a `date` field is there, and
    /// `Content-Length` and chunked coding are never both used.
    fn assert_well_formed(&self) {
        for name in ["content-length", "transfer-encoding", "connection", "date", "content-type"] {
            assert!(self.count(name) <= 1, "{name} repeated: {:?}", self.fields);
        }
        assert!(self.count("date") == 1, "no date: {:?}", self.fields);
        let date = self.field("date").unwrap();
        assert!(httpdate::parse_http_date(date).is_ok(), "bad date {date:?}");
        assert!(!(self.count("content-length") == 1 && self.count("transfer-encoding") == 1), "{:?}", self.fields);
    }
}

/// Reads into `pending` until it holds `n` bytes; false if the connection ended first.
async fn fill(tcp: &mut TcpStream, pending: &mut Vec<u8>, n: usize) -> bool {
    while pending.len() < n {
        let mut buf = [0u8; 16384];
        match tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return false,
            Ok(Ok(k)) => pending.extend_from_slice(&buf[..k]),
        }
    }
    true
}

/// Reads a CRLF-ended line off the front of `pending`.
async fn line(tcp: &mut TcpStream, pending: &mut Vec<u8>) -> Option<String> {
    loop {
        if let Some(end) = pending.windows(2).position(|w| w == b"\r\n") {
            let l = String::from_utf8(pending[..end].to_vec()).ok()?;
            pending.drain(..end + 2);
            return Some(l);
        }
        let want = pending.len() + 1;
        if !fill(tcp, pending, want).await {
            return None;
        }
    }
}

/// One reply off `tcp` (see [`Reply`]); `None` if the connection ended before a whole one.
async fn reply(tcp: &mut TcpStream, pending: &mut Vec<u8>) -> Option<Reply> {
    let status_line = line(tcp, pending).await?;
    assert!(status_line.starts_with("HTTP/1.1 "), "{status_line:?}");
    let status: u16 = status_line[9..12].parse().unwrap();
    let mut fields = Vec::new();
    loop {
        let l = line(tcp, pending).await?;
        if l.is_empty() {
            break;
        }
        let (name, value) = l.split_once(':').unwrap_or_else(|| panic!("bad field line {l:?}"));
        fields.push((name.to_ascii_lowercase(), value.trim().to_string()));
    }
    let mut r = Reply { status, fields, body: Vec::new() };
    if r.field("transfer-encoding").is_some() {
        assert_eq!(r.field("transfer-encoding"), Some("chunked"));
        loop {
            let size_line = line(tcp, pending).await?;
            assert!(!size_line.is_empty() && size_line.bytes().all(|b| b.is_ascii_hexdigit()), "chunk size {size_line:?}");
            let size = usize::from_str_radix(&size_line, 16).unwrap();
            if !fill(tcp, pending, size + 2).await {
                return None;
            }
            if size == 0 {
                assert_eq!(&pending[..2], b"\r\n", "trailers or no final CRLF");
                pending.drain(..2);
                return Some(r);
            }
            assert_eq!(&pending[size..size + 2], b"\r\n", "a chunk not followed by CRLF");
            r.body.extend_from_slice(&pending[..size]);
            pending.drain(..size + 2);
        }
    }
    let len: usize = r.field("content-length").map_or(0, |v| v.parse().unwrap());
    if !fill(tcp, pending, len).await {
        return None;
    }
    r.body = pending.drain(..len).collect();
    Some(r)
}

/// Whether the server closed `tcp` within `limit` (reading and discarding anything else).
async fn closes_within(tcp: &mut TcpStream, limit: Duration) -> bool {
    let mut buf = [0u8; 4096];
    let t = std::time::Instant::now();
    loop {
        match tokio::time::timeout(limit.saturating_sub(t.elapsed()), tcp.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

fn chat_body(body: &str, extra: &str) -> String {
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\n\r\n{body}",
        body.len()
    )
}

async fn pipelined_requests_mixing_the_fast_path_and_hyper_are_answered_in_order() {
    let up = upstreams().await;
    let addr = gateway_to(&format!("{up}/ok/v1"), "").await;
    let mut tcp = TcpStream::connect(&addr).await.unwrap();
    // Fast, fast, hyper (healthz), fast (now on hyper), all in one write.
    let all = format!("{}{}GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n{}", chat("a", ""), chat("b", ""), chat("c", ""));
    tcp.write_all(all.as_bytes()).await.unwrap();
    let mut pending = Vec::new();
    for want in ["a", "b", "healthz", "c"] {
        let r = reply(&mut tcp, &mut pending).await.expect("a reply");
        assert_eq!(r.status, 200, "{want}: {r:?}");
        r.assert_well_formed();
        if want != "healthz" {
            assert_eq!(r.field("x-request-id"), Some(want));
            assert_eq!(r.text(), REPLY);
        }
    }
    // A hand-over in the middle of pipelined bytes: a whole fast request, then part of
    // a head hyper must finish reading.
    let mut tcp = TcpStream::connect(&addr).await.unwrap();
    let next = chat("e", "");
    let cut = 30;
    tcp.write_all(format!("{}{}", chat("d", ""), &next[..cut]).as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    tcp.write_all(&next.as_bytes()[cut..]).await.unwrap();
    let mut pending = Vec::new();
    for want in ["d", "e"] {
        let r = reply(&mut tcp, &mut pending).await.expect("a reply");
        assert_eq!((r.status, r.field("x-request-id")), (200, Some(want)), "{r:?}");
        r.assert_well_formed();
    }
    // ...and cut inside the body of the second.
    let mut tcp = TcpStream::connect(&addr).await.unwrap();
    let cut = next.len() - 5;
    tcp.write_all(format!("{}{}", chat("f", ""), &next[..cut]).as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    tcp.write_all(format!("{}GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n", &next[cut..]).as_bytes()).await.unwrap();
    let mut pending = Vec::new();
    for want in [Some("f"), Some("e"), None] {
        let r = reply(&mut tcp, &mut pending).await.expect("a reply");
        assert_eq!(r.status, 200, "{r:?}");
        if want.is_some() {
            assert_eq!(r.field("x-request-id"), want, "{r:?}");
        }
        r.assert_well_formed();
    }
}

async fn a_streamed_reply_is_strictly_chunked_and_the_connection_is_kept() {
    let up = upstreams().await;
    let addr = gateway_to(&format!("{up}/stream/v1"), "").await;
    let stream_body = r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let mut tcp = TcpStream::connect(&addr).await.unwrap();
    let mut pending = Vec::new();
    for round in 0..3 {
        // The second round pipelines a second stream right behind the first.
        let n = if round == 1 { 2 } else { 1 };
        tcp.write_all(chat_body(stream_body, "").repeat(n).as_bytes()).await.unwrap();
        for _ in 0..n {
            let r = reply(&mut tcp, &mut pending).await.expect("a whole chunked reply");
            assert_eq!(r.status, 200, "{r:?}");
            r.assert_well_formed();
            assert_eq!(r.field("transfer-encoding"), Some("chunked"), "{r:?}");
            assert_eq!(r.field("content-type"), Some("text/event-stream"), "{r:?}");
            let text = r.text();
            assert!(text.contains("\"a\"") && text.contains("\"b\"") && text.trim_end().ends_with("data: [DONE]"), "{text}");
        }
    }
    // A stream with Connection: close ends its body, then the connection.
    // A stream, then a request hyper serves, pipelined.
    tcp.write_all(format!("{}GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n", chat_body(stream_body, "")).as_bytes()).await.unwrap();
    let r = reply(&mut tcp, &mut pending).await.expect("a whole chunked reply");
    assert!(r.text().trim_end().ends_with("data: [DONE]"), "{r:?}");
    let r = reply(&mut tcp, &mut pending).await.expect("healthz");
    assert_eq!(r.status, 200);
    tcp.write_all(chat_body(stream_body, "connection: close\r\n").as_bytes()).await.unwrap();
    let r = reply(&mut tcp, &mut pending).await.expect("a whole chunked reply");
    assert_eq!(r.field("connection"), Some("close"));
    assert!(closes_within(&mut tcp, Duration::from_secs(2)).await);
}

/// A gateway racing two attempts (the second after 100 ms) on [`silent_upstream`], with
/// `extra` config lines after `[gateway]`: its base URL, and the count of upstream
/// requests closed.
async fn racing_silent_upstreams(extra: &str) -> (String, Arc<AtomicUsize>) {
    let (up, dropped) = silent_upstream().await;
    let toml = format!(
        "{OPEN_GATEWAY}{extra}\n{}{}{}",
        openai_provider("p", &up),
        openai_provider("h", &up),
        hedged_chat_route("ph", "p", "h", 100, "first_token_hedge_ms = 100")
    );
    let url = common::serve_config(&toml).await;
    (url.trim_end_matches("/v1/chat/completions").to_string(), dropped)
}

/// A client that hangs up while its reply is being raced: both attempts' upstream
/// requests are closed at once (not run on to their timeout), on the fast path and on
/// hyper's (on both the race is stopped, with receipts: the next two tests).
async fn a_client_that_hangs_up_during_a_race_has_its_upstream_requests_closed_at_once() {
    let (base, dropped) = racing_silent_upstreams("").await;
    let addr = base.trim_start_matches("http://").to_string();
    // On the fast path, and on hyper's (a query string hands the request over); whole
    // replies, then streams before their first token.
    let streamed = r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let cases = [
        ("/v1/chat/completions", BODY),
        ("/v1/chat/completions?via=hyper", BODY),
        ("/v1/chat/completions", streamed),
        ("/v1/chat/completions?via=hyper", streamed),
    ];
    for (i, (path, body)) in cases.into_iter().enumerate() {
        let mut tcp = TcpStream::connect(&addr).await.unwrap();
        tcp.write_all(chat_body(body, "").replacen("/v1/chat/completions", path, 1).as_bytes()).await.unwrap();
        // Both attempts are out (the hedge after 100 ms), then the client hangs up.
        tokio::time::sleep(Duration::from_millis(400)).await;
        drop(tcp);
        let t = std::time::Instant::now();
        while dropped.load(Ordering::SeqCst) < 2 * (i + 1) && t.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(dropped.load(Ordering::SeqCst), 2 * (i + 1), "{path} {body}: both attempts' upstream requests were dropped");
    }
    // The gateway still serves.
    let mut tcp = TcpStream::connect(&addr).await.unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
    let r = reply(&mut tcp, &mut Vec::new()).await.expect("a reply");
    assert_eq!(r.status, 200);
}

/// On the fast path a client that hangs up mid-race stops the race the way the total
/// timeout does: both attempts are cancelled with receipts (`request_channel_closed`),
/// the race is settled and recorded, and the request is counted as a 499.
async fn a_client_that_hangs_up_stops_its_race_with_a_receipt_for_every_attempt() {
    let (base, dropped) = racing_silent_upstreams("").await;
    let addr = base.trim_start_matches("http://").to_string();
    let streamed = r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let http = reqwest::Client::new();
    for (i, body) in [BODY, streamed].into_iter().enumerate() {
        let mut tcp = TcpStream::connect(&addr).await.unwrap();
        tcp.write_all(chat_body(body, "").as_bytes()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(400)).await;
        drop(tcp);
        let want = 2 * (i + 1);
        let t = std::time::Instant::now();
        let mut metrics = String::new();
        while t.elapsed() < Duration::from_secs(5) {
            metrics = http.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
            if channel_closed_receipts(&metrics) >= want && dropped.load(Ordering::SeqCst) >= want {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(channel_closed_receipts(&metrics), want, "{body}: a receipt for every attempt:\n{metrics}");
        assert_eq!(dropped.load(Ordering::SeqCst), want, "{body}: both upstream requests closed");
        let closed = metrics.lines().find(|l| l.starts_with("tailcut_requests_total{") && l.contains("status=\"499\""));
        assert!(closed.is_some_and(|l| l.ends_with(&format!(" {}", i + 1))), "{body}: counted as 499:\n{metrics}");
        assert!(closed.is_some_and(|l| l.contains("route=\"chat\"")), "{body}: counted under its route:\n{metrics}");
    }
}

/// The sum, in the `/metrics` text `metrics`, of the series of `name` whose labels
/// contain `label`.
fn series_sum(metrics: &str, name: &str, label: &str) -> usize {
    metrics
        .lines()
        .filter(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with('{')) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as usize
}

/// The `request_channel_closed` receipts counted in the `/metrics` text `metrics`.
fn channel_closed_receipts(metrics: &str) -> usize {
    series_sum(metrics, "tailcut_cancels_total", "request_channel_closed")
}

/// The requests counted with status 499 in the `/metrics` text `metrics`.
fn client_closed_requests(metrics: &str) -> usize {
    series_sum(metrics, "tailcut_requests_total", "status=\"499\"")
}

/// On a connection hyper has taken over (a health check came first), a client that
/// hangs up mid-race stops the race as on the fast path: the race settles into the
/// trace with a `request_channel_closed` receipt for each of its attempts, and the
/// request is counted as a 499 — a whole reply, then a stream before its first token.
async fn a_client_that_hangs_up_on_hyper_s_path_stops_its_race_with_a_receipt_for_every_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let (base, dropped) = racing_silent_upstreams(&format!("[trace]\npath = \"{}\"\n", trace.display())).await;
    let addr = base.trim_start_matches("http://").to_string();
    let streamed = r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let http = reqwest::Client::new();
    for (i, (id, body)) in [("hyper-whole", BODY), ("hyper-stream", streamed)].into_iter().enumerate() {
        let mut tcp = TcpStream::connect(&addr).await.unwrap();
        let mut pending = Vec::new();
        tcp.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
        assert_eq!(reply(&mut tcp, &mut pending).await.expect("healthz").status, 200);
        // Now on hyper's path: a proxied call whose two attempts never answer.
        tcp.write_all(chat_body(body, &format!("x-request-id: {id}\r\n")).as_bytes()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(400)).await;
        drop(tcp);
        let want = 2 * (i + 1);
        let t = std::time::Instant::now();
        let (mut metrics, mut line) = (String::new(), None);
        while t.elapsed() < Duration::from_secs(5) {
            metrics = http.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
            line = std::fs::read_to_string(&trace)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .find(|t| t["request_id"] == id);
            // The trace, the metrics and the upstream's count settle in their own time.
            let settled = channel_closed_receipts(&metrics) >= want && client_closed_requests(&metrics) > i;
            if line.is_some() && settled && dropped.load(Ordering::SeqCst) >= want {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let line = line.unwrap_or_else(|| panic!("{id}: the race was never recorded in the trace"));
        assert_eq!(line["attempts"].as_array().map(Vec::len), Some(2), "{id}: {line}");
        assert_eq!(line["stopped_by_caller"], true, "{id}: {line}");
        let receipts = line["receipts"].as_array().unwrap_or_else(|| panic!("{id}: no receipts: {line}"));
        let mut providers: Vec<&str> = receipts.iter().filter_map(|r| r["provider"].as_str()).collect();
        providers.sort_unstable();
        assert_eq!(providers, ["h", "p"], "{id}: a receipt for every attempt: {line}");
        for r in receipts {
            assert_eq!(r["evidence"], "request_channel_closed", "{id}: {r}");
        }
        assert_eq!(channel_closed_receipts(&metrics), want, "{id}: {metrics}");
        assert_eq!(client_closed_requests(&metrics), i + 1, "{id}: counted as 499:\n{metrics}");
        assert_eq!(dropped.load(Ordering::SeqCst), want, "{id}: both upstream requests closed");
    }
}

async fn connection_close_with_bytes_sent_after_it_still_gets_the_whole_reply() {
    let up = upstreams().await;
    let addr = gateway_to(&format!("{up}/ok/v1"), "").await;
    for delay in [0u64, 50] {
        let mut tcp = TcpStream::connect(&addr).await.unwrap();
        tcp.write_all(chat("last", "connection: close\r\n").as_bytes()).await.unwrap();
        // More requests after the close (a client that did not wait), some after the
        // server has answered.
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        let _ = tcp.write_all(chat("after", "").repeat(20).as_bytes()).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut pending = Vec::new();
        let r = reply(&mut tcp, &mut pending).await.unwrap_or_else(|| panic!("the reply was lost (delay {delay} ms)"));
        assert_eq!((r.status, r.field("x-request-id"), r.field("connection")), (200, Some("last"), Some("close")));
        assert_eq!(r.text(), REPLY);
        assert!(reply(&mut tcp, &mut pending).await.is_none(), "a request after Connection: close was answered");
    }
}

async fn heads_and_bodies_around_the_read_sizes_and_the_body_limit() {
    let up = upstreams().await;
    let max = 200_000;
    let addr = gateway_to(&format!("{up}/ok/v1"), &format!("max_body_bytes = {max}")).await;
    let padded = |len: usize| {
        let base = r#"{"model":"m","messages":[{"role":"user","content":""}]}"#;
        let pad = len - base.len();
        format!(r#"{{"model":"m","messages":[{{"role":"user","content":"{}"}}]}}"#, "x".repeat(pad))
    };
    let mut tcp = TcpStream::connect(&addr).await.unwrap();
    let mut pending = Vec::new();
    // A head just over the first read's 8 KiB, then one of exactly 8 KiB.
    for pad in [8300, 8192 - 160, 8192 - 100] {
        let req = chat_body(BODY, &format!("x-pad: {}\r\n", "p".repeat(pad)));
        tcp.write_all(req.as_bytes()).await.unwrap();
        let r = reply(&mut tcp, &mut pending).await.expect("a reply");
        assert_eq!(r.status, 200, "pad {pad}: {r:?}");
        r.assert_well_formed();
    }
    // A body over 64 KiB, and one exactly at the limit: answered (on one connection).
    for len in [70_000, max] {
        tcp.write_all(chat_body(&padded(len), "").as_bytes()).await.unwrap();
        let r = reply(&mut tcp, &mut pending).await.expect("a reply");
        assert_eq!(r.status, 200, "body {len}: {}", r.text());
        r.assert_well_formed();
    }
    // One byte over: a 413 with a JSON body.
    tcp.write_all(chat_body(&padded(max + 1), "").as_bytes()).await.unwrap();
    let r = reply(&mut tcp, &mut pending).await.expect("a reply");
    assert_eq!(r.status, 413, "{r:?}");
    r.assert_well_formed();
    assert!(r.json()["error"]["message"].is_string());
}

async fn header_count_limits() {
    let up = upstreams().await;
    let addr = gateway_to(&format!("{up}/ok/v1"), "").await;
    let fields = |n: usize| (0..n).map(|i| format!("x-h{i}: v\r\n")).collect::<String>();
    let mut tcp = TcpStream::connect(&addr).await.unwrap();
    let mut pending = Vec::new();
    // 28 + the 4 of `chat` = 32 (the fast path's slots), then 33, then 100.
    for n in [28, 29, 96] {
        tcp.write_all(chat(&format!("n{n}"), &fields(n)).as_bytes()).await.unwrap();
        let r = reply(&mut tcp, &mut pending).await.expect("a reply");
        assert_eq!((r.status, r.field("x-request-id")), (200, Some(format!("n{n}").as_str())), "{r:?}");
        r.assert_well_formed();
    }
    // 101: a 431 with a JSON body, first on a connection and after a fast-path request.
    for first in [false, true] {
        let mut tcp = TcpStream::connect(&addr).await.unwrap();
        let mut pending = Vec::new();
        if first {
            tcp.write_all(chat("one", "").as_bytes()).await.unwrap();
            assert_eq!(reply(&mut tcp, &mut pending).await.expect("a reply").status, 200);
        }
        tcp.write_all(chat("many", &fields(97)).as_bytes()).await.unwrap();
        let r = reply(&mut tcp, &mut pending).await.expect("a reply");
        assert_eq!(r.status, 431, "{r:?}");
        r.assert_well_formed();
        assert!(r.json()["error"]["message"].is_string());
    }
}

async fn authorization_is_checked_as_on_hyper_s_path() {
    let up = upstreams().await;
    let key = "k-secret";
    let toml = format!(
        "{MEMORY_GATEWAY}keys = [{{ name = \"a\", sha256 = \"{}\" }}]\n{}{}",
        tailcut_gateway::tenancy::sha256_hex(key),
        openai_provider("up", &format!("{up}/ok/v1")),
        tailcut_testkit::config::single_chat_route("one", "up")
    );
    let url = common::serve_config(&toml).await;
    let addr = url.trim_start_matches("http://").trim_end_matches("/v1/chat/completions").to_string();
    let mut tcp = TcpStream::connect(&addr).await.unwrap();
    let mut pending = Vec::new();
    let cases = [
        (String::new(), 401),
        ("authorization: Bearer wrong\r\n".to_string(), 401),
        ("authorization: Basic abc\r\n".to_string(), 401),
        (format!("authorization: Bearer {key}\r\nauthorization: Bearer {key}\r\n"), 400),
        (format!("Authorization: Bearer {key}\r\n"), 200),
    ];
    for (fields, status) in cases {
        tcp.write_all(chat("auth", &fields).as_bytes()).await.unwrap();
        let r = reply(&mut tcp, &mut pending).await.expect("a reply");
        assert_eq!(r.status, status, "{fields:?}: {r:?}");
        r.assert_well_formed();
        if status != 200 {
            assert!(r.json()["error"]["message"].is_string());
        }
    }
}

async fn chunked_with_content_length_is_hyper_s_to_judge_and_never_desyncs() {
    let up = upstreams().await;
    let addr = gateway_to(&format!("{up}/ok/v1"), "").await;
    // A body of 0-chunk framing with a Content-Length that would, if obeyed, swallow
    // the smuggled request.
    let chunked = format!("{:x}\r\n{BODY}\r\n0\r\n\r\n", BODY.len());
    let smuggled = "GET /smuggled HTTP/1.1\r\nhost: x\r\n\r\n";
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\ntransfer-encoding: chunked\r\n\r\n{chunked}{smuggled}",
        chunked.len()
    );
    for before in [false, true] {
        let mut tcp = TcpStream::connect(&addr).await.unwrap();
        let mut pending = Vec::new();
        if before {
            tcp.write_all(chat("one", "").as_bytes()).await.unwrap();
            assert_eq!(reply(&mut tcp, &mut pending).await.expect("a reply").status, 200);
        }
        tcp.write_all(req.as_bytes()).await.unwrap();
        let mut statuses = Vec::new();
        while let Some(r) = reply(&mut tcp, &mut pending).await {
            statuses.push(r.status);
            if statuses.len() > 3 {
                break;
            }
        }
        // hyper reads the body as chunked and closes after it: the smuggled request is
        // never answered.
        assert_eq!(statuses, [200], "after a fast request: {before}");
    }
}

async fn http_1_0_requests_go_to_hyper() {
    let up = upstreams().await;
    let addr = gateway_to(&format!("{up}/ok/v1"), "").await;
    let req = format!("POST /v1/chat/completions HTTP/1.0\r\ncontent-length: {}\r\n\r\n{BODY}", BODY.len());
    let mut tcp = TcpStream::connect(&addr).await.unwrap();
    tcp.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.0 200") || text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.ends_with(REPLY), "{text}");
    // After a fast-path request.
    let mut tcp = TcpStream::connect(&addr).await.unwrap();
    tcp.write_all(format!("{}{req}", chat("one", "")).as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out);
    assert_eq!(text.matches(REPLY).count(), 2, "{text}");
}

/// RFC 9112 §3.2: an HTTP/1.1 request without a `Host` field, or with two, is a 400 with
/// the gateway's JSON error body, first on a connection (the fast path's) and on one
/// hyper has taken over; an HTTP/1.0 request needs none and is served.
async fn an_http_1_1_request_needs_exactly_one_host_field() {
    let up = upstreams().await;
    let addr = gateway_to(&format!("{up}/ok/v1"), "").await;
    let no_host = chat("no-host", "").replacen("host: x\r\n", "", 1);
    let two_hosts = chat("two-hosts", "host: y\r\n");
    let healthz_no_host = "GET /healthz HTTP/1.1\r\n\r\n".to_string();
    for (name, bad) in [("no Host", &no_host), ("two Host fields", &two_hosts), ("healthz without Host", &healthz_no_host)] {
        // First on a fresh connection, after a fast-path request, after a hand-over.
        for before in ["", "fast", "hyper"] {
            let mut tcp = TcpStream::connect(&addr).await.unwrap();
            let mut pending = Vec::new();
            match before {
                "fast" => tcp.write_all(chat("one", "").as_bytes()).await.unwrap(),
                "hyper" => tcp.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap(),
                _ => {}
            }
            if !before.is_empty() {
                assert_eq!(reply(&mut tcp, &mut pending).await.expect("a reply").status, 200, "{name} after {before}");
            }
            tcp.write_all(bad.as_bytes()).await.unwrap();
            let r = reply(&mut tcp, &mut pending).await.unwrap_or_else(|| panic!("{name} after {before:?}: no reply"));
            assert_eq!(r.status, 400, "{name} after {before:?}: {r:?}");
            r.assert_well_formed();
            assert_eq!(r.field("content-type"), Some("application/json"), "{r:?}");
            let error = r.json();
            assert_eq!(error["error"]["code"], "bad_request", "{error}");
            assert!(error["error"]["message"].as_str().is_some_and(|m| m.contains("Host")), "{error}");
        }
    }
    // HTTP/1.0 needs no Host: served first on a connection and after a hand-over.
    let old = format!("POST /v1/chat/completions HTTP/1.0\r\ncontent-length: {}\r\n\r\n{BODY}", BODY.len());
    for before in ["", "GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n"] {
        let mut tcp = TcpStream::connect(&addr).await.unwrap();
        tcp.write_all(format!("{before}{old}").as_bytes()).await.unwrap();
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut out)).await;
        let text = String::from_utf8_lossy(&out);
        assert!(text.ends_with(REPLY) && !text.contains(" 400 "), "HTTP/1.0 after {before:?}: {text}");
    }
}

async fn an_idle_fast_path_connection_closes_at_the_idle_timeout() {
    let up = upstreams().await;
    let addr = gateway_to(&format!("{up}/ok/v1"), "idle_timeout_s = 1").await;
    let mut tcp = TcpStream::connect(&addr).await.unwrap();
    let mut pending = Vec::new();
    // Used a few times, 600 ms apart (each wait under the timeout).
    for _ in 0..3 {
        tcp.write_all(chat("x", "").as_bytes()).await.unwrap();
        assert_eq!(reply(&mut tcp, &mut pending).await.expect("a reply").status, 200);
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
    let t = std::time::Instant::now();
    assert!(closes_within(&mut tcp, Duration::from_secs(3)).await, "kept open past the idle timeout");
    let waited = t.elapsed() + Duration::from_millis(600);
    assert!(waited >= Duration::from_millis(900) && waited < Duration::from_millis(1800), "closed after {waited:?} idle");
}

/// A gateway in front of `base_url` that drains when the returned sender fires: its
/// address, the sender, and the serving task (which ends once the drain is done).
async fn drainable_gateway(
    base_url: &str,
    lines: &str,
) -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<std::io::Result<()>>) {
    let toml = tailcut_testkit::config::one_provider_gateway(base_url, lines);
    let config = common::parse_config(&toml);
    let state = tailcut_gateway::AppState::new(config, None).unwrap();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(tailcut_gateway::serve(l, state, async move {
        let _ = stopped.await;
    }));
    (addr, stop, served)
}

async fn drain_closes_idle_fast_path_connections_promptly() {
    let up = upstreams().await;
    let (addr, stop, served) = drainable_gateway(&format!("{up}/ok/v1"), "idle_timeout_s = 60").await;
    let mut idle = Vec::new();
    for _ in 0..3 {
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        tcp.write_all(chat("x", "").as_bytes()).await.unwrap();
        assert_eq!(reply(&mut tcp, &mut Vec::new()).await.expect("a reply").status, 200);
        idle.push(tcp);
    }
    // One that never sent anything.
    idle.push(TcpStream::connect(addr).await.unwrap());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t = std::time::Instant::now();
    stop.send(()).unwrap();
    for tcp in &mut idle {
        assert!(closes_within(tcp, Duration::from_secs(2)).await, "an idle connection was kept through drain");
    }
    tokio::time::timeout(Duration::from_secs(5), served).await.expect("serve returned").unwrap().unwrap();
    assert!(t.elapsed() < Duration::from_secs(2), "drain took {:?}", t.elapsed());
}

async fn error_replies_on_the_fast_path_are_well_formed() {
    let up = upstreams().await;
    let addr = gateway_to(&format!("{up}/ok/v1"), "").await;
    let mut tcp = TcpStream::connect(&addr).await.unwrap();
    let mut pending = Vec::new();
    for (body, status) in [("{", 400), (r#"{"model":"nope","messages":[]}"#, 404), ("", 400), (BODY, 200)] {
        tcp.write_all(chat_body(body, "").as_bytes()).await.unwrap();
        let r = reply(&mut tcp, &mut pending).await.expect("a reply");
        assert_eq!(r.status, status, "{body}: {r:?}");
        r.assert_well_formed();
        assert_eq!(r.field("content-type"), Some("application/json"), "{r:?}");
    }
}

/// A client that half-closes after its request: hyper's path (no half-close support,
/// its default) drops the request, and the fast path does the same.
async fn a_half_closed_client_is_treated_as_on_hyper_s_path() {
    let up = upstreams().await;
    let addr = gateway_to(&format!("{up}/ok/v1"), "").await;
    let mut seen = Vec::new();
    for path in ["/v1/chat/completions?via=hyper", "/v1/chat/completions"] {
        let mut tcp = TcpStream::connect(&addr).await.unwrap();
        tcp.write_all(chat("half", "").replacen("/v1/chat/completions", path, 1).as_bytes()).await.unwrap();
        tcp.shutdown().await.unwrap();
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut out)).await;
        seen.push(out.starts_with(b"HTTP/1.1 200"));
    }
    assert_eq!(seen[0], seen[1], "hyper's path answered: {}, the fast path: {}", seen[0], seen[1]);
}

async fn a_large_reply_a_stray_crlf_and_expect_100_continue() {
    let up = upstreams().await;
    let addr = gateway_to(&format!("{up}/big/v1"), "").await;
    let mut tcp = TcpStream::connect(&addr).await.unwrap();
    let mut pending = Vec::new();
    // Twice, the second after a stray CRLF (RFC 9112 2.2: ignored before a request line).
    tcp.write_all(format!("{}\r\n{}", chat("a", ""), chat("b", "")).as_bytes()).await.unwrap();
    for id in ["a", "b"] {
        let r = reply(&mut tcp, &mut pending).await.expect("a reply");
        assert_eq!((r.status, r.field("x-request-id")), (200, Some(id)), "{:?}", r.fields);
        r.assert_well_formed();
        assert_eq!(r.text(), big_reply());
    }
    // Expect: 100-continue: the interim reply comes before the body is sent.
    let mut tcp = TcpStream::connect(&addr).await.unwrap();
    let req = chat("c", "expect: 100-continue\r\n");
    let (head, body) = req.split_at(req.find("\r\n\r\n").unwrap() + 4);
    tcp.write_all(head.as_bytes()).await.unwrap();
    let mut pending = Vec::new();
    let l = line(&mut tcp, &mut pending).await.expect("100 continue");
    assert_eq!(l, "HTTP/1.1 100 Continue");
    assert_eq!(line(&mut tcp, &mut pending).await.as_deref(), Some(""));
    tcp.write_all(body.as_bytes()).await.unwrap();
    let r = reply(&mut tcp, &mut pending).await.expect("a reply");
    assert_eq!(r.status, 200);
}

async fn drain_finishes_a_fast_path_request_in_flight_then_closes() {
    let up = upstreams().await;
    let (addr, stop, served) = drainable_gateway(&format!("{up}/delay/v1"), "").await;
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    // One in flight, a second pipelined behind it.
    tcp.write_all(format!("{}{}", chat("inflight", ""), chat("behind", "")).as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    stop.send(()).unwrap();
    let mut pending = Vec::new();
    let r = reply(&mut tcp, &mut pending).await.expect("the request in flight was answered");
    assert_eq!((r.status, r.field("x-request-id"), r.field("connection")), (200, Some("inflight"), Some("close")), "{r:?}");
    assert!(reply(&mut tcp, &mut pending).await.is_none(), "a request was answered after the close");
    tokio::time::timeout(Duration::from_secs(5), served).await.expect("serve returned").unwrap().unwrap();
}

async fn at_the_cap_used_idle_fast_path_connections_make_room_and_busy_ones_finish() {
    let up = upstreams().await;
    let addr = gateway_to(&format!("{up}/delay/v1"), "max_connections = 3\nidle_timeout_s = 60").await;
    // Two used connections, now idle, and one busy (its request takes 400 ms).
    let mut idle = Vec::new();
    for _ in 0..2 {
        let mut tcp = TcpStream::connect(&addr).await.unwrap();
        tcp.write_all(chat("x", "").as_bytes()).await.unwrap();
        assert_eq!(reply(&mut tcp, &mut Vec::new()).await.expect("a reply").status, 200);
        idle.push(tcp);
    }
    let mut busy = TcpStream::connect(&addr).await.unwrap();
    busy.write_all(chat("busy", "").as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Over the cap: the idle ones are asked to close.
    let _newcomer = TcpStream::connect(&addr).await.unwrap();
    for tcp in &mut idle {
        assert!(closes_within(tcp, Duration::from_secs(2)).await, "an idle connection was kept over the cap");
    }
    let r = reply(&mut busy, &mut Vec::new()).await.expect("the busy connection's reply");
    assert_eq!((r.status, r.field("x-request-id")), (200, Some("busy")));
}

/// `Connection: close`, then megabytes the server never reads: closing with them unread
/// resets the connection, and the reply (sent before) must still reach the client, on
/// the fast path as on hyper's.
async fn connection_close_with_a_flood_after_it_still_gets_the_reply() {
    let up = upstreams().await;
    let addr = gateway_to(&format!("{up}/ok/v1"), "").await;
    for path in ["/v1/chat/completions?via=hyper", "/v1/chat/completions"] {
        let tcp = TcpStream::connect(&addr).await.unwrap();
        let (mut rd, mut wr) = tcp.into_split();
        let req = chat("last", "connection: close\r\n").replacen("/v1/chat/completions", path, 1);
        let flood = vec![b'x'; 4 << 20];
        let writer = tokio::spawn(async move {
            let _ = wr.write_all(req.as_bytes()).await;
            let r = wr.write_all(&flood).await;
            (r.is_ok(), wr)
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut out = Vec::new();
        let got = tokio::time::timeout(Duration::from_secs(5), rd.read_to_end(&mut out)).await;
        let (wrote, _wr) = writer.await.unwrap();
        assert!(got.is_ok(), "{path}: the connection was not closed");
        assert!(!wrote, "{path}: the flood was read");
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("HTTP/1.1 200") && text.ends_with(REPLY), "{path}: {text}");
    }
}

/// A request to make room that came while a fast-path connection was busy does not
/// count against it once hyper takes it over (a busy connection finishes and stays).
async fn a_busy_connection_handed_to_hyper_is_not_shed_for_a_request_made_while_it_was_busy() {
    let up = upstreams().await;
    let addr = gateway_to(&format!("{up}/delay/v1"), "max_connections = 2\nidle_timeout_s = 60").await;
    let mut busy = TcpStream::connect(&addr).await.unwrap();
    busy.write_all(format!("{}GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n", chat("busy", "")).as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Over the cap while it is busy.
    let mut others = Vec::new();
    for _ in 0..2 {
        others.push(TcpStream::connect(&addr).await.unwrap());
    }
    let mut pending = Vec::new();
    let r = reply(&mut busy, &mut pending).await.expect("the busy request's reply");
    assert_eq!((r.status, r.field("x-request-id")), (200, Some("busy")));
    let r = reply(&mut busy, &mut pending).await.expect("healthz");
    assert_eq!(r.status, 200);
    assert_eq!(r.field("connection"), None, "{r:?}");
    busy.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
    assert_eq!(reply(&mut busy, &mut pending).await.expect("the connection was kept").status, 200);
}

/// Runs each case on both server paths: a module per case with `fast_path` and
/// `hyper_path` tests (a case may name its runtime: `case [flavor = ...]`).
macro_rules! on_both_paths {
    ($($case:ident $([$($runtime:tt)*])?),* $(,)?) => {$(
        mod $case {
            #[tokio::test$(($($runtime)*))?]
            async fn fast_path() {
                crate::common::on_path(true, super::$case()).await
            }
            #[tokio::test$(($($runtime)*))?]
            async fn hyper_path() {
                crate::common::on_path(false, super::$case()).await
            }
        }
    )*};
}

on_both_paths! {
    pipelined_requests_are_answered_in_order_on_one_connection,
    a_body_in_pieces_is_waited_for_and_a_stalled_one_gets_a_408,
    connection_close_is_honoured_after_the_reply,
    a_connection_goes_from_proxied_calls_to_any_other_request,
    pipelined_requests_mixing_the_fast_path_and_hyper_are_answered_in_order,
    a_streamed_reply_is_strictly_chunked_and_the_connection_is_kept,
    a_client_that_hangs_up_during_a_race_has_its_upstream_requests_closed_at_once [flavor = "multi_thread", worker_threads = 2],
    a_client_that_hangs_up_stops_its_race_with_a_receipt_for_every_attempt [flavor = "multi_thread", worker_threads = 2],
    a_client_that_hangs_up_on_hyper_s_path_stops_its_race_with_a_receipt_for_every_attempt [flavor = "multi_thread", worker_threads = 2],
    connection_close_with_bytes_sent_after_it_still_gets_the_whole_reply,
    heads_and_bodies_around_the_read_sizes_and_the_body_limit,
    header_count_limits,
    authorization_is_checked_as_on_hyper_s_path,
    chunked_with_content_length_is_hyper_s_to_judge_and_never_desyncs,
    http_1_0_requests_go_to_hyper,
    an_http_1_1_request_needs_exactly_one_host_field,
    an_idle_fast_path_connection_closes_at_the_idle_timeout,
    drain_closes_idle_fast_path_connections_promptly,
    error_replies_on_the_fast_path_are_well_formed,
    a_half_closed_client_is_treated_as_on_hyper_s_path,
    a_large_reply_a_stray_crlf_and_expect_100_continue,
    drain_finishes_a_fast_path_request_in_flight_then_closes,
    at_the_cap_used_idle_fast_path_connections_make_room_and_busy_ones_finish [flavor = "multi_thread", worker_threads = 2],
    connection_close_with_a_flood_after_it_still_gets_the_reply [flavor = "multi_thread", worker_threads = 2],
    a_busy_connection_handed_to_hyper_is_not_shed_for_a_request_made_while_it_was_busy [flavor = "multi_thread", worker_threads = 2],
}
