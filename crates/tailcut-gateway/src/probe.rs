//! The fields of an OpenAI-style request body that the gateway routes and checks by
//! (`model`, `messages`, `prompt`, `input`, `stream`), read in one pass that checks the
//! whole body's syntax but builds no document: the body itself is forwarded as sent.

use crate::error::{ApiError, BadRequest};
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::borrow::Cow;
use std::fmt;

/// What one top-level field holds.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) enum Field<'a> {
    /// Not in the body.
    #[default]
    Absent,
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number.
    Number,
    /// A string (borrowed from the body unless it has escapes).
    Str(Cow<'a, str>),
    /// An array (contents skipped).
    Array,
    /// An object (contents skipped).
    Object,
}

impl<'de: 'a, 'a> Deserialize<'de> for Field<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Kind<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for Kind<'a> {
            type Value = Field<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_unit<E>(self) -> Result<Field<'a>, E> {
                Ok(Field::Null)
            }
            fn visit_none<E>(self) -> Result<Field<'a>, E> {
                Ok(Field::Null)
            }
            fn visit_bool<E>(self, v: bool) -> Result<Field<'a>, E> {
                Ok(Field::Bool(v))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Field<'a>, E> {
                Ok(Field::Number)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Field<'a>, E> {
                Ok(Field::Number)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Field<'a>, E> {
                Ok(Field::Number)
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Field<'a>, E> {
                Ok(Field::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Field<'a>, E> {
                Ok(Field::Str(Cow::Owned(v.to_string())))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Field<'a>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Field::Array)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Field<'a>, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Field::Object)
            }
        }
        d.deserialize_any(Kind(std::marker::PhantomData))
    }
}

/// The routing fields of a request body; every other field is skipped (but checked).
#[derive(Debug, Deserialize)]
pub(crate) struct Probe<'a> {
    #[serde(default, borrow)]
    pub model: Field<'a>,
    #[serde(default, borrow)]
    pub messages: Field<'a>,
    #[serde(default, borrow)]
    pub prompt: Field<'a>,
    #[serde(default, borrow)]
    pub input: Field<'a>,
    #[serde(default, borrow)]
    pub stream: Field<'a>,
}

/// Reads the routing fields of `body`, which must be one JSON object.
pub(crate) fn probe(body: &[u8]) -> Result<Probe<'_>, ApiError> {
    if let Some(p) = quick_probe(body) {
        return Ok(p);
    }
    let not_json = |e: serde_json::Error| ApiError::from(BadRequest::NotJson(e));
    if !body.trim_ascii_start().starts_with(b"{") {
        // Distinguish "not JSON" from "JSON, but not an object", as a full parse would.
        serde_json::from_slice::<IgnoredAny>(body).map_err(not_json)?;
        return Err(BadRequest::NotObject.into());
    }
    serde_json::from_slice(body).map_err(not_json)
}

const FIELDS: [&str; 5] = ["model", "messages", "prompt", "input", "stream"];

/// The common case without serde: a JSON object whose routing fields are each given
/// once, with no escapes in their strings and no numbers. Anything else (including
/// every error, so that its message is serde's) is `None`, for the full reader.
fn quick_probe(body: &[u8]) -> Option<Probe<'_>> {
    let mut values: [Option<&[u8]>; 5] = [None; 5];
    let mut repeated = false;
    let found = tailcut_core::json_scan::object_members(
        body,
        |key| FIELDS.iter().position(|f| f.as_bytes() == key),
        |slot, value| {
            repeated |= values[slot].replace(value).is_some();
        },
    );
    if found != tailcut_core::json_scan::Members::Object || repeated {
        return None;
    }
    let [model, messages, prompt, input, stream] = values.map(quick_field);
    Some(Probe { model: model?, messages: messages?, prompt: prompt?, input: input?, stream: stream? })
}

/// A routing field's value as [`Field`], or `None` where serde must decide.
fn quick_field(v: Option<&[u8]>) -> Option<Field<'_>> {
    let Some(v) = v else { return Some(Field::Absent) };
    Some(match v.first()? {
        b'n' => Field::Null,
        b't' => Field::Bool(true),
        b'f' => Field::Bool(false),
        b'[' => Field::Array,
        b'{' => Field::Object,
        b'"' => {
            let inner = &v[1..v.len() - 1];
            if inner.contains(&b'\\') {
                return None;
            }
            Field::Str(Cow::Borrowed(std::str::from_utf8(inner).ok()?))
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_routing_fields_and_agrees_with_a_full_parse() {
        let bodies: [&[u8]; 9] = [
            br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}"#,
            br#" {"model":"m\u00e9","prompt":null,"extra":{"deep":[1,2,{"x":"y"}]}}"#,
            br#"{"input":["a","b"],"model":"e","stream":false}"#,
            br#"{"model":7,"messages":"not an array","stream":"yes"}"#,
            br#"{}"#,
            br#"[1,2]"#,
            br#"{"model":"m",}"#,
            br#"{"model":"m"} trailing"#,
            b"not json",
        ];
        for body in bodies {
            let full: Result<serde_json::Value, _> = serde_json::from_slice(body);
            match (probe(body), full) {
                (Ok(p), Ok(v)) => {
                    assert_eq!(
                        p.model,
                        v.get("model").and_then(|m| m.as_str()).map_or_else(|| kind(v.get("model")), |m| Field::Str(m.into()))
                    );
                    assert_eq!(p.messages == Field::Array, v.get("messages").is_some_and(|m| m.is_array()));
                    assert_eq!(p.prompt != Field::Absent, v.get("prompt").is_some());
                    assert_eq!(p.input != Field::Absent, v.get("input").is_some());
                    assert_eq!(p.stream == Field::Bool(true), v.get("stream").and_then(|s| s.as_bool()) == Some(true));
                }
                (Err(ApiError::BadRequest(m)), Ok(v)) => assert!(!v.is_object() && m.to_string().contains("JSON object"), "{m}"),
                (Err(ApiError::BadRequest(m)), Err(_)) => assert!(m.to_string().starts_with("body is not valid JSON"), "{m}"),
                (p, v) => panic!("{} disagrees: {p:?} vs {v:?}", String::from_utf8_lossy(body)),
            }
        }
    }

    fn kind(v: Option<&serde_json::Value>) -> Field<'static> {
        match v {
            None => Field::Absent,
            Some(serde_json::Value::Null) => Field::Null,
            Some(serde_json::Value::Bool(b)) => Field::Bool(*b),
            Some(serde_json::Value::Number(_)) => Field::Number,
            Some(serde_json::Value::String(s)) => Field::Str(s.clone().into()),
            Some(serde_json::Value::Array(_)) => Field::Array,
            Some(serde_json::Value::Object(_)) => Field::Object,
        }
    }

    fn serde_probe(body: &[u8]) -> Option<Probe<'_>> {
        serde_json::from_slice(body).ok()
    }

    fn value() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop::sample::select(vec![
            r#""m""#,
            r#""gpt-4o-mini""#,
            r#""caf\u00e9""#,
            r#""a\"b""#,
            r#""""#,
            "true",
            "false",
            "null",
            "0",
            "-1.5e3",
            "[]",
            r#"[{"role":"user","content":"hi"}]"#,
            r#"{"k":[1,2]}"#,
            "\"\u{e9}t\u{e9}\"",
            "[1,",
            r#""\x""#,
            "tru",
            "01",
        ])
        .prop_map(str::to_string)
    }

    proptest::proptest! {
        /// Wherever the fast path answers, it answers as serde does; and it answers for
        /// the plain bodies clients send.
        #[test]
        fn the_fast_path_agrees_with_serde(
            members in proptest::collection::vec(
                (proptest::sample::select(vec!["model", "messages", "prompt", "input", "stream", "temperature", r"mo\u0064el"]), value()),
                0..7,
            ),
            pad in proptest::sample::select(vec!["", " ", "\n  "]),
        ) {
            let body: Vec<String> = members.iter().map(|(k, v)| format!("\"{k}\":{pad}{v}")).collect();
            let doc = format!("{{{pad}{}{pad}}}", body.join(","));
            let quick = quick_probe(doc.as_bytes());
            let full = serde_probe(doc.as_bytes());
            if let Some(q) = &quick {
                let f = full.as_ref().expect("serde accepts what the fast path accepts");
                proptest::prop_assert_eq!(
                    (&q.model, &q.messages, &q.prompt, &q.input, &q.stream),
                    (&f.model, &f.messages, &f.prompt, &f.input, &f.stream),
                    "{}", doc
                );
            }
            let plain = members.iter().all(|(k, v)| !k.contains('\\') && !v.contains('\\') && !v.starts_with(|c: char| c == '-' || c.is_ascii_digit()));
            let mut names: Vec<&str> = members.iter().map(|(k, _)| *k).collect();
            names.sort_unstable();
            let repeated = names.windows(2).any(|w| w[0] == w[1]);
            if plain && !repeated && full.is_some() {
                proptest::prop_assert!(quick.is_some(), "fast path declined a plain body: {}", doc);
            }
        }
    }

    #[test]
    fn a_repeated_field_is_refused() {
        assert!(probe(br#"{"model":"a","model":"b"}"#).is_err());
    }
}

/// Fuzz-style tests, bounded for CI: arbitrary bytes and damaged request bodies through
/// the probe. It must never panic, answer every case in bounded time, and reject with a
/// message; a body it accepts must be an object serde_json reads when it skims it (keys
/// read, values skipped: what the probe promises; the provider judges the rest). Seeds: the shapes
/// that broke parsers before (deep nesting, huge strings, invalid UTF-8, NaN-like
/// numbers, duplicated keys, escapes in keys).
#[cfg(test)]
mod fuzz {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    /// Each case's time bound (generous for a loaded debug build; the probe takes
    /// microseconds).
    const BOUND: Duration = Duration::from_secs(2);

    fn check(body: &[u8]) -> Result<(), TestCaseError> {
        let owned = body.to_vec();
        let probed = tailcut_testkit::fuzz::bounded(BOUND, move || probe(&owned).map(|_| ()))
            .map_err(|why| TestCaseError::fail(format!("{why} on {} bytes", body.len())))?;
        match probed {
            Ok(_) => {
                let skim = serde_json::from_slice::<std::collections::BTreeMap<String, IgnoredAny>>(body);
                prop_assert!(skim.is_ok(), "accepted a body serde rejects: {:?}", String::from_utf8_lossy(body));
            }
            Err(e) => {
                prop_assert_eq!(e.status(), axum::http::StatusCode::BAD_REQUEST);
                prop_assert!(!e.to_string().is_empty());
            }
        }
        Ok(())
    }

    fn seeds() -> Vec<Vec<u8>> {
        let mut s: Vec<Vec<u8>> = vec![
            br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}"#.to_vec(),
            br#"{"model":"m","model":"n","messages":[]}"#.to_vec(),
            br#"{"mo\u0064el":"m","messages":[]}"#.to_vec(),
            br#"{"model":NaN}"#.to_vec(),
            br#"{"model":1e999999}"#.to_vec(),
            br#"{"model":"\ud800"}"#.to_vec(),
            b"{\"model\":\"\xff\xfe\"}".to_vec(),
            b"\xef\xbb\xbf{}".to_vec(),
            b"{}\x00".to_vec(),
            b"".to_vec(),
            b"[]".to_vec(),
            b"null".to_vec(),
        ];
        s.push(format!("{{\"model\":\"{}\"}}", "a".repeat(1 << 20)).into_bytes());
        s.push(format!("{{\"messages\":{}{}}}", "[".repeat(100_000), "]".repeat(100_000)).into_bytes());
        s.push("{\"a\":".repeat(50_000).into_bytes());
        s
    }

    tailcut_testkit::fuzz_tests!(seeds: seeds, check: check, cases: 3000);
}
