//! Calibration you can see, through the real binary: the reliability table of `auto` in
//! `replay --learned` and `report`, `model calibration` on a trace `demo` wrote (tables,
//! JSON, the SVG diagram; exit 2 when a trace holds no prediction), and the model
//! commands a newcomer meets first (`model show` with no model, `model fit` on the
//! reference tool's live records).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use std::process::Command;
use tailcut_testkit::cli::{fixture, stdout};

fn tailcut(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tailcut")).args(args).output().unwrap()
}

fn tailcut_in(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tailcut")).current_dir(dir).args(args).output().unwrap()
}

/// The built-in simulated providers and one `auto` policy.
const AUTO_CONFIG: &str = r#"
[race]
max_live = 2
cap_s = 300

[validator]
name = "json"
required = ["output"]

[providers.runpod]
adapter = "sim"
rate_usd_per_s = 0.000306
idle_window_s = 60
expected_run_s = 30
sim = { profile = "runpod", seed = 11 }

[providers.modal]
adapter = "sim"
rate_usd_per_s = 0.000704
idle_window_s = 0
expected_run_s = 40
sim = { profile = "modal", seed = 44 }

[providers.cerebrium]
adapter = "sim"
rate_usd_per_s = 0.000736
idle_window_s = 0
expected_run_s = 20
sim = { profile = "cerebrium", seed = 37 }

[policies.auto]
kind = "auto"
providers = ["runpod", "modal", "cerebrium"]
deadline_ms = 60000
target_miss = 0.05
"#;

#[test]
fn model_calibration_of_a_demo_trace_tables_json_and_plot() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("auto.toml");
    std::fs::write(&config, AUTO_CONFIG).unwrap();
    let trace = dir.path().join("demo.jsonl");
    let (config, trace_s) = (config.to_str().unwrap(), trace.to_str().unwrap());
    stdout(&tailcut(&["demo", "--config", config, "--requests", "300", "--trace", trace_s]));

    let json: serde_json::Value =
        serde_json::from_str(&stdout(&tailcut(&["model", "calibration", trace_s, "--config", config, "--json"]))).unwrap();
    let policies = json["policies"].as_array().unwrap();
    assert_eq!(policies.len(), 1, "only auto predicts: {json}");
    let p = &policies[0];
    assert_eq!(p["policy"], "auto:runpod,modal,cerebrium@60000ms/miss5%");
    assert_eq!((p["deadline_s"].as_f64(), p["deadline_from"].as_str()), (Some(60.0), Some("policy_label")));
    let r = &p["reliability"];
    let n = r["n"].as_u64().unwrap();
    // Every decision is predicted but the explorations and re-probes (no prediction).
    assert_eq!(n + p["without_prediction"].as_u64().unwrap(), 300);
    assert!(n > 150, "{n}");
    let groups = r["groups"].as_array().unwrap();
    assert!((5..=10).contains(&groups.len()), "{}", groups.len());
    assert_eq!(groups.iter().map(|g| g["n"].as_u64().unwrap()).sum::<u64>(), n);
    assert_eq!(groups.iter().map(|g| g["misses"].as_u64().unwrap()).sum::<u64>(), r["misses"].as_u64().unwrap());
    let brier = r["brier"].as_f64().unwrap();
    assert!((0.0..0.25).contains(&brier), "{brier}");
    // The learned model's predictions are in the right range: within a few points.
    assert!(r["ece"].as_f64().unwrap() < 0.1, "{r}");
    let cost = &r["cost"];
    assert_eq!(cost["n"].as_u64(), Some(n));
    let ratio = cost["ratio"].as_f64().unwrap();
    assert!(ratio > 0.5 && ratio < 2.0, "{ratio}");

    let svg = dir.path().join("rel.svg");
    let text = stdout(&tailcut(&["model", "calibration", trace_s, "--config", config, "--plot", svg.to_str().unwrap()]));
    assert!(text.contains("Calibration of auto:runpod,modal,cerebrium@60000ms/miss5% (300 learned decisions; misses over 60 s"), "{text}");
    assert!(text.contains("Brier") && text.contains("ECE") && text.contains("mean realized $"), "{text}");
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(drawn.contains("perfectly calibrated") && drawn.contains("decisions"), "the diagram");

    // `report` prints the same table and carries it in its JSON.
    let report = stdout(&tailcut(&["report", trace_s, "--config", config]));
    assert!(report.contains("Calibration of auto:runpod,modal,cerebrium@60000ms/miss5%"), "{report}");
    let rj: serde_json::Value = serde_json::from_str(&stdout(&tailcut(&["report", trace_s, "--config", config, "--json"]))).unwrap();
    assert_eq!(rj["calibration"][0]["reliability"]["n"].as_u64(), Some(n));
}

#[test]
fn model_calibration_without_predictions_says_which_commands_write_them() {
    let out = tailcut(&["model", "calibration", &fixture("live_hedge.jsonl")]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("live_hedge.jsonl: no learned decision with a predicted miss"), "{err}");
    assert!(err.contains("tailcut run --policy") && err.contains("kind = \"auto\"") && err.contains("--learned"), "{err}");
    let out = tailcut(&["model", "calibration", &fixture("live_hedge.jsonl"), "--deadline", "-1"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn replay_learned_prints_auto_calibration_and_carries_it_in_json() {
    let args = ["replay", &fixture("moss_rounds.jsonl"), "--calibration-rounds", "18", "--learned"];
    let json: serde_json::Value = serde_json::from_str(&stdout(&tailcut(&[&args[..], &["--json"]].concat()))).unwrap();
    let eval = json["evaluation"].as_array().unwrap();
    let auto = eval.iter().find(|r| r["policy"].as_str().is_some_and(|p| p.starts_with("auto:"))).unwrap();
    let r = &auto["reliability"];
    assert_eq!(r["n"].as_u64(), Some(36), "every evaluation round of auto is a predicted decision: {r}");
    assert_eq!(r["groups"].as_array().unwrap().iter().map(|g| g["n"].as_u64().unwrap()).sum::<u64>(), 36);
    // Misses at auto's 60 s deadline agree with its row.
    assert_eq!(r["misses"], auto["miss_counts"]["60"]);
    assert!(eval
        .iter()
        .filter(|r| r["learned"] == true && !r["policy"].as_str().unwrap().starts_with("auto:"))
        .all(|r| r.get("reliability").is_none()));
    let text = stdout(&tailcut(&args));
    assert!(text.contains("Calibration of auto:60s/miss5%/extra100%: its predicted miss and active cost"), "{text}");
    assert!(text.contains("realized (95% CI)") && text.contains("Brier"), "{text}");
}

#[test]
fn model_show_without_a_model_says_how_to_get_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = tailcut_in(dir.path(), &["model", "show"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("model.json: no such model file"), "{err}");
    assert!(
        err.contains("tailcut model fit TRACE... -o model.json") && err.contains("--from-gateway") && err.contains("/admin/models"),
        "{err}"
    );
}

#[test]
fn model_fit_learns_from_the_reference_live_records_with_losers_censored() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.json");
    let out = tailcut(&["model", "fit", &fixture("live_hedge.jsonl"), "-o", model.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("18 reference request records"));
    let json: serde_json::Value = serde_json::from_str(&stdout(&tailcut(&["model", "show", model.to_str().unwrap(), "--json"]))).unwrap();
    let by = |name: &str| json["providers"].as_array().unwrap().iter().find(|p| p["provider"] == name).unwrap().clone();
    // RunPod was launched in all 18 (15 wins, 3 cancelled losers); Modal won twice and
    // Cerebrium once.
    let rp = by("runpod");
    assert_eq!(rp["attempts"], 18);
    assert_eq!((by("modal")["attempts"].as_u64(), by("cerebrium")["attempts"].as_u64()), (Some(2), Some(1)));
    // The three lost RunPod attempts ran 29–67 s without an answer: a tail known only as
    // "longer than that", not as failures.
    let unseen = rp["latency_s"]["unseen_tail"].as_f64().unwrap();
    assert!(unseen > 0.1 && unseen < 0.25, "{unseen}");
    assert_eq!(rp["failure_rate"].as_f64(), Some(0.0));
    let p50 = rp["latency_s"]["p50"].as_f64().unwrap();
    assert!((5.9..6.6).contains(&p50), "{p50}");
}

#[test]
fn model_fit_of_a_cancel_audit_says_which_file_to_use() {
    let out = tailcut(&["model", "fit", &fixture("cancel_audit.jsonl"), "-o", "/nonexistent/never.json"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nothing to learn from") && err.contains("`forced_cancel`"), "{err}");
    assert!(err.contains("moss_rounds.jsonl") && err.contains("live_hedge.jsonl"), "{err}");
}
