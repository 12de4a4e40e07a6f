//! The `json` validator (feature `json`): the payload parses, and required fields are
//! present and non-null. Required top-level fields take the one-pass
//! [`json_scan`](crate::json_scan); dotted paths a parsed document.

use super::{bad_setting, dotted, json_payload, reject_settings, Validation, Validator, ValidatorError, ValidatorSpec};
use crate::job::JobResult;
use crate::json_scan::{top_level_keys, top_level_present, Scan};

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

    pub(super) fn from_spec(spec: &ValidatorSpec) -> Result<JsonValidator, ValidatorError> {
        reject_settings(spec, &["required"])?;
        let required = match spec.settings.get("required") {
            None => Vec::new(),
            Some(serde_json::Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| bad_setting(spec, "required", "an array of strings (dotted paths)"))?,
            Some(_) => return Err(bad_setting(spec, "required", "an array of strings (dotted paths)")),
        };
        Ok(JsonValidator { required })
    }
}

impl JsonValidator {
    pub(super) fn all_top_level(&self) -> bool {
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
        let value = match json_payload(result) {
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
