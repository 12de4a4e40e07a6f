//! The fields of an OpenAI-style request body that the gateway routes and checks by
//! (`model`, `messages`, `prompt`, `input`, `stream`), read in one pass that checks the
//! whole body's syntax but builds no document: the body itself is forwarded as sent.

use crate::error::ApiError;
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
    let not_json = |e: serde_json::Error| ApiError::BadRequest(format!("body is not valid JSON: {e}"));
    if !body.trim_ascii_start().starts_with(b"{") {
        // Distinguish "not JSON" from "JSON, but not an object", as a full parse would.
        serde_json::from_slice::<IgnoredAny>(body).map_err(not_json)?;
        return Err(ApiError::BadRequest("body must be a JSON object".into()));
    }
    serde_json::from_slice(body).map_err(not_json)
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
                (Err(ApiError::BadRequest(m)), Ok(v)) => assert!(!v.is_object() && m.contains("JSON object"), "{m}"),
                (Err(ApiError::BadRequest(m)), Err(_)) => assert!(m.starts_with("body is not valid JSON"), "{m}"),
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

    #[test]
    fn a_repeated_field_is_refused() {
        assert!(probe(br#"{"model":"a","model":"b"}"#).is_err());
    }
}
