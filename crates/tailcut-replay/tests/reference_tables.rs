//! The reference tool's published replay, reproduced record for record.
//!
//! `fixtures/gpuhedge-0.1.0-moss-sweep.json` was produced by GPUHedge 0.1.0 itself
//! (`pip install gpuhedge`; `standard_policy_sweep` over the committed
//! `moss_rounds.jsonl` with its packaged config, for the three splits), keeping both its
//! rounded `to_record()` output and the unrounded values. Every one of the 55 policies
//! on all three splits must match: rounded fields exactly, unrounded values to the bit.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use std::path::PathBuf;
use tailcut_replay::rounds::load_file;
use tailcut_replay::summary::PolicySummary;
use tailcut_replay::sweep::{evaluate, standard_sweep, ProviderRates};
use tailcut_stats::Estimator;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn round(x: f64, dp: usize) -> f64 {
    format!("{x:.dp$}").parse().unwrap()
}

fn num(v: &serde_json::Value) -> f64 {
    match v.as_str() {
        Some("inf") => f64::INFINITY,
        Some("-inf") => f64::NEG_INFINITY,
        _ => v.as_f64().unwrap_or_else(|| panic!("not a number: {v}")),
    }
}

fn round4(x: f64) -> f64 {
    if x.is_finite() {
        round(x, 4)
    } else {
        x
    }
}

fn opt(v: &serde_json::Value) -> Option<f64> {
    if v.is_null() {
        None
    } else {
        Some(num(v))
    }
}

fn fin(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

const MOSS: &str = "fixtures/gpuhedge-2026-07/moss_rounds.jsonl";
const EDGE: &str = "crates/tailcut-replay/tests/fixtures/synth-edge-400.jsonl";

fn summaries(file: &str, split: &str) -> Vec<PolicySummary> {
    let rates = ProviderRates::reference_2026_07();
    let names: Vec<String> = rates.iter().map(|r| r.name.clone()).collect();
    let all = load_file(&repo().join(file), &names).unwrap().rounds;
    let set = match split {
        "all" => all,
        "calibration" => all.filter(|id| id <= 18),
        _ => all.filter(|id| id > 18),
    };
    let delays = [0.0, 5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0];
    standard_sweep(&set, &rates, &delays)
        .into_iter()
        .map(|def| {
            let ev = evaluate(&set, &rates, &def.family, 300.0);
            PolicySummary::new(def.label, &ev, &[30, 60, 90, 120], Estimator::Nearest)
        })
        .collect()
}

#[test]
fn every_policy_on_every_split_matches_the_reference() {
    assert_eq!(matches_oracle(MOSS, "tests/fixtures/gpuhedge-0.1.0-moss-sweep.json"), 165);
}

/// 400 synthetic rounds edited to hit the edge cases: providers missing from rounds,
/// missing queue signals, failed submits (wall 0), missing wall times, invalid arms,
/// and arms censored at the 300 s cap.
#[test]
fn edge_case_rounds_match_the_reference() {
    assert_eq!(matches_oracle(EDGE, "tests/fixtures/gpuhedge-0.1.0-synth-edge-sweep.json"), 165);
}

fn matches_oracle(file: &str, oracle: &str) -> usize {
    let oracle: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(oracle)).unwrap()).unwrap();
    let mut checked = 0;
    for split in ["all", "calibration", "evaluation"] {
        let ours = summaries(file, split);
        let theirs = oracle[split].as_array().unwrap();
        assert_eq!(ours.len(), 55, "{split}");
        assert_eq!(theirs.len(), 55);
        for (s, o) in ours.iter().zip(theirs) {
            let (rec, raw) = (&o["record"], &o["raw"]);
            let who = format!("{split} {}", s.policy);
            assert_eq!(s.policy, rec["policy"].as_str().unwrap(), "{who}: label");
            assert_eq!(s.n as u64, rec["n"].as_u64().unwrap(), "{who}: n");
            assert_eq!(fin(s.p50_s).map(|x| round(x, 1)), opt(&rec["p50_s"]), "{who}: p50");
            assert_eq!(fin(s.p95_s).map(|x| round(x, 1)), opt(&rec["p95_s"]), "{who}: p95");
            assert_eq!(fin(s.max_s).map(|x| round(x, 1)), opt(&rec["max_s"]), "{who}: max");
            assert_eq!(fin(s.p50_s), opt(&raw["p50_s"]), "{who}: raw p50");
            assert_eq!(fin(s.p95_s), opt(&raw["p95_s"]), "{who}: raw p95");
            assert_eq!(fin(s.max_s), opt(&raw["max_s"]), "{who}: raw max");
            for d in ["30", "60", "90", "120"] {
                assert_eq!(s.miss_counts[d], rec["miss_counts"][d].as_u64().unwrap(), "{who}: misses {d}");
                assert_eq!(round(s.miss_rates[d], 3), rec["miss_rates"][d].as_f64().unwrap(), "{who}: miss rate {d}");
                let ci = &rec["miss_ci95"][d];
                assert_eq!(round(s.miss_ci95[d][0], 3), ci[0].as_f64().unwrap(), "{who}: ci lo {d}");
                assert_eq!(round(s.miss_ci95[d][1], 3), ci[1].as_f64().unwrap(), "{who}: ci hi {d}");
            }
            assert_eq!(round4(s.active_usd_per_req), num(&rec["mean_cost_usd"]), "{who}: active");
            assert_eq!(round4(s.billed_usd_per_req), num(&rec["mean_billed_usd"]), "{who}: billed");
            assert_eq!(round(s.hedge_rate, 3), rec["hedge_rate"].as_f64().unwrap(), "{who}: hedge rate");
            assert_eq!(s.active_usd_per_req, num(&raw["mean_cost_usd"]), "{who}: raw active");
            assert_eq!(s.billed_usd_per_req, num(&raw["mean_billed_usd"]), "{who}: raw billed");
            assert_eq!(s.hedge_rate, raw["hedge_rate"].as_f64().unwrap(), "{who}: raw hedge rate");
            checked += 1;
        }
    }
    checked
}

#[test]
fn published_evaluation_headlines() {
    let eval = summaries(MOSS, "evaluation");
    let row = |label: &str| eval.iter().find(|s| s.policy == label).unwrap_or_else(|| panic!("{label}"));
    let single = row("single:runpod");
    assert_eq!((format!("{:.1}", single.p50_s), format!("{:.1}", single.p95_s)), ("6.0".into(), "116.6".into()));
    assert_eq!(single.misses(60), 11);
    assert_eq!(
        (format!("{:.4}", single.active_usd_per_req), format!("{:.4}", single.billed_usd_per_req)),
        ("0.0114".into(), "0.0298".into())
    );
    let hedge = row("hedge:runpod->cerebrium@10s");
    assert_eq!(format!("{:.1}", hedge.p95_s), "29.4");
    assert_eq!(hedge.misses(60), 0);
    assert_eq!(
        (format!("{:.4}", hedge.active_usd_per_req), format!("{:.4}", hedge.billed_usd_per_req)),
        ("0.0083".into(), "0.0266".into())
    );
    assert_eq!(format!("{:.0}%", hedge.hedge_rate * 100.0), "31%");
    let cutover = row("cutover:runpod->cerebrium@q2.5s+s8.5s");
    assert_eq!(format!("{:.1}", cutover.p95_s), "21.9");
    assert_eq!(
        (format!("{:.4}", cutover.active_usd_per_req), format!("{:.4}", cutover.billed_usd_per_req)),
        ("0.0056".into(), "0.0183".into())
    );
    let race = row("hedge:runpod->cerebrium@0s");
    assert_eq!((format!("{:.1}", race.p95_s), race.hedge_rate), ("19.4".into(), 1.0));
    let modal = row("hedge:runpod->modal@10s");
    assert_eq!((format!("{:.1}", modal.p95_s), modal.misses(60)), ("49.6".into(), 1));
    // The cascade equals the cutover on this split: the hedge always delivers before 25 s.
    let cascade = row("cascade:runpod->cerebrium->modal@q2.5s+s8.5s+e25s");
    assert_eq!((cascade.p95_s, cascade.active_usd_per_req), (cutover.p95_s, cutover.active_usd_per_req));
}
