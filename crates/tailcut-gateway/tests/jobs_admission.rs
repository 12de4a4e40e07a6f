//! Jobs under admission: a running job holds an in-flight slot (`max_in_flight`, counted
//! in `tailcut_in_flight`) until it ends, and one of its key's `max_running_jobs`; past
//! either, `POST /v1/jobs` is refused (503 or 429) with `Retry-After` and a JSON body. So
//! the upstream never sees more than `max_in_flight × race.max_live` submissions at once.

// Tests spawn their own servers and clients freely: the tracker rule is for the gateway.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

mod common;

use std::sync::Once;
use std::time::Duration;
use tailcut_gateway::tenancy::sha256_hex;
use tailcut_mockproviders::{Behaviour, Flavor, MockServer};

const ENV: &str = "TAILCUT_TEST_JOBS_KEY";

/// The providers' key in the environment, set once before any gateway reads it.
fn key_in_env() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| std::env::set_var(ENV, "jobs-test-key-0123456789"));
}

/// A jobs route `jobs` hedging RunPod provider `a` with `b` after 10 ms, both on the
/// mock `upstream` (so it sees every attempt), at most `race.max_live = 2` live; with
/// `gateway` lines added to `[gateway]`.
fn config(upstream: &str, gateway: &str) -> String {
    let provider = |name: &str| {
        format!(
            "[providers.{name}]\nadapter = \"runpod\"\nbase_url = \"{upstream}/v2\"\nendpoint_id = \"ep\"\napi_key_env = \"{ENV}\"\nrate_usd_per_s = 0.0\npoll_interval_ms = 5\ncancel_window_ms = 2000\n"
        )
    };
    format!(
        "[race]\nmax_live = 2\n[budget]\nledger = \":memory:\"\n[gateway]\nstore = \":memory:\"\n{gateway}\n{}{}\
         [policies.hedged]\nkind = \"hedge\"\nprimary = \"a\"\nhedge = \"b\"\ndelay_ms = 10\n[routes.jobs]\nkind = \"jobs\"\npolicy = \"hedged\"\n",
        provider("a"),
        provider("b")
    )
}

async fn gateway(toml: &str) -> String {
    key_in_env();
    common::serve_config(toml).await.trim_end_matches("/v1/chat/completions").to_string()
}

fn in_flight(metrics: &str) -> usize {
    metrics.lines().find_map(|l| l.strip_prefix("tailcut_in_flight ")).and_then(|v| v.parse().ok()).unwrap()
}

/// With `max_in_flight = 2` and `race.max_live = 2`, 300 job submissions at once: every
/// one is started (202) or refused (503 with `Retry-After` and a JSON error), and the
/// upstream never has more than 2 × 2 jobs queued or running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_count_against_max_in_flight_so_the_upstream_never_sees_more_than_the_slots_allow() {
    let up = MockServer::start(Flavor::RunPod, Behaviour::timed(Duration::from_millis(20), Duration::from_millis(20))).await.unwrap();
    // Every job is hedged (the hedge-load cap lifted): two attempts each.
    let lines = "auth = \"none\"\nmax_in_flight = 2\nadmission_wait_ms = 1000\nhedge_budget_percent = 1000";
    let base = gateway(&config(&up.url(), lines)).await;
    let http = reqwest::Client::new();
    // `tailcut_in_flight`, read every 5 ms while the jobs run.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = tokio::spawn({
        let (http, base, done) = (http.clone(), base.clone(), done.clone());
        async move {
            let mut peak = 0;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                let m = http.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
                peak = peak.max(in_flight(&m));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            peak
        }
    });
    let tasks: Vec<_> = (0..300)
        .map(|_| {
            let (http, base) = (http.clone(), base.clone());
            tokio::spawn(async move {
                let r = http.post(format!("{base}/v1/jobs")).json(&serde_json::json!({"route": "jobs", "input": {}})).send().await.unwrap();
                let (status, retry) = (r.status().as_u16(), r.headers().get("retry-after").map(|v| v.to_str().unwrap().to_string()));
                (status, retry, r.json::<serde_json::Value>().await.unwrap())
            })
        })
        .collect();
    let mut started = Vec::new();
    let mut refused = 0;
    for t in tasks {
        let (status, retry, body) = t.await.unwrap();
        match status {
            202 => started.push(body["id"].as_str().unwrap().to_string()),
            503 => {
                refused += 1;
                assert_eq!(retry.as_deref(), Some("1"), "{body}");
                assert_eq!(body["error"]["code"], "unavailable", "{body}");
            }
            other => panic!("{other}: {body}"),
        }
    }
    // Every started job ends.
    for id in &started {
        let row: serde_json::Value = http.get(format!("{base}/v1/jobs/{id}?wait=30")).send().await.unwrap().json().await.unwrap();
        assert_eq!(row["state"], "succeeded", "{row}");
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let peak_in_flight = sampler.await.unwrap();
    eprintln!(
        "300 submissions: {} started, {refused} refused (503); upstream: {} submits, at most {} live at once; tailcut_in_flight at most {peak_in_flight}",
        started.len(),
        up.submits(),
        up.max_live()
    );
    assert!(started.len() >= 2 && started.len() + refused == 300, "{} started, {refused} refused", started.len());
    assert!((1..=2).contains(&peak_in_flight), "tailcut_in_flight read {peak_in_flight} at most");
    assert!(up.max_live() <= 4, "the upstream had {} jobs live at once (at most max_in_flight × max_live = 4)", up.max_live());
    assert!(up.submits() >= 2 * started.len() as u32 - 2, "the jobs were hedged: {} submits for {} jobs", up.submits(), started.len());
}

/// A running job holds its slot: `tailcut_in_flight` counts it, the next job past
/// `max_in_flight` is a 503, and a key at its `max_running_jobs` gets a 429 (both with
/// `Retry-After`) while another key still starts jobs; a job's end frees both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_jobs_hold_their_slots_and_a_key_is_capped_at_its_max_running_jobs() {
    let up = MockServer::start(Flavor::RunPod, Behaviour::timed(Duration::from_secs(30), Duration::from_millis(10))).await.unwrap();
    let keys = format!(
        "keys = [{{ name = \"alice\", sha256 = \"{}\", max_running_jobs = 1 }}, {{ name = \"bob\", sha256 = \"{}\" }}]\n\
         max_running_jobs_per_key = 5\nmax_in_flight = 2\nadmission_wait_ms = 0",
        sha256_hex("alice-key"),
        sha256_hex("bob-key")
    );
    let base = gateway(&config(&up.url(), &keys)).await;
    let http = reqwest::Client::new();
    let post = |key: &'static str| {
        let (http, base) = (http.clone(), base.clone());
        async move {
            let r = http.post(format!("{base}/v1/jobs")).bearer_auth(key).json(&serde_json::json!({"input": {}})).send().await.unwrap();
            let (status, retry) = (r.status().as_u16(), r.headers().get("retry-after").map(|v| v.to_str().unwrap().to_string()));
            (status, retry, r.json::<serde_json::Value>().await.unwrap())
        }
    };
    let (s, _, first) = post("alice-key").await;
    assert_eq!(s, 202, "{first}");
    let (s, retry, body) = post("alice-key").await;
    assert_eq!((s, retry.as_deref()), (429, Some("1")), "alice is at her max_running_jobs: {body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("max_running_jobs"), "{body}");
    let (s, _, second) = post("bob-key").await;
    assert_eq!(s, 202, "bob has his own cap: {second}");
    let m = http.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
    assert_eq!(in_flight(&m), 2, "both running jobs hold a slot:\n{m}");
    assert!(m.contains("tailcut_admission_total{outcome=\"key_jobs_cap\"} 1"), "{m}");
    let (s, retry, body) = post("bob-key").await;
    assert_eq!((s, retry.as_deref()), (503, Some("1")), "max_in_flight is reached: {body}");
    assert_eq!(body["error"]["code"], "unavailable", "{body}");
    // Alice's job ends (cancelled): her slot and the in-flight slot are free again.
    let id = first["id"].as_str().unwrap();
    let row: serde_json::Value =
        http.delete(format!("{base}/v1/jobs/{id}")).bearer_auth("alice-key").send().await.unwrap().json().await.unwrap();
    assert_eq!(row["state"], "cancelled", "{row}");
    let mut again = (0, None, serde_json::Value::Null);
    for _ in 0..100 {
        again = post("alice-key").await;
        if again.0 == 202 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(again.0, 202, "{}", again.2);
}

#[test]
fn max_running_jobs_is_range_checked() {
    for (line, key) in [
        ("max_running_jobs_per_key = 0", "gateway.max_running_jobs_per_key"),
        ("max_running_jobs_per_key = 20000000", "gateway.max_running_jobs_per_key"),
        ("keys = [{ name = \"a\", sha256 = \"0000000000000000000000000000000000000000000000000000000000000000\", max_running_jobs = -1 }]", "gateway.keys[0].max_running_jobs"),
    ] {
        let e = tailcut_config::Config::parse(&config("http://127.0.0.1:9", line), "test.toml").unwrap_err().to_string();
        assert!(e.contains(key) && e.contains("test.toml"), "{line}: {e}");
    }
}
