//! The validators' unit tests; those of a feature-gated validator run with its feature.

use super::*;
use crate::job::{JobState, Payload};

fn completed(bytes: &[u8]) -> JobResult {
    let mut r = JobResult::bare(JobState::Completed, None);
    r.payload = Some(Payload { bytes: bytes::Bytes::copy_from_slice(bytes), content_type: "application/octet-stream".into() });
    r
}

#[cfg(feature = "json-schema")]
#[test]
fn unknown_validator_is_an_error_naming_it() {
    let err = ValidatorRegistry::default().build(&ValidatorSpec::named("nope")).unwrap_err();
    assert!(err.to_string().contains("unknown validator `nope`"), "{err}");
    assert!(err.to_string().contains("json-schema"));
}

#[test]
fn non_completed_results_are_invalid() {
    let mut r = completed(b"x");
    r.state = JobState::Failed;
    assert!(!judge(&NonEmpty, &r).valid);
}

#[test]
fn nonempty_rejects_empty() {
    assert!(!NonEmpty.validate(&completed(b"")).valid);
    assert!(NonEmpty.validate(&completed(b"a")).valid);
}

#[cfg(feature = "json")]
#[test]
fn json_requires_fields_by_dotted_path() {
    let v = JsonValidator::requiring(&["result.audio", "items.1"]);
    assert!(v.validate(&completed(br#"{"result":{"audio":"x"},"items":[1,2]}"#)).valid);
    let bad = v.validate(&completed(br#"{"result":{},"items":[1]}"#));
    assert_eq!(bad.reasons.len(), 2);
    assert!(!v.validate(&completed(b"{not json")).valid);
}

#[cfg(feature = "json")]
#[test]
fn top_level_fast_path_agrees_with_the_document_path() {
    // `choices` takes the one-pass scan; `$.choices` the same check on a parsed document.
    let fast = JsonValidator::requiring(&["choices", "usage"]);
    let slow = JsonValidator::requiring(&["$.choices", "$.usage"]);
    assert!(fast.all_top_level() && !slow.all_top_level());
    let cases: &[&[u8]] = &[
        br#"{"choices":[],"usage":{}}"#,
        br#"{"choices":[{"a":[1,{"b":null}]}],"usage":0}"#,
        br#"{"choices":null,"usage":1}"#,
        br#"{"usage":1}"#,
        br#"{"choices":1,"usage":2,"choices":null}"#,
        br#"{"choices":null,"usage":2,"choices":3}"#,
        br#"{"ch\u006fices":1,"usage":2}"#,
        br#"{"choices":1,"usage":2} trailing"#,
        br#"{"choices":1,"usage":"#,
        b"[1,2]",
        b"\"choices\"",
        b"null",
        b"42",
        b"",
        b"  ",
    ];
    for case in cases {
        let (a, b) = (fast.validate(&completed(case)), slow.validate(&completed(case)));
        assert_eq!(a.valid, b.valid, "{}", String::from_utf8_lossy(case));
        assert_eq!(a.reasons.len(), b.reasons.len(), "{}: {:?} vs {:?}", String::from_utf8_lossy(case), a.reasons, b.reasons);
    }
}

#[cfg(feature = "json-schema")]
#[test]
fn json_schema_checks_types() {
    let spec: ValidatorSpec = serde_json::from_value(serde_json::json!({
        "name": "json-schema",
        "schema": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}
    }))
    .unwrap();
    let v = ValidatorRegistry::default().build(&spec).unwrap();
    assert!(v.validate(&completed(br#"{"text":"hi"}"#)).valid);
    assert!(!v.validate(&completed(br#"{"text":3}"#)).valid);
    assert!(!v.validate(&completed(br#"{}"#)).valid);
}

#[cfg(feature = "json-schema")]
#[test]
fn json_schema_without_schema_is_a_setting_error() {
    let err = ValidatorRegistry::default().build(&ValidatorSpec::named("json-schema")).unwrap_err();
    assert!(matches!(err, ValidatorError::BadSetting { ref key, .. } if key == "schema"));
}

#[cfg(feature = "wav")]
#[test]
fn wav_accepts_speechlike_audio() {
    let v = WavValidator::default();
    assert!(v.check_bytes(&sine_wav(1.0, 16_000, 220.0, 0.3)).valid);
}

#[cfg(feature = "wav")]
#[test]
fn wav_rejects_silence_short_clipped_and_garbage() {
    let v = WavValidator::default();
    let silent = v.check_bytes(&sine_wav(1.0, 16_000, 220.0, 1e-6));
    assert!(silent.reasons.iter().any(|r| r.contains("near-silent")), "{silent:?}");
    let short = v.check_bytes(&sine_wav(0.2, 16_000, 220.0, 0.3));
    assert!(short.reasons.iter().any(|r| r.contains("duration")));
    let clipped = v.check_bytes(&sine_wav(1.0, 16_000, 220.0, 1.5));
    assert!(clipped.reasons.iter().any(|r| r.contains("clipped")), "{clipped:?}");
    assert_eq!(v.check_bytes(b"RIFF....garbage").reasons, vec!["unparseable WAV"]);
    assert_eq!(v.check_bytes(b"").reasons, vec!["empty result"]);
}

#[cfg(feature = "wav")]
#[test]
fn wav_checks_expected_sample_rate() {
    let v = WavValidator { expected_sample_rate: Some(24_000), ..WavValidator::default() };
    assert!(!v.check_bytes(&sine_wav(1.0, 16_000, 220.0, 0.3)).valid);
}

#[cfg(feature = "wav")]
#[test]
fn wav_settings_are_checked() {
    let spec: ValidatorSpec = serde_json::from_value(serde_json::json!({"name":"wav","min_rms":"loud"})).unwrap();
    assert!(ValidatorRegistry::default().build(&spec).is_err());
    let spec: ValidatorSpec = serde_json::from_value(serde_json::json!({"name":"wav","colour":1})).unwrap();
    assert!(ValidatorRegistry::default().build(&spec).is_err());
}
