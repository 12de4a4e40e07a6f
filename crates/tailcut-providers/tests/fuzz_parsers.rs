//! Fuzzing the adapters' reply parsers (RunPod, Replicate, fal, Baseten, Modal,
//! Cerebrium, OpenAI whole replies and SSE streams, the generic JSON job API) in bounded
//! time: arbitrary bytes, and structure-aware mutations of well-formed replies (documents
//! built from the fields the adapters read, then truncated, bit-flipped, spliced). Each
//! case runs under a time bound on its own thread. Properties: no panic, no hang, and
//! every rejection is a clear error: non-empty, naming the status or what was missing,
//! and short (a reply body is never dumped whole into an error, a trace or a job row).
//!
//! `CASES` cases per parser family (3,000 each); a seed corpus of known-nasty replies
//! runs first in its own test.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use bytes::Bytes;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::time::Duration;
use tailcut_core::{JobResult, JobState, ProviderError};
use tailcut_providers::client::Reply;
use tailcut_providers::generic::{Generic, GenericSpec};
use tailcut_providers::openai::assemble::assemble;
use tailcut_providers::openai::Endpoint;
use tailcut_providers::polling::{CancelReply, Observation, Remote, MAX_ERROR_CHARS};
use tailcut_providers::{baseten, cerebrium, fal, modal, openai, replicate, runpod, vast};
use tailcut_testkit::fuzz::{mutate, mutation};

const CASES: u32 = 3000;
/// The time bound per case (a debug build, replies up to ~64 KiB).
const BOUND: Duration = Duration::from_secs(2);
/// The longest error text a parser may produce, in bytes.
const MAX_ERROR_BYTES: usize = 4 * MAX_ERROR_CHARS + 200;

/// The fields the adapters read, so generated documents hit their code paths.
const KEYS: &[&str] = &[
    "id",
    "status",
    "output",
    "error",
    "errors",
    "message",
    "delayTime",
    "executionTime",
    "stream",
    "request_id",
    "status_url",
    "response_url",
    "cancel_url",
    "queue_position",
    "metrics",
    "inference_time",
    "predict_time",
    "data_removed",
    "canceled",
    "call_id",
    "result",
    "run_time_ms",
    "run_id",
    "data",
    "choices",
    "delta",
    "content",
    "text",
    "finish_reason",
    "usage",
    "job",
    "state",
    "audio",
    "object",
    "index",
];
/// State names the adapters map.
const STATES: &[&str] = &[
    "IN_QUEUE",
    "IN_PROGRESS",
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMED_OUT",
    "starting",
    "processing",
    "succeeded",
    "failed",
    "canceled",
    "aborted",
    "QUEUED",
    "SUCCEEDED",
    "CANCELED",
    "EXPIRED",
    "PENDING",
    "SUCCESS",
    "TERMINATED",
    "FAILURE",
    "OK",
    "CANCELLATION_REQUESTED",
    "ALREADY_COMPLETED",
    "done",
    "waiting",
    "",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        2 => Just(Value::Null),
        2 => any::<bool>().prop_map(Value::from),
        2 => any::<i64>().prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
        2 => any::<f64>().prop_filter("JSON numbers are finite", |f| f.is_finite()).prop_map(Value::from),
        3 => ".{0,24}".prop_map(Value::from),
        6 => prop::sample::select(STATES).prop_map(Value::from),
        // Long strings: error texts that must not be kept whole.
        1 => (1usize..8_000).prop_map(|n| Value::from("e".repeat(n))),
        // Base64-ish strings, for the payload paths.
        2 => "[A-Za-z0-9+/=]{0,40}".prop_map(Value::from),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![4 => prop::sample::select(KEYS).prop_map(str::to_string), 1 => ".{0,8}"]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..8).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// A reply-shaped document: an object whose fields are mostly ones the adapters read.
fn document() -> impl Strategy<Value = Value> {
    prop::collection::vec((key(), value()), 0..10).prop_map(|kv| Value::Object(kv.into_iter().collect()))
}

/// Well-formed replies of each provider (and of each call), to mutate field by field.
fn templates() -> Vec<Value> {
    vec![
        json!({"id": "j1", "status": "IN_QUEUE"}),
        json!({"id": "j1", "status": "COMPLETED", "delayTime": 12, "executionTime": 340, "output": {"text": "ok"}}),
        json!({"id": "j1", "status": "FAILED", "error": "boom", "executionTime": 5}),
        json!({"status": "IN_PROGRESS", "stream": [{"output": "tok"}]}),
        json!({"id": "p1", "status": "succeeded", "output": ["x"], "metrics": {"predict_time": 1.5}, "error": null, "data_removed": false}),
        json!({"request_id": "r1", "status_url": "http://x/s", "response_url": "http://x/r", "cancel_url": "http://x/c"}),
        json!({"status": "COMPLETED", "queue_position": 3, "metrics": {"inference_time": 0.5}, "error": "cancelled"}),
        json!({"status": "CANCELLATION_REQUESTED"}),
        json!({"request_id": "b1", "status": "FAILED", "errors": [{"message": "bad"}]}),
        json!({"canceled": false, "message": "cannot cancel"}),
        json!({"call_id": "c1", "status": "SUCCESS"}),
        json!({"result": {"x": 1}, "run_time_ms": 12, "run_id": "run-1"}),
        json!({"job": {"id": "g1"}, "state": "done", "metrics": {"m": 1}, "output": {"audio": "UklGRg=="}}),
        json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}], "usage": {"total_tokens": 3}}),
        json!({"data": {"x": 1}}),
    ]
}

/// A value for a field that exists: anything, often a long string or the wrong type.
fn field_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => value(),
        1 => (1usize..8_000).prop_map(|n| Value::from("e".repeat(n))),
        1 => prop::sample::select(vec![json!(null), json!([]), json!({}), json!(-1), json!(1e308), json!(""), json!("COMPLETED")]),
    ]
}

/// A provider's reply with some of its own fields given other values or removed.
fn templated() -> impl Strategy<Value = Value> {
    (prop::sample::select(templates()), prop::collection::vec((any::<usize>(), prop::option::weighted(0.85, field_value())), 1..4))
        .prop_map(|(mut t, changes)| {
            if let Value::Object(m) = &mut t {
                for (i, v) in changes {
                    let Some(k) = m.keys().nth(i % m.len().max(1)).cloned() else { continue };
                    match v {
                        Some(v) => m.insert(k, v),
                        None => m.remove(&k),
                    };
                }
            }
            t
        })
}

/// A reply body: a well-formed document, a mutated one, or arbitrary bytes.
fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => templated().prop_map(|v| serde_json::to_vec(&v).unwrap()),
        2 => (templated(), prop::collection::vec(mutation(), 1..3)).prop_map(|(v, m)| mutate(serde_json::to_vec(&v).unwrap(), &m)),
        2 => document().prop_map(|v| serde_json::to_vec(&v).unwrap()),
        2 => (document(), prop::collection::vec(mutation(), 1..4)).prop_map(|(v, m)| mutate(serde_json::to_vec(&v).unwrap(), &m)),
        1 => prop::collection::vec(any::<u8>(), 0..512),
    ]
}

fn status() -> impl Strategy<Value = u16> {
    prop_oneof![
        4 => Just(200u16),
        1 => prop::sample::select(vec![201u16, 202, 204, 400, 401, 403, 404, 409, 422, 429, 500, 502, 503]),
        1 => 100u16..600,
    ]
}

/// Runs `f` on its own thread within [`BOUND`]: its value, or why not (a panic, or no
/// answer in time: a hang).
fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, tailcut_testkit::fuzz::Unfinished> {
    tailcut_testkit::fuzz::bounded(BOUND, f)
}

/// A rejection is clear: it says what was wrong (the status, or what was missing or
/// malformed) in a bounded amount of text.
fn clear(e: &ProviderError, status: u16) -> Result<(), String> {
    let text = e.to_string();
    let ok = match e {
        ProviderError::Rejected { status: s, message } => {
            *s == status && text.contains(&format!("status {status}")) && message.len() <= 1000
        }
        ProviderError::MalformedResponse { reason: m } => !m.trim().is_empty(),
        ProviderError::Transport { reason: m } => !m.trim().is_empty(),
        ProviderError::NotDeployed { .. } | ProviderError::Unsupported(_) => true,
    };
    if !ok || text.len() > MAX_ERROR_BYTES {
        return Err(format!("unclear error for status {status}: {text:.300}"));
    }
    Ok(())
}

fn clear_result<T>(r: &Result<T, ProviderError>, status: u16) -> Result<(), String> {
    match r {
        Ok(_) => Ok(()),
        Err(e) => clear(e, status),
    }
}

fn obs_ok(r: &Result<Observation, ProviderError>, status: u16) -> Result<(), String> {
    clear_result(r, status)?;
    if let Ok(o) = r {
        if o.error.as_ref().is_some_and(|e| e.len() > MAX_ERROR_BYTES) {
            return Err(format!("an observation kept a {}-byte error", o.error.as_ref().map_or(0, String::len)));
        }
        if o.state.is_terminal() && o.state != JobState::Completed && o.state != JobState::Failed && o.state != JobState::Cancelled {
            return Err(format!("a provider state mapped to {:?}", o.state));
        }
    }
    Ok(())
}

fn result_ok(r: &JobResult) -> Result<(), String> {
    if r.error.as_ref().is_some_and(|e| e.trim().is_empty() || e.len() > MAX_ERROR_BYTES) {
        return Err(format!("unclear result error: {:.300}", r.error.clone().unwrap_or_default()));
    }
    if r.state == JobState::Completed && r.payload.is_none() {
        return Err("completed without a payload".into());
    }
    if r.state != JobState::Completed && r.error.is_none() {
        return Err(format!("{:?} without an error", r.state));
    }
    Ok(())
}

fn reply(status: u16, body: &[u8]) -> Reply {
    Reply { status, body: Bytes::copy_from_slice(body) }
}

fn generic(audio: bool) -> Generic {
    let mut spec = json!({
        "submit": {"url": "http://x/jobs"},
        "id_path": "job.id",
        "status": {"url": "http://x/jobs/{job_id}"},
        "state_path": "state",
        "state_map": {"waiting": "queued", "done": "completed"},
        "metrics_path": "metrics",
        "result_path": "output",
        "cancel": {"url": "http://x/jobs/{job_id}"},
    });
    if audio {
        spec["audio_b64_path"] = json!("output.audio");
        spec["result"] = json!({"url": "http://x/jobs/{job_id}/result"});
    }
    let spec: GenericSpec = serde_json::from_value(spec).unwrap();
    Generic { name: "gen".into(), spec: spec.normalized() }
}

/// Every job-queue and request-channel parser on one reply.
fn all_parsers(status: u16, body: &[u8]) -> Result<(), String> {
    let r = reply(status, body);
    let check = |what: &str, res: Result<(), String>| res.map_err(|e| format!("{what}: {e}"));
    check("runpod submit", clear_result::<Remote>(&runpod::read_submit(&r), status))?;
    check("runpod status", obs_ok(&runpod::read_status(&r, "runpod"), status))?;
    check("runpod cancel", clear_result::<CancelReply>(&runpod::read_cancel(&r), status))?;
    check("runpod stream", clear_result(&runpod::read_stream(&r), status))?;
    check("replicate submit", clear_result(&replicate::read_submit(&r), status))?;
    check("replicate status", obs_ok(&replicate::read_status(&r, "replicate"), status))?;
    check("replicate cancel", clear_result(&replicate::read_cancel(&r), status))?;
    check("fal submit", clear_result(&fal::read_submit(&r), status))?;
    check("fal status", obs_ok(&fal::read_status(&r, "fal"), status))?;
    check("fal result", clear_result(&fal::read_result(&r), status))?;
    check("fal cancel", clear_result(&fal::read_cancel(&r), status))?;
    check("baseten submit", clear_result(&baseten::read_submit(&r), status))?;
    check("baseten status", obs_ok(&baseten::read_status(&r), status))?;
    check("baseten result", clear_result(&baseten::read_result(&r), status))?;
    check("baseten cancel", clear_result(&baseten::read_cancel(&r), status))?;
    check("modal submit", clear_result(&modal::read_submit(&r), status))?;
    check("modal status", obs_ok(&modal::read_status(&r), status))?;
    check("modal result", clear_result(&modal::read_result(&r), status))?;
    check("cerebrium", result_ok(&cerebrium::read_reply(&r, "cerebrium")))?;
    check("vast worker", result_ok(&vast::read_worker(&r)))?;
    check(
        "vast route",
        match vast::read_route(&r) {
            Ok(_) => Ok(()),
            Err(e) => match e.to_string() {
                e if !e.trim().is_empty() && e.len() <= MAX_ERROR_BYTES => Ok(()),
                e => Err(format!("unclear route error: {e:.300}")),
            },
        },
    )?;
    for audio in [false, true] {
        let g = generic(audio);
        check("generic submit", clear_result(&g.read_submit(&r), status))?;
        check("generic status", obs_ok(&g.read_status(&r), status))?;
        check("generic result", clear_result(&g.read_result(&r), status))?;
    }
    Ok(())
}

fn openai_whole(status: u16, body: &[u8]) -> Result<(), String> {
    let started = tokio::time::Instant::now();
    for check_json in [true, false] {
        let r = openai::whole_reply(status, Bytes::copy_from_slice(body), check_json, started);
        result_ok(&r)?;
        if r.state == JobState::Completed
            && check_json
            && serde_json::from_slice::<serde::de::IgnoredAny>(&r.payload.unwrap().bytes).is_err()
        {
            return Err("a checked completion is not JSON".into());
        }
    }
    Ok(())
}

/// Feeds a stream in `cuts` pieces to the assembly; checks what it makes of it.
fn openai_stream(stream: &[u8], cuts: &[usize]) -> Result<(), String> {
    let started = tokio::time::Instant::now();
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
    points.sort_unstable();
    points.push(stream.len());
    let mut from = 0;
    let mut chunks = Vec::new();
    for to in points {
        chunks.push(Ok::<_, String>(Bytes::copy_from_slice(&stream[from..to.max(from)])));
        from = to.max(from);
    }
    for route in [Endpoint::Chat, Endpoint::Completions] {
        // The body is always ready, so the assembly never waits.
        let mut body = futures::stream::iter(chunks.clone());
        let r = futures::FutureExt::now_or_never(assemble(&mut body, started, route, "up")).ok_or("the assembly waited on a ready body")?;
        match &r.error {
            Some(e) if e.trim().is_empty() || e.len() > MAX_ERROR_BYTES => return Err(format!("unclear stream failure: {e:.300}")),
            Some(_) => {}
            None => {
                result_ok(&r)?;
                if let Some(p) = &r.payload {
                    serde_json::from_slice::<Value>(&p.bytes).map_err(|e| format!("assembled completion is not JSON: {e}"))?;
                }
            }
        }
    }
    Ok(())
}

/// One server-sent event: a chunk-shaped document, `[DONE]`, an error, or noise.
fn event() -> impl Strategy<Value = Vec<u8>> {
    let chunk = (".{0,12}", prop::option::of(prop::sample::select(vec!["stop", "length"])), any::<bool>()).prop_map(|(text, fin, chat)| {
        let choice = if chat {
            json!({"index": 0, "delta": {"content": text}, "finish_reason": fin})
        } else {
            json!({"index": 0, "text": text, "finish_reason": fin})
        };
        json!({"object": "chat.completion.chunk", "choices": [choice]})
    });
    prop_oneof![
        6 => chunk.prop_map(|v| format!("data: {v}\n\n").into_bytes()),
        1 => document().prop_map(|v| format!("data: {v}\n\n").into_bytes()),
        1 => Just(b"data: [DONE]\n\n".to_vec()),
        1 => value().prop_map(|v| format!("data: {}\n\n", json!({"error": v})).into_bytes()),
        1 => Just(b": keep-alive\nevent: ping\n\n".to_vec()),
        1 => Just(b"data: {\"usage\": {\"total_tokens\": 3}}\r\n\r\n".to_vec()),
        1 => prop::collection::vec(any::<u8>(), 0..64),
    ]
}

fn sse_stream() -> impl Strategy<Value = Vec<u8>> {
    (prop::collection::vec(event(), 0..24), prop::collection::vec(mutation(), 0..2)).prop_map(|(events, m)| mutate(events.concat(), &m))
}

fn config() -> ProptestConfig {
    ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn job_api_parsers_never_panic_hang_or_give_unclear_errors(status in status(), body in body()) {
        let outcome = bounded(move || all_parsers(status, &body));
        prop_assert!(matches!(outcome, Ok(Ok(()))), "{:?}", outcome);
    }

    #[test]
    fn openai_whole_replies_never_panic_hang_or_give_unclear_errors(status in status(), body in body()) {
        let outcome = bounded(move || openai_whole(status, &body));
        prop_assert!(matches!(outcome, Ok(Ok(()))), "{:?}", outcome);
    }

    #[test]
    fn openai_streams_never_panic_hang_or_give_unclear_errors(stream in sse_stream(), cuts in prop::collection::vec(any::<usize>(), 0..6)) {
        let outcome = bounded(move || openai_stream(&stream, &cuts));
        prop_assert!(matches!(outcome, Ok(Ok(()))), "{:?}", outcome);
    }
}

/// Known-nasty replies, run first as seeds: deep nesting, huge error texts, numbers out
/// of range, invalid UTF-8, a byte-order mark, empty and whitespace bodies, and the
/// reply shapes of each provider with their fields of the wrong type.
#[test]
fn seed_corpus() {
    let mut seeds: Vec<Vec<u8>> = vec![
        Vec::new(),
        b" \n\t".to_vec(),
        b"\xef\xbb\xbf{\"id\": \"x\"}".to_vec(),
        b"\xff\xfe\xfd".to_vec(),
        b"null".to_vec(),
        b"[]".to_vec(),
        b"{\"status\": 1e400}".to_vec(),
        b"{\"executionTime\": -1e308, \"status\": \"COMPLETED\"}".to_vec(),
        b"{\"id\": \"\xc3\x28\"}".to_vec(),
        [b"[".repeat(100_000), b"]".repeat(100_000)].concat(),
        [b"{\"a\":".repeat(50_000), b"1".to_vec(), b"}".repeat(50_000)].concat(),
        json!({"status": "FAILED", "error": "x".repeat(1_000_000)}).to_string().into_bytes(),
        json!({"status": "COMPLETED", "output": null}).to_string().into_bytes(),
        json!({"status": "succeeded", "data_removed": true, "metrics": {"predict_time": "fast"}}).to_string().into_bytes(),
        json!({"status": "IN_QUEUE", "queue_position": {"deep": [1, 2, 3]}, "metrics": {"inference_time": 1e308}}).to_string().into_bytes(),
        json!({"status": "FAILED", "errors": [{"message": 5}, {"message": "y".repeat(100_000)}, null]}).to_string().into_bytes(),
        json!({"request_id": 7, "status_url": ["x"], "call_id": {}, "id": 1.5}).to_string().into_bytes(),
        json!({"job": {"id": 12345678901234567890u64}, "state": "done", "metrics": [1], "output": {"audio": "!!!"}})
            .to_string()
            .into_bytes(),
        json!({"result": null, "run_time_ms": "soon", "run_id": []}).to_string().into_bytes(),
        json!({"choices": [{"delta": {"content": 5}}], "error": null}).to_string().into_bytes(),
    ];
    seeds.push(
        b"data: {\"error\": {\"message\": \""
            .iter()
            .copied()
            .chain(std::iter::repeat_n(b'z', 1_000_000))
            .chain(b"\"}}\n\n".iter().copied())
            .collect(),
    );
    seeds.push(b"data: [DONE]".to_vec());
    seeds.push(b"data:".repeat(100_000));
    seeds.push(std::iter::repeat_n(b'x', 1_000_000).collect());
    for seed in seeds {
        for status in [200u16, 202, 401, 500] {
            let (a, b) = (seed.clone(), seed.clone());
            let outcome = bounded(move || all_parsers(status, &a).and(openai_whole(status, &b)));
            assert!(matches!(outcome, Ok(Ok(()))), "{outcome:?} for {:.120}", String::from_utf8_lossy(&seed));
        }
        let s = seed.clone();
        let outcome = bounded(move || openai_stream(&s, &[3, 17, 1000]));
        assert!(matches!(outcome, Ok(Ok(()))), "{outcome:?} for stream {:.120}", String::from_utf8_lossy(&seed));
    }
}
