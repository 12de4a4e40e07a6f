//! A newcomer's typical mistakes, through the real binary: each exits 2 with a message
//! naming the flag, or the file and key, and what was expected — never a silent success,
//! an empty table, exit 1 or a panic.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use std::process::{Command, Output};

fn tailcut(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tailcut")).args(args).env("TAILCUT_LOG", "off").output().unwrap()
}

/// Exit 2, no panic, and stderr containing every one of `needles`.
fn refused(out: &Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "expected `{n}` in: {err}");
    }
}

const ROUNDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/gpuhedge-2026-07/moss_rounds.jsonl");
const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/contend");

#[test]
fn a_count_of_zero_is_refused_instead_of_running_nothing() {
    // Each of these used to exit 0: an empty table, no output at all, or an empty file.
    for (args, flag) in [
        (vec!["demo", "--requests", "0"], "--requests"),
        (vec!["run", "--policy", "hedge", "--repeat", "0"], "--repeat"),
        (vec!["run", "--policy", "hedge", "--concurrency", "0"], "--concurrency"),
        (vec!["synth", "--rounds", "0"], "--rounds"),
        (vec!["synth", "--rounds", "5", "--rounds-per-block", "0"], "--rounds-per-block"),
        (vec!["replay", ROUNDS, "--top", "0"], "--top"),
        (vec!["bench", "--rounds", "0"], "--rounds"),
        (vec!["cancel-audit", "--repeats", "0"], "--repeats"),
    ] {
        let out = tailcut(&args);
        refused(&out, &[flag, "expected at least 1"]);
        assert!(out.stdout.is_empty(), "{args:?} printed {}", String::from_utf8_lossy(&out.stdout));
    }
}

#[test]
fn a_calibration_split_with_an_empty_side_is_refused() {
    // `--calibration-rounds 1000` on 54 rounds used to drop both splits silently.
    refused(&tailcut(&["replay", ROUNDS, "--calibration-rounds", "1000"]), &["--calibration-rounds 1000", "evaluation", "from 1 to 53"]);
    refused(&tailcut(&["replay", ROUNDS, "--calibration-rounds=-3"]), &["--calibration-rounds -3", "calibration", "from 1 to 53"]);
    let ok = tailcut(&["replay", ROUNDS, "--calibration-rounds", "18", "--json"]);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
}

#[test]
fn a_config_value_of_the_wrong_type_is_described_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("tailcut.toml");
    std::fs::write(&f, "[race]\nmax_live = \"two\"\n").unwrap();
    let f = f.to_str().unwrap();
    let out = tailcut(&["config", "check", f]);
    refused(&out, &[&format!("{f}: key `race.max_live`"), "expected an integer"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("i64") && !err.contains("\nin `"), "Rust's type name or a repeated key: {err}");
}

#[test]
fn contend_plan_inputs_are_named_and_range_checked() {
    let gpus = format!("{EXAMPLES}/gpus.toml");
    let agents = std::fs::read_to_string(format!("{EXAMPLES}/agents.toml")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    // A missing file was exit 1.
    let missing = dir.path().join("missing.toml");
    let missing = missing.to_str().unwrap();
    refused(&tailcut(&["contend", "plan", "--agents", missing, "--gpus", &gpus]), &[missing, "cannot read"]);
    refused(&tailcut(&["contend", "verify", missing]), &[missing, "cannot read"]);
    // A negative memory named neither file nor key; a 1e308 objective was planned.
    let first = |from: &str, to: &str| agents.replacen(from, to, 1);
    let negative = write("negative.toml", &first("memory_gb = 4", "memory_gb = -4"));
    refused(&tailcut(&["contend", "plan", "--agents", &negative, "--gpus", &gpus]), &[&negative, "key `agents[0].memory_gb`", "got -4"]);
    let huge = write("huge.toml", &first("p99_objective_ms = 5.0", "p99_objective_ms = 1e308"));
    refused(&tailcut(&["contend", "plan", "--agents", &huge, "--gpus", &gpus]), &[&huge, "key `agents[0].p99_objective_ms`", "got 1e308"]);
    let typed = write("typed.toml", &first("memory_gb = 4", "memory_gb = \"big\""));
    let out = tailcut(&["contend", "plan", "--agents", &typed, "--gpus", &gpus]);
    refused(&out, &[&typed, "expected a number"]);
    // Objectives as multiples of a solo p99 nobody gave: the message said every
    // requirement at once; now the one that failed, as what to give.
    let out = tailcut(&["contend", "plan", "--agents", &format!("{EXAMPLES}/gpu-agents.toml"), "--gpus", &gpus]);
    refused(&out, &["agent `", "no solo p99", "--table"]);
    // A pool's counts were not range-checked.
    let pool = std::fs::read_to_string(&gpus).unwrap();
    let many = write("many.toml", &pool.replacen("max_share = 4", "max_share = 1000", 1));
    refused(
        &tailcut(&["contend", "plan", "--agents", &format!("{EXAMPLES}/agents.toml"), "--gpus", &many]),
        &[&many, "key `max_share`", "got 1000"],
    );
    let none = write("none.toml", &pool.replacen("count = ", "count = 0 # was ", 1));
    refused(
        &tailcut(&["contend", "plan", "--agents", &format!("{EXAMPLES}/agents.toml"), "--gpus", &none]),
        &[&none, "key `count`", "got 0"],
    );
    let ok = tailcut(&["contend", "plan", "--agents", &format!("{EXAMPLES}/agents.toml"), "--gpus", &gpus]);
    assert!(ok.status.success(), "the example plans: {}", String::from_utf8_lossy(&ok.stderr));
}

#[test]
fn sim_provider_names_the_flag_and_the_address() {
    refused(&tailcut(&["sim-provider", "--port", "0", "--max-workers", "0"]), &["--max-workers 0", "from 1 to"]);
    refused(&tailcut(&["sim-provider", "--profile", "nosuch", "--port", "0"]), &["--profile", "nosuch"]);
    // A port already taken (by a listener this test holds) was exit 1 without the address.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    refused(&tailcut(&["sim-provider", "--port", &port]), &[&format!("cannot listen on 127.0.0.1:{port}")]);
}

#[test]
fn a_plot_into_a_missing_directory_is_refused_before_the_work() {
    // It used to fail at the very end, after the replay, with exit 1.
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("no/such/dir/out.svg");
    let svg = svg.to_str().unwrap();
    refused(&tailcut(&["replay", ROUNDS, "--plot", svg]), &["--plot", svg, "does not exist"]);
    refused(&tailcut(&["report", ROUNDS, "--html", svg]), &["--html", svg, "does not exist"]);
    refused(&tailcut(&["scenario", "run", "straggler", "--plot", svg]), &["--plot", svg, "does not exist"]);
}

#[test]
fn an_output_file_that_cannot_be_created_is_bad_input() {
    // Under a regular file, so that no directory can be made there (even as root). These
    // were exit 1, as if the run itself had failed.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let out = file.join("out.jsonl");
    let out = out.to_str().unwrap();
    refused(&tailcut(&["run", "--policy", "hedge", "--trace", out]), &[out]);
    refused(&tailcut(&["demo", "--requests", "3", "--trace", out]), &[out]);
    refused(&tailcut(&["synth", "--rounds", "3", "-o", out]), &["--out", out]);
    refused(&tailcut(&["bench", "--rounds", "1", "--wait", "0s", "--out", out]), &["--out", out]);
}
