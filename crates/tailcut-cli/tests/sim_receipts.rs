//! Receipts against a real local `tailcut sim-provider` through the RunPod adapter: a
//! job cancelled while still in the queue executed nothing, so its receipt shows no
//! execution and a reconciled cost of zero, as the provider billed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// The server, its port, and its stdout kept open (it prints more lines after the first;
/// closing the pipe early would make its next write fail and end it).
struct Server(Child, u16, #[allow(dead_code)] BufReader<std::process::ChildStdout>);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sim_provider(profile: &str, time_scale: &str) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tailcut"))
        .args(["sim-provider", "--profile", profile, "--port", "0", "--time-scale", time_scale, "--max-workers", "64"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    stdout.read_line(&mut line).unwrap();
    let port: u16 = line.rsplit(':').next().unwrap().trim().parse().unwrap();
    Server(child, port, stdout)
}

#[test]
fn a_job_cancelled_in_the_queue_has_a_receipt_with_no_execution_and_no_cost() {
    // A fresh RunPod-like server at time scale 0.2: the first job is a cold start that
    // queues for at least 220 ms, far longer than the cutover poll (2 ms) and the cancel
    // take, even on a loaded machine. The hedge answers in tens of milliseconds.
    let (a, b) = (sim_provider("runpod", "0.2"), sim_provider("runpod", "0.01"));
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cutover.toml");
    let provider = |name: &str, port: u16| {
        format!(
            "[providers.{name}]\nadapter = \"runpod\"\nbase_url = \"http://127.0.0.1:{port}/v2\"\nendpoint_id = \"sim\"\nrate_usd_per_s = 0.000306\npoll_interval_ms = 5\ncancel_window_ms = 2000\n"
        )
    };
    std::fs::write(
        &cfg,
        format!(
            "[race]\ncap_s = 5\n[budget]\nledger = \":memory:\"\n{}{}[policies.cutover]\nkind = \"cutover\"\nprimary = \"primary\"\nhedge = \"hedge\"\npoll_after_ms = 2\nsafety_at_ms = 4000\n",
            provider("primary", a.1),
            provider("hedge", b.1)
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tailcut"))
        .args(["run", "--config", cfg.to_str().unwrap(), "--policy", "cutover", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut queued = 0;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let record: serde_json::Value = serde_json::from_str(line).unwrap();
        for r in record["receipts"].as_array().unwrap() {
            if r["provider"] == "primary" && r["state_before_cancel"] == "IN_QUEUE" && r["terminal_status"] == "CANCELLED" {
                queued += 1;
                assert_eq!(r["execution_ms_before_cancel"], 0.0, "{r}");
                assert_eq!(r["reconciled_cost_micro_usd"], 0, "{r}");
                assert_eq!(r["cancel_scope"], "queued_job", "{r}");
            }
        }
    }
    assert_eq!(queued, 1, "the primary was cancelled in the queue: {}", String::from_utf8_lossy(&out.stdout));
}
