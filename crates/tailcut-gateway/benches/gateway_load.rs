//! Gateway load benchmark on loopback, against an instant OpenAI-compatible upstream:
//!
//! 1. added latency (gateway vs direct) p50/p99 at fixed open-loop rates (1k and 5k req/s),
//!    with hedging enabled (a 500 ms timer hedge that never fires), and the same through
//!    an nginx `proxy_pass` baseline when `nginx` is installed;
//! 2. maximum throughput (closed loop, 64 connections) for direct, gateway and nginx;
//! 3. streaming: added time to first token, p50/p99;
//! 4. 10,000 concurrent hedged requests whose primary stalls: errors, leaks, receipts,
//!    peak RSS.
//!
//! Run: `cargo bench -p tailcut-gateway --bench gateway_load`

use axum::response::IntoResponse;
use axum::routing::post;
use axum::Router;
use futures::StreamExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
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
store = ":memory:"
max_in_flight = 100000
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

fn nginx(upstream: &str, dir: &std::path::Path) -> Option<(std::process::Child, String)> {
    let bin = ["/usr/sbin/nginx", "/usr/bin/nginx"].into_iter().find(|p| std::path::Path::new(p).exists())?;
    let port = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
    let up = upstream.trim_start_matches("http://");
    let conf = format!(
        "worker_processes 1; daemon off; pid {d}/nginx.pid; error_log {d}/error.log;\n\
         events {{ worker_connections 16384; }}\n\
         http {{ access_log off; client_body_temp_path {d}; proxy_temp_path {d};\n\
           upstream up {{ server {up}; keepalive 256; }}\n\
           server {{ listen 127.0.0.1:{port}; location / {{ proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering off; }} }} }}\n",
        d = dir.display()
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf).ok()?;
    let child =
        Command::new(bin).args(["-c", path.to_str()?, "-p", dir.to_str()?]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().ok()?;
    std::thread::sleep(Duration::from_millis(300));
    Some((child, format!("http://127.0.0.1:{port}")))
}

fn pct(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[((q * (v.len() - 1) as f64).round() as usize).min(v.len() - 1)]
}

const BODY: &str = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
const STREAM_BODY: &str = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}"#;

/// Open loop at `rate` req/s for `secs`; latency from the scheduled send time, ms.
async fn open_loop(client: &reqwest::Client, base: &str, rate: u32, secs: u64) -> (Vec<f64>, usize) {
    let url = format!("{base}/v1/chat/completions");
    let total = rate as u64 * secs;
    let start = Instant::now();
    let interval = Duration::from_secs_f64(1.0 / f64::from(rate));
    let mut tasks = Vec::with_capacity(total as usize);
    for i in 0..total {
        let at = start + interval * i as u32;
        let now = Instant::now();
        if at > now {
            tokio::time::sleep(at - now).await;
        }
        let (c, u) = (client.clone(), url.clone());
        tasks.push(tokio::spawn(async move {
            let r = c.post(&u).header("content-type", "application/json").body(BODY).send().await;
            let ok = match r {
                Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                Err(_) => false,
            };
            (at.elapsed().as_secs_f64() * 1000.0, ok)
        }));
    }
    let mut lat = Vec::with_capacity(tasks.len());
    let mut errors = 0;
    for t in tasks {
        match t.await {
            Ok((l, true)) => lat.push(l),
            _ => errors += 1,
        }
    }
    (lat, errors)
}

async fn max_rps(client: &reqwest::Client, base: &str, conns: usize, secs: f64) -> f64 {
    let url = format!("{base}/v1/chat/completions");
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let done = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let tasks: Vec<_> = (0..conns)
        .map(|_| {
            let (c, u, d) = (client.clone(), url.clone(), done.clone());
            tokio::spawn(async move {
                while Instant::now() < deadline {
                    if let Ok(r) = c.post(&u).header("content-type", "application/json").body(BODY).send().await {
                        if r.bytes().await.is_ok() {
                            d.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
    done.load(std::sync::atomic::Ordering::Relaxed) as f64 / secs
}

async fn ttft(client: &reqwest::Client, base: &str, n: usize) -> Vec<f64> {
    let url = format!("{base}/v1/chat/completions");
    let mut out = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        let Ok(r) = client.post(&url).header("content-type", "application/json").body(STREAM_BODY).send().await else { continue };
        let mut s = r.bytes_stream();
        let mut seen = String::new();
        while let Some(Ok(chunk)) = s.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("\"content\":\"hi\"") {
                out.push(t.elapsed().as_secs_f64() * 1000.0);
                break;
            }
        }
        while s.next().await.is_some() {}
    }
    out
}

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0)
}

fn main() {
    // Per-request JSON logs would measure stderr, not the gateway.
    std::env::set_var("TAILCUT_LOG", "off");
    let only_stall = std::env::args().any(|a| a == "--stall-only");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let dir = std::env::temp_dir().join(format!("tailcut-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let up = upstream().await;
        let client = reqwest::Client::builder().pool_max_idle_per_host(4096).build().unwrap();
        if !only_stall {
            latency_and_throughput(&client, &up, &dir).await;
        }
        stalled(&client, &up).await;
        let _ = std::fs::remove_dir_all(&dir);
    });
}

async fn latency_and_throughput(client: &reqwest::Client, up: &str, dir: &std::path::Path) {
    {
        let (client, up) = (client.clone(), up.to_string());
        let gw = gateway(&up, &up, 500, 500).await;
        let ngx = nginx(&up, dir);
        // Warm up connection pools.
        let _ = open_loop(&client, &up, 500, 1).await;
        let _ = open_loop(&client, &gw, 500, 1).await;
        if let Some((_, n)) = &ngx {
            let _ = open_loop(&client, n, 500, 1).await;
        }
        println!("target          rate   p50 ms   p99 ms   added p50 ms   added p99 ms   errors");
        for rate in [1000u32, 5000] {
            let (mut d, de) = open_loop(&client, &up, rate, 4).await;
            let (dp50, dp99) = (pct(&mut d, 0.5), pct(&mut d, 0.99));
            println!("direct        {rate:6} {dp50:8.3} {dp99:8.3} {:>14} {:>14} {de:8}", "-", "-");
            let mut targets = vec![("tailcut", gw.clone())];
            if let Some((_, n)) = &ngx {
                targets.push(("nginx", n.clone()));
            }
            for (name, base) in targets {
                let (mut g, ge) = open_loop(&client, &base, rate, 4).await;
                let (p50, p99) = (pct(&mut g, 0.5), pct(&mut g, 0.99));
                println!("{name:13} {rate:6} {p50:8.3} {p99:8.3} {:14.3} {:14.3} {ge:8}", p50 - dp50, p99 - dp99);
            }
        }
        println!("\nmax throughput (closed loop, 64 connections, 4 s)");
        let direct = max_rps(&client, &up, 64, 4.0).await;
        let via = max_rps(&client, &gw, 64, 4.0).await;
        println!("direct   {direct:10.0} req/s");
        println!("tailcut  {via:10.0} req/s");
        if let Some((_, n)) = &ngx {
            let nx = max_rps(&client, n, 64, 4.0).await;
            println!("nginx    {nx:10.0} req/s   (tailcut / nginx = {:.2})", via / nx);
        }
        println!("\nstreaming time to first token (2,000 sequential streams)");
        let mut d = ttft(&client, &up, 2000).await;
        let mut g = ttft(&client, &gw, 2000).await;
        let (d50, d99, g50, g99) = (pct(&mut d, 0.5), pct(&mut d, 0.99), pct(&mut g, 0.5), pct(&mut g, 0.99));
        println!("direct   p50 {d50:.3} ms  p99 {d99:.3} ms");
        println!("tailcut  p50 {g50:.3} ms  p99 {g99:.3} ms   added p50 {:.3} ms, added p99 {:.3} ms", g50 - d50, g99 - d99);

        if let Some((mut child, _)) = ngx {
            let _ = child.kill();
        }
    }
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
                    match c.post(&u).header("content-type", "application/json").body(body).send().await {
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
                    }
                })
            })
            .collect();
        let mut ok = 0;
        let mut failures: std::collections::BTreeMap<String, usize> = Default::default();
        for t in tasks {
            match t.await {
                Ok(Ok(())) => ok += 1,
                Ok(Err(kind)) => *failures.entry(kind).or_default() += 1,
                Err(_) => *failures.entry("task panicked".to_string()).or_default() += 1,
            }
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
