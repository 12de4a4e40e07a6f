//! Hedged streaming failure paths, against a local upstream that misbehaves on purpose:
//! an error before the first token falls through to the next upstream at once; an error
//! after it ends the client's stream with an error event and `[DONE]`. A stream read to
//! its end leaves its upstream connection open for the next one.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

mod common;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tailcut_testkit::config::{hedged_chat_route, openai_provider, OPEN_GATEWAY};

const ROLE: &str = r#"data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#;

fn token(t: &str) -> String {
    format!(r#"data: {{"choices":[{{"index":0,"delta":{{"content":"{t}"}}}}]}}"#)
}

/// Server-sent events, 20 ms apart; `Err` items break the connection mid-body.
fn sse(events: Vec<Result<String, ()>>) -> Response {
    let stream = futures::stream::unfold(events.into_iter(), |mut it| async move {
        let next = it.next()?;
        tokio::time::sleep(Duration::from_millis(20)).await;
        Some((next.map(|e| bytes::Bytes::from(format!("{e}\n\n"))).map_err(|()| std::io::Error::other("cut")), it))
    });
    Response::builder().header("content-type", "text/event-stream").body(Body::from_stream(stream)).unwrap()
}

/// `/fail` answers 500; `/good` streams two tokens; `/error` sends a token then an error
/// event; `/cut` sends a token then drops the connection.
async fn upstream() -> String {
    let app = Router::new()
        .route("/fail/v1/chat/completions", post(|| async { Response::builder().status(500).body(Body::from("boom")).unwrap() }))
        .route(
            "/good/v1/chat/completions",
            post(|| async { sse(vec![Ok(ROLE.into()), Ok(token("a")), Ok(token("b")), Ok("data: [DONE]".into())]) }),
        )
        .route(
            "/error/v1/chat/completions",
            post(|| async { sse(vec![Ok(ROLE.into()), Ok(token("x")), Ok(r#"data: {"error":{"message":"engine died"}}"#.into())]) }),
        )
        .route("/cut/v1/chat/completions", post(|| async { sse(vec![Ok(ROLE.into()), Ok(token("x")), Err(())]) }));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await });
    format!("http://{addr}")
}

/// A gateway whose route tries `primary` then `hedge` (a 5 s first-token hedge, so only a
/// failure makes it move on early).
async fn gateway(up: &str, primary: &str, hedge: &str) -> String {
    let toml = format!(
        "{OPEN_GATEWAY}{}{}{}",
        openai_provider("p", &format!("{up}/{primary}/v1")),
        openai_provider("h", &format!("{up}/{hedge}/v1")),
        hedged_chat_route("ph", "p", "h", 5000, "first_token_hedge_ms = 5000")
    );
    common::serve_config(&toml).await
}

async fn stream(url: &str) -> (reqwest::header::HeaderMap, String) {
    let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": true});
    let r = reqwest::Client::new().post(url).json(&body).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let headers = r.headers().clone();
    (headers, r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_before_the_first_token_falls_through_at_once() {
    let up = upstream().await;
    let url = gateway(&up, "fail", "good").await;
    let t = Instant::now();
    let (headers, text) = stream(&url).await;
    assert!(t.elapsed() < Duration::from_secs(2), "waited for the 5 s hedge instead of falling through: {:?}", t.elapsed());
    assert_eq!(headers["x-tailcut-winner"], "h");
    assert_eq!(headers["x-tailcut-hedge-reason"], "upstream_error");
    assert!(text.contains(r#""content":"a""#) && text.contains(r#""content":"b""#), "{text}");
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
    assert_eq!(text.matches(r#""role":"assistant""#).count(), 1, "one role chunk: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_event_after_the_first_token_ends_the_stream_with_an_error() {
    let up = upstream().await;
    let url = gateway(&up, "error", "good").await;
    let (headers, text) = stream(&url).await;
    assert_eq!(headers["x-tailcut-winner"], "p");
    assert!(text.contains(r#""content":"x""#), "{text}");
    assert!(text.contains("upstream failed mid-stream"), "{text}");
    assert!(!text.contains(r#""content":"a""#), "tokens of another upstream leaked in: {text}");
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_cut_after_the_first_token_ends_the_stream_with_an_error() {
    let up = upstream().await;
    let url = gateway(&up, "cut", "good").await;
    let (_, text) = stream(&url).await;
    assert!(text.contains(r#""content":"x""#), "{text}");
    assert!(text.contains("upstream failed mid-stream"), "{text}");
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
}

/// An upstream whose `/good` streams as [`upstream`]'s does (chunked, so its last bytes
/// come after `[DONE]`), recording the client address of every request it serves: one
/// address per upstream connection.
async fn counting_upstream() -> (String, Arc<Mutex<HashSet<SocketAddr>>>) {
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let record = seen.clone();
    let app = Router::new().route(
        "/good/v1/chat/completions",
        post(move |ConnectInfo(from): ConnectInfo<SocketAddr>| {
            record.lock().unwrap().insert(from);
            async { sse(vec![Ok(ROLE.into()), Ok(token("a")), Ok("data: [DONE]".into())]) }
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app.into_make_service_with_connect_info::<SocketAddr>()).await });
    (format!("http://{addr}"), seen)
}

// One thread, as each of the gateway's per-core runtimes: connection pools are per
// thread, and on a work-stealing runtime a reader that moves threads returns its
// connection to another thread's pool.
#[tokio::test]
async fn a_stream_read_to_its_end_keeps_its_upstream_connection_for_the_next() {
    let (up, connections) = counting_upstream().await;
    let url = gateway(&up, "good", "good").await;
    for _ in 0..6 {
        let (headers, text) = stream(&url).await;
        assert_eq!(headers["x-tailcut-winner"], "p");
        assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
        // The reader gets the chunked body's terminator after the client's `[DONE]`.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let n = connections.lock().unwrap().len();
    assert_eq!(n, 1, "{n} upstream connections for 6 sequential streams");
}
