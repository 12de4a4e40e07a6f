//! Fuzz-style property tests of the two trace readers (paired rounds and live requests),
//! bounded in time so they run in CI with the other tests.
//!
//! Inputs: arbitrary bytes (biased towards JSON punctuation so that parsing gets deep),
//! and structure-aware mutations of the real lines in `fixtures/gpuhedge-2026-07/`
//! (a value replaced by a hostile one, a key dropped, a line cut, a byte flipped, lines
//! repeated). Properties, for every input:
//!
//! - no panic, and each case finishes within [`CASE_BOUND`];
//! - a rejection is an error naming the file and a line that exists, with a message;
//! - under `skip_bad_lines` nothing is rejected (the bad lines are counted instead),
//!   except a provider missing from the configuration, which is a configuration error;
//! - what is accepted is sane: latencies +∞ or within [0, 1e6] s, no NaN where a number
//!   is read, unique round ids, and the summaries and policy sweep run on it.
//!
//! The seed corpus is the bad inputs of issue 12 (items 10, 12 and 17).
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tailcut_replay::rounds::{load, LoadOptions, Loaded};
use tailcut_replay::summary::PolicySummary;
use tailcut_replay::sweep::{evaluate, standard_sweep, ProviderRates};
use tailcut_replay::traces::{read_live_with, summarize, LiveOptions, LiveTraces};
use tailcut_replay::ReplayError;
use tailcut_stats::Estimator;

/// Cases per property.
const CASES: u32 = 2500;
/// Longest one case may take (debug build, a loaded CI machine).
const CASE_BOUND: Duration = Duration::from_secs(10);

const MOSS: &str = include_str!("../../../fixtures/gpuhedge-2026-07/moss_rounds.jsonl");
const LIVE: &str = include_str!("../../../fixtures/gpuhedge-2026-07/live_hedge.jsonl");
const STATE_AWARE: &str = include_str!("../../../fixtures/gpuhedge-2026-07/state_aware.jsonl");
const AUDIT: &str = include_str!("../../../fixtures/gpuhedge-2026-07/cancel_audit.jsonl");

fn providers() -> Vec<String> {
    ProviderRates::reference_2026_07().into_iter().map(|r| r.name).collect()
}

/// Runs `f` on its own thread; a case that does not finish within [`CASE_BOUND`] fails.
fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, TestCaseError> {
    tailcut_testkit::fuzz::bounded(CASE_BOUND, f).map_err(TestCaseError::fail)
}

fn temp(bytes: &[u8]) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().expect("temp file");
    f.write_all(bytes).expect("write");
    f
}

/// Number of lines as an editor counts them (a last line without a newline counts).
fn line_count(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|b| **b == b'\n').count() as u64 + 1
}

/// A rejection names this file and an existing line, and says something.
fn clear_rejection(e: &ReplayError, file: &str, lines: u64) -> Result<(), TestCaseError> {
    let (f, line) = match e {
        ReplayError::Malformed { file, line, problem } => {
            prop_assert!(!problem.to_string().trim().is_empty(), "empty message: {e}");
            (file, *line)
        }
        ReplayError::LineTooLong { file, line, .. } | ReplayError::UnknownProvider { file, line, .. } => (file, *line),
        ReplayError::DuplicateRound { file, line, first, .. } => {
            prop_assert!(first.starts_with(file.as_str()), "first occurrence in this file: {e}");
            (file, *line)
        }
        ReplayError::Io { .. } => return Err(TestCaseError::fail(format!("a readable file gave an I/O error: {e}"))),
    };
    prop_assert_eq!(f.as_str(), file);
    prop_assert!((1..=lines).contains(&line), "line {} of {}: {}", line, lines, e);
    prop_assert!(e.to_string().starts_with(&format!("{file}:{line}: ")), "{}", e);
    Ok(())
}

fn sane_rounds(l: &Loaded) -> Result<(), TestCaseError> {
    let r = &l.rounds;
    prop_assert_eq!(r.latency.len(), r.len() * r.width());
    for &x in &r.latency {
        prop_assert!(x == f64::INFINITY || (0.0..=1e6).contains(&x), "latency {}", x);
    }
    for &x in &r.billed {
        prop_assert!(x.is_nan() || x == f64::INFINITY || (0.0..=1e6).contains(&x), "billed {}", x);
    }
    for &x in &r.queue {
        prop_assert!(x.is_nan() || (0.0..=1e6).contains(&x), "queue {}", x);
    }
    let mut ids = r.round_ids.clone();
    ids.sort_unstable();
    ids.dedup();
    prop_assert_eq!(ids.len(), r.len(), "round ids are unique");
    // The consumers run on what was accepted.
    let rates = ProviderRates::reference_2026_07();
    for def in standard_sweep(r, &rates, &[0.0, 10.0]) {
        let ev = evaluate(r, &rates, &def.family, 300.0);
        let s = PolicySummary::new(def.label, &ev, &[60], Estimator::Nearest);
        // +∞ is the reference's cost of an arm without `wall_s`; NaN would be a bug.
        for usd in [s.active_usd_per_req, s.billed_usd_per_req] {
            prop_assert!(s.n == 0 || usd >= 0.0, "{:?}", s);
        }
    }
    Ok(())
}

fn sane_live(t: &LiveTraces) -> Result<(), TestCaseError> {
    for row in &t.rows {
        prop_assert!(row.latency_s == f64::INFINITY || (0.0..=2e6).contains(&row.latency_s), "latency {}", row.latency_s);
        for r in &row.receipts {
            for x in [r.ack_ms, r.terminal_ms].into_iter().flatten() {
                prop_assert!(x.is_finite() && x >= 0.0, "receipt latency {}", x);
            }
        }
    }
    for a in summarize(&t.rows, 60.0) {
        prop_assert_eq!(a.n, a.sent + a.refused);
        prop_assert!(a.misses as usize <= a.sent);
        for q in [a.p50_s, a.p95_s, a.max_s].into_iter().flatten() {
            prop_assert!(q.is_finite() && q >= 0.0, "quantile {}", q);
        }
    }
    Ok(())
}

/// The rounds reader on `bytes`, strict and skipping, with 1 and 2 workers.
fn check_rounds(bytes: Vec<u8>) -> Result<(), TestCaseError> {
    let f = temp(&bytes);
    let path = f.path().to_path_buf();
    let name = path.display().to_string();
    let lines = line_count(&bytes);
    for (skip, threads) in [(false, 1), (true, 2)] {
        let p = path.clone();
        let opts = LoadOptions { skip_bad_lines: skip, threads, max_line_bytes: 4096 };
        match bounded(move || load(&[p], &providers(), opts, &|_| {}))? {
            Ok(l) => sane_rounds(&l)?,
            Err(e) => {
                clear_rejection(&e, &name, lines)?;
                prop_assert!(!skip || matches!(e, ReplayError::UnknownProvider { .. }), "rejected under skip_bad_lines: {}", e);
            }
        }
    }
    Ok(())
}

/// The live-trace reader on `bytes`, strict and skipping.
fn check_live(bytes: Vec<u8>) -> Result<(), TestCaseError> {
    let f = temp(&bytes);
    let path = f.path().to_path_buf();
    let name = path.display().to_string();
    let lines = line_count(&bytes);
    for skip in [false, true] {
        let p: Vec<PathBuf> = vec![path.clone()];
        let opts = LiveOptions { skip_bad_lines: skip, max_line_bytes: 4096 };
        match bounded(move || read_live_with(&p, opts))? {
            Ok(t) => sane_live(&t)?,
            Err(e) => {
                prop_assert!(!skip, "rejected under skip_bad_lines: {}", e);
                clear_rejection(&e, &name, lines)?;
            }
        }
    }
    Ok(())
}

// === Generators ===

/// Bytes biased towards JSON's alphabet, with some raw (often non-UTF-8) bytes.
fn jsonish_bytes() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        4 => prop::sample::select(vec![
            "{", "}", "[", "]", ":", ",", "\"", "\n", " ", "0", "-1", "1e308", "-1e308", "1.5", "null", "true", "\"kind\"",
            "\"round\"", "\"tailcut_request\"", "\"round_id\"", "\"providers\"", "\"runpod\"", "\"wall_s\"", "\"valid\"",
            "\"winner_total_ms\"", "\"receipts\"", "\"cancel_sent_ms\"", "\"attempts\"", "\"\\u00e9\"", "\\",
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
        1 => prop::collection::vec(any::<u8>(), 1..4),
    ];
    prop::collection::vec(token, 0..200).prop_map(|parts| parts.concat())
}

/// A hostile replacement for a JSON value.
fn hostile_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        prop::sample::select(vec![-5.0, -1e308, 1e308, 0.0, 1e-300, 4e6, 1e9, 1e12, 2e12, 6.5, 120.0]).prop_map(|x| serde_json::json!(x)),
        any::<i64>().prop_map(|x| serde_json::json!(x)),
        any::<u64>().prop_map(|x| serde_json::json!(x)),
        "[a-z0-9@>:.+ -]{0,12}".prop_map(Value::String),
        prop::sample::select(vec!["nan", "inf", "-5", "6.5", "runpod", "round", "tailcut_request", "a->b@1e308s", "a->b@-5s"])
            .prop_map(|s| Value::String(s.into())),
        Just(serde_json::json!([])),
        Just(serde_json::json!({})),
        Just(serde_json::json!([{"provider": "modal", "cancel_sent_ms": 5, "cancel_ack_ms": 1}])),
    ]
}

/// One structure-aware edit.
#[derive(Debug, Clone)]
enum Edit {
    /// Replace the n-th value (pre-order) with another.
    Replace(prop::sample::Index, Value),
    /// Drop the n-th object member.
    Drop(prop::sample::Index),
    /// Cut the serialised line at a byte.
    Cut(prop::sample::Index),
    /// Overwrite a byte of the serialised line.
    Flip(prop::sample::Index, u8),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        6 => (any::<prop::sample::Index>(), hostile_value()).prop_map(|(i, v)| Edit::Replace(i, v)),
        2 => any::<prop::sample::Index>().prop_map(Edit::Drop),
        1 => any::<prop::sample::Index>().prop_map(Edit::Cut),
        1 => (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Edit::Flip(i, b)),
    ]
}

fn count_values(v: &Value) -> usize {
    1 + match v {
        Value::Array(items) => items.iter().map(count_values).sum(),
        Value::Object(map) => map.values().map(count_values).sum(),
        _ => 0,
    }
}

/// Replaces the value at pre-order position `i` (safe recursion, no raw pointers).
fn replace_nth(v: &mut Value, i: usize, with: Value) {
    fn go(v: &mut Value, n: &mut usize, with: &mut Option<Value>) {
        if with.is_none() {
            return;
        }
        if *n == 0 {
            if let Some(w) = with.take() {
                *v = w;
            }
            return;
        }
        *n -= 1;
        match v {
            Value::Array(items) => items.iter_mut().for_each(|c| go(c, n, with)),
            Value::Object(map) => map.values_mut().for_each(|c| go(c, n, with)),
            _ => {}
        }
    }
    go(v, &mut { i }, &mut Some(with));
}

/// Drops the member of the n-th object (pre-order over objects' members).
fn drop_nth_member(v: &mut Value, i: usize) {
    fn go(v: &mut Value, n: &mut usize) -> bool {
        match v {
            Value::Object(map) => {
                if *n < map.len() {
                    if let Some(key) = map.keys().nth(*n).cloned() {
                        map.remove(&key);
                    }
                    return true;
                }
                *n -= map.len();
                map.values_mut().any(|c| go(c, n))
            }
            Value::Array(items) => items.iter_mut().any(|c| go(c, n)),
            _ => false,
        }
    }
    go(v, &mut { i });
}

fn members(v: &Value) -> usize {
    match v {
        Value::Object(map) => map.len() + map.values().map(members).sum::<usize>(),
        Value::Array(items) => items.iter().map(members).sum(),
        _ => 0,
    }
}

fn apply(line: &str, edits: &[Edit]) -> Vec<u8> {
    let mut value: Value = serde_json::from_str(line).unwrap_or(Value::Null);
    let mut raw: Option<Vec<u8>> = None;
    for e in edits {
        match e {
            Edit::Replace(i, with) => {
                let at = i.index(count_values(&value));
                replace_nth(&mut value, at, with.clone());
            }
            Edit::Drop(i) => {
                let m = members(&value);
                if m > 0 {
                    drop_nth_member(&mut value, i.index(m));
                }
            }
            Edit::Cut(i) => {
                let mut bytes = raw.take().unwrap_or_else(|| serde_json::to_vec(&value).unwrap_or_default());
                bytes.truncate(i.index(bytes.len() + 1));
                raw = Some(bytes);
            }
            Edit::Flip(i, b) => {
                let mut bytes = raw.take().unwrap_or_else(|| serde_json::to_vec(&value).unwrap_or_default());
                if !bytes.is_empty() {
                    let at = i.index(bytes.len());
                    bytes[at] = *b;
                }
                raw = Some(bytes);
            }
        }
    }
    raw.unwrap_or_else(|| serde_json::to_vec(&value).unwrap_or_default())
}

/// A trace of real lines from `corpus`, some edited, some repeated.
fn mutated_trace(corpus: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    let line = (prop::sample::select(corpus), prop::collection::vec(edit(), 0..4), 1usize..3);
    prop::collection::vec(line, 1..6).prop_map(|lines| {
        let mut out = Vec::new();
        for (text, edits, times) in lines {
            let bytes = apply(text, &edits);
            for _ in 0..times {
                out.extend_from_slice(&bytes);
                out.push(b'\n');
            }
        }
        out
    })
}

fn lines_of(text: &'static str) -> Vec<&'static str> {
    text.lines().filter(|l| !l.trim().is_empty()).collect()
}

fn run(name: &str, strategy: impl Strategy<Value = Vec<u8>>, check: fn(Vec<u8>) -> Result<(), TestCaseError>) {
    let started = Instant::now();
    let mut runner = TestRunner::new(Config { cases: CASES, failure_persistence: None, ..Config::default() });
    let result = runner.run(&strategy, check);
    eprintln!("{name}: {CASES} cases in {:.1} s", started.elapsed().as_secs_f64());
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
}

#[test]
fn rounds_reader_on_arbitrary_bytes() {
    run("rounds/arbitrary", jsonish_bytes(), check_rounds);
}

#[test]
fn rounds_reader_on_mutated_real_rounds() {
    let corpus: &'static [&'static str] = Box::leak(lines_of(MOSS).into_boxed_slice());
    run("rounds/mutated", mutated_trace(corpus), check_rounds);
}

#[test]
fn live_reader_on_arbitrary_bytes() {
    run("live/arbitrary", jsonish_bytes(), check_live);
}

#[test]
fn live_reader_on_mutated_real_records() {
    let mut lines = lines_of(LIVE);
    lines.extend(lines_of(STATE_AWARE));
    lines.extend(lines_of(AUDIT));
    lines.push(r#"{"kind":"tailcut_request","schema_version":1,"request_id":"r1","policy":"hedge:runpod->cerebrium@10s","hedge_launched":true,"attempts":[{"provider":"runpod"},{"provider":"cerebrium"}],"winner":"cerebrium","winner_valid_at_ms":9000.0,"winner_total_ms":19000.0,"receipts":[{"provider":"runpod","cancel_sent_ms":19000.1,"cancel_ack_ms":19200.0,"terminal_ms":19300.0,"terminal_status":"CANCELLED","evidence":"confirmed_terminal","leaked":false,"was_running":true}],"budget_refusals":0}"#);
    lines.push(r#"{"kind":"tailcut_request","schema_version":1,"request_id":"r2","policy":"single:runpod","attempts":[],"winner":null,"winner_valid_at_ms":null,"winner_total_ms":null,"receipts":[]}"#);
    lines.push(r#"{"kind":"validation_index","request_id":1,"arm":"hedge"}"#);
    let corpus: &'static [&'static str] = Box::leak(lines.into_boxed_slice());
    run("live/mutated", mutated_trace(corpus), check_live);
}

/// The bad inputs of issue 12 (items 10, 12, 17), each through both readers.
#[test]
fn seed_corpus_of_the_reported_bad_inputs() {
    let round = |arm: &str| format!(r#"{{"kind":"round","round_id":1,"providers":{{"runpod":{arm}}}}}"#);
    let request = |extra: &str| {
        format!(
            r#"{{"kind":"tailcut_request","request_id":"a","policy":"single:runpod","winner":"runpod","winner_total_ms":5000,"attempts":[{{}}],"receipts":[]{extra}}}"#
        )
    };
    let mut seeds: Vec<Vec<u8>> = vec![
        round(r#"{"wall_s":-5,"valid":true}"#).into_bytes(),
        round(r#"{"wall_s":"6.5","valid":true}"#).into_bytes(),
        round(r#"{"wall_s":1e308,"valid":true}"#).into_bytes(),
        format!("{}\n{}\n", round(r#"{"wall_s":6,"valid":true}"#), round(r#"{"wall_s":7,"valid":true}"#)).into_bytes(),
        request(r#","winner_total_ms":-5"#).into_bytes(),
        request(r#","winner_total_ms":"5000""#).into_bytes(),
        request(r#","receipts":[{"cancel_sent_ms":-1e308,"cancel_ack_ms":1e308,"terminal_ms":1e308}]"#).into_bytes(),
        b"\xff\xfe{\"kind\":\"round\"}\n".to_vec(),
        b"{\"kind\":\"round\",\"round_id\":1,\"note\":\"\xff\",\"providers\":{}}\n".to_vec(),
        // Over the 4096-byte cap these checks use: item 10's long line, scaled down.
        format!("{}\n", round(&format!(r#"{{"wall_s":6,"valid":true,"pad":"{}"}}"#, "x".repeat(10_000)))).into_bytes(),
    ];
    seeds.push([seeds[0].clone(), b"\n".to_vec(), seeds[3].clone()].concat());
    for seed in seeds {
        let text = String::from_utf8_lossy(&seed).chars().take(120).collect::<String>();
        check_rounds(seed.clone()).unwrap_or_else(|e| panic!("rounds {text}: {e}"));
        check_live(seed).unwrap_or_else(|e| panic!("live {text}: {e}"));
    }
}

#[test]
fn the_edits_really_edit() {
    // Guards the generator: a replacement and a drop change the record where intended.
    let line = r#"{"a":1,"b":{"c":2}}"#;
    let mut value: Value = serde_json::from_str(line).unwrap();
    assert_eq!(count_values(&value), 4);
    replace_nth(&mut value, 3, Value::Null);
    assert_eq!(value, serde_json::json!({"a": 1, "b": {"c": null}}));
    drop_nth_member(&mut value, 2);
    assert_eq!(value, serde_json::json!({"a": 1, "b": {}}));
}
