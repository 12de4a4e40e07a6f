//! The gateway's own HTTP/1.1 for proxied calls, as a client meets it over raw TCP:
//! pipelined requests are answered in order, a body that arrives in pieces is waited for
//! (and one that stalls gets a 408), `Connection: close` is honoured, and a connection
//! can go from proxied calls to any other request (which hyper then serves).

mod common;

use axum::routing::post;
use axum::Router;
use std::time::Duration;
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

#[tokio::test]
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

#[tokio::test]
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

#[tokio::test]
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

#[tokio::test]
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
