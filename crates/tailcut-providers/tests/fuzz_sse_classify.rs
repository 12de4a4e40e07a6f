//! Fuzz-style tests of the stream-event classifier, bounded for CI: on arbitrary bytes
//! and damaged events it never panics, and it decides as a full parse decides — except
//! that, like the JSON scan it uses, it does not check the range of numbers it skips
//! (such an event is valid JSON syntax that `serde_json` refuses to hold as a float).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use proptest::prelude::*;
use std::time::Duration;
use tailcut_providers::openai::event::{classify, classify_parsed, EventKind};

fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    let text = String::from_utf8_lossy(bytes).into_owned();
    let owned = text.clone();
    let scanned = tailcut_testkit::fuzz::bounded(Duration::from_secs(2), move || classify(&owned))
        .map_err(|why| TestCaseError::fail(format!("{why} on {} bytes", bytes.len())))?;
    let parsed = classify_parsed(&text);
    if scanned != parsed {
        let syntax_only = serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok();
        prop_assert!(parsed == EventKind::Malformed && syntax_only, "scan {scanned:?}, parse {parsed:?}: {text:?}");
    }
    Ok(())
}

fn seeds() -> Vec<Vec<u8>> {
    [
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"hi"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        r#"{"choices":[{"delta":{"content":null},"text":"x"}]}"#,
        r#"{"choices":[{"delta":[1],"text":"x"}]}"#,
        r#"{"choices":[{"text":"completion"}]}"#,
        r#"{"choices":[{"text":""}],"choices":[{"text":"last wins"}]}"#,
        r#"{"choices":[]}"#,
        r#"{"choices":"nope"}"#,
        r#"{"choices":[7,{"delta":{"content":"second"}}]}"#,
        r#"{"usage":{"total_tokens":3}}"#,
        r#"{"error":{"message":"overloaded"}}"#,
        r#"{"error":null}"#,
        r#"{"ch\u006fices":[{"delta":{"content":"escaped key"}}]}"#,
        r#"{"choices":[{"d\u0065lta":{"content":"x"}}]}"#,
        r#"{"choices":[{"delta":{"content":"\u00e9\n\""}}]}"#,
        r#"[{"choices":[]}]"#,
        r#"{"choices":[{"delta":{"content":"x"}}]"#,
        r#"{"choices":[{"delta":{"content":1e400}}]}"#,
        " { \"choices\" : [ { \"delta\" : { \"content\" : \"spaced\" } } ] } ",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

#[test]
fn the_common_events_are_classified_as_a_client_reads_them() {
    let kinds: Vec<EventKind> = seeds().iter().map(|s| classify(std::str::from_utf8(s).unwrap())).collect();
    use EventKind::*;
    let expected = [
        Preamble, Content, Preamble, Preamble, Content, Content, Content, Preamble, Preamble, Preamble, Preamble, Error, Error, Content,
        Content, Content, Preamble, Malformed, Preamble, Content,
    ];
    assert_eq!(kinds, expected);
}

tailcut_testkit::fuzz_tests!(seeds: seeds, check: check, cases: 3000);
