//! `tailcut run` when no attempt succeeds: against a real local server that answers
//! 401 and a closed port, the command exits 1 and names each attempt's cause on stderr;
//! `--json` still prints the record.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;

/// A server answering every request with 401 and a JSON error body, until the test ends.
fn unauthorized_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 8192];
            let _ = stream.read(&mut buf);
            let body = r#"{"error":"invalid api key"}"#;
            let _ = write!(
                stream,
                "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// A port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn config(dir: &std::path::Path) -> std::path::PathBuf {
    let (denied, closed) = (unauthorized_server(), closed_port());
    let text = format!(
        r#"
[race]
cap_s = 5
[budget]
ledger = ":memory:"
[providers.denied]
adapter = "runpod"
base_url = "http://127.0.0.1:{denied}/v2"
endpoint_id = "sim"
api_key_env = "TAILCUT_TEST_TOKEN"
rate_usd_per_s = 0.0
[providers.closed]
adapter = "openai"
base_url = "http://127.0.0.1:{closed}/v1"
api_key_env = "TAILCUT_TEST_TOKEN"
rate_usd_per_s = 0.0
[policies.both]
kind = "race"
providers = ["denied", "closed"]
"#
    );
    let path = dir.join("failing.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_run_without_a_valid_result_exits_1_naming_each_attempts_cause() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    for json in [false, true] {
        let mut args = vec!["run", "--config", cfg.to_str().unwrap(), "--policy", "both"];
        if json {
            args.push("--json");
        }
        let out = Command::new(env!("CARGO_BIN_EXE_tailcut")).args(&args).env("TAILCUT_TEST_TOKEN", "k-test").output().unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "json={json}\nstdout: {stdout}\nstderr: {stderr}");
        assert!(stderr.contains("no valid result from 2 attempt(s)"), "{stderr}");
        let line = |provider: &str| {
            stderr.lines().find(|l| l.contains(&format!("  {provider} (racer): "))).unwrap_or_else(|| panic!("{provider}: {stderr}"))
        };
        assert!(line("denied").contains("401"), "{stderr}");
        assert!(line("closed").to_lowercase().contains("connect"), "{stderr}");
        if json {
            let record: serde_json::Value = serde_json::from_str(stdout.trim()).expect("--json still prints the record");
            assert!(record["winner"].is_null());
            assert_eq!(record["attempts"].as_array().map(Vec::len), Some(2));
        } else {
            assert!(stdout.contains("winner none"), "{stdout}");
        }
    }
}

#[test]
fn a_request_the_budget_refuses_is_reported_once_and_traced_as_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("budget.toml");
    std::fs::write(
        &cfg,
        "[budget]\nhard_stop_usd = 0.01\nsoft_stop_usd = 0.005\nledger = \":memory:\"\n[providers.sim]\nadapter = \"sim\"\nrate_usd_per_s = 0.000306\nexpected_run_s = 90\nsim = { profile = \"runpod\" }\n[policies.one]\nkind = \"single\"\nprovider = \"sim\"\n",
    )
    .unwrap();
    let trace = dir.path().join("trace.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_tailcut"))
        .args(["run", "--config", cfg.to_str().unwrap(), "--policy", "one", "--trace", trace.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.matches("budget exceeded").count(), 1, "printed once: {stderr}");
    assert!(stderr.contains("request 0 refused: budget exceeded"), "{stderr}");
    // The trace records the request with no attempt; report counts it as refused, not as a miss.
    let out = Command::new(env!("CARGO_BIN_EXE_tailcut")).args(["report", trace.to_str().unwrap(), "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let arm = &v["arms"][0];
    assert_eq!((arm["n"].as_u64(), arm["refused"].as_u64(), arm["misses"].as_u64()), (Some(1), Some(1), Some(0)), "{arm}");
}

#[test]
fn a_run_without_a_result_never_prints_its_reservation_as_a_projected_cost() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (closed_port(), closed_port());
    // Queue providers (RunPod's API) on closed ports: every submit fails. OpenAI providers:
    // the request is the job, so the failure comes as the attempt's result.
    for (adapter, path, want) in [("runpod", "v2", "nothing submitted (every submit failed;"), ("openai", "v1", "no result; $")] {
        let cfg = dir.path().join(format!("down-{adapter}.toml"));
        std::fs::write(
            &cfg,
            format!(
                "[race]\ncap_s = 5\n[budget]\nledger = \":memory:\"\n[providers.a]\nadapter = \"{adapter}\"\nbase_url = \"http://127.0.0.1:{a}/{path}\"\nendpoint_id = \"x\"\nrate_usd_per_s = 0.0003\n[providers.b]\nadapter = \"{adapter}\"\nbase_url = \"http://127.0.0.1:{b}/{path}\"\nendpoint_id = \"x\"\nrate_usd_per_s = 0.0007\n[policies.both]\nkind = \"hedge\"\nprimary = \"a\"\nhedge = \"b\"\ndelay_ms = 10\n"
            )
            .replace(if adapter == "openai" { "endpoint_id = \"x\"\n" } else { "\u{0}" }, ""),
        )
        .unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_tailcut"))
            .args(["run", "--config", cfg.to_str().unwrap(), "--policy", "both"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{adapter}: {stdout}{}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains(want), "{adapter}: {stdout}");
        assert!(!stdout.contains("projected $"), "{adapter}: {stdout}");
    }
}
