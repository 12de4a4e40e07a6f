//! Fuzz-style tests of the one-pass JSON scan, bounded for CI: arbitrary bytes and
//! damaged documents. It must never panic, decide each case in bounded time, and decide
//! as serde_json decides when it reads an object's keys and skips its values (the
//! scan's contract; a skim, like the scan, does not check the UTF-8 inside string
//! values or the range of numbers it skips), when it decides at all.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use proptest::prelude::*;
use std::time::Duration;
use tailcut_core::json_scan::{object_members, top_level_keys, Members, Scan};

const BOUND: Duration = Duration::from_secs(2);

fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    let keys = vec!["choices".to_string(), "data".to_string(), "error".to_string()];
    let owned = bytes.to_vec();
    let (scan, found) = tailcut_testkit::fuzz::bounded(BOUND, move || {
        let mut members = 0usize;
        let found = object_members(&owned, |k| (k == b"choices").then_some(0), |_, _| members += 1);
        (top_level_keys(&owned, &keys), found)
    })
    .map_err(|why| TestCaseError::fail(format!("{why} on {} bytes", bytes.len())))?;
    let serde_ok = serde_json::from_slice::<std::collections::BTreeMap<String, serde::de::IgnoredAny>>(bytes).is_ok();
    match scan {
        Scan::Present(_) => prop_assert!(serde_ok, "scan accepted what serde rejects: {:?}", String::from_utf8_lossy(bytes)),
        Scan::Invalid => prop_assert!(!serde_ok, "scan rejected what serde accepts: {:?}", String::from_utf8_lossy(bytes)),
        Scan::Unsure => {}
    }
    prop_assert_eq!(found == Members::Object, matches!(scan, Scan::Present(_)));
    Ok(())
}

fn seeds() -> Vec<Vec<u8>> {
    let mut s: Vec<Vec<u8>> = vec![
        br#"{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}]}"#.to_vec(),
        br#"{"data":[{"embedding":[0.1,-2e-3,3E+2]}],"choices":null}"#.to_vec(),
        br#"{"error":{"message":"Bearer sk-xyz"}}"#.to_vec(),
        br#"{"a":"\u00e9\n\"","b":[true,false,null,{}],"c":-0.0}"#.to_vec(),
        b"{\"choices\":\"\xc3\x28\"}".to_vec(),
        b"{\"choices\":01}".to_vec(),
        b"{\"choices\":[1,]}".to_vec(),
        b" \n{} ".to_vec(),
    ];
    s.push(format!("{{\"choices\":{}{}}}", "[".repeat(100_000), "]".repeat(100_000)).into_bytes());
    s.push(format!("{{\"choices\":{}", "{\"a\":".repeat(50_000)).into_bytes());
    s.push(format!("{{\"choices\":\"{}\"}}", "x".repeat(1 << 22)).into_bytes());
    s
}

tailcut_testkit::fuzz_tests!(seeds: seeds, check: check, cases: 3000);
