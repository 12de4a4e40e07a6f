//! End-to-end checks of `tailcut demo` and `tailcut config` through the real binary.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use std::process::Command;

fn tailcut(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tailcut")).args(args).output().unwrap()
}

fn row<'a>(rows: &'a [serde_json::Value], prefix: &str) -> &'a serde_json::Value {
    rows.iter().find(|r| r["policy"].as_str().unwrap().starts_with(prefix)).unwrap_or_else(|| panic!("no row {prefix}"))
}

#[test]
fn demo_json_shows_hedging_cutting_the_tail() {
    let out = tailcut(&["demo", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    for key in
        ["policy", "n", "p50_s", "p95_s", "p99_s", "max_s", "miss_60s", "hedge_rate", "active_usd_per_req", "billed_usd_per_req", "leaked"]
    {
        assert!(rows[0].get(key).is_some(), "missing key {key}");
    }
    let single = row(&rows, "single:runpod");
    assert_eq!(single["n"], 1000);
    let single_p95 = single["p95_s"].as_f64().unwrap();
    let single_miss = single["miss_60s"].as_u64().unwrap();
    for prefix in ["hedge:runpod->cerebrium@10s", "cutover:runpod->cerebrium"] {
        let r = row(&rows, prefix);
        assert!(r["p95_s"].as_f64().unwrap() <= single_p95 / 2.0, "{prefix} p95 {} vs single {single_p95}", r["p95_s"]);
        assert!(r["miss_60s"].as_u64().unwrap() < single_miss, "{prefix} misses");
        let rate = r["hedge_rate"].as_f64().unwrap();
        assert!(rate > 0.0 && rate < 0.5, "{prefix} hedge rate {rate}");
    }
    for r in &rows {
        assert_eq!(r["leaked"], 0, "{} leaked without a leak probability", r["policy"]);
    }
}

#[test]
fn demo_is_deterministic_for_a_seed() {
    let a = tailcut(&["demo", "--json", "--requests", "50", "--seed", "9"]);
    let b = tailcut(&["demo", "--json", "--requests", "50", "--seed", "9"]);
    assert_eq!(a.stdout, b.stdout);
    let c = tailcut(&["demo", "--json", "--requests", "50", "--seed", "10"]);
    assert_ne!(a.stdout, c.stdout);
}

#[test]
fn demo_reports_leaks_when_configured() {
    let out = tailcut(&["demo", "--json", "--requests", "300", "--leak-p", "0.5"]);
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let leaked: u64 = rows.iter().map(|r| r["leaked"].as_u64().unwrap()).sum();
    assert!(leaked > 0);
}

#[test]
fn demo_writes_traces() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let out = tailcut(&["demo", "--requests", "20", "--trace", path.to_str().unwrap()]);
    assert!(out.status.success());
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 20 * 8);
    assert!(lines.iter().all(|l| l["kind"] == "tailcut_request"));
}

#[test]
fn bad_config_exits_2_naming_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tailcut.toml");
    std::fs::write(&path, "[providers.runpod]\nadapter = \"sim\"\nrate_usd_per_s = \"free\"\n").unwrap();
    for args in [vec!["config", "check", path.to_str().unwrap()], vec!["demo", "--config", path.to_str().unwrap()]] {
        let out = tailcut(&args);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("tailcut.toml") && err.contains("providers.runpod.rate_usd_per_s"), "{err}");
    }
}

#[test]
fn built_in_config_round_trips_through_check() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tailcut.toml");
    let show = tailcut(&["config", "show"]);
    std::fs::write(&path, &show.stdout).unwrap();
    let out = tailcut(&["config", "check", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn report_prints_the_deadline_as_given_explains_its_columns_and_plots_tails() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    let svg = dir.path().join("r.svg");
    assert!(tailcut(&["demo", "--requests", "30", "--trace", trace.to_str().unwrap()]).status.success());
    let out = tailcut(&["report", trace.to_str().unwrap(), "--deadline", "45.5", "--plot", svg.to_str().unwrap()]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("miss>45.5s"), "{text}");
    assert!(text.contains("p95 s (nearest / linear)") && text.contains("p95 by two estimators"), "{text}");
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    assert!(svg_text.contains("45.5 s deadline") && svg_text.contains("(baseline)") && svg_text.contains("slower than x"));
    // The other single-provider arms are left out: the baseline (the hedged arms' primary) and five hedging arms.
    assert!(svg_text.contains("against single:runpod (2 other single-provider arm(s) not drawn)"));
}

#[test]
fn appending_to_a_trace_that_holds_records_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    let first = tailcut(&["demo", "--requests", "5", "--trace", trace.to_str().unwrap()]);
    assert!(!String::from_utf8_lossy(&first.stderr).contains("appending"));
    let second = tailcut(&["demo", "--requests", "5", "--trace", trace.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("already holds 40 record(s)"), "{err}");
}
