//! One field of a live record read as a number, or the typed error naming it: the leaf
//! the record checks, the reference evidence and the learned facts share.

use serde_json::Value;

use crate::error::{Expected, Field, RecordError};

/// `field` holds `found`, which is not what `expected` says.
pub(super) fn wrong(field: Field, found: &Value, expected: Expected) -> RecordError {
    RecordError::WrongType { field, found: found.clone(), expected }
}

/// An optional number (null allowed) in `[lo, hi]`: `range` says what is expected of a
/// number out of range, `kind` of a value that is not a number.
pub(super) fn number_in(
    v: Option<&Value>,
    field: Field,
    (lo, hi): (f64, f64),
    range: Expected,
    kind: Expected,
) -> Result<Option<f64>, RecordError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(x) if x.is_finite() && (lo..=hi).contains(&x) => Ok(Some(x)),
            _ => Err(RecordError::OutOfRange { field, value: n.clone(), expected: range }),
        },
        Some(other) => Err(wrong(field, other, kind)),
    }
}

/// An optional number of milliseconds in `[0, max]` (null allowed).
pub(super) fn millis(v: Option<&Value>, field: Field, max: f64) -> Result<Option<f64>, RecordError> {
    number_in(v, field, (0.0, max), Expected::Millis { max }, Expected::MillisOrNull)
}
