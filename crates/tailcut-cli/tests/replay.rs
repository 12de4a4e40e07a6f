//! `tailcut replay`, `report` and `synth` through the real binary.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use std::process::Command;
use tailcut_testkit::cli::{fixture, stdout};

fn tailcut(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tailcut")).args(args).output().unwrap()
}

#[test]
fn replay_prints_the_published_evaluation_table() {
    let out = stdout(&tailcut(&["replay", &fixture("moss_rounds.jsonl"), "--calibration-rounds", "18"]));
    let eval = out.split("EVALUATION (rounds 19+; report these numbers) (36 rounds)").nth(1).expect("evaluation table");
    let line =
        |label: &str| eval.lines().find(|l| l.split_whitespace().next() == Some(label)).unwrap_or_else(|| panic!("{label}")).to_string();
    let cells = |label: &str| line(label).split_whitespace().map(str::to_string).collect::<Vec<_>>();
    assert_eq!(cells("single:runpod"), ["single:runpod", "6.0", "116.6", "11/36", "(18%–47%)", "0.0114", "0.0298", "0%"]);
    assert_eq!(
        cells("hedge:runpod->cerebrium@10s"),
        ["hedge:runpod->cerebrium@10s", "6.0", "29.4", "0/36", "(0%–10%)", "0.0083", "0.0266", "31%"]
    );
    assert_eq!(
        cells("cutover:runpod->cerebrium@q2.5s+s8.5s"),
        ["cutover:runpod->cerebrium@q2.5s+s8.5s", "6.0", "21.9", "0/36", "(0%–10%)", "0.0056", "0.0183", "31%"]
    );
    assert_eq!(cells("hedge:runpod->cerebrium@0s")[2], "19.4");
    assert!(!eval.contains("cascade:"), "the reference selection never shows cascades");
}

#[test]
fn replay_json_has_three_splits_of_55_full_precision_rows() {
    let out = stdout(&tailcut(&["replay", &fixture("moss_rounds.jsonl"), "--calibration-rounds", "18", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    for split in ["all", "calibration", "evaluation"] {
        assert_eq!(v[split].as_array().unwrap().len(), 55, "{split}");
    }
    let row = v["evaluation"].as_array().unwrap().iter().find(|r| r["policy"] == "single:runpod").unwrap();
    assert_eq!(row["n"], 36);
    assert_eq!(row["p95_s"], 116.63);
    assert_eq!(row["miss_counts"]["60"], 11);
    assert!((row["active_usd_per_req"].as_f64().unwrap() - 0.011408190000000004).abs() < 1e-15);
    for key in ["policy", "n", "p50_s", "p95_s", "max_s", "miss_counts", "active_usd_per_req", "billed_usd_per_req", "hedge_rate"] {
        assert!(row.get(key).is_some(), "{key}");
    }
    let no_split = stdout(&tailcut(&["replay", &fixture("moss_rounds.jsonl"), "--json"]));
    let v: serde_json::Value = serde_json::from_str(&no_split).unwrap();
    assert!(v.get("calibration").is_none());
}

#[test]
fn replay_top_csv_linear_and_plot() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("p.svg");
    let out = stdout(&tailcut(&[
        "replay",
        &fixture("moss_rounds.jsonl"),
        "--top",
        "5",
        "--by",
        "cost",
        "--csv",
        "--plot",
        svg.to_str().unwrap(),
    ]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 6);
    assert!(lines[0].starts_with("split,policy,n,p50_s"));
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    assert!(svg_text.starts_with("<svg") && svg_text.contains("60 s deadline"));
    // A baseline, at most five frontier curves beside it, the cost/p95 scatter, the tail
    // levels marked.
    assert!(svg_text.contains("(baseline)"), "no baseline curve");
    assert!(svg_text.contains("cost against p95") && svg_text.contains("frontier"));
    assert!(svg_text.contains("p95") && svg_text.contains("slower than x"));
    let linear = stdout(&tailcut(&["replay", &fixture("moss_rounds.jsonl"), "--estimator", "linear", "--json"]));
    let nearest = stdout(&tailcut(&["replay", &fixture("moss_rounds.jsonl"), "--json"]));
    assert_ne!(linear, nearest);
}

#[test]
fn replay_bad_line_names_file_and_line_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.jsonl");
    let good = std::fs::read_to_string(fixture("moss_rounds.jsonl")).unwrap();
    let mut text: String = good.lines().take(3).map(|l| format!("{l}\n")).collect();
    text.push_str("{\"kind\": \"round\", broken\n");
    std::fs::write(&path, text).unwrap();
    let out = tailcut(&["replay", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.jsonl:4: malformed record"), "{err}");
    let out = tailcut(&["replay", path.to_str().unwrap(), "--skip-bad-lines"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("skipped 1 malformed line"));
}

#[test]
fn replay_unknown_provider_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fal.jsonl");
    std::fs::write(&path, "{\"kind\":\"round\",\"round_id\":1,\"providers\":{\"fal\":{\"wall_s\":3.0,\"valid\":true}}}\n").unwrap();
    let out = tailcut(&["replay", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("provider `fal` has no rate"));
}

#[test]
fn report_reproduces_the_live_stage() {
    let out = stdout(&tailcut(&["report", &fixture("live_hedge.jsonl"), "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let all = v["arms"].as_array().unwrap().iter().find(|a| a["arm"] == "all").unwrap();
    assert_eq!(all["n"], 18);
    assert_eq!(all["hedged"], 3);
    assert_eq!(all["receipts"], 3);
    assert_eq!(all["evidence"]["confirmed_terminal"], 3);
    assert_eq!(all["leaked"], 0);
    assert_eq!(all["ack_ms"]["min"].as_f64().unwrap().round(), 254.0);
    assert_eq!(all["ack_ms"]["max"].as_f64().unwrap().round(), 309.0);
    let table = stdout(&tailcut(&["report", &fixture("live_hedge.jsonl")]));
    assert!(table.contains("254–309"), "{table}");
}

#[test]
fn report_reads_tailcut_traces_and_cancel_audits() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    assert!(tailcut(&["demo", "--requests", "30", "--trace", trace.to_str().unwrap()]).status.success());
    let out = stdout(&tailcut(&["report", trace.to_str().unwrap(), &fixture("cancel_audit.jsonl"), "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let arms = v["arms"].as_array().unwrap();
    assert!(arms.iter().any(|a| a["arm"] == "hedge:runpod->cerebrium@10s" && a["n"] == 30));
    let audit = v["cancel_audit"].as_array().unwrap();
    assert!(audit.iter().any(|c| c["provider"] == "cerebrium" && c["leaked"] == 2));
}

#[test]
fn synth_output_replays() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    assert!(tailcut(&["synth", "--rounds", "300", "--seed", "3", "-o", path.to_str().unwrap()]).status.success());
    let out = stdout(&tailcut(&["replay", path.to_str().unwrap(), "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = v["all"].as_array().unwrap();
    assert_eq!(rows.len(), 55);
    assert_eq!(rows[0]["n"], 300);
    assert!(rows[0]["p99_s"].is_null() || rows[0]["p99_s"].is_f64(), "p99 present from 100 rounds");
}

#[test]
fn top_ranks_on_calibration_and_freezes_those_policies_for_evaluation() {
    let out =
        stdout(&tailcut(&["replay", &fixture("moss_rounds.jsonl"), "--calibration-rounds", "18", "--top", "3", "--by", "p50", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let names = |split: &str| v[split].as_array().unwrap().iter().map(|r| r["policy"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    assert_eq!(names("calibration").len(), 3);
    assert_eq!(names("calibration"), names("evaluation"), "the evaluation split must show the policies picked on calibration");
    let text = stdout(&tailcut(&["replay", &fixture("moss_rounds.jsonl"), "--calibration-rounds", "18", "--top", "3", "--by", "p50"]));
    assert!(text.contains("ranked here, then frozen") && text.contains("the policies frozen on calibration"), "{text}");
}

#[test]
fn time_scale_scales_the_queue_state_timers() {
    let out = stdout(&tailcut(&["replay", &fixture("moss_rounds.jsonl"), "--time-scale", "0.01", "--all"]));
    assert!(out.contains("cutover:runpod->cerebrium@q0.025s+s0.085s"), "{out}");
    assert!(out.contains("+e0.25s"), "{out}");
    let bad = tailcut(&["replay", &fixture("moss_rounds.jsonl"), "--time-scale", "0"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn a_config_that_sets_calibration_rounds_splits_and_the_flag_overrides_it() {
    let built_in = stdout(&tailcut(&["config", "show"]));
    assert!(built_in.contains("\n# calibration_rounds = 18\n"), "the built-in file leaves it unset: {built_in}");
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("split.toml");
    std::fs::write(&cfg, built_in.replace("\n# calibration_rounds = 18\n", "\ncalibration_rounds = 18\n")).unwrap();
    let cfg = cfg.to_str().unwrap();
    let plain = stdout(&tailcut(&["replay", &fixture("moss_rounds.jsonl")]));
    assert!(!plain.contains("EVALUATION"), "no split unless asked for: {plain}");
    let split = stdout(&tailcut(&["replay", &fixture("moss_rounds.jsonl"), "--config", cfg]));
    assert!(split.contains("EVALUATION (rounds 19+; report these numbers) (36 rounds)"), "{split}");
    let flag = stdout(&tailcut(&["replay", &fixture("moss_rounds.jsonl"), "--config", cfg, "--calibration-rounds", "20"]));
    assert!(flag.contains("EVALUATION (rounds 21+; report these numbers) (34 rounds)"), "{flag}");
}
