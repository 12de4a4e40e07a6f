//! Per-key budgets are durable: a key's spend is in the gateway's ledger file, charged in
//! the same transaction as the global spend, so neither a `SIGHUP` reload nor a restart
//! (a new gateway over the same files) hands a spent key a fresh budget.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use std::path::Path;
use std::sync::Arc;
use tailcut_gateway::tenancy::sha256_hex;
use tailcut_gateway::AppState;
use tailcut_mockproviders::{Behaviour, Flavor, MockServer};

/// One key with a $0.025 budget; each request is one submission projected at
/// $0.001/s × 10 s = $0.01, so two fit and the third is refused.
fn config(upstream: &str, ledger: &Path) -> String {
    format!(
        r#"
[budget]
ledger = "{}"
[gateway]
store = ":memory:"
keys = [{{ name = "team-a", sha256 = "{}", budget_usd = 0.025 }}]
[providers.up]
adapter = "openai"
base_url = "{upstream}/v1"
rate_usd_per_s = 0.001
expected_run_s = 10
{}"#,
        ledger.display(),
        sha256_hex("secret-a"),
        tailcut_testkit::config::single_chat_route("one", "up")
    )
}

async fn serve(state: Arc<AppState>) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(tailcut_gateway::serve(l, state, futures::future::pending()));
    format!("http://{addr}/v1/chat/completions")
}

async fn ask(http: &reqwest::Client, url: &str) -> (u16, String) {
    let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    let r = http.post(url).bearer_auth("secret-a").json(&body).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_spend_survives_reload_and_restart() {
    let up = MockServer::start(Flavor::OpenAi, Behaviour::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (ledger, file) = (dir.path().join("ledger.sqlite"), dir.path().join("gateway.toml"));
    std::fs::write(&file, config(&up.url(), &ledger)).unwrap();
    let http = reqwest::Client::new();

    let state = AppState::new(tailcut_config::Config::load(&file).unwrap(), Some(file.clone())).unwrap();
    let url = serve(state.clone()).await;
    for _ in 0..2 {
        let (status, body) = ask(&http, &url).await;
        assert_eq!(status, 200, "{body}");
    }
    // Reload (what SIGHUP does): the key's $0.02 is still counted, so $0.01 more is refused.
    state.reload().unwrap();
    let (status, body) = ask(&http, &url).await;
    assert_eq!(status, 429, "a reload handed the key a fresh budget: {body}");
    assert!(body.contains("team-a"), "the refusal names the key's budget: {body}");

    // Restart: a new gateway over the same files.
    let restarted = AppState::new(tailcut_config::Config::load(&file).unwrap(), Some(file.clone())).unwrap();
    let url = serve(restarted).await;
    let (status, body) = ask(&http, &url).await;
    assert_eq!(status, 429, "a restart handed the key a fresh budget: {body}");

    // The spend is in the ledger file, under the key's name, with the global spend.
    let l = tailcut_state::ledger::SqliteLedger::open(&ledger, tailcut_core::ledger::BudgetLimits::UNLIMITED).unwrap();
    use tailcut_core::ledger::BudgetGate;
    assert_eq!(l.account_spent("team-a").unwrap(), tailcut_core::MicroUsd(20_000));
    assert_eq!(l.summary().unwrap().total, tailcut_core::MicroUsd(20_000));
}

/// A key's streamed requests and its jobs race with its account in their scope too:
/// each launch is charged to it with the global spend, and a spent key's next stream is
/// refused with its budget named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_streams_and_jobs_are_charged_to_its_account() {
    let up = MockServer::start(Flavor::OpenAi, Behaviour::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (ledger, file) = (dir.path().join("ledger.sqlite"), dir.path().join("gateway.toml"));
    let jobs_route = "[routes.jobs]\nkind = \"jobs\"\npolicy = \"one\"\n";
    std::fs::write(&file, format!("{}{jobs_route}", config(&up.url(), &ledger))).unwrap();
    let http = reqwest::Client::new();
    let state = AppState::new(tailcut_config::Config::load(&file).unwrap(), Some(file.clone())).unwrap();
    let url = serve(state).await;
    let base = url.trim_end_matches("/v1/chat/completions");
    let messages = serde_json::json!([{"role": "user", "content": "hi"}]);
    let stream = || async {
        let body = serde_json::json!({"model": "m", "messages": messages, "stream": true});
        let r = http.post(&url).bearer_auth("secret-a").json(&body).send().await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    };

    let (status, body) = stream().await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("[DONE]"), "{body}");
    let job = serde_json::json!({"route": "jobs", "input": {"model": "m", "messages": messages}});
    let r = http.post(format!("{base}/v1/jobs?wait=30")).bearer_auth("secret-a").json(&job).send().await.unwrap();
    let row: serde_json::Value = r.json().await.unwrap();
    assert_eq!(row["state"], "succeeded", "{row}");

    let l = tailcut_state::ledger::SqliteLedger::open(&ledger, tailcut_core::ledger::BudgetLimits::UNLIMITED).unwrap();
    use tailcut_core::ledger::BudgetGate;
    assert_eq!(l.account_spent("team-a").unwrap(), tailcut_core::MicroUsd(20_000), "the stream's and the job's launches");
    assert_eq!(l.summary().unwrap().total, tailcut_core::MicroUsd(20_000));
    let (status, body) = stream().await;
    assert_eq!(status, 429, "a spent key's stream was raced: {body}");
    assert!(body.contains("team-a"), "the refusal names the key's budget: {body}");
}
