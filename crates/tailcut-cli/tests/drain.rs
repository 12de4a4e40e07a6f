//! Issue 29's must-show "Drain": SIGTERM to a real `tailcut serve` with 200 hedged races in
//! flight on the jobs API and 200 on the OpenAI proxy, against a mock provider (a local
//! HTTP server in this test) whose job cancels take 1.5 s and that counts its running
//! jobs. After the drain every loser has a receipt in the trace, and the mock has no job
//! and no request still running. Without the drain's wait on the task tracker
//! (`serving::drain_in_flight_races`) the process exits with the cancels in flight: the
//! receipts are missing and the mock still runs the jobs.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use axum::extract::{Path, State};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tailcut_testkit::cli::serve;

/// Races per API.
const RACES: usize = 200;
/// How long the mock takes to carry out a job cancel.
const SLOW_CANCEL: Duration = Duration::from_millis(1500);

/// The mock provider: a JSON job API per prefix (`/ja`, `/jb`) whose jobs run until
/// cancelled, and an OpenAI chat endpoint per prefix (`/a`, `/b`) answering after a
/// per-prefix delay.
#[derive(Default)]
struct Mock {
    /// Job id → cancelled.
    jobs: Mutex<HashMap<String, bool>>,
    next: AtomicUsize,
    /// Jobs submitted and not yet cancelled.
    running_jobs: AtomicUsize,
    /// Chat requests being answered.
    open_chats: AtomicUsize,
}

type St = State<Arc<Mock>>;

async fn submit(State(m): St) -> Json<Value> {
    let id = format!("j{}", m.next.fetch_add(1, Ordering::SeqCst));
    m.jobs.lock().unwrap().insert(id.clone(), false);
    m.running_jobs.fetch_add(1, Ordering::SeqCst);
    Json(json!({"id": id}))
}

async fn status(State(m): St, Path((_, id)): Path<(String, String)>) -> Json<Value> {
    let cancelled = m.jobs.lock().unwrap().get(&id).copied().unwrap_or(false);
    Json(json!({"id": id, "status": if cancelled { "CANCELLED" } else { "RUNNING" }}))
}

/// Slow: the job stops 1.5 s after the cancel arrives (if the caller hangs up first, the
/// handler is dropped and the job runs on).
async fn cancel(State(m): St, Path((_, id)): Path<(String, String)>) -> Json<Value> {
    tokio::time::sleep(SLOW_CANCEL).await;
    if m.jobs.lock().unwrap().insert(id.clone(), true) == Some(false) {
        m.running_jobs.fetch_sub(1, Ordering::SeqCst);
    }
    Json(json!({"id": id, "status": "CANCELLED"}))
}

/// Counts an open chat request until its handler ends or is dropped.
struct Open(Arc<Mock>);
impl Drop for Open {
    fn drop(&mut self) {
        self.0.open_chats.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn chat(State(m): St, Path(prefix): Path<String>) -> Json<Value> {
    m.open_chats.fetch_add(1, Ordering::SeqCst);
    let _open = Open(m.clone());
    // `a` (the primary) is slow; `b` (the hedge) wins.
    tokio::time::sleep(Duration::from_millis(if prefix == "a" { 6000 } else { 1200 })).await;
    Json(json!({
        "id": "c", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    }))
}

async fn start_mock() -> (Arc<Mock>, String) {
    let mock = Arc::new(Mock::default());
    let app = Router::new()
        .route("/{p}/jobs", post(submit))
        .route("/{p}/jobs/{id}", axum::routing::get(status))
        .route("/{p}/jobs/{id}/cancel", post(cancel))
        .route("/{p}/v1/chat/completions", post(chat))
        .with_state(mock.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (mock, url)
}

fn job_provider(name: &str, base: &str) -> String {
    format!(
        "[providers.{name}]\nadapter = \"http\"\nrate_usd_per_s = 0.0\npoll_interval_ms = 400\ncancel_window_ms = 10000\n\
         [providers.{name}.http]\nsubmit = {{ url = \"{base}/jobs\" }}\nstatus = {{ url = \"{base}/jobs/{{job_id}}\" }}\n\
         cancel = {{ url = \"{base}/jobs/{{job_id}}/cancel\" }}\n"
    )
}

/// Polls `f` every 50 ms until it holds, for at most `secs`; returns whether it did.
async fn eventually(secs: u64, f: impl Fn() -> bool) -> bool {
    let until = tokio::time::Instant::now() + Duration::from_secs(secs);
    while tokio::time::Instant::now() < until {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    f()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_hedged_races_in_flight_waits_for_every_cancel_and_receipt() {
    let (mock, up) = start_mock().await;
    let dir = tempfile::tempdir().unwrap();
    let (cfg, trace) = (dir.path().join("gw.toml"), dir.path().join("trace.jsonl"));
    let text = format!(
        "[budget]\nledger = \":memory:\"\n[trace]\npath = \"{}\"\n[gateway]\nauth = \"none\"\nstore = \":memory:\"\n\
         hedge_budget_percent = 1000\nhedge_budget_burst = 100000\ndrain_timeout_s = 30\n\
         {}{}{}{}\
         [policies.jobs]\nkind = \"hedge\"\nprimary = \"ja\"\nhedge = \"jb\"\ndelay_ms = 100\n\
         [routes.jobs]\nkind = \"jobs\"\npolicy = \"jobs\"\n\
         {}",
        trace.display(),
        job_provider("ja", &format!("{up}/ja")),
        job_provider("jb", &format!("{up}/jb")),
        tailcut_testkit::config::openai_provider("a", &format!("{up}/a/v1")),
        tailcut_testkit::config::openai_provider("b", &format!("{up}/b/v1")),
        tailcut_testkit::config::hedged_chat_route("chat", "a", "b", 100, ""),
    );
    std::fs::write(&cfg, text).unwrap();
    let (mut gw, base) = serve(env!("CARGO_BIN_EXE_tailcut"), &cfg, &["--workers", "2"]);
    let pid = gw.0.id().to_string();
    let http = reqwest::Client::new();

    // 200 jobs, each hedged: 400 provider jobs running until cancelled.
    let submits: Vec<_> = (0..RACES)
        .map(|i| {
            let (http, url) = (http.clone(), format!("{base}/v1/jobs"));
            tokio::spawn(async move { http.post(url).json(&json!({"route": "jobs", "input": {"i": i}})).send().await.unwrap().status() })
        })
        .collect();
    for s in submits {
        assert_eq!(s.await.unwrap().as_u16(), 202);
    }
    assert!(
        eventually(20, || mock.running_jobs.load(Ordering::SeqCst) == 2 * RACES).await,
        "the hedges did not launch: {} provider jobs running",
        mock.running_jobs.load(Ordering::SeqCst)
    );
    // 200 proxied requests, each hedged: 400 upstream requests open.
    let chats: Vec<_> = (0..RACES)
        .map(|_| {
            let (http, url) = (http.clone(), format!("{base}/v1/chat/completions"));
            tokio::spawn(async move {
                let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
                http.post(url).json(&body).send().await.map(|r| r.status().as_u16()).map_err(|e| e.to_string())
            })
        })
        .collect();
    assert!(
        eventually(20, || mock.open_chats.load(Ordering::SeqCst) == 2 * RACES).await,
        "the proxied hedges did not launch: {} upstream requests open",
        mock.open_chats.load(Ordering::SeqCst)
    );

    let signalled = tokio::time::Instant::now();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let exited = loop {
        if let Some(s) = gw.0.try_wait().unwrap() {
            break s;
        }
        assert!(signalled.elapsed() < Duration::from_secs(40), "the gateway did not stop within 40 s of SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let drained_in = signalled.elapsed();
    assert!(exited.success(), "{exited}");
    // The proxied requests in flight at SIGTERM were answered (by the hedge).
    for c in chats {
        assert_eq!(c.await.unwrap(), Ok(200));
    }

    // Every loser of every race has a receipt in the trace.
    let text = std::fs::read_to_string(&trace).unwrap();
    let records: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let (mut losers, mut missing) = (0, Vec::new());
    for r in &records {
        let receipted: HashSet<(String, String)> = r["receipts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| (x["provider"].as_str().unwrap_or("").to_string(), x["job_id"].to_string()))
            .collect();
        for a in r["attempts"].as_array().unwrap() {
            if Some(a["provider"].as_str().unwrap()) == r["winner"].as_str() {
                continue;
            }
            losers += 1;
            if !receipted.contains(&(a["provider"].as_str().unwrap().to_string(), a["job_id"].to_string())) {
                missing.push(format!("{} {} {}", r["request_id"], a["provider"], a["job_id"]));
            }
        }
    }
    let jobs = records.iter().filter(|r| r["winner"].is_null()).count();
    let proxied = records.iter().filter(|r| r["winner"] == "b").count();
    assert_eq!(
        (jobs, proxied),
        (RACES, RACES),
        "trace records after a drain of {drained_in:?}: {jobs} jobs, {proxied} proxied (of {})",
        records.len()
    );
    assert_eq!(losers, 3 * RACES, "both attempts of each job and the primary of each proxied request lost");
    assert!(
        missing.is_empty(),
        "{} of {losers} losers have no receipt in the trace, e.g. {:?}",
        missing.len(),
        &missing[..3.min(missing.len())]
    );
    // Job receipts saw the job end (CANCELLED), none leaked.
    let leaked: usize = records.iter().flat_map(|r| r["receipts"].as_array().unwrap()).filter(|x| x["leaked"] == true).count();
    assert_eq!(leaked, 0);

    // Nothing still runs at the provider.
    assert_eq!(mock.running_jobs.load(Ordering::SeqCst), 0, "provider jobs still running after the drain");
    assert!(
        eventually(2, || mock.open_chats.load(Ordering::SeqCst) == 0).await,
        "upstream requests still open after the drain: {}",
        mock.open_chats.load(Ordering::SeqCst)
    );
    assert!(drained_in >= SLOW_CANCEL, "the drain waited for the slow cancels ({drained_in:?})");
}
