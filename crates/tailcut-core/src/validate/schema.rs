//! The `json-schema` validator (feature `json-schema`): the payload is JSON that
//! satisfies a JSON Schema document.

use super::{bad_setting, json_payload, reject_settings, Validation, Validator, ValidatorError, ValidatorSpec};
use crate::job::JobResult;
use std::fmt;

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
    pub fn new(schema: &serde_json::Value) -> Result<JsonSchemaValidator, Box<jsonschema::ValidationError<'static>>> {
        jsonschema::validator_for(schema).map(|schema| JsonSchemaValidator { schema }).map_err(Box::new)
    }

    pub(super) fn from_spec(spec: &ValidatorSpec) -> Result<JsonSchemaValidator, ValidatorError> {
        reject_settings(spec, &["schema"])?;
        let schema = spec.settings.get("schema").ok_or_else(|| bad_setting(spec, "schema", "a JSON Schema document"))?;
        JsonSchemaValidator::new(schema).map_err(|e| bad_setting(spec, "schema", &format!("a valid JSON Schema ({e})")))
    }
}

impl Validator for JsonSchemaValidator {
    fn validate(&self, result: &JobResult) -> Validation {
        let value = match json_payload(result) {
            Ok(v) => v,
            Err(v) => return v,
        };
        let reasons: Vec<String> = self.schema.iter_errors(&value).take(8).map(|e| format!("{} at `{}`", e, e.instance_path)).collect();
        Validation::from_reasons(reasons)
    }
}
