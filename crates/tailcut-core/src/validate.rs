//! Result validators, looked up by name.
//!
//! The engine never trusts a provider's "completed": a result wins only if its
//! validator says it is valid. Validators never fail; a bad result is just invalid,
//! with reasons, and the race keeps going. Built-ins: `nonempty`, `json` (parses, with
//! optional required fields by dotted path), `json-schema` (a JSON Schema document) and
//! `wav` (header, duration bounds, RMS, NaN and clipping, as in the reference tool).

use crate::job::{JobResult, JobState};
use crate::json_scan::{top_level_keys, Scan};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A validator's verdict.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Validation {
    /// Whether the result may win.
    pub valid: bool,
    /// Why not, in check order.
    pub reasons: Vec<String>,
}

impl Validation {
    /// A passing verdict.
    pub fn ok() -> Validation {
        Validation { valid: true, reasons: Vec::new() }
    }

    /// A failing verdict with one reason.
    pub fn invalid(reason: impl Into<String>) -> Validation {
        Validation { valid: false, reasons: vec![reason.into()] }
    }

    fn from_reasons(reasons: Vec<String>) -> Validation {
        Validation { valid: reasons.is_empty(), reasons }
    }
}

/// Decides whether a completed result may win a race.
pub trait Validator: Send + Sync + fmt::Debug {
    /// Judges the result's payload. Called only for `COMPLETED` results.
    fn validate(&self, result: &JobResult) -> Validation;
}

/// Validates a result: anything but `COMPLETED` is invalid, otherwise the validator decides.
pub fn judge(validator: &dyn Validator, result: &JobResult) -> Validation {
    if result.state != JobState::Completed {
        let mut reason = format!("state {}", result.state.wire());
        if let Some(e) = &result.error {
            reason.push_str(": ");
            reason.push_str(e);
        }
        return Validation::invalid(reason);
    }
    validator.validate(result)
}

/// A validator choice as written in configuration: a name plus its own settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValidatorSpec {
    /// Registered name (`nonempty`, `json`, `json-schema`, `wav`, or a custom one).
    pub name: String,
    /// The validator's own settings.
    #[serde(flatten)]
    pub settings: serde_json::Map<String, serde_json::Value>,
}

impl ValidatorSpec {
    /// A spec with no settings.
    pub fn named(name: &str) -> ValidatorSpec {
        ValidatorSpec { name: name.into(), settings: serde_json::Map::new() }
    }
}

/// Why a validator could not be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ValidatorError {
    /// No validator is registered under this name.
    #[error("unknown validator `{name}` (known: {known})")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The registered names, comma-separated.
        known: String,
    },
    /// A setting is missing or has the wrong type.
    #[error("validator `{name}`: setting `{key}`: {expected}")]
    BadSetting {
        /// Validator name.
        name: String,
        /// The setting.
        key: String,
        /// What was expected.
        expected: String,
    },
}

type Factory = fn(&ValidatorSpec) -> Result<Arc<dyn Validator>, ValidatorError>;

/// Validators by name. [`ValidatorRegistry::default`] holds the built-ins; `register`
/// adds or replaces one.
#[derive(Clone)]
pub struct ValidatorRegistry {
    factories: BTreeMap<String, Factory>,
}

impl fmt::Debug for ValidatorRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.factories.keys()).finish()
    }
}

impl Default for ValidatorRegistry {
    fn default() -> Self {
        let mut r = ValidatorRegistry { factories: BTreeMap::new() };
        r.register("nonempty", |s| {
            reject_settings(s, &[])?;
            Ok(Arc::new(NonEmpty))
        });
        r.register("json", |s| Ok(Arc::new(JsonValidator::from_spec(s)?)));
        r.register("json-schema", |s| Ok(Arc::new(JsonSchemaValidator::from_spec(s)?)));
        r.register("wav", |s| Ok(Arc::new(WavValidator::from_spec(s)?)));
        r
    }
}

impl ValidatorRegistry {
    /// Adds or replaces the validator called `name`.
    pub fn register(&mut self, name: &str, factory: Factory) {
        self.factories.insert(name.to_string(), factory);
    }

    /// Builds the validator a spec names.
    pub fn build(&self, spec: &ValidatorSpec) -> Result<Arc<dyn Validator>, ValidatorError> {
        match self.factories.get(&spec.name) {
            Some(f) => f(spec),
            None => Err(ValidatorError::Unknown {
                name: spec.name.clone(),
                known: self.factories.keys().cloned().collect::<Vec<_>>().join(", "),
            }),
        }
    }
}

fn reject_settings(spec: &ValidatorSpec, allowed: &[&str]) -> Result<(), ValidatorError> {
    for key in spec.settings.keys() {
        if !allowed.contains(&key.as_str()) {
            return Err(ValidatorError::BadSetting {
                name: spec.name.clone(),
                key: key.clone(),
                expected: if allowed.is_empty() { "no settings are accepted".into() } else { format!("one of: {}", allowed.join(", ")) },
            });
        }
    }
    Ok(())
}

fn bad(spec: &ValidatorSpec, key: &str, expected: &str) -> ValidatorError {
    ValidatorError::BadSetting { name: spec.name.clone(), key: key.into(), expected: expected.into() }
}

fn f64_setting(spec: &ValidatorSpec, key: &str, default: f64) -> Result<f64, ValidatorError> {
    match spec.settings.get(key) {
        None => Ok(default),
        // Finite and non-negative: a negative bound would refuse (or pass) every result.
        Some(v) => v.as_f64().filter(|x| (0.0..=1e9).contains(x)).ok_or_else(|| bad(spec, key, "a number from 0 to 1e9")),
    }
}

// === impl NonEmpty ===

/// Valid when the payload has at least one byte.
#[derive(Debug, Clone, Copy)]
pub struct NonEmpty;

impl Validator for NonEmpty {
    fn validate(&self, result: &JobResult) -> Validation {
        match &result.payload {
            Some(p) if !p.bytes.is_empty() => Validation::ok(),
            _ => Validation::invalid("empty result"),
        }
    }
}

// === impl JsonValidator ===

/// Valid when the payload parses as JSON and every required dotted path is present.
#[derive(Debug, Clone, Default)]
pub struct JsonValidator {
    required: Vec<String>,
}

impl JsonValidator {
    /// Requires each dotted path (`result.audio`) to be present and non-null.
    pub fn requiring(paths: &[&str]) -> JsonValidator {
        JsonValidator { required: paths.iter().map(|s| s.to_string()).collect() }
    }

    fn from_spec(spec: &ValidatorSpec) -> Result<JsonValidator, ValidatorError> {
        reject_settings(spec, &["required"])?;
        let required = match spec.settings.get("required") {
            None => Vec::new(),
            Some(serde_json::Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| bad(spec, "required", "an array of strings (dotted paths)"))?,
            Some(_) => return Err(bad(spec, "required", "an array of strings (dotted paths)")),
        };
        Ok(JsonValidator { required })
    }
}

/// Looks up a dotted path (`a.b.0.c`; digits index arrays) in a JSON value.
pub fn dotted<'a>(value: &'a serde_json::Value, path: &str) -> Option<&'a serde_json::Value> {
    let path = path.strip_prefix("$.").unwrap_or(path);
    if path.is_empty() || path == "$" {
        return Some(value);
    }
    path.split('.').try_fold(value, |v, seg| match v {
        serde_json::Value::Object(m) => m.get(seg),
        serde_json::Value::Array(a) if seg.bytes().all(|b| b.is_ascii_digit()) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

fn parse_payload(result: &JobResult) -> Result<serde_json::Value, Validation> {
    let Some(p) = result.payload.as_ref().filter(|p| !p.bytes.is_empty()) else {
        return Err(Validation::invalid("empty result"));
    };
    serde_json::from_slice(&p.bytes).map_err(|e| Validation::invalid(format!("not JSON: {e}")))
}

/// Which of `keys` a JSON object has with a non-null value, found in one pass over the
/// text without building a document (the common case: required top-level fields such
/// as an OpenAI completion's `choices`). `Err` when the text is not JSON; `Ok(None)`
/// when it is JSON but not an object.
pub(crate) fn top_level_present(bytes: &[u8], keys: &[String]) -> Result<Option<Vec<bool>>, serde_json::Error> {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
    struct Keys<'k>(&'k [String]);
    impl<'de> Visitor<'de> for Keys<'_> {
        type Value = Option<Vec<bool>>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON value")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut seen = vec![false; self.0.len()];
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                let present = map.next_value::<Option<IgnoredAny>>()?.is_some();
                if let Some(i) = self.0.iter().position(|k| *k == key) {
                    seen[i] = present; // the last duplicate wins, as in a parsed document
                }
            }
            Ok(Some(seen))
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let out = (&mut de).deserialize_any(Keys(keys))?;
    de.end()?;
    Ok(out)
}

impl JsonValidator {
    fn all_top_level(&self) -> bool {
        self.required.iter().all(|p| !p.is_empty() && !p.contains('.') && !p.starts_with('$'))
    }
}

impl Validator for JsonValidator {
    fn validate(&self, result: &JobResult) -> Validation {
        if self.all_top_level() {
            let Some(p) = result.payload.as_ref().filter(|p| !p.bytes.is_empty()) else {
                return Validation::invalid("empty result");
            };
            let missing = |present: &dyn Fn(usize) -> bool| {
                Validation::from_reasons(
                    self.required
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| !present(*i))
                        .map(|(_, p)| format!("missing required field `{p}`"))
                        .collect(),
                )
            };
            // The fast scan decides the common case; a full parser the rest (and words
            // the error when the text is not JSON).
            if let Scan::Present(mask) = top_level_keys(&p.bytes, &self.required) {
                return missing(&|i| mask >> i & 1 == 1);
            }
            return match top_level_present(&p.bytes, &self.required) {
                Err(e) => Validation::invalid(format!("not JSON: {e}")),
                Ok(seen) => missing(&|i| seen.as_ref().is_some_and(|s| s[i])),
            };
        }
        let value = match parse_payload(result) {
            Ok(v) => v,
            Err(v) => return v,
        };
        let reasons = self
            .required
            .iter()
            .filter(|p| dotted(&value, p).is_none_or(|v| v.is_null()))
            .map(|p| format!("missing required field `{p}`"))
            .collect();
        Validation::from_reasons(reasons)
    }
}

// === impl JsonSchemaValidator ===

/// Valid when the payload is JSON that satisfies a JSON Schema document.
pub struct JsonSchemaValidator {
    schema: jsonschema::Validator,
}

impl fmt::Debug for JsonSchemaValidator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JsonSchemaValidator")
    }
}

impl JsonSchemaValidator {
    /// Compiles a schema document.
    pub fn new(schema: &serde_json::Value) -> Result<JsonSchemaValidator, String> {
        jsonschema::validator_for(schema).map(|schema| JsonSchemaValidator { schema }).map_err(|e| e.to_string())
    }

    fn from_spec(spec: &ValidatorSpec) -> Result<JsonSchemaValidator, ValidatorError> {
        reject_settings(spec, &["schema"])?;
        let schema = spec.settings.get("schema").ok_or_else(|| bad(spec, "schema", "a JSON Schema document"))?;
        JsonSchemaValidator::new(schema).map_err(|e| bad(spec, "schema", &format!("a valid JSON Schema ({e})")))
    }
}

impl Validator for JsonSchemaValidator {
    fn validate(&self, result: &JobResult) -> Validation {
        let value = match parse_payload(result) {
            Ok(v) => v,
            Err(v) => return v,
        };
        let reasons: Vec<String> = self.schema.iter_errors(&value).take(8).map(|e| format!("{} at `{}`", e, e.instance_path)).collect();
        Validation::from_reasons(reasons)
    }
}

// === impl WavValidator ===

/// Valid when the payload is a WAV file of plausible speech: allowed channel count,
/// expected sample rate (if set), duration in bounds, not near-silent, not clipped,
/// no NaN. Thresholds default to the reference tool's.
#[derive(Debug, Clone, PartialEq)]
pub struct WavValidator {
    /// Shortest acceptable duration (inclusive), seconds.
    pub min_duration_s: f64,
    /// Longest acceptable duration (inclusive), seconds.
    pub max_duration_s: f64,
    /// Minimum RMS of the mono mix.
    pub min_rms: f64,
    /// Maximum share of samples with |x| ≥ 0.999.
    pub max_clipped_fraction: f64,
    /// Required sample rate, if any.
    pub expected_sample_rate: Option<u32>,
}

impl Default for WavValidator {
    fn default() -> Self {
        WavValidator { min_duration_s: 0.5, max_duration_s: 120.0, min_rms: 1e-4, max_clipped_fraction: 0.01, expected_sample_rate: None }
    }
}

impl WavValidator {
    fn from_spec(spec: &ValidatorSpec) -> Result<WavValidator, ValidatorError> {
        reject_settings(spec, &["min_duration_s", "max_duration_s", "min_rms", "max_clipped_fraction", "expected_sample_rate"])?;
        let d = WavValidator::default();
        let expected_sample_rate = match spec.settings.get("expected_sample_rate") {
            None => None,
            Some(v) => Some(
                v.as_u64()
                    .and_then(|r| u32::try_from(r).ok())
                    .ok_or_else(|| bad(spec, "expected_sample_rate", "a positive integer (Hz)"))?,
            ),
        };
        Ok(WavValidator {
            min_duration_s: f64_setting(spec, "min_duration_s", d.min_duration_s)?,
            max_duration_s: f64_setting(spec, "max_duration_s", d.max_duration_s)?,
            min_rms: f64_setting(spec, "min_rms", d.min_rms)?,
            max_clipped_fraction: f64_setting(spec, "max_clipped_fraction", d.max_clipped_fraction)?,
            expected_sample_rate,
        })
    }

    /// Judges raw WAV bytes.
    pub fn check_bytes(&self, bytes: &[u8]) -> Validation {
        if bytes.is_empty() {
            return Validation::invalid("empty result");
        }
        let Ok(reader) = hound::WavReader::new(std::io::Cursor::new(bytes)) else {
            return Validation::invalid("unparseable WAV");
        };
        let spec = reader.spec();
        let channels = usize::from(spec.channels.max(1));
        let samples: Result<Vec<f32>, _> = match spec.sample_format {
            hound::SampleFormat::Float => reader.into_samples::<f32>().collect(),
            hound::SampleFormat::Int => {
                let scale = 2f32.powi(i32::from(spec.bits_per_sample) - 1);
                reader.into_samples::<i32>().map(|s| s.map(|v| v as f32 / scale)).collect()
            }
        };
        let Ok(samples) = samples else {
            return Validation::invalid("unparseable WAV");
        };
        let mono: Vec<f64> = samples.chunks(channels).map(|c| c.iter().map(|&x| f64::from(x)).sum::<f64>() / c.len() as f64).collect();
        let has_nan = mono.iter().any(|x| x.is_nan());
        let (rms, clipped) = if has_nan || mono.is_empty() {
            (0.0, 0.0)
        } else {
            let rms = (mono.iter().map(|x| x * x).sum::<f64>() / mono.len() as f64).sqrt();
            let clipped = mono.iter().filter(|x| x.abs() >= 0.999).count() as f64 / mono.len() as f64;
            (rms, clipped)
        };
        let duration = mono.len() as f64 / f64::from(spec.sample_rate.max(1));
        let mut reasons = Vec::new();
        if has_nan {
            reasons.push("NaN samples".to_string());
        }
        if !(1..=2).contains(&spec.channels) {
            reasons.push(format!("unsupported channel count {}", spec.channels));
        }
        if let Some(rate) = self.expected_sample_rate {
            if spec.sample_rate != rate {
                reasons.push(format!("sample rate {} != expected {rate}", spec.sample_rate));
            }
        }
        if duration < self.min_duration_s || duration > self.max_duration_s {
            reasons.push(format!("duration {duration:.3}s outside [{}, {}]", self.min_duration_s, self.max_duration_s));
        }
        if rms < self.min_rms {
            reasons.push(format!("near-silent (rms {rms:.6} < {})", self.min_rms));
        }
        if clipped > self.max_clipped_fraction {
            reasons.push(format!("clipped fraction {clipped:.4} > {}", self.max_clipped_fraction));
        }
        Validation::from_reasons(reasons)
    }
}

impl Validator for WavValidator {
    fn validate(&self, result: &JobResult) -> Validation {
        match &result.payload {
            Some(p) => self.check_bytes(&p.bytes),
            None => Validation::invalid("empty result"),
        }
    }
}

/// Encodes a mono 16-bit PCM sine wave (used by the simulator and tests).
pub fn sine_wav(seconds: f64, sample_rate: u32, hz: f64, amplitude: f64) -> Vec<u8> {
    let spec = hound::WavSpec { channels: 1, sample_rate, bits_per_sample: 16, sample_format: hound::SampleFormat::Int };
    let mut cursor = std::io::Cursor::new(Vec::new());
    let n = (seconds * f64::from(sample_rate)) as usize;
    if let Ok(mut w) = hound::WavWriter::new(&mut cursor, spec) {
        for i in 0..n {
            let x = amplitude * (2.0 * std::f64::consts::PI * hz * i as f64 / f64::from(sample_rate)).sin();
            let _ = w.write_sample((x * 32767.0).round() as i16);
        }
        let _ = w.finalize();
    }
    cursor.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::Payload;

    fn completed(bytes: &[u8]) -> JobResult {
        let mut r = JobResult::bare(JobState::Completed, None);
        r.payload = Some(Payload { bytes: bytes::Bytes::copy_from_slice(bytes), content_type: "application/octet-stream".into() });
        r
    }

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

    #[test]
    fn json_requires_fields_by_dotted_path() {
        let v = JsonValidator::requiring(&["result.audio", "items.1"]);
        assert!(v.validate(&completed(br#"{"result":{"audio":"x"},"items":[1,2]}"#)).valid);
        let bad = v.validate(&completed(br#"{"result":{},"items":[1]}"#));
        assert_eq!(bad.reasons.len(), 2);
        assert!(!v.validate(&completed(b"{not json")).valid);
    }

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

    #[test]
    fn json_schema_without_schema_is_a_setting_error() {
        let err = ValidatorRegistry::default().build(&ValidatorSpec::named("json-schema")).unwrap_err();
        assert!(matches!(err, ValidatorError::BadSetting { ref key, .. } if key == "schema"));
    }

    #[test]
    fn wav_accepts_speechlike_audio() {
        let v = WavValidator::default();
        assert!(v.check_bytes(&sine_wav(1.0, 16_000, 220.0, 0.3)).valid);
    }

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

    #[test]
    fn wav_checks_expected_sample_rate() {
        let v = WavValidator { expected_sample_rate: Some(24_000), ..WavValidator::default() };
        assert!(!v.check_bytes(&sine_wav(1.0, 16_000, 220.0, 0.3)).valid);
    }

    #[test]
    fn wav_settings_are_checked() {
        let spec: ValidatorSpec = serde_json::from_value(serde_json::json!({"name":"wav","min_rms":"loud"})).unwrap();
        assert!(ValidatorRegistry::default().build(&spec).is_err());
        let spec: ValidatorSpec = serde_json::from_value(serde_json::json!({"name":"wav","colour":1})).unwrap();
        assert!(ValidatorRegistry::default().build(&spec).is_err());
    }
}
