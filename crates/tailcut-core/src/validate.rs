//! Result validators, looked up by name.
//!
//! The engine never trusts a provider's "completed": a result wins only if its
//! validator says it is valid. Validators never fail; a bad result is just invalid,
//! with reasons, and the race keeps going. This module owns the contract ([`Validator`],
//! [`judge`]), the registry by name and `nonempty`. The content validators are behind
//! cargo features, so that the engine alone pulls no parser or codec:
//!
//! | validator | feature | file |
//! |---|---|---|
//! | `nonempty` | always | here |
//! | `json` (parses, with optional required fields by dotted path) | `json` | `validate/json.rs` |
//! | `json-schema` (a JSON Schema document) | `json-schema` | `validate/schema.rs` |
//! | `wav` (header, duration bounds, RMS, NaN and clipping, as in the reference tool) | `wav` | `validate/wav.rs` |

use crate::job::{JobResult, JobState};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

#[cfg(feature = "json")]
mod json;
#[cfg(feature = "json-schema")]
mod schema;
#[cfg(test)]
mod tests;
#[cfg(feature = "wav")]
mod wav;

#[cfg(feature = "json")]
pub use json::JsonValidator;
#[cfg(feature = "json-schema")]
pub use schema::JsonSchemaValidator;
#[cfg(feature = "wav")]
pub use wav::{sine_wav, WavValidator};

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

    /// A verdict from its reasons: valid when there are none.
    pub fn from_reasons(reasons: Vec<String>) -> Validation {
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
        #[cfg(feature = "json")]
        r.register("json", |s| Ok(Arc::new(JsonValidator::from_spec(s)?)));
        #[cfg(feature = "json-schema")]
        r.register("json-schema", |s| Ok(Arc::new(JsonSchemaValidator::from_spec(s)?)));
        #[cfg(feature = "wav")]
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

/// Refuses any setting of `spec` not named in `allowed`.
pub fn reject_settings(spec: &ValidatorSpec, allowed: &[&str]) -> Result<(), ValidatorError> {
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

/// A [`ValidatorError::BadSetting`]: `spec`'s setting `key` is not what was `expected`.
pub fn bad_setting(spec: &ValidatorSpec, key: &str, expected: &str) -> ValidatorError {
    ValidatorError::BadSetting { name: spec.name.clone(), key: key.into(), expected: expected.into() }
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

/// The payload parsed as JSON, or why it is invalid (`empty result`, `not JSON: …`).
pub fn json_payload(result: &JobResult) -> Result<serde_json::Value, Validation> {
    let Some(p) = result.payload.as_ref().filter(|p| !p.bytes.is_empty()) else {
        return Err(Validation::invalid("empty result"));
    };
    serde_json::from_slice(&p.bytes).map_err(|e| Validation::invalid(format!("not JSON: {e}")))
}
