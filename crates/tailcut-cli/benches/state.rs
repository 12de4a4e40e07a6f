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

use std::process::Command;

#[path = "common/procs.rs"]
mod procs;
use procs::{free_port, Procs};

#[path = "common/load.rs"]
mod load;
use load::{client, closed_loop, median, open_loop, pct, Post};
use tailcut_testkit::postgres::PgServer;

const KEY: &str = "bench-key";
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
    procs.start_instant_upstream(bin, up_port);
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
    procs.start_instant_upstream(bin, up_port);
    let url3 = pg.database("bench3");
    let toml = gateway_toml(&upstream, &format!("url = \"{url3}\""));
    let replicas: Vec<String> = (0..3).map(|i| start_gateway(bin, dir.path(), &format!("replica{i}"), &toml, &mut procs)).collect();
    let cfg = dir.path().join("replica0.toml");
    let before = charges(bin, &cfg);
    let secs3 = if quick { 3.0 } else { 10.0 };
    let sent = rt.block_on(async { closed_loop(&client(), &replicas, CHAT_POST, 96, secs3).await });
    let after = charges(bin, &cfg);
    println!(
        "3 PostgreSQL replicas, closed loop, 96 connections, {secs3} s: {sent} requests, {} ledger charges, {:.0} charges/s",
        after - before,
        (after - before) as f64 / secs3
    );
    println!("load average at end: {}", load());
}
