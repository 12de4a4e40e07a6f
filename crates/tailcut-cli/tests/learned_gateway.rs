//! A learned route through the real `tailcut serve`: the live model is saved to the
//! ledger's SQLite file, survives `kill -9`, and the first request after the restart is
//! decided with it (its trace shows the model's samples); `tailcut model show
//! --from-gateway` prints the live model with an admin key, and refuses without one.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use std::process::Command;
use std::time::{Duration, Instant};
use tailcut_mockproviders::{Behaviour, Flavor, MockServer};
use tailcut_testkit::cli::serve;
use tailcut_testkit::config::openai_provider;

const KEY: &str = "learned-admin-key";

/// The trace record of request `id`, once written (after its losers settle).
async fn trace_of(path: &std::path::Path, id: &str) -> serde_json::Value {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let found = text.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).find(|t| t["request_id"] == id);
        match found {
            Some(t) => return t,
            None if Instant::now() < until => tokio::time::sleep(Duration::from_millis(50)).await,
            None => panic!("no trace of {id} in {}", path.display()),
        }
    }
}

/// The saved model of `chat/chat` in the ledger file, if a save happened.
fn saved_updates(ledger: &std::path::Path) -> Option<u64> {
    let conn = rusqlite::Connection::open(ledger).ok()?;
    let json: String = conn.query_row("SELECT model_json FROM learned_models WHERE route = 'chat/chat'", [], |r| r.get(0)).ok()?;
    serde_json::from_str::<serde_json::Value>(&json).ok()?["updates"].as_u64()
}

async fn chat(http: &reqwest::Client, url: &str, id: &str) {
    let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    let r = http.post(format!("{url}/v1/chat/completions")).bearer_auth(KEY).header("x-request-id", id).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    let _ = r.bytes().await;
}

/// A gateway whose one route is a learned `auto` over `slow` and `fast`; `state` is the
/// config's state section (a `[budget] ledger` file, or `[state] url`).
fn learned_config(path: &std::path::Path, state: &str, trace: &std::path::Path, slow: &MockServer, fast: &MockServer) {
    let priced = |name: &str, url: String| openai_provider(name, &url).replace("rate_usd_per_s = 0.0", "rate_usd_per_s = 0.001");
    std::fs::write(
        path,
        format!(
            r#"{}
[trace]
path = "{}"
[gateway]
{}keys = [{{ name = "ops", sha256 = "{}", admin = true }}]
{}{}[policies.auto]
kind = "auto"
providers = ["slow", "fast"]
deadline_ms = 100
target_miss = 0.01
extra_load_percent = 100
[routes.chat]
kind = "openai"
models = ["m"]
policy = "auto"
"#,
            state,
            trace.display(),
            // The job store lives in the PostgreSQL state when there is one.
            if state.contains("[state]") { "" } else { "store = \":memory:\"\n" },
            tailcut_gateway::tenancy::sha256_hex(KEY),
            priced("slow", format!("{}/v1", slow.url())),
            priced("fast", format!("{}/v1", fast.url())),
        ),
    )
    .unwrap();
}

/// Waits until `saved()` reports a model of at least `updates` observations.
async fn wait_for_save(saved: impl Fn() -> Option<u64>, updates: u64) {
    let until = Instant::now() + Duration::from_secs(20);
    while Instant::now() < until {
        if saved().is_some_and(|u| u >= updates) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no save of the learned model with {updates} updates");
}

/// The first request a gateway serves is decided with a warm model: every provider has
/// samples, no exploration, `fast` first.
fn assert_warm_first_decision(first: &serde_json::Value) {
    let beliefs = first["learned"]["model"].as_array().unwrap();
    assert!(beliefs.iter().all(|b| b["samples"].as_u64().unwrap() >= 5), "decided with the warm model: {first}");
    assert!(!first["learned"]["reason"].as_str().unwrap().contains("exploring"), "{first}");
    assert_eq!(first["attempts"][0]["provider"], "fast", "the learned primary: {first}");
    // The saved model carried when `fast` last served, so its idle gap (and with it
    // P(warm)) is known at once, not only after it serves again.
    let fast = beliefs.iter().find(|b| b["provider"] == "fast").unwrap();
    assert!(fast["idle_gap_s"].as_f64().is_some_and(|g| g >= 0.0), "the restored idle gap: {first}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_learned_model_survives_kill_9_and_decides_the_first_request_after_restart() {
    let quick = |ms| Behaviour { queue: Duration::ZERO, run: Duration::from_millis(ms), ..Behaviour::default() };
    let slow = MockServer::start(Flavor::OpenAi, quick(300)).await.unwrap();
    let fast = MockServer::start(Flavor::OpenAi, quick(5)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (ledger, trace, cfg) = (dir.path().join("ledger.sqlite"), dir.path().join("trace.jsonl"), dir.path().join("gw.toml"));
    learned_config(&cfg, &format!("[budget]\nledger = \"{}\"", ledger.display()), &trace, &slow, &fast);
    let bin = env!("CARGO_BIN_EXE_tailcut");
    let http = reqwest::Client::new();
    let (mut gw, url) = serve(bin, &cfg, &["--workers", "1"]);
    // A cold model: the first decision says so.
    chat(&http, &url, "first-ever").await;
    let cold = trace_of(&trace, "first-ever").await;
    assert!(cold["learned"]["model"].as_array().unwrap().iter().all(|b| b["samples"] == 0), "{cold}");
    for i in 0..15 {
        chat(&http, &url, &format!("warmup-{i}")).await;
    }
    // The saver writes the changed model within about a second.
    wait_for_save(|| saved_updates(&ledger), 16).await;
    // The live table, with the admin key; refused without one (exit 2, naming the status).
    let out = Command::new(bin).args(["model", "show", "--from-gateway", &url, "--key", KEY]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("chat/chat (auto:slow,fast@100ms/miss1%)") && text.contains("fast"), "{text}");
    let out = Command::new(bin).args(["model", "show", "--from-gateway", &url]).env_remove("TAILCUT_ADMIN_KEY").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("401"), "{}", String::from_utf8_lossy(&out.stderr));

    // kill -9 (SIGKILL, by pid): no drain, no final save.
    gw.0.kill().unwrap();
    gw.0.wait().unwrap();
    let (_gw, url) = serve(bin, &cfg, &["--workers", "1"]);
    chat(&http, &url, "after-restart").await;
    let first = trace_of(&trace, "after-restart").await;
    // Shown with `--nocapture`: the decision the restarted gateway made first.
    println!("first decision after the restart: {}", first["learned"]);
    assert_warm_first_decision(&first);
}

/// On the shared PostgreSQL state, the learned model is saved there: a second replica
/// started while the first serves decides its first request with what the first learned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_a_new_replica_decides_with_the_model_another_learned() {
    let Some(pg) = tailcut_testkit::postgres::PgServer::start() else { return };
    let quick = |ms| Behaviour { queue: Duration::ZERO, run: Duration::from_millis(ms), ..Behaviour::default() };
    let slow = MockServer::start(Flavor::OpenAi, quick(300)).await.unwrap();
    let fast = MockServer::start(Flavor::OpenAi, quick(5)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (trace, cfg) = (dir.path().join("trace.jsonl"), dir.path().join("gw.toml"));
    learned_config(&cfg, &format!("[state]\nurl = \"{}\"", pg.url()), &trace, &slow, &fast);
    let bin = env!("CARGO_BIN_EXE_tailcut");
    let http = reqwest::Client::new();
    let (_a, url_a) = serve(bin, &cfg, &["--workers", "1"]);
    for i in 0..16 {
        chat(&http, &url_a, &format!("a-{i}")).await;
    }
    let saved = || {
        let json = pg.query("SELECT model_json FROM learned_models WHERE route = 'chat/chat'");
        serde_json::from_str::<serde_json::Value>(&json).ok()?["updates"].as_u64()
    };
    wait_for_save(saved, 16).await;
    let (_b, url_b) = serve(bin, &cfg, &["--workers", "1"]);
    chat(&http, &url_b, "b-first").await;
    let first = trace_of(&trace, "b-first").await;
    println!("the second replica's first decision: {}", first["learned"]);
    assert_warm_first_decision(&first);
}
