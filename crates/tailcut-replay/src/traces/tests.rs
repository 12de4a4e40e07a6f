use super::*;
use std::io::Write;

fn write(bytes: &[u8]) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(bytes).unwrap();
    f
}

fn request(id: u32, extra: &str) -> String {
    format!(
        r#"{{"kind":"tailcut_request","request_id":"r{id}","policy":"single:runpod","winner":"runpod","winner_total_ms":5000.0,"attempts":[{{}}],"receipts":[]{extra}}}"#
    ) + "\n"
}

fn err(text: &[u8]) -> String {
    let f = write(text);
    let e = read_live(&[f.path().to_path_buf()], false).unwrap_err().to_string();
    assert!(e.starts_with(&format!("{}:", f.path().display())), "names the file: {e}");
    e
}

#[test]
fn refused_requests_are_not_latency_misses() {
    let refused = r#"{"kind":"tailcut_request","request_id":"b","policy":"single:runpod","winner":null,"winner_total_ms":null,"attempts":[],"receipts":[]}"#;
    let failed = r#"{"kind":"tailcut_request","request_id":"c","policy":"single:runpod","winner":null,"winner_total_ms":null,"attempts":[{"provider":"runpod"}],"receipts":[]}"#;
    let text = format!("{}{refused}\n{refused}\n{failed}\n", request(1, ""));
    let f = write(text.as_bytes());
    let t = read_live(&[f.path().to_path_buf()], false).unwrap();
    let a = &summarize(&t.rows, 60.0)[0];
    assert_eq!((a.n, a.refused, a.sent, a.valid, a.misses), (4, 2, 2, 1, 1));
    assert_eq!(a.winners.values().sum::<usize>(), 2, "winners count sent requests only: {:?}", a.winners);
    assert_eq!(a.p50_s, Some(5.0));
}

#[test]
fn numbers_are_type_and_range_checked_naming_line_and_key() {
    let cases = [
        (r#","winner_total_ms":-5"#, "`winner_total_ms` is -5: expected milliseconds between 0 and 1e9"),
        (r#","winner_total_ms":"5000""#, "`winner_total_ms` is \"5000\": expected a number of milliseconds or null"),
        (r#","winner_valid_at_ms":1e308"#, "`winner_valid_at_ms` is 1e308"),
        (r#","receipts":[{"provider":"modal","cancel_sent_ms":-1e308,"cancel_ack_ms":1e308}]"#, "`receipts[0].cancel_sent_ms` is -1e308"),
        (r#","receipts":[{"provider":"modal","cancel_sent_ms":10,"cancel_ack_ms":4}]"#, "`receipts[0].cancel_ack_ms` (4) is before"),
        (r#","receipts":[{"provider":"modal","leaked":"false"}]"#, "`receipts[0].leaked` is \"false\": expected true, false or null"),
        (r#","budget_refusals":-1"#, "`budget_refusals` is -1"),
        (r#","attempts":{}"#, "`attempts` is an object: expected an array"),
    ];
    for (extra, expected) in cases {
        // serde_json keeps the last of a repeated key, so `extra` overrides the defaults.
        let e = err(format!("{}{}", request(1, ""), request(2, extra)).as_bytes());
        assert!(e.contains(":2: malformed record: ") && e.contains(expected), "{extra}: {e}");
    }
    // A legacy record rebuilds the winner's launch offset from its policy label.
    for label in ["runpod->modal@1e308s", "runpod->modal@nans", "runpod->modal@-5s"] {
        let legacy = format!(r#"{{"kind":"hedged_request","request_id":1,"policy":"{label}","winner":"modal","winner_valid_at_ms":3000}}"#);
        let e = err(format!("{legacy}\n").as_bytes());
        assert!(e.contains(&format!(":1: malformed record: policy label `{label}` launches at ")), "{e}");
    }
    let audit = r#"{"kind":"forced_cancel","provider":"runpod","phase":"early","receipt":{"cancel_sent_ms":1e308,"cancel_ack_ms":-1e308}}"#;
    assert!(err(format!("{audit}\n").as_bytes()).contains(":1: malformed record: `receipt.cancel_sent_ms` is 1e308"));
}

#[test]
fn bad_lines_are_counted_under_skip_bad_lines() {
    let mut text = request(1, "").into_bytes();
    text.extend_from_slice(b"{\"kind\":\"tailcut_request\",\"note\":\"\xff\"}\n");
    text.extend_from_slice(request(3, r#","winner_total_ms":-5"#).as_bytes());
    text.extend_from_slice(b"[1,2]\n");
    text.extend_from_slice(request(5, "").as_bytes());
    let e = err(&text);
    assert!(e.contains(":2: malformed record: not valid UTF-8 (invalid byte at column 35)"), "{e}");
    let f = write(&text);
    let t = read_live(&[f.path().to_path_buf()], true).unwrap();
    assert_eq!((t.rows.len(), t.skipped), (2, 3));
    assert!(t.skipped_examples[2].contains(":4: malformed record: expected a JSON object, found an array"), "{:?}", t.skipped_examples);
}

#[test]
fn long_lines_are_read_up_to_the_cap_then_named() {
    let pad = |n: usize| request(1, &format!(r#","pad":"{}""#, "x".repeat(n)));
    let text = [pad(5 << 20), request(2, ""), pad(3 << 20), request(4, "")].concat();
    let f = write(text.as_bytes());
    let t = read_live(&[f.path().to_path_buf()], false).unwrap();
    assert_eq!(t.rows.len(), 4);
    let capped = LiveOptions { skip_bad_lines: false, max_line_bytes: 4 << 20 };
    let e = read_live_with(&[f.path().to_path_buf()], capped).unwrap_err().to_string();
    assert!(e.contains(":1: line longer than 4194304 bytes"), "{e}");
    let t = read_live_with(&[f.path().to_path_buf()], LiveOptions { skip_bad_lines: true, ..capped }).unwrap();
    assert_eq!((t.rows.len(), t.skipped), (3, 1));
}

#[test]
fn a_repeated_id_in_a_joined_trace_is_an_error() {
    let engine = r#"{"kind":"hedged_request","request_id":7,"policy":"runpod->modal@10s","winner":"runpod","winner_valid_at_ms":3000}"#;
    let index = r#"{"kind":"validation_index","request_id":7,"arm":"hedge"}"#;
    let e = err(format!("{engine}\n{index}\n{index}\n").as_bytes());
    assert!(e.contains(":3: malformed record: duplicate validation_index for request_id 7 (first at "), "{e}");
    let e = err(format!("{engine}\n{engine}\n{index}\n").as_bytes());
    assert!(e.contains(":2: malformed record: duplicate request_id 7"), "{e}");
}

/// Issue 27 item 10: summarising grew with the square of the number of distinct arms
/// (50k lines, each its own policy, took 9.6 s in `report`). Grouped in one pass, 40,000
/// distinct arms take well under the bound.
#[test]
fn many_distinct_arms_summarise_in_linear_time() {
    let text: String = (0..40_000).map(|i| request(i, "").replace("single:runpod", &format!("single:p{i}"))).collect();
    let f = write(text.as_bytes());
    let t = read_live(&[f.path().to_path_buf()], false).unwrap();
    let started = std::time::Instant::now();
    let arms = summarize(&t.rows, 60.0);
    assert_eq!(arms.len(), 40_001);
    assert_eq!((arms[7].arm.as_str(), arms[7].n), ("single:p7", 1));
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(3), "{took:?} for 40,000 distinct arms");
}

#[test]
fn a_bad_record_is_a_typed_problem_keeping_its_field_and_value() {
    use crate::error::{Expected, Field, LineError, Place, RecordError};
    use crate::ReplayError;
    let late = r#","receipts":[{"provider":"modal","cancel_sent_ms":10,"cancel_ack_ms":4}]"#;
    let f = write(format!("{}{}", request(1, ""), request(2, late)).as_bytes());
    let e = read_live(&[f.path().to_path_buf()], false).unwrap_err();
    assert!(matches!(e, ReplayError::Malformed { line: 2, .. }), "{e:?}");
    let Some(LineError::Record(RecordError::BeforeCancel { field, at, sent })) = e.problem() else { panic!("{e:?}") };
    assert_eq!((*field, *at, *sent), (Field::at(Place::InList { list: "receipts", index: 0 }, "cancel_ack_ms"), 4.0, 10.0));
    assert!(
        e.to_string().ends_with(":2: malformed record: `receipts[0].cancel_ack_ms` (4) is before `receipts[0].cancel_sent_ms` (10)"),
        "{e}"
    );
    let f = write(request(1, r#","winner_total_ms":"5000""#).as_bytes());
    let e = read_live(&[f.path().to_path_buf()], false).unwrap_err();
    let Some(LineError::Record(RecordError::WrongType { field, found, expected })) = e.problem() else { panic!("{e:?}") };
    assert_eq!((*field, found, *expected), (Field::top("winner_total_ms"), &serde_json::json!("5000"), Expected::MillisOrNull));
}
