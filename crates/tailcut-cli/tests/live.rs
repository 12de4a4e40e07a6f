//! Live commands against a real local `tailcut sim-provider`: no --go needed on loopback,
//! refusal without --go for paid providers, and credentials never reaching any output.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use std::process::{Command, Stdio};
use tailcut_testkit::cli::{spawn_announcing, Spawned};

fn tailcut() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tailcut"))
}

/// A running `tailcut sim-provider` and its port.
struct Server(#[allow(dead_code)] Spawned, u16);

fn sim_provider(profile: &str) -> Server {
    let (child, line) = spawn_announcing(
        tailcut()
            .args(["sim-provider", "--profile", profile, "--port", "0", "--time-scale", "0.002", "--max-workers", "64"])
            .stderr(Stdio::null()),
    );
    let port: u16 = line.rsplit(':').next().unwrap().trim().parse().unwrap();
    Server(child, port)
}

const TOKEN: &str = "rp-SECRET-4f8e1c2d9a7b";

fn config(dir: &std::path::Path, a: u16, b: u16) -> std::path::PathBuf {
    let text = format!(
        r#"
[race]
cap_s = 2
[budget]
ledger = ":memory:"
[validator]
name = "json"
required = ["output"]
[providers.primary]
adapter = "runpod"
base_url = "http://127.0.0.1:{a}/v2"
endpoint_id = "sim"
api_key_env = "TAILCUT_TEST_TOKEN"
rate_usd_per_s = 0.000306
poll_interval_ms = 5
cancel_window_ms = 1000
[providers.hedge]
adapter = "runpod"
base_url = "http://127.0.0.1:{b}/v2"
endpoint_id = "sim"
api_key_env = "TAILCUT_TEST_TOKEN"
rate_usd_per_s = 0.000736
poll_interval_ms = 5
cancel_window_ms = 1000
[providers.dead]
adapter = "openai"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "TAILCUT_TEST_TOKEN"
rate_usd_per_s = 0.0
[policies.cutover]
kind = "cutover"
primary = "primary"
hedge = "hedge"
poll_after_ms = 5
safety_at_ms = 17
[policies.dead]
kind = "hedge"
primary = "dead"
hedge = "primary"
delay_ms = 10
"#
    );
    let path = dir.join("live.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn live_commands_work_on_loopback_and_never_print_credentials() {
    let (a, b) = (sim_provider("runpod"), sim_provider("cerebrium"));
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), a.1, b.1);
    let cfg = cfg.to_str().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let rounds = dir.path().join("rounds.jsonl");
    let audit = dir.path().join("audit.jsonl");
    let runs: Vec<Vec<&str>> = vec![
        vec!["run", "--config", cfg, "--policy", "cutover", "--repeat", "5", "--wait", "300ms", "--trace", trace.to_str().unwrap()],
        vec!["run", "--config", cfg, "--policy", "cutover", "--repeat", "50", "--concurrency", "50", "--json"],
        vec!["run", "--config", cfg, "--policy", "dead", "--json", "--trace", trace.to_str().unwrap()],
        vec!["login-check", "--config", cfg],
        vec!["bench", "--config", cfg, "--rounds", "2", "--wait", "300ms", "--out", rounds.to_str().unwrap()],
        vec![
            "cancel-audit",
            "--config",
            cfg,
            "--providers",
            "primary",
            "--repeats",
            "1",
            "--early",
            "5ms",
            "--late",
            "300ms",
            "--wait",
            "50ms",
            "--out",
            audit.to_str().unwrap(),
        ],
    ];
    let mut everything = String::new();
    for args in &runs {
        let out = tailcut().args(args).env("TAILCUT_TEST_TOKEN", TOKEN).output().unwrap();
        let (so, se) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        everything.push_str(&so);
        everything.push_str(&se);
        if args[0] != "login-check" {
            assert!(out.status.success(), "{args:?}: {se}");
        }
    }
    for f in [&trace, &rounds, &audit] {
        let text = std::fs::read_to_string(f).unwrap();
        assert!(!text.is_empty(), "{}", f.display());
        everything.push_str(&text);
    }
    assert!(!everything.contains(TOKEN), "the credential leaked into an output");
    assert!(everything.contains("confirmed_terminal") || everything.contains("\"receipts\""));
    // The bench trace replays and the request trace reports.
    let rep =
        tailcut().args(["replay", rounds.to_str().unwrap(), "--config", cfg, "--deadlines", "1", "--delays", "0,0.02"]).output().unwrap();
    assert!(rep.status.success(), "{}", String::from_utf8_lossy(&rep.stderr));
    let rep = tailcut().args(["report", trace.to_str().unwrap(), audit.to_str().unwrap(), "--json"]).output().unwrap();
    assert!(rep.status.success());
    let v: serde_json::Value = serde_json::from_slice(&rep.stdout).unwrap();
    assert!(v["arms"].as_array().unwrap().iter().any(|a| a["leaked"] == 0));
}

#[test]
fn paid_providers_need_go() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("paid.toml");
    std::fs::write(
        &path,
        "[providers.rp]\nadapter = \"runpod\"\nendpoint_id = \"abc\"\nrate_usd_per_s = 0.000306\n[policies.one]\nkind = \"single\"\nprovider = \"rp\"\n",
    )
    .unwrap();
    let out = tailcut().args(["run", "--config", path.to_str().unwrap(), "--policy", "one"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("without --go"));
    let out = tailcut().args(["bench", "--config", path.to_str().unwrap(), "--rounds", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    // With --go but no credential: refused before anything is sent, naming the variable.
    let out = tailcut()
        .args(["run", "--config", path.to_str().unwrap(), "--policy", "one", "--go"])
        .env_remove("RUNPOD_API_KEY")
        .env("HOME", dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("RUNPOD_API_KEY"), "{}", String::from_utf8_lossy(&out.stderr));
}
