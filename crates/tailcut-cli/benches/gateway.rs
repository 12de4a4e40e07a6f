//! `tailcut serve` against an `nginx` `proxy_pass` baseline, each in its own process, on
//! loopback, in front of the same instant upstream (an nginx `return 200` server, or
//! `tailcut sim-provider --profile instant` where nginx is missing):
//!
//! 1. added latency (proxy − direct) p50/p99 at fixed open-loop rates (1k and 5k req/s),
//!    with hedging enabled on the gateway (a 500 ms timer hedge that never fires), and
//!    a second gateway (`tailcut-auto`) whose routes are learned `auto` policies, which
//!    decide every request and learn from every settled one;
//!    latency counts from each request's scheduled send time (no coordinated omission),
//!    over at most 64 connections (a request waits for one, as behind a client pool);
//! 2. maximum throughput, closed loop, 64 connections (`wrk` when installed), with the
//!    proxy's CPU time per request read from /proc;
//! 3. streaming: added time to the first content token, p50/p99, over sequential streams
//!    from a single-threaded client.
//!
//! Every measurement runs in interleaved rounds (direct, tailcut, nginx, direct, …), each
//! round starting one target later than the one before (so no target always follows the
//! same one). The added latency uses twelve one-second rounds per target and reports
//! percentiles over all of a target's requests: the background load of a shared host drifts over seconds,
//! and four-second rounds gave one target a quiet stretch and another a busy one (the
//! direct path's own 5k p99 moved 0.42–1.70 ms by round). Throughput reports the median
//! of five rounds (each round's figure printed); streaming, like the added latency,
//! twelve interleaved rounds of 500 streams, percentiles over all of a target's streams.
//!
//! Run: `cargo bench -p tailcut-cli --bench gateway` (`-- --quick` for one short round,
//! `-- --streams` for the streaming rounds alone; `-- --latency [--rounds N] [--rate R]` for
//! the added-latency rounds alone, N interleaved rounds (default 12) at rate R (default both);
//! `TAILCUT_BENCH_BASELINE=path/to/tailcut` adds another build, e.g. an older commit, as
//! a fourth target `tailcut@base` measured in the same interleaved rounds).
// Load generators spawn and read the wall clock freely (clippy.toml's bans are for the
// gateway's own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use http_body_util::BodyExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "common/procs.rs"]
mod procs;
use procs::{free_port, wait_for_port, Procs};

#[path = "common/load.rs"]
mod load;
use load::{client, closed_loop, median, open_loop, pct, Http, Post};

#[path = "gateway/configs.rs"]
mod configs;
use configs::{gateway_toml, proxy_conf, upstream_conf};

const CHAT: &str = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#;
const SSE: [&str; 4] = [
    r#"data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
    r#"data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}"#,
    r#"data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
    "data: [DONE]",
];
const BODY: &str = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
/// A chat completion (nginx and the gateway's benchmark routes want no key).
const CHAT_POST: Post = Post { body: BODY, key: None };
/// A streamed chat completion (model `s`: the gateway's SSE route).
const STREAM_POST: Post = Post { body: r#"{"model":"s","messages":[{"role":"user","content":"hi"}],"stream":true}"#, key: None };

fn nginx_bin() -> Option<PathBuf> {
    ["/usr/sbin/nginx", "/usr/bin/nginx"].into_iter().map(PathBuf::from).find(|p| p.exists())
}

fn start_nginx(bin: &Path, dir: &Path, name: &str, body: &str) -> Child {
    let conf = format!("daemon off; pid {d}/{name}.pid; error_log {d}/{name}.err;\n{body}", d = dir.display());
    let path = dir.join(format!("{name}.conf"));
    std::fs::write(&path, conf).expect("write nginx config");
    Command::new(bin)
        .args(["-c", path.to_str().expect("utf-8 path"), "-p", dir.to_str().expect("utf-8 path")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nginx starts")
}

/// `wrk` closed loop: requests per second.
fn wrk(url: &str, conns: usize, secs: f64, dir: &Path) -> Option<f64> {
    let script = dir.join("post.lua");
    std::fs::write(&script, format!("wrk.method = \"POST\"\nwrk.body = '{BODY}'\nwrk.headers[\"Content-Type\"] = \"application/json\"\n"))
        .ok()?;
    let out = Command::new("wrk")
        .args(["-t1", &format!("-c{conns}"), &format!("-d{}s", secs.round()), "-s", script.to_str()?, url])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    if text.contains("Non-2xx") || text.contains("Socket errors") {
        eprintln!("wrk reported errors against {url}:\n{text}");
    }
    text.lines().find(|l| l.starts_with("Requests/sec:"))?.split_whitespace().nth(1)?.parse().ok()
}

/// Time to the first content token of one streamed completion, ms.
async fn first_token(http: &Http, url: &str) -> Option<f64> {
    let t = Instant::now();
    let resp = http.request(STREAM_POST.request(url)).await.ok()?;
    let mut body = resp.into_body();
    let mut seen = Vec::new();
    let mut at = None;
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.ok()?.into_data() {
            seen.extend_from_slice(&data);
            if at.is_none() && seen.windows(14).any(|w| w == b"\"content\":\"hi\"") {
                at = Some(t.elapsed().as_secs_f64() * 1000.0);
            }
        }
    }
    at
}

/// CPU seconds used so far by a process and its children threads/processes.
fn cpu_seconds(pids: &[u32]) -> f64 {
    let tick = 100.0; // USER_HZ on Linux
    pids.iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).ok())
        .filter_map(|s| {
            let fields: Vec<&str> = s.rsplit_once(')')?.1.split_whitespace().collect();
            Some((fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?) / tick)
        })
        .sum()
}

/// Worker processes of an nginx master (its children), plus the master.
fn nginx_pids(master: u32) -> Vec<u32> {
    let mut pids = vec![master];
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
            let ppid = stat.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().nth(1)?.parse::<u32>().ok());
            if ppid == Some(master) {
                pids.push(pid);
            }
        }
    }
    pids
}

/// The targets in round `round`'s order: each round starts one target later, so every
/// target runs in every position equally often. (In a fixed order, two copies of the same
/// binary measured 0.03 ms apart in added p99 at 1k req/s over 40 rounds: the target
/// right after `direct` did worse.)
fn rotated(targets: &[Target], round: usize) -> impl Iterator<Item = (usize, &Target)> {
    let n = targets.len().max(1);
    (0..targets.len()).map(move |j| {
        let i = (j + round) % n;
        (i, &targets[i])
    })
}

/// The lowest and highest of `v` (the spread of the rounds' p99s).
fn spread(v: &[f64]) -> (f64, f64) {
    v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(*x), hi.max(*x)))
}

struct Target {
    name: &'static str,
    base: String,
    pids: Vec<u32>,
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    // Only the streaming time-to-first-token rounds (about a minute).
    let streams_only = std::env::args().any(|a| a == "--streams");
    // Only the added-latency rounds, e.g. many of them at one rate to tell a 0.05 ms p99
    // difference from the spread between rounds.
    let latency_only = std::env::args().any(|a| a == "--latency");
    let flag_value = |name: &str| {
        let args: Vec<String> = std::env::args().collect();
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map(|v| v.parse::<u32>().unwrap_or_else(|_| panic!("{name} wants a whole number, got {v:?}")))
    };
    let secs = if quick { 2.0 } else { 4.0 };
    // Added latency: short interleaved rounds, percentiles over every request of a target.
    let (lat_rounds, lat_secs) = if quick { (1, 2.0) } else { (flag_value("--rounds").unwrap_or(12).max(1) as usize, 1.0) };
    let lat_rates: Vec<u32> = flag_value("--rate").map_or(vec![1000, 5000], |r| vec![r.max(1)]);
    // nginx's own closed-loop rate moves by a fifth between rounds on a shared 2-core
    // host: more rounds give its median (and the ratio) a steadier footing.
    let throughput_rounds = if quick { 1 } else { 5 };
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut procs = Procs::default();
    let nginx = nginx_bin();
    let bin = env!("CARGO_BIN_EXE_tailcut");

    // The instant upstream.
    let up_port = free_port();
    match &nginx {
        Some(n) => {
            procs.0.push(start_nginx(n, dir.path(), "upstream", &upstream_conf(dir.path(), up_port)));
            wait_for_port(up_port);
        }
        None => {
            eprintln!("nginx is not installed (apt-get install nginx): no baseline; the upstream is tailcut sim-provider");
            procs.start_instant_upstream(bin, up_port);
        }
    }
    let upstream = format!("http://127.0.0.1:{up_port}");

    // The gateway, as users run it.
    let cfg = dir.path().join("gateway.toml");
    std::fs::write(&cfg, gateway_toml(&upstream, false)).expect("write gateway config");
    let cfg_auto = dir.path().join("gateway-auto.toml");
    std::fs::write(&cfg_auto, gateway_toml(&upstream, true)).expect("write gateway config");
    // A baseline from before `auth` existed refuses the key; without it, no keys meant no
    // authentication there, so it serves the same way.
    let cfg_before_auth = dir.path().join("gateway-before-auth.toml");
    std::fs::write(&cfg_before_auth, gateway_toml(&upstream, false).replace("auth = \"none\"\n", "")).expect("write gateway config");
    let (gw_base, gw_pid) = procs.start_gateway(bin, &cfg);
    let (auto_base, auto_pid) = procs.start_gateway(bin, &cfg_auto);
    let baseline = std::env::var("TAILCUT_BENCH_BASELINE").ok().map(|b| {
        let accepts_auth = Command::new(&b)
            .args(["config", "check", cfg.to_str().expect("utf-8 path")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        procs.start_gateway(&b, if accepts_auth { &cfg } else { &cfg_before_auth })
    });

    let mut targets = vec![
        Target { name: "direct", base: upstream.clone(), pids: vec![] },
        Target { name: "tailcut", base: gw_base, pids: vec![gw_pid] },
        Target { name: "tailcut-auto", base: auto_base, pids: vec![auto_pid] },
    ];
    if let Some(n) = &nginx {
        let px_port = free_port();
        let child = start_nginx(n, dir.path(), "proxy", &proxy_conf(dir.path(), px_port, up_port));
        let master = child.id();
        procs.0.push(child);
        wait_for_port(px_port);
        std::thread::sleep(Duration::from_millis(200));
        targets.push(Target { name: "nginx", base: format!("http://127.0.0.1:{px_port}"), pids: nginx_pids(master) });
    }
    if let Some((base, pid)) = baseline {
        targets.push(Target { name: "tailcut@base", base, pids: vec![pid] });
    }

    // The load generator: one worker thread (plus the pacer), so it leaves the other core
    // to the proxy under test.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a runtime");
    rt.block_on(async {
        if streams_only {
            return;
        }
        let http = client();
        for t in &targets {
            let url = format!("{}/v1/chat/completions", t.base);
            let (_, errors) = open_loop(&http, &url, CHAT_POST, 1000, 1.0).await;
            assert_eq!(errors, 0, "{} failed during warm-up", t.name);
        }

        println!(
            "added latency, open loop, {lat_rounds} interleaved round(s) of {lat_secs} s each; percentiles over all of a target's requests (p99 by round: lowest-highest)"
        );
        println!("target        rate    p50 ms    p99 ms   added p50   added p99   errors   p99 by round");
        for &rate in &lat_rates {
            let mut per: Vec<(Vec<f64>, Vec<f64>, usize)> = targets.iter().map(|_| (vec![], vec![], 0)).collect();
            for round in 0..lat_rounds {
                for (i, t) in rotated(&targets, round) {
                    let (mut lat, errors) = open_loop(&http, &format!("{}/v1/chat/completions", t.base), CHAT_POST, rate, lat_secs).await;
                    per[i].1.push(pct(&mut lat, 0.99));
                    per[i].0.extend(lat);
                    per[i].2 += errors;
                }
            }
            let (d50, d99) = (pct(&mut per[0].0, 0.5), pct(&mut per[0].0, 0.99));
            for (i, t) in targets.iter().enumerate() {
                let (p50, p99) = (pct(&mut per[i].0, 0.5), pct(&mut per[i].0, 0.99));
                let (lo, hi) = spread(&per[i].1);
                let (a50, a99) =
                    if i == 0 { ("-".to_string(), "-".to_string()) } else { (format!("{:+.3}", p50 - d50), format!("{:+.3}", p99 - d99)) };
                println!("{:12} {rate:5} {p50:9.3} {p99:9.3} {a50:>11} {a99:>11} {:8}   [{lo:.3}-{hi:.3}]", t.name, per[i].2);
            }
        }

        if latency_only {
            return;
        }
        let have_wrk = Command::new("wrk").arg("--version").output().is_ok();
        println!(
            "\nmax throughput, closed loop, 64 connections, {} ({throughput_rounds} interleaved round(s) of {secs} s; median)",
            if have_wrk { "wrk -t1" } else { "in-process client (wrk not installed)" }
        );
        let mut rps: Vec<Vec<f64>> = targets.iter().map(|_| vec![]).collect();
        let mut cpu_per_req: Vec<Vec<f64>> = targets.iter().map(|_| vec![]).collect();
        for round in 0..throughput_rounds {
            for (i, t) in rotated(&targets, round) {
                let url = format!("{}/v1/chat/completions", t.base);
                let before = cpu_seconds(&t.pids);
                let r = if have_wrk { wrk(&url, 64, secs, dir.path()) } else { None };
                let r = match r {
                    Some(r) => r,
                    None => closed_loop(&http, std::slice::from_ref(&url), CHAT_POST, 64, secs).await as f64 / secs,
                };
                let used = cpu_seconds(&t.pids) - before;
                rps[i].push(r);
                cpu_per_req[i].push(used / (r * secs) * 1e6);
            }
        }
        let tailcut = median(rps[1].clone());
        for (i, t) in targets.iter().enumerate() {
            let m = median(rps[i].clone());
            let rounds: Vec<String> = rps[i].iter().map(|v| format!("{v:.0}")).collect();
            let cpu =
                if t.pids.is_empty() { String::new() } else { format!("   proxy CPU {:.1} µs/request", median(cpu_per_req[i].clone())) };
            println!("{:12} {m:9.0} req/s{cpu}   [{}]", t.name, rounds.join(", "));
        }
        if let Some(i) = targets.iter().position(|t| t.name == "nginx") {
            println!("tailcut / nginx = {:.2}", tailcut / median(rps[i].clone()));
            println!("tailcut-auto / nginx = {:.2}", median(rps[2].clone()) / median(rps[i].clone()));
        }
        if let Some(i) = targets.iter().position(|t| t.name == "tailcut@base") {
            println!("tailcut / tailcut@base = {:.2}", tailcut / median(rps[i].clone()));
        }
    });

    // Sequential streams need no second thread: on one, the client's connection task and
    // the stream reading it never wake each other across threads. (With a worker thread,
    // those wake-ups made the direct target's median 0.07 ms instead of 0.01 and put
    // 0.1-0.6 ms p99s into every target's rounds.)
    if latency_only {
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    rt.block_on(async {
        let http = client();
        let n = if quick { 300 } else { 500 };
        println!(
            "\nstreaming: time to first content token, {n} sequential streams per round, {lat_rounds} interleaved round(s); percentiles over all of a target's streams (p99 by round: lowest-highest)"
        );
        let mut ttft: Vec<(Vec<f64>, Vec<f64>)> = targets.iter().map(|_| (vec![], vec![])).collect();
        for round in 0..lat_rounds {
            for (i, t) in rotated(&targets, round) {
                // The gateway routes model `s` to the SSE upstream; the others go to it by path.
                let url = if t.name.starts_with("tailcut") {
                    format!("{}/v1/chat/completions", t.base)
                } else {
                    format!("{}/sse/v1/chat/completions", t.base)
                };
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    if let Some(ms) = first_token(&http, &url).await {
                        v.push(ms);
                    }
                }
                assert!(v.len() * 10 >= n * 9, "{}: only {} of {n} streams produced a token", t.name, v.len());
                ttft[i].1.push(pct(&mut v, 0.99));
                ttft[i].0.extend(v);
            }
        }
        let (d50, d99) = (pct(&mut ttft[0].0, 0.5), pct(&mut ttft[0].0, 0.99));
        for (i, t) in targets.iter().enumerate() {
            let (p50, p99) = (pct(&mut ttft[i].0, 0.5), pct(&mut ttft[i].0, 0.99));
            let added = if i == 0 { String::new() } else { format!("   added p50 {:+.3} ms, added p99 {:+.3} ms", p50 - d50, p99 - d99) };
            let (lo, hi) = spread(&ttft[i].1);
            println!("{:12} p50 {p50:.3} ms  p99 {p99:.3} ms{added}   p99 by round [{lo:.3}-{hi:.3}]", t.name);
        }
    });
    drop(procs);
}
