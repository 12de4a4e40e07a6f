//! What PostgreSQL state costs a request: `tailcut serve` with `[state] url` on SQLite
//! (embedded) and on PostgreSQL (a local, durable server: fsync on; charge rows durable
//! before a submission goes out, and `charge_rows = "write_behind"`), each its own process
//! in front of the same instant upstream (an nginx `return 200` server, as in the gateway
//! bench; `tailcut sim-provider --profile instant` where nginx is missing: it costs ~0.8 ms
//! of CPU per request, which saturates a 2-core machine near 2,000 req/s), in one run:
//!
//! 1. p50/p99 latency at fixed open-loop rates, 1,000 then 2,000 req/s (from each
//!    request's scheduled send time, at most 64 connections), every request charged to
//!    the ledger (a key with a budget, so the per-key account is charged too); rounds
//!    interleaved (embedded, postgres, embedded, …), the median round reported and every
//!    round printed; the added p99 is postgres − embedded (target ≤ 0.5 ms at 2,000
//!    req/s), printed per rate and PostgreSQL mode at the end;
//! 2. budget charges per second across three PostgreSQL replicas, closed loop, in each
//!    mode: the ledger's charge rows counted by `tailcut state reconcile` over the run's
//!    length (after the replicas drained, so rows written behind are counted).
//!
//! Run: `cargo bench -p tailcut-cli --bench state` (`-- --quick`: one short round;
//! `TAILCUT_BENCH_RATE=N[,M…]` for other rates than 1,000 and 2,000 req/s; `TAILCUT_BENCH_ASYNC_COMMIT=1`
//! for PostgreSQL sessions with `synchronous_commit=off`). Needs
//! Debian's `postgresql` package (the server runs as `nobody` in a temporary directory).
// Load generators spawn and read the wall clock freely (clippy.toml's bans are for the
// gateway's own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

#[path = "common/procs.rs"]
mod procs;
use procs::{free_port, Procs};

#[path = "common/load.rs"]
mod load;
use load::{client, closed_loop, median, open_loop, pct, Post};
use tailcut_testkit::postgres::PgServer;

const KEY: &str = "bench-key";
/// The instant upstream's reply (nginx `return 200`).
const CHAT: &str = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#;

fn nginx_bin() -> Option<PathBuf> {
    ["/usr/sbin/nginx", "/usr/bin/nginx"].into_iter().map(PathBuf::from).find(|p| p.exists())
}

/// An nginx `return 200` server on `port`, one worker (stopped with the other processes).
fn start_nginx_upstream(bin: &Path, dir: &Path, port: u16) -> Child {
    let d = dir.display();
    let conf = format!(
        "daemon off; pid {d}/upstream.pid; error_log {d}/upstream.err;\nworker_processes 1;\nevents {{ worker_connections 16384; }}\n\
         http {{ access_log off; client_body_temp_path {d};\n\
           server {{ listen 127.0.0.1:{port} backlog=4096; keepalive_requests 10000000;\n\
             location / {{ default_type application/json; return 200 '{CHAT}'; }} }} }}\n"
    );
    let path = dir.join("upstream.conf");
    std::fs::write(&path, conf).expect("write the nginx config");
    let child = Command::new(bin)
        .args(["-c", path.to_str().expect("utf-8 path"), "-p", dir.to_str().expect("utf-8 path")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nginx starts");
    procs::wait_for_port(port);
    child
}

/// The instant upstream on `port`: nginx if installed, else `tailcut sim-provider`.
fn start_upstream(bin: &str, dir: &Path, port: u16, procs: &mut Procs) {
    match nginx_bin() {
        Some(n) => procs.0.push(start_nginx_upstream(&n, dir, port)),
        None => procs.start_instant_upstream(bin, port),
    }
}
/// A chat completion charged to the key's budget.
const CHAT_POST: Post = Post { body: r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#, key: Some(KEY) };

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

/// Writes `dir/name.toml` and serves it: the gateway's chat completions URL.
fn start_gateway(bin: &str, dir: &std::path::Path, name: &str, toml: &str, procs: &mut Procs) -> String {
    let cfg = dir.join(format!("{name}.toml"));
    std::fs::write(&cfg, toml).expect("write the config");
    format!("{}/v1/chat/completions", procs.start_gateway(bin, &cfg).0)
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
    match nginx_bin() {
        Some(_) => println!("upstream: nginx return 200"),
        None => println!("upstream: tailcut sim-provider --profile instant (nginx is not installed; it saturates near 2,000 req/s)"),
    }
    start_upstream(bin, dir.path(), up_port, &mut procs);
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
    let behind_state = format!("url = \"{}{options}\"\ncharge_rows = \"write_behind\"", pg.database("bench_behind"));
    let embedded = start_gateway(bin, dir.path(), "embedded", &gateway_toml(&upstream, &embedded_state), &mut procs);
    let postgres = start_gateway(bin, dir.path(), "postgres", &gateway_toml(&upstream, &pg_state), &mut procs);
    let behind = start_gateway(bin, dir.path(), "pg-behind", &gateway_toml(&upstream, &behind_state), &mut procs);
    let targets = [("embedded", embedded), ("postgres", postgres), ("pg-behind", behind)];

    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    // The machine's load when the bench starts and ends (a shared machine skews p99).
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split_whitespace().take(3).collect::<Vec<_>>().join(" ");
    println!("load average at start: {}", load());
    rt.block_on(async {
        let http = client();
        for (_, url) in &targets {
            let _ = open_loop(&http, url, CHAT_POST, 500, 1.0).await; // warm-up: connections, leases
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
                for (i, (_, url)) in targets.iter().enumerate() {
                    let (mut lat, errors) = open_loop(&http, url, CHAT_POST, rate, secs).await;
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
                    println!(
                        "added by PostgreSQL state ({name}): p50 {:+.3} ms, p99 {:+.3} ms (target p99 <= +0.5 ms)",
                        p50 - e50,
                        p99 - e99
                    );
                    added.push((rate, *name, e99, p99, p99 - e99));
                }
            }
        }
        println!("\nadded p99 (PostgreSQL - embedded, median round; target <= +0.5 ms at 2,000 req/s):");
        for (rate, name, e99, p99, d) in &added {
            let verdict = if *d <= 0.5 { "met" } else { "not met" };
            println!("  at {rate} req/s, {name:9}: {d:+.3} ms (embedded {e99:.3} ms, PostgreSQL {p99:.3} ms): {verdict}");
        }
    });
    drop(procs);

    // Budget charges per second across three PostgreSQL replicas, in each mode.
    for (mode, extra) in [("durable", ""), ("write_behind", "\ncharge_rows = \"write_behind\"")] {
        let mut procs = Procs::default();
        start_upstream(bin, dir.path(), up_port, &mut procs);
        let url3 = pg.database(&format!("bench3_{mode}"));
        let toml = gateway_toml(&upstream, &format!("url = \"{url3}\"{extra}"));
        let replicas: Vec<String> =
            (0..3).map(|i| start_gateway(bin, dir.path(), &format!("replica{i}_{mode}"), &toml, &mut procs)).collect();
        let cfg = dir.path().join(format!("replica0_{mode}.toml"));
        let before = charges(bin, &cfg);
        let secs3 = if quick { 3.0 } else { 10.0 };
        let sent = rt.block_on(async { closed_loop(&client(), &replicas, CHAT_POST, 96, secs3).await });
        drop(procs); // drained: every row written behind is in the ledger
        let after = charges(bin, &cfg);
        println!(
            "3 PostgreSQL replicas ({mode}), closed loop, 96 connections, {secs3} s: {sent} requests, {} ledger charges, {:.0} charges/s",
            after - before,
            (after - before) as f64 / secs3
        );
    }
    println!("load average at end: {}", load());
}
