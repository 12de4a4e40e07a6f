//! 10,000 concurrent hedged requests whose primary stalls before its first token (half of
//! them streamed): errors, hedges, receipts, leaks and peak memory. The gateway runs in
//! this process, or, with `TAILCUT_GATEWAY_URL` set (scripts/bench-gateway.sh), as its
//! own `tailcut serve` process.
//!
//! Added latency, throughput against nginx and streaming time to first token are measured
//! by `cargo bench -p tailcut-cli --bench gateway`, with every party in its own process.
//!
//! Run: `cargo bench -p tailcut-gateway --bench gateway_load`
// Load generators spawn and read the wall clock freely (clippy.toml's bans are for the
// gateway's own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use axum::response::IntoResponse;
use axum::routing::post;
use axum::Router;
use std::time::{Duration, Instant};
use tailcut_mockproviders::{Behaviour, Flavor, MockServer};

const CHAT: &str = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#;
const SSE: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

async fn instant(body: axum::body::Bytes) -> axum::response::Response {
    if body.windows(13).any(|w| w == b"\"stream\":true") {
        ([("content-type", "text/event-stream")], SSE).into_response()
    } else {
        ([("content-type", "application/json")], CHAT).into_response()
    }
}

async fn upstream() -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, Router::new().route("/v1/chat/completions", post(instant))).await });
    format!("http://{addr}")
}

async fn gateway(primary: &str, hedge: &str, delay_ms: u64, first_token_ms: u64) -> String {
    let toml = format!(
        r#"
[budget]
ledger = ":memory:"
[gateway]
auth = "none"
store = ":memory:"
max_connections = 15000
max_in_flight = 100000
admission_wait_ms = 30000
total_timeout_s = 60
hedge_budget_percent = 1000
hedge_budget_burst = 100000
[providers.a]
adapter = "openai"
base_url = "{primary}/v1"
rate_usd_per_s = 0.0
[providers.b]
adapter = "openai"
base_url = "{hedge}/v1"
rate_usd_per_s = 0.0
[policies.h]
kind = "hedge"
primary = "a"
hedge = "b"
delay_ms = {delay_ms}
[routes.chat]
kind = "openai"
models = ["m"]
policy = "h"
first_token_hedge_ms = {first_token_ms}
"#
    );
    let config = tailcut_config::Config::parse(&toml, "bench").unwrap();
    let state = tailcut_gateway::AppState::new(config, None).unwrap();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(tailcut_gateway::serve(l, state, futures::future::pending()));
    format!("http://{addr}")
}

const BODY: &str = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
const STREAM_BODY: &str = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}"#;

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0)
}

fn main() {
    // Per-request JSON logs would measure stderr, not the gateway.
    std::env::set_var("TAILCUT_LOG", "off");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let up = upstream().await;
        let client = reqwest::Client::builder().pool_max_idle_per_host(4096).build().unwrap();
        stalled(&client, &up).await;
    });
}

async fn stalled(client: &reqwest::Client, up: &str) {
    {
        println!("\n10,000 concurrent hedged requests, primary stalls (no token for 5 s), hedge after 50 ms");
        // With TAILCUT_GATEWAY_URL set (scripts/bench-gateway.sh), the gateway and the
        // upstreams run as their own processes, so 10,000 connections fit each fd limit.
        let external = std::env::var("TAILCUT_GATEWAY_URL").ok();
        let stall = MockServer::start(
            Flavor::OpenAi,
            Behaviour { queue: Duration::from_secs(5), run: Duration::from_secs(1), ..Behaviour::default() },
        )
        .await
        .unwrap();
        let gw2 = match &external {
            Some(u) => u.clone(),
            None => gateway(&stall.url(), up, 50, 50).await,
        };
        let before = rss_kb();
        let t = Instant::now();
        let tasks: Vec<_> = (0..10_000)
            .map(|i| {
                let c = client.clone();
                let u = format!("{gw2}/v1/chat/completions");
                let body = if i % 2 == 0 { BODY } else { STREAM_BODY };
                tokio::spawn(async move {
                    let sent = Instant::now();
                    let r = match c.post(&u).header("content-type", "application/json").body(body).send().await {
                        Ok(r) if r.status().is_success() => match r.bytes().await {
                            Ok(_) => Ok(()),
                            Err(_) => Err("body cut".to_string()),
                        },
                        Ok(r) => {
                            let code = r.status().as_u16();
                            let text = r.text().await.unwrap_or_default();
                            let msg = serde_json::from_str::<serde_json::Value>(&text)
                                .ok()
                                .and_then(|v| v.pointer("/error/message").and_then(|m| m.as_str()).map(str::to_string))
                                .unwrap_or_default();
                            let msg: String = msg.chars().take(200).collect();
                            Err(format!("HTTP {code}: {msg}"))
                        }
                        Err(e) if e.is_connect() => Err("connect".to_string()),
                        Err(e) if e.is_timeout() => Err("timeout".to_string()),
                        Err(_) => Err("other transport".to_string()),
                    };
                    (i % 2 == 1, sent.elapsed().as_secs_f64(), r)
                })
            })
            .collect();
        let mut ok = 0;
        let mut failures: std::collections::BTreeMap<String, usize> = Default::default();
        let mut latency: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        for t in tasks {
            match t.await {
                Ok((streamed, secs, r)) => {
                    latency[usize::from(streamed)].push(secs);
                    match r {
                        Ok(()) => ok += 1,
                        Err(kind) => *failures.entry(kind).or_default() += 1,
                    }
                }
                Err(_) => *failures.entry("task panicked".to_string()).or_default() += 1,
            }
        }
        for (name, mut l) in ["whole", "streamed"].into_iter().zip(latency) {
            l.sort_by(f64::total_cmp);
            let at = |q: f64| l.get(((l.len() as f64 * q) as usize).min(l.len().saturating_sub(1))).copied().unwrap_or(0.0);
            println!("{name}: latency p50 {:.3} s, p99 {:.3} s, max {:.3} s", at(0.5), at(0.99), at(1.0));
        }
        if !failures.is_empty() {
            println!("failures by kind: {failures:?}");
        }
        let elapsed = t.elapsed().as_secs_f64();
        tokio::time::sleep(Duration::from_millis(2000)).await;
        let m = client.get(format!("{gw2}/metrics")).send().await.unwrap().text().await.unwrap();
        let sum = |prefix: &str| -> f64 {
            m.lines().filter(|l| l.starts_with(prefix)).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
        };
        println!(
            "ok {ok}/10000 in {elapsed:.2} s; hedges {} ; receipts {} (channel closed {}), leaks {}; in-process stalled upstream saw {} disconnects; peak RSS of this process {} MB (before: {} MB)",
            sum("tailcut_hedges_total") + sum("tailcut_stream_hedges_total"),
            sum("tailcut_cancels_total"),
            sum("tailcut_cancels_total{route=\"chat\",evidence=\"request_channel_closed\"}"),
            sum("tailcut_leaks_total") + 0.0,
            stall.disconnects(),
            rss_kb() / 1024,
            before / 1024
        );
    }
}
