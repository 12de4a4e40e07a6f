//! Bad trace input and bad flags through the real binary: exit 2 naming the file and
//! line (or the flag), each message once; a closed stdout ends quietly; refused requests
//! reported apart from latency misses.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use tailcut_testkit::cli::fixture;

fn tailcut(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tailcut")).args(args).output().unwrap()
}

fn file(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> String {
    let path = dir.path().join(name);
    std::fs::File::create(&path).unwrap().write_all(bytes).unwrap();
    path.display().to_string()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x").display().to_string();
    let runs: Vec<Vec<String>> = vec![
        vec!["replay".into(), fixture("moss_rounds.jsonl"), "--all".into(), "--matrix".into()],
        vec!["report".into(), fixture("live_hedge.jsonl")],
        vec!["report".into(), fixture("live_hedge.jsonl"), "--json".into()],
        // An explicit (non-macro) writer: the error path, not the panic path.
        vec!["synth".into(), "--rounds".into(), "20000".into()],
        vec!["config".into(), "show".into()],
        vec!["demo".into(), "--requests".into(), "20".into(), "--trace".into(), out],
    ];
    for args in runs {
        // The pipe's reader is gone before the child starts, as with `| head -0` once
        // head has exited: the child's first write must fail, however fast it writes
        // (closing the reader after spawning raced a child that fit its whole output
        // into the pipe's buffer first).
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let child = Command::new(env!("CARGO_BIN_EXE_tailcut")).args(&args).stdout(writer).stderr(Stdio::piped()).spawn().unwrap();
        let out = child.wait_with_output().unwrap();
        let err = stderr(&out);
        assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(141), "{args:?}: {err}");
    }
}

#[test]
fn bad_numeric_flags_exit_2_naming_the_flag() {
    let live = fixture("live_hedge.jsonl");
    let rounds = fixture("moss_rounds.jsonl");
    let cases: Vec<Vec<&str>> = vec![
        vec!["report", &live, "--deadline", "nan"],
        vec!["report", &live, "--deadline", "inf"],
        vec!["report", &live, "--deadline=-5"],
        vec!["report", &live, "--deadline", "1e308"],
        vec!["replay", &rounds, "--delays", "0,1e308"],
        vec!["replay", &rounds, "--delays", "NaN"],
        vec!["replay", &rounds, "--threads", "100000"],
        vec!["demo", "--deadline", "nan"],
        vec!["demo", "--leak-p", "1.5"],
    ];
    for args in cases {
        let out = tailcut(&args);
        let flag = args.iter().find(|a| a.starts_with("--")).and_then(|a| a.split('=').next()).unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(&format!("'{flag} <")), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn bad_trace_values_exit_2_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = r#"{"kind":"tailcut_request","request_id":"a","policy":"single:runpod","winner":"runpod","winner_total_ms":5000,"attempts":[{}],"receipts":[]}"#;
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "replay",
            r#"{"kind":"round","round_id":1,"providers":{"runpod":{"wall_s":-5,"valid":true}}}"#.into(),
            ":2: malformed record: `providers.runpod.wall_s` is -5",
        ),
        (
            "replay",
            r#"{"kind":"round","round_id":1,"providers":{"runpod":{"wall_s":"fast","valid":true}}}"#.into(),
            ":2: malformed record: invalid type: string \"fast\"",
        ),
        ("replay", r#"{"kind":"round","round_id":0,"providers":{}}"#.into(), ":2: duplicate round_id 0 (first at "),
        ("report", good.replace("5000", "-5"), ":2: malformed record: `winner_total_ms` is -5"),
        ("report", good.replace("5000", "\"5000\""), ":2: malformed record: `winner_total_ms` is \"5000\""),
        (
            "report",
            good.replace(r#""receipts":[]"#, r#""receipts":[{"cancel_sent_ms":-1e308,"cancel_ack_ms":1e308}]"#),
            ":2: malformed record: `receipts[0].cancel_sent_ms` is -1e308",
        ),
    ];
    for (command, bad, expected) in cases {
        let first = if command == "replay" { r#"{"kind":"round","round_id":0,"providers":{}}"# } else { good };
        let path = file(&dir, "t.jsonl", format!("{first}\n{bad}\n").as_bytes());
        let out = tailcut(&[command, &path]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr(&out));
        assert!(stderr(&out).contains(&format!("{path}{expected}")), "{bad}: {}", stderr(&out));
        let skipped = tailcut(&[command, &path, "--skip-bad-lines"]);
        assert!(skipped.status.success(), "{bad}: {}", stderr(&skipped));
        assert!(stderr(&skipped).contains("skipped 1 malformed line(s)"), "{}", stderr(&skipped));
    }
}

#[test]
fn non_utf8_input_names_the_line_and_each_message_is_printed_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir, "bin.jsonl", b"{\"kind\":\"round\",\"round_id\":1,\"providers\":{}}\n\xff\xfe\x00garbage\n");
    for command in ["replay", "report"] {
        let out = tailcut(&[command, &path]);
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(stderr(&out).trim(), format!("tailcut: {path}:2: malformed record: not valid UTF-8 (invalid byte at column 1)"));
        let out = tailcut(&[command, &path, "--skip-bad-lines"]);
        assert!(out.status.success(), "{command}: {}", stderr(&out));
    }
    let missing = dir.path().join("missing.jsonl").display().to_string();
    for command in ["replay", "report"] {
        let err = stderr(&tailcut(&[command, &missing]));
        assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    }
}

#[test]
fn replay_reads_a_line_longer_than_its_block() {
    let dir = tempfile::tempdir().unwrap();
    let pad = "x".repeat(5 << 20);
    let text = format!(
        "{{\"kind\":\"round\",\"round_id\":1,\"pad\":\"{pad}\",\"providers\":{{\"runpod\":{{\"wall_s\":7,\"valid\":true}}}}}}\n{{\"kind\":\"round\",\"round_id\":2,\"providers\":{{\"runpod\":{{\"wall_s\":9,\"valid\":true}}}}}}\n"
    );
    let path = file(&dir, "long.jsonl", text.as_bytes());
    let mut child = Command::new(env!("CARGO_BIN_EXE_tailcut")).args(["replay", &path]).stdout(Stdio::piped()).spawn().unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("replay still running after 60 s on a 5 MiB line");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("Replayed 2 rounds"));
}

#[test]
fn report_counts_refused_requests_apart_from_misses() {
    let dir = tempfile::tempdir().unwrap();
    let sent = r#"{"kind":"tailcut_request","request_id":"a","policy":"single:runpod","winner":"runpod","winner_total_ms":5000,"attempts":[{}],"receipts":[]}"#;
    let refused = r#"{"kind":"tailcut_request","request_id":"b","policy":"single:runpod","winner":null,"winner_total_ms":null,"attempts":[],"receipts":[]}"#;
    let mut text = format!("{sent}\n");
    for _ in 0..19 {
        text.push_str(refused);
        text.push('\n');
    }
    let path = file(&dir, "refused.jsonl", text.as_bytes());
    let out = tailcut(&["report", &path, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let arm = &v["arms"][0];
    assert_eq!(
        (arm["n"].as_u64(), arm["refused"].as_u64(), arm["sent"].as_u64(), arm["misses"].as_u64()),
        (Some(20), Some(19), Some(1), Some(0))
    );
    let table = String::from_utf8(tailcut(&["report", &path]).stdout).unwrap();
    let row: Vec<&str> = table.lines().find(|l| l.starts_with("single:runpod")).unwrap().split_whitespace().collect();
    assert_eq!(&row[..3], ["single:runpod", "20", "19"]);
    assert!(table.contains("miss>60s of sent") && table.contains("0/1 ("), "{table}");
    assert!(table.contains("refused = never sent"), "{table}");
}

/// Issue 27 item 11: provider and policy names from trace and model files reach the
/// terminal with their control characters escaped, in `report`, `model show` and the
/// trace readers' errors: no ESC byte of a file's is ever printed.
#[test]
fn names_from_files_are_printed_with_control_characters_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let evil = "x\u{1b}[2J\u{1b}[31mred\rforged";
    let record = |id: &str| {
        serde_json::json!({"kind": "tailcut_request", "schema_version": 1, "request_id": id, "policy": format!("single:{evil}"),
            "winner": evil, "winner_total_ms": 100.0,
            "attempts": [{"provider": evil, "role": "primary", "submit_offset_ms": 0.0, "wall_ms": 100.0, "valid": true, "outcome": "COMPLETED"}],
            "receipts": []})
        .to_string()
    };
    let traces = file(&dir, "t.jsonl", format!("{}\n{}\n", record("a"), record("b")).as_bytes());
    let out = tailcut(&["report", &traces]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.contains("single:x\\u{1b}[2J\\u{1b}[31mred\\rforged"), "{text}");
    assert!(!out.stdout.contains(&0x1b) && !out.stdout.contains(&b'\r'), "{text:?}");

    // A reader's error quoting the file's text (a legacy record's policy label).
    let legacy = serde_json::json!({"kind": "hedged_request", "request_id": 1, "policy": format!("{evil}->modal@1e308s"),
        "winner": "modal", "winner_valid_at_ms": 3000});
    let bad = file(&dir, "bad.jsonl", format!("{legacy}\n").as_bytes());
    let out = tailcut(&["report", &bad]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("policy label `x\\u{1b}[2J") && !out.stderr.contains(&0x1b), "{:?}", stderr(&out));

    // `model show`.
    let model =
        tailcut_model::Model::new(&[(evil.to_string(), 0.001, 0.0), ("b".into(), 0.001, 0.0)], tailcut_model::ModelConfig::default());
    let path = dir.path().join("m.json");
    model.save(&path).unwrap();
    let out = tailcut(&["model", "show", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("x\\u{1b}[2J") && !out.stdout.contains(&0x1b), "{text:?}");
}
