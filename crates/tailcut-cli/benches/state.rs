//! What PostgreSQL state costs a request: `tailcut serve` with `[state] url` on SQLite
//! (embedded) and on PostgreSQL (a local, durable server: fsync on), each its own process
//! in front of the same instant upstream (`tailcut sim-provider --profile instant`), in
//! one run:
//!
//! 1. p50/p99 latency at fixed open-loop rates, 1,000 then 2,000 req/s (from each
//!    request's scheduled send time, at most 64 connections), every request charged to
//!    the ledger (a key with a budget, so the per-key account is charged too); rounds
//!    interleaved (embedded, postgres, embedded, …), the median round reported and every
//!    round printed; the added p99 is postgres − embedded (target ≤ 0.5 ms at 2,000
//!    req/s), printed per rate at the end;
//! 2. budget charges per second across three PostgreSQL replicas, closed loop: the
//!    ledger's charge rows counted by `tailcut state reconcile` over the run's length.
//!
//! Run: `cargo bench -p tailcut-cli --bench state` (`-- --quick`: one short round;
//! `TAILCUT_BENCH_RATE=N[,M…]` for other rates than 1,000 and 2,000 req/s; `TAILCUT_BENCH_ASYNC_COMMIT=1`
//! for PostgreSQL sessions with `synchronous_commit=off`). Needs
//! Debian's `postgresql` package (the server runs as `nobody` in a temporary directory).

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "common/procs.rs"]
mod procs;
use procs::{free_port, wait_for_port, Procs};
use tailcut_testkit::postgres::PgServer;

const BODY: &str = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
const KEY: &str = "bench-key";
type Http = Client<HttpConnector, Full<Bytes>>;

fn gateway_toml(upstream: &str, state: &str) -> String {
    let sha = tailcut_gateway::tenancy::sha256_hex(KEY);
    format!(
        "[budget]\nsoft_stop_usd = 1000000\nhard_stop_usd = 1000000\n[state]\n{state}\n\
         [gateway]\nmax_in_flight = 100000\ntotal_timeout_s = 60\nhedge_budget_percent = 1000\nhedge_budget_burst = 100000\n\
         keys = [{{ name = \"bench\", sha256 = \"{sha}\", budget_usd = 1000000 }}]\n\
         [providers.a]\nadapter = \"openai\"\nbase_url = \"{upstream}/v1\"\nrate_usd_per_s = 0.0001\nexpected_run_s = 1\n\
         [providers.b]\nadapter = \"openai\"\nbase_url = \"{upstream}/v1\"\nrate_usd_per_s = 0.0001\nexpected_run_s = 1\n\
         [policies.h]\nkind = \"hedge\"\nprimary = \"a\"\nhedge = \"b\"\ndelay_ms = 500\n\
         [routes.chat]\nkind = \"openai\"\nmodels = [\"m\"]\npolicy = \"h\"\n"
    )
}

fn start_gateway(bin: &str, dir: &std::path::Path, name: &str, toml: &str, procs: &mut Procs) -> String {
    let cfg = dir.join(format!("{name}.toml"));
    std::fs::write(&cfg, toml).expect("write the config");
    let port = free_port();
    procs.0.push(
        Command::new(bin)
            .args(["serve", "--config"])
            .arg(&cfg)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env("TAILCUT_LOG", "off")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("tailcut serve starts"),
    );
    wait_for_port(port);
    format!("http://127.0.0.1:{port}")
}

fn client() -> Http {
    let mut c = HttpConnector::new();
    c.set_nodelay(true);
    Client::builder(TokioExecutor::new()).pool_timer(TokioTimer::new()).pool_max_idle_per_host(4096).build(c)
}

async fn exchange(http: &Http, url: &str) -> bool {
    let req = http::Request::post(url)
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {KEY}"))
        .body(Full::new(Bytes::from_static(BODY.as_bytes())))
        .expect("a valid request");
    match http.request(req).await {
        Ok(r) if r.status().is_success() => r.into_body().collect().await.is_ok(),
        _ => false,
    }
}

/// Open loop at `rate` req/s for `secs`, at most 64 connections: latencies (ms) from the
/// scheduled send times (a pacing thread: tokio's timer rounds to whole milliseconds).
async fn open_loop(http: &Http, url: &str, rate: u32, secs: f64) -> (Vec<f64>, usize) {
    let total = (f64::from(rate) * secs) as usize;
    let interval = Duration::from_secs_f64(1.0 / f64::from(rate));
    let handle = tokio::runtime::Handle::current();
    let (http, url) = (http.clone(), url.to_string());
    let connections = std::sync::Arc::new(tokio::sync::Semaphore::new(64));
    let pacer = std::thread::spawn(move || {
        let start = Instant::now() + Duration::from_millis(5);
        let mut tasks = Vec::with_capacity(total);
        for i in 0..total {
            let at = start + interval.mul_f64(i as f64);
            let now = Instant::now();
            if at > now {
                std::thread::sleep(at - now);
            }
            let (http, url, connections) = (http.clone(), url.clone(), connections.clone());
            tasks.push(handle.spawn(async move {
                let _connection = connections.acquire_owned().await;
                let ok = exchange(&http, &url).await;
                (at.elapsed().as_secs_f64() * 1000.0, ok)
            }));
        }
        tasks
    });
    let tasks = loop {
        if pacer.is_finished() {
            break pacer.join().expect("the pacer thread");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let (mut lat, mut errors) = (Vec::with_capacity(total), 0);
    for t in tasks {
        match t.await {
            Ok((ms, true)) => lat.push(ms),
            _ => errors += 1,
        }
    }
    (lat, errors)
}

/// Closed loop over `urls` (round robin), `conns` connections, for `secs`: requests sent.
async fn closed_loop(http: &Http, urls: &[String], conns: usize, secs: f64) -> usize {
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for c in 0..conns {
        let (http, url) = (http.clone(), format!("{}/v1/chat/completions", urls[c % urls.len()]));
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while Instant::now() < until {
                if exchange(&http, &url).await {
                    n += 1;
                }
            }
            n
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap_or(0);
    }
    total
}

fn pct(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((q * (v.len() - 1) as f64).round() as usize).min(v.len() - 1)]
}

fn median(mut v: Vec<f64>) -> f64 {
    pct(&mut v, 0.5)
}

fn charges(bin: &str, config: &std::path::Path) -> i64 {
    let out = Command::new(bin).args(["state", "reconcile", "--json", "--config"]).arg(config).output().expect("reconcile runs");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("reconcile prints JSON");
    v["scopes"].as_array().and_then(|s| s.iter().find(|s| s["scope"] == "global")).and_then(|g| g["charges"].as_i64()).unwrap_or(0)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (rounds, secs) = if quick { (1, 3.0) } else { (5, 10.0) };
    let bin = env!("CARGO_BIN_EXE_tailcut");
    let Some(pg) = PgServer::start_durable() else {
        eprintln!("no PostgreSQL: apt-get install postgresql");
        return;
    };
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut procs = Procs::default();
    let up_port = free_port();
    procs.0.push(
        Command::new(bin)
            .args(["sim-provider", "--profile", "instant", "--port", &up_port.to_string(), "--max-workers", "1000000"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sim-provider starts"),
    );
    wait_for_port(up_port);
    let upstream = format!("http://127.0.0.1:{up_port}");
    let embedded_state = format!("url = \"sqlite:{}\"", dir.path().join("state.sqlite").display());
    // TAILCUT_BENCH_ASYNC_COMMIT=1: the gateway's sessions commit without waiting for the
    // WAL flush (`options=-c synchronous_commit=off` in the URL, as an operator would set
    // it): a replica's kill -9 still loses nothing, a crash of the database server can
    // lose the last fraction of a second of charge rows.
    let options =
        if std::env::var("TAILCUT_BENCH_ASYNC_COMMIT").is_ok_and(|v| v == "1") { "?options=-c%20synchronous_commit%3Doff" } else { "" };
    let pg_url = format!("{}{options}", pg.database("bench"));
    let pg_state = format!("url = \"{pg_url}\"");
    let embedded = start_gateway(bin, dir.path(), "embedded", &gateway_toml(&upstream, &embedded_state), &mut procs);
    let postgres = start_gateway(bin, dir.path(), "postgres", &gateway_toml(&upstream, &pg_state), &mut procs);
    let targets = [("embedded", embedded), ("postgres", postgres)];

    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    // The machine's load when the bench starts and ends (a shared machine skews p99).
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split_whitespace().take(3).collect::<Vec<_>>().join(" ");
    println!("load average at start: {}", load());
    rt.block_on(async {
        let http = client();
        for (_, base) in &targets {
            let url = format!("{base}/v1/chat/completions");
            let _ = open_loop(&http, &url, 500, 1.0).await; // warm-up: connections, leases
        }
        // Each rate in turn (default 1,000 and 2,000 req/s); within a rate, rounds
        // interleave the targets (embedded, postgres, embedded, ...).
        let rates: Vec<u32> = std::env::var("TAILCUT_BENCH_RATE")
            .ok()
            .map(|r| r.split(',').filter_map(|x| x.trim().parse().ok()).collect())
            .filter(|r: &Vec<u32>| !r.is_empty())
            .unwrap_or_else(|| vec![1000, 2000]);
        let mut added = Vec::new();
        for &rate in &rates {
            println!("\n{rate} req/s open loop, {secs} s per round, {rounds} round(s), every request charged (global + key)");
            println!("target        p50 ms    p99 ms   errors   p99 by round");
            let mut per: Vec<(Vec<f64>, Vec<f64>, usize)> = vec![(Vec::new(), Vec::new(), 0); targets.len()];
            for _ in 0..rounds {
                for (i, (_, base)) in targets.iter().enumerate() {
                    let (mut lat, errors) = open_loop(&http, &format!("{base}/v1/chat/completions"), rate, secs).await;
                    per[i].0.push(pct(&mut lat, 0.5));
                    per[i].1.push(pct(&mut lat, 0.99));
                    per[i].2 += errors;
                }
            }
            let (e50, e99) = (median(per[0].0.clone()), median(per[0].1.clone()));
            for (i, (name, _)) in targets.iter().enumerate() {
                let (p50, p99) = (median(per[i].0.clone()), median(per[i].1.clone()));
                let by_round: Vec<String> = per[i].1.iter().map(|v| format!("{v:.3}")).collect();
                println!("{name:12} {p50:9.3} {p99:9.3} {:8}   [{}]", per[i].2, by_round.join(", "));
                if i > 0 {
                    println!("added by PostgreSQL state: p50 {:+.3} ms, p99 {:+.3} ms (target p99 <= +0.5 ms)", p50 - e50, p99 - e99);
                    added.push((rate, e99, p99, p99 - e99));
                }
            }
        }
        println!("\nadded p99 (PostgreSQL - embedded, median round; target <= +0.5 ms at 2,000 req/s):");
        for (rate, e99, p99, d) in &added {
            let verdict = if *d <= 0.5 { "met" } else { "not met" };
            println!("  at {rate} req/s: {d:+.3} ms (embedded {e99:.3} ms, PostgreSQL {p99:.3} ms): {verdict}");
        }
    });
    drop(procs);

    // Budget charges per second across three PostgreSQL replicas.
    let mut procs = Procs::default();
    procs.0.push(
        Command::new(bin)
            .args(["sim-provider", "--profile", "instant", "--port", &up_port.to_string(), "--max-workers", "1000000"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sim-provider starts"),
    );
    wait_for_port(up_port);
    let url3 = pg.database("bench3");
    let toml = gateway_toml(&upstream, &format!("url = \"{url3}\""));
    let replicas: Vec<String> = (0..3).map(|i| start_gateway(bin, dir.path(), &format!("replica{i}"), &toml, &mut procs)).collect();
    let cfg = dir.path().join("replica0.toml");
    let before = charges(bin, &cfg);
    let secs3 = if quick { 3.0 } else { 10.0 };
    let sent = rt.block_on(async { closed_loop(&client(), &replicas, 96, secs3).await });
    let after = charges(bin, &cfg);
    println!(
        "3 PostgreSQL replicas, closed loop, 96 connections, {secs3} s: {sent} requests, {} ledger charges, {:.0} charges/s",
        after - before,
        (after - before) as f64 / secs3
    );
    println!("load average at end: {}", load());
}
