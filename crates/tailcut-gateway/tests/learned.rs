//! A learned (`auto`) route against real local HTTP providers: one stalls before its
//! response headers on every third request, the other is always fast. The route learns
//! which one is slow (listed first, it is where a fixed policy would start), whole replies and streams (time to the first content token) each
//! in their own model, and makes the fast one primary; every extra attempt stays within
//! the route's hedge-load cap (10 % plus a burst of 10), counted from the traces; the
//! models are on `/metrics` and `/admin/models`.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

mod common;

use axum::body::Body;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tailcut_testkit::config::{openai_provider, OPEN_GATEWAY};

/// A provider charging $0.001/s, so that a second attempt costs something.
fn priced(name: &str, url: &str) -> String {
    openai_provider(name, url).replace("rate_usd_per_s = 0.0", "rate_usd_per_s = 0.001")
}

const STALL: Duration = Duration::from_millis(800);

fn reply(stream: bool) -> Response {
    if stream {
        let sse = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}]}\n\n",
            "data: [DONE]\n\n"
        );
        return Response::builder().header("content-type", "text/event-stream").body(Body::from(sse)).unwrap();
    }
    let body = r#"{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}"#;
    Response::builder().header("content-type", "application/json").body(Body::from(body)).unwrap()
}

/// `/stally` stalls [`STALL`] before its headers on every third request; `/fast` never.
async fn upstream() -> String {
    let n = Arc::new(AtomicU64::new(0));
    let app = Router::new()
        .route(
            "/stally/v1/chat/completions",
            post(move |body: String| {
                let n = n.clone();
                async move {
                    if n.fetch_add(1, Ordering::Relaxed).is_multiple_of(3) {
                        tokio::time::sleep(STALL).await;
                    }
                    reply(body.contains("\"stream\":true"))
                }
            }),
        )
        .route("/fast/v1/chat/completions", post(|body: String| async move { reply(body.contains("\"stream\":true")) }));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await });
    format!("http://{addr}")
}

fn traces(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_auto_route_learns_the_slow_provider_whole_and_streamed_within_the_hedge_cap() {
    let up = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let toml = format!(
        "{OPEN_GATEWAY}[trace]\npath = \"{}\"\n{}{}[policies.auto]\nkind = \"auto\"\nproviders = [\"stally\", \"fast\"]\ndeadline_ms = 250\ntarget_miss = 0.01\nextra_load_percent = 100\n[routes.chat]\nkind = \"openai\"\nmodels = [\"m\"]\npolicy = \"auto\"\n",
        trace.display(),
        priced("stally", &format!("{up}/stally/v1")),
        priced("fast", &format!("{up}/fast/v1")),
    );
    let url = common::serve_config(&toml).await;
    let base = url.trim_end_matches("/v1/chat/completions").to_string();
    let http = reqwest::Client::new();
    const N: usize = 40;
    for stream in [false, true] {
        for i in 0..N {
            let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": stream});
            let id = format!("{}-{i:03}", if stream { "stream" } else { "whole" });
            let r = http.post(&url).header("x-request-id", id).json(&body).send().await.unwrap();
            assert_eq!(r.status(), 200);
            let _ = r.bytes().await.unwrap();
        }
    }
    // Every race settles and is written (losers' cancels may still be in flight).
    let mut all = Vec::new();
    for _ in 0..100 {
        all = traces(&trace);
        if all.len() == 2 * N {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(all.len(), 2 * N);
    all.sort_by_key(|t| t["request_id"].as_str().unwrap_or_default().to_string());
    let (streamed, whole): (Vec<_>, Vec<_>) = all.iter().partition(|t| t["request_id"].as_str().is_some_and(|r| r.starts_with("stream")));
    assert_eq!((whole.len(), streamed.len()), (N, N), "whole and streamed traces");
    for (mode, ts) in [("whole", &whole), ("stream", &streamed)] {
        // Every decision is explained, with the model's beliefs.
        for t in ts.iter() {
            let l = &t["learned"];
            assert!(l["plan"].is_string() && l["reason"].is_string(), "{mode}: {t}");
            assert_eq!(l["model"].as_array().map(Vec::len), Some(2), "{mode}: {t}");
        }
        // Learned: the last quarter runs the fast provider alone, predicted to meet the
        // miss target, and the model knows the stalling one's tail.
        for t in &ts[ts.len() - N / 4..] {
            let l = &t["learned"];
            let plan = l["plan"].as_str().unwrap();
            assert!(plan == "single:fast" || plan.starts_with("hedge:fast->stally@"), "{mode}: {t}");
            assert!(l["predicted_miss"].as_f64().is_some_and(|p| p <= 0.01), "{mode}: {t}");
            assert!(l["model"].as_array().unwrap().iter().all(|b| b["samples"].as_u64().unwrap() >= 5), "{mode}: {t}");
            assert_eq!(t["attempts"][0]["provider"], "fast");
            assert_eq!(t["winner"], "fast");
            assert!(t["winner_total_ms"].as_f64().unwrap() < 250.0, "{mode}: {t}");
        }
        // The cap: extra attempts ≤ the burst of 10 plus 10 % of the requests (one minute
        // window, one gate per route shared by whole replies and streams).
        let extra: usize = ts.iter().map(|t| t["attempts"].as_array().unwrap().len() - 1).sum();
        let denied: u64 = ts.iter().map(|t| t["hedges_denied"].as_u64().unwrap_or(0)).sum();
        assert!(extra >= 1, "{mode}: it explored the second provider");
        eprintln!("{mode}: {extra} extra attempts, {denied} denied");
    }
    let extra_total: usize = all.iter().map(|t| t["attempts"].as_array().unwrap().len() - 1).sum();
    assert!(extra_total as f64 <= 10.0 + 0.1 * (2 * N) as f64, "{extra_total} extra attempts over {} requests", 2 * N);

    // `/metrics`: per route, slot and provider.
    let metrics = http.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
    // (A quantile is exported only where the model reaches it: a provider's p99 may lie
    // beyond everything it saw when it lost races (cancelled attempts are censored), so
    // `fast` is asked for its median, which every run reaches, and `stally` for its
    // samples.)
    for want in [
        "tailcut_learned_samples{route=\"chat\",slot=\"chat\",provider=\"fast\"}",
        "tailcut_learned_samples{route=\"chat\",slot=\"chat_stream\",provider=\"stally\"}",
        "tailcut_learned_latency_seconds{route=\"chat\",slot=\"chat_stream\",provider=\"fast\",quantile=\"0.5\"}",
        "tailcut_learned_unseen_tail{route=\"chat\",slot=\"chat\",provider=\"stally\"}",
        "tailcut_learned_shifts{route=\"chat\",slot=\"chat_stream\",provider=\"fast\"}",
    ] {
        assert!(metrics.contains(want), "{want} missing from:\n{metrics}");
    }
    // `/admin/models`: one model per slot of the route (auth = "none": open).
    let models: serde_json::Value = http.get(format!("{base}/admin/models")).send().await.unwrap().json().await.unwrap();
    let keys: Vec<&str> = models["models"].as_array().unwrap().iter().filter_map(|m| m["key"].as_str()).collect();
    assert_eq!(keys, ["chat/chat", "chat/completions", "chat/embeddings", "chat/chat_stream", "chat/completions_stream"]);
    assert!(models["models"][0]["model"]["updates"].as_u64().unwrap() >= N as u64);
    // The status page lists the learned models per provider.
    let page = http.get(format!("{base}/ui")).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("<h2>Learned models</h2>") && page.contains("<code>chat/chat_stream</code>"), "{page}");
}
