#![cfg(feature = "postgres")]
//! The gateway on PostgreSQL state (`[state] url`), against a real server
//! (tailcut-testkit's `PgServer`; skipped with a note where PostgreSQL is not installed,
//! a failure under `TAILCUT_REQUIRE_POSTGRES=1`): a job-store call waiting on the
//! database never blocks the thread that serves other requests.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tailcut_core::MicroUsd;
use tailcut_state::pg::{PgSettings, PgState};
use tailcut_testkit::config::SIM_PROVIDERS;
use tailcut_testkit::postgres::PgServer;

const KEY: &str = "alice-secret-key";

/// A gateway on `url` with one jobs route on the instant simulated provider.
fn config(url: &str) -> String {
    format!(
        r#"[budget]
soft_stop_usd = 100
hard_stop_usd = 100
[state]
url = "{url}"
[gateway]
keys = [{{ name = "alice", sha256 = "{}" }}]
{SIM_PROVIDERS}
[policies.fast]
kind = "single"
provider = "fastsim"
[routes.jobs]
kind = "jobs"
policy = "fast"
"#,
        tailcut_gateway::tenancy::sha256_hex(KEY)
    )
}

/// The whole gateway on this test's one thread (a current-thread runtime): a call that
/// blocked the thread would hold up every other request.
#[tokio::test]
async fn a_job_store_call_waiting_on_the_database_does_not_block_other_requests() {
    let Some(pg) = PgServer::start() else { return };
    let url = pg.database("nonblocking");
    let state = tailcut_gateway::AppState::new(tailcut_config::Config::parse(&config(&url), "test").unwrap(), None).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(tailcut_gateway::serve(listener, state, futures::future::pending()));
    let http = reqwest::Client::new();

    // Another session holds the jobs table for 4 s: inserting a job row waits that long.
    let settings = PgSettings {
        url: url.clone(),
        pool_size: 2,
        lease_ttl: Duration::from_secs(30),
        lease_slice: MicroUsd(1_000),
        write_behind: false,
    };
    let locker = PgState::connect(settings).unwrap();
    let (locked_tx, locked) = tokio::sync::oneshot::channel();
    let st: Arc<PgState> = locker.clone();
    locker.spawn(async move {
        let Ok(c) = st.client().await else { return };
        if c.batch_execute("BEGIN; LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE").await.is_ok() {
            let _ = locked_tx.send(());
            tokio::time::sleep(Duration::from_secs(4)).await;
            let _ = c.batch_execute("COMMIT").await;
        }
    });
    locked.await.expect("the jobs table is locked");

    let post = tokio::spawn({
        let (http, base) = (http.clone(), base.clone());
        async move {
            let r = http.post(format!("{base}/v1/jobs")).bearer_auth(KEY).json(&json!({"input": {}})).send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = Instant::now();
    let health = http.get(format!("{base}/healthz")).send().await.unwrap();
    let took = asked.elapsed();
    assert_eq!(health.status().as_u16(), 200);
    assert!(!post.is_finished(), "the job's insert is still waiting for the lock");
    assert!(took < Duration::from_secs(2), "/healthz took {took:?} while a job insert waited on the database");

    // Once the lock is released, the job is created and runs.
    let (status, created) = post.await.unwrap();
    assert_eq!(status, 202, "{created}");
    let id = created["id"].as_str().unwrap();
    let row: Value = http.get(format!("{base}/v1/jobs/{id}?wait=10")).bearer_auth(KEY).send().await.unwrap().json().await.unwrap();
    assert_eq!(row["state"], "succeeded", "{row}");
}
