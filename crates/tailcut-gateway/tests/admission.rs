//! Admission control (`max_in_flight` slots, a bounded wait for one, a streamed response
//! holding its slot until the stream ends) and replies that must never reach a client.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

mod common;

use std::time::{Duration, Instant};
use tailcut_mockproviders::{Behaviour, Flavor, MockServer};
use tailcut_testkit::config::{hedged_chat_route, one_provider_gateway, openai_provider, OPEN_GATEWAY};

/// A gateway config: one route, `m`, to one upstream, with `gateway` lines added to
/// `[gateway]`.
fn config(upstream: &str, gateway: &str) -> String {
    one_provider_gateway(&format!("{upstream}/v1"), gateway)
}

async fn gateway(upstream: &str, admission_wait_ms: u64) -> String {
    common::serve_config(&config(upstream, &format!("max_in_flight = 1\nadmission_wait_ms = {admission_wait_ms}"))).await
}

fn body(stream: bool) -> serde_json::Value {
    serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": stream})
}

/// An upstream that answers after ~300 ms, streaming 5 tokens 100 ms apart when asked to.
async fn slow_upstream() -> MockServer {
    MockServer::start(
        Flavor::OpenAi,
        Behaviour {
            queue: Duration::from_millis(200),
            run: Duration::from_millis(100),
            token_interval: Duration::from_millis(100),
            tokens: 5,
            ..Behaviour::default()
        },
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_gateway_answers_503_at_once_without_a_wait() {
    let up = slow_upstream().await;
    let url = gateway(&up.url(), 0).await;
    let http = reqwest::Client::new();
    let first = tokio::spawn({
        let (http, url) = (http.clone(), url.clone());
        async move { http.post(&url).json(&body(false)).send().await.unwrap().status().as_u16() }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t = Instant::now();
    let second = http.post(&url).json(&body(false)).send().await.unwrap();
    assert_eq!(second.status().as_u16(), 503);
    assert!(t.elapsed() < Duration::from_millis(150), "a zero wait must not queue: {:?}", t.elapsed());
    let v: serde_json::Value = second.json().await.unwrap();
    assert!(v["error"]["message"].as_str().unwrap().contains("in flight"), "{v}");
    let m = metrics(&http, &url).await;
    assert!(m.contains("tailcut_in_flight 1\n"), "the first request holds the slot: {m}");
    assert!(m.contains("tailcut_admission_total{outcome=\"rejected\"} 1"), "{m}");
    assert_eq!(first.await.unwrap(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_waits_for_slots_instead_of_failing() {
    let up = slow_upstream().await;
    let url = gateway(&up.url(), 5_000).await;
    let http = reqwest::Client::new();
    let t = Instant::now();
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let (http, url) = (http.clone(), url.clone());
            tokio::spawn(async move { http.post(&url).json(&body(false)).send().await.unwrap().status().as_u16() })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), 200);
    }
    // One slot: the four ran one after another.
    assert!(t.elapsed() >= Duration::from_millis(4 * 250), "they did not queue: {:?}", t.elapsed());
    let m = metrics(&http, &url).await;
    assert!(m.contains("tailcut_admission_total{outcome=\"waited\"} 3"), "{m}");
    assert!(m.contains("tailcut_admission_wait_seconds_count{} 3"), "{m}");
    assert!(m.contains("tailcut_in_flight 0\n") && m.contains("tailcut_in_flight_limit 1\n"), "{m}");
}

async fn metrics(http: &reqwest::Client, chat_url: &str) -> String {
    let url = chat_url.replace("/v1/chat/completions", "/metrics");
    http.get(url).send().await.unwrap().text().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_holds_its_slot_until_it_ends() {
    let up = slow_upstream().await;
    let url = gateway(&up.url(), 0).await;
    let http = reqwest::Client::new();
    let streaming = http.post(&url).json(&body(true)).send().await.unwrap();
    assert_eq!(streaming.status().as_u16(), 200, "headers come with the first token");
    // Tokens are still flowing: the slot is taken.
    let during = http.post(&url).json(&body(false)).send().await.unwrap();
    assert_eq!(during.status().as_u16(), 503);
    let text = streaming.text().await.unwrap();
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
    tokio::time::sleep(Duration::from_millis(50)).await;
    let after = http.post(&url).json(&body(false)).send().await.unwrap();
    assert_eq!(after.status().as_u16(), 200, "the slot came back when the stream ended");
}

/// The gateway's adapter skips its own JSON check (the route validator scans each reply
/// once): a truncated reply must still be rejected, never passed to the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_upstream_reply_is_a_502_naming_the_providers_reason() {
    let up = MockServer::start(
        Flavor::OpenAi,
        Behaviour { queue: Duration::from_millis(10), run: Duration::from_millis(10), malformed: true, ..Behaviour::default() },
    )
    .await
    .unwrap();
    let url = gateway(&up.url(), 0).await;
    let r = reqwest::Client::new().post(&url).json(&body(false)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 502);
    let v: serde_json::Value = r.json().await.unwrap();
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("no upstream returned a valid response"), "{v}");
    // Whole replies name each provider's reason, as streams do (one `respond`).
    assert!(message.contains("(1 attempt(s): up: "), "the provider and its reason: {v}");
}

/// A request refused after it was routed — the budget's 429, a 502 — is counted in
/// `tailcut_requests_total` under its route, so per-route alerts see it; `route="-"` is
/// only for a refusal before routing (an unknown model, a bad body).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_after_routing_are_counted_under_their_route() {
    let malformed = MockServer::start(
        Flavor::OpenAi,
        Behaviour { queue: Duration::from_millis(10), run: Duration::from_millis(10), malformed: true, ..Behaviour::default() },
    )
    .await
    .unwrap();
    // A budget no submission fits: each is projected at $0.001/s × 10 s = $0.01.
    let budget = format!(
        "[budget]\nledger = \":memory:\"\nsoft_stop_usd = 0.001\nhard_stop_usd = 0.001\n[gateway]\nauth = \"none\"\nstore = \":memory:\"\n{}expected_run_s = 10\n{}",
        openai_provider("up", &format!("{}/v1", malformed.url())).replace("rate_usd_per_s = 0.0", "rate_usd_per_s = 0.001"),
        tailcut_testkit::config::single_chat_route("one", "up")
    );
    let http = reqwest::Client::new();
    for (toml, want) in [(budget, 429), (config(&malformed.url(), ""), 502)] {
        let url = common::serve_config(&toml).await;
        let r = http.post(&url).json(&body(false)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), want, "{}", r.text().await.unwrap());
        let unknown = http.post(&url).json(&serde_json::json!({"model": "nope", "messages": []})).send().await.unwrap();
        assert_eq!(unknown.status().as_u16(), 404);
        let m = metrics(&http, &url).await;
        let counted = |route: &str, status: u16| format!("tailcut_requests_total{{route=\"{route}\",status=\"{status}\"}} 1\n");
        assert!(m.contains(&counted("chat", want)), "a {want} after routing is counted under its route:\n{m}");
        assert!(!m.contains(&format!("route=\"-\",status=\"{want}\"")), "{m}");
        assert!(m.contains(&counted("-", 404)), "a refusal before routing is `-`:\n{m}");
    }
}

/// A body over `max_body_bytes` gets an OpenAI-style JSON 413 whether its length was
/// declared or it arrived chunked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_get_a_json_413_declared_or_chunked() {
    let up = slow_upstream().await;
    let url = gateway(&up.url(), 0).await;
    // Declared (2 MiB, over the default 1 MiB): only the head and one byte are sent.
    let framing = format!("content-length: {}", 2 << 20);
    let (status, declared) = raw_request(&url, &framing, |s| {
        Box::pin(async move {
            use tokio::io::AsyncWriteExt;
            let _ = s.write_all(b"{").await;
        })
    })
    .await;
    assert_eq!(status, 413, "{declared}");
    let v: serde_json::Value = serde_json::from_str(&declared).unwrap();
    assert_eq!(v["error"]["code"], "request_too_large", "{v}");
    // Chunked, 2 MiB: no declared length; the limit is found while reading.
    let (status, chunked) = raw_request(&url, "transfer-encoding: chunked", |s| {
        Box::pin(async move {
            use tokio::io::AsyncWriteExt;
            let chunk = format!("{:x}\r\n{}\r\n", 64 << 10, " ".repeat(64 << 10));
            for _ in 0..32 {
                // The gateway may answer and close before the upload ends.
                if s.write_all(chunk.as_bytes()).await.is_err() {
                    return;
                }
            }
            let _ = s.write_all(b"0\r\n\r\n").await;
        })
    })
    .await;
    assert_eq!(status, 413, "{chunked}");
    let v: serde_json::Value = serde_json::from_str(&chunked).unwrap();
    assert_eq!(v["error"]["code"], "request_too_large", "{v}");
}

type Upload = for<'a> fn(&'a mut tokio::net::TcpStream) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>>;

/// Sends a request head with `framing` (a length or chunked header), lets `upload` write
/// the body, then returns the answer's status and body. Raw TCP, so an early answer is
/// read even when the gateway closes before the upload ends.
async fn raw_request(url: &str, framing: &str, upload: Upload) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = url.trim_start_matches("http://").split('/').next().unwrap();
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!("POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n{framing}\r\n\r\n");
    s.write_all(head.as_bytes()).await.unwrap();
    upload(&mut s).await;
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let read = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await;
        let n = read.expect("no answer within 10 s").unwrap_or(0);
        reply.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&reply).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap()));
            if n == 0 || len.is_some_and(|len| body.len() >= len) {
                let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
                return (status, body.to_string());
            }
        }
        assert!(n > 0, "connection closed before an answer: {text:?}");
    }
}

#[tokio::test]
async fn a_reload_changes_the_body_limit_at_once() {
    let up = slow_upstream().await;
    let dir = std::env::temp_dir().join(format!("tailcut-body-limit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("gateway.toml");
    let config = |limit: usize| config(&up.url(), &format!("max_body_bytes = {limit}"));
    std::fs::write(&path, config(200)).unwrap();
    let state = tailcut_gateway::AppState::new(tailcut_config::Config::load(&path).unwrap(), Some(path.clone())).unwrap();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1/chat/completions", l.local_addr().unwrap());
    tokio::spawn(tailcut_gateway::serve(l, state.clone(), futures::future::pending()));
    let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "x".repeat(400)}]});
    let http = reqwest::Client::new();
    let before = http.post(&url).json(&body).send().await.unwrap();
    assert_eq!(before.status().as_u16(), 413);
    std::fs::write(&path, config(4096)).unwrap();
    state.reload().unwrap();
    let after = http.post(&url).json(&body).send().await.unwrap();
    assert_ne!(after.status().as_u16(), 413, "the reloaded limit applies to the next request");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A body that arrives in pieces (chunked, with pauses between them, so the gateway
/// reads several frames) is put back together and answered like a body sent at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_in_pieces_is_read_whole() {
    let up = MockServer::start(Flavor::OpenAi, Behaviour::default()).await.unwrap();
    let url = gateway(&up.url(), 0).await;
    let (status, reply) = raw_request(&url, "transfer-encoding: chunked", |s| {
        Box::pin(async move {
            use tokio::io::AsyncWriteExt;
            let body = br#"{"model":"m","messages":[{"role":"user","content":"hello in pieces"}]}"#;
            for piece in body.chunks(9) {
                s.write_all(format!("{:x}\r\n", piece.len()).as_bytes()).await.unwrap();
                s.write_all(piece).await.unwrap();
                s.write_all(b"\r\n").await.unwrap();
                s.flush().await.unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            s.write_all(b"0\r\n\r\n").await.unwrap();
        })
    })
    .await;
    assert_eq!(status, 200, "{reply}");
    let v: serde_json::Value = serde_json::from_str(&reply).unwrap();
    assert!(v["choices"][0]["message"]["content"].is_string(), "{v}");
}

/// When `total_timeout_s` passes with no answer, the client gets an OpenAI-style 504 and
/// the stalled attempt is cancelled with a receipt (the race itself is stopped, not
/// dropped), which the metrics count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_total_timeout_answers_504_and_leaves_a_receipt() {
    let up = MockServer::start(Flavor::OpenAi, Behaviour { queue: Duration::from_secs(60), ..Behaviour::default() }).await.unwrap();
    let url = common::serve_config(&config(&up.url(), "total_timeout_s = 0.5")).await;
    let http = reqwest::Client::new();
    let t = Instant::now();
    let resp = http.post(&url).json(&body(false)).send().await.unwrap();
    let waited = t.elapsed();
    assert_eq!(resp.status().as_u16(), 504);
    assert!(waited >= Duration::from_millis(500) && waited < Duration::from_secs(5), "{waited:?}");
    let v: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["code"], "timeout", "{v}");
    let metrics_url = url.replace("/v1/chat/completions", "/metrics");
    let want = r#"tailcut_cancels_total{route="chat",evidence="request_channel_closed"} 1"#;
    let mut text = String::new();
    for _ in 0..50 {
        text = http.get(&metrics_url).send().await.unwrap().text().await.unwrap();
        if text.contains(want) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(text.contains(want), "{text}");
    assert!(text.contains(r#"tailcut_requests_total{route="chat",status="504"} 1"#), "counted under its route: {text}");
    // No leak: the route's leak counter (exported from the start, at zero) stays at zero.
    assert!(text.contains("tailcut_leaks_total{route=\"chat\"} 0\n"), "{text}");
}

/// Graceful drain: once the shutdown signal comes, no new connection is accepted, the
/// request in flight still gets its answer, and `serve` returns when it is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_finishes_the_request_in_flight_and_refuses_new_connections() {
    let up = slow_upstream().await;
    let config = tailcut_config::Config::parse(&config(&up.url(), ""), "test").unwrap();
    let state = tailcut_gateway::AppState::new(config, None).unwrap();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(tailcut_gateway::serve(l, state, async move {
        let _ = stop_rx.await;
    }));
    let url = format!("http://{addr}/v1/chat/completions");
    // A keep-alive connection left idle must not hold the drain up.
    let idle = reqwest::Client::new();
    assert_eq!(idle.get(format!("http://{addr}/healthz")).send().await.unwrap().status().as_u16(), 200);
    let in_flight = tokio::spawn(async move { reqwest::Client::new().post(&url).json(&body(false)).send().await });
    // Stop once the request is at the upstream (which takes ~300 ms to answer).
    let t = Instant::now();
    while up.submits() == 0 {
        assert!(t.elapsed() < Duration::from_secs(10), "the request never reached the upstream");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stop_tx.send(()).unwrap();
    let answer = in_flight.await.unwrap().expect("the request in flight is answered");
    assert_eq!(answer.status().as_u16(), 200);
    assert!(answer.text().await.unwrap().contains("choices"));
    tokio::time::timeout(Duration::from_secs(5), served).await.expect("serve returns after the drain").unwrap().unwrap();
    assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "the listener is closed");
    drop(idle);
}

/// A whole reply names what served it: the request id sent (or a new one), the route,
/// the winning upstream, the attempts launched and why a hedge launched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_replies_carry_the_request_id_winner_attempts_and_hedge_reason() {
    let slow = MockServer::start(Flavor::OpenAi, Behaviour { queue: Duration::from_secs(3), ..Behaviour::default() }).await.unwrap();
    let fast = MockServer::start(Flavor::OpenAi, Behaviour::default()).await.unwrap();
    let toml = format!(
        "{OPEN_GATEWAY}{}{}{}",
        openai_provider("slow", &format!("{}/v1", slow.url())),
        openai_provider("fast", &format!("{}/v1", fast.url())),
        hedged_chat_route("h", "slow", "fast", 100, "")
    );
    let url = common::serve_config(&toml).await;
    let http = reqwest::Client::new();
    let r = http.post(&url).header("x-request-id", "trace-42").json(&body(false)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let h = r.headers().clone();
    assert_eq!(h["x-request-id"], "trace-42");
    assert_eq!(h["x-tailcut-route"], "chat");
    assert_eq!(h["x-tailcut-winner"], "fast");
    assert_eq!(h["x-tailcut-attempts"], "2");
    assert_eq!(h["x-tailcut-hedge-reason"], "timer");
    assert_eq!(h["content-type"], "application/json");
    assert_eq!(h.get_all("x-tailcut-winner").iter().count(), 1);
    assert!(r.json::<serde_json::Value>().await.unwrap()["choices"].is_array());
    // Without an id, the gateway makes one.
    let r = http.post(&url).json(&body(false)).send().await.unwrap();
    assert!(r.headers()["x-request-id"].to_str().unwrap().starts_with("req-"), "{:?}", r.headers());
}
