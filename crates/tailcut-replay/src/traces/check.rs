//! The checks a live record passes as it is read: every field the summaries use holds
//! the type and range expected, and a receipt's ack or terminal time does not precede its
//! cancel. Errors name the field and keep the value ([`RecordError`]).

use serde_json::{Map, Value};

use super::field::{millis, wrong};
use super::record::{MAX_CLOCK_MS, MAX_OFFSET_MS, REQUEST_KINDS};
use crate::error::{Expected, Field, Place, RecordError};

/// An optional string field (null allowed).
fn check_str(obj: &Map<String, Value>, key: &'static str, place: Place) -> Result<(), RecordError> {
    match obj.get(key) {
        None | Some(Value::Null | Value::String(_)) => Ok(()),
        Some(other) => Err(wrong(Field::at(place, key), other, Expected::Str)),
    }
}

/// An optional boolean field (null allowed).
fn check_bool(obj: &Map<String, Value>, key: &'static str, place: Place) -> Result<(), RecordError> {
    match obj.get(key) {
        None | Some(Value::Null | Value::Bool(_)) => Ok(()),
        Some(other) => Err(wrong(Field::at(place, key), other, Expected::BoolOrNull)),
    }
}

/// An optional count (a non-negative integer).
fn check_count(obj: &Map<String, Value>, key: &'static str) -> Result<(), RecordError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Number(n)) if n.as_u64().is_some_and(|c| c <= u64::from(u32::MAX)) => Ok(()),
        Some(other) => Err(wrong(Field::top(key), other, Expected::Count)),
    }
}

fn check_receipt(r: &Value, place: Place) -> Result<(), RecordError> {
    let Value::Object(obj) = r else {
        return Err(wrong(Field::whole(place), r, Expected::Receipt));
    };
    for key in ["provider", "evidence", "terminal_status"] {
        check_str(obj, key, place)?;
    }
    for key in ["leaked", "was_running"] {
        check_bool(obj, key, place)?;
    }
    let sent = millis(obj.get("cancel_sent_ms"), Field::at(place, "cancel_sent_ms"), MAX_CLOCK_MS)?;
    for key in ["cancel_ack_ms", "terminal_ms"] {
        let field = Field::at(place, key);
        if let (Some(at), Some(sent)) = (millis(obj.get(key), field, MAX_CLOCK_MS)?, sent) {
            if at < sent {
                return Err(RecordError::BeforeCancel { field, at, sent });
            }
        }
    }
    Ok(())
}

fn check_receipts(obj: &Map<String, Value>, list: &'static str) -> Result<(), RecordError> {
    match obj.get(list) {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(items)) => items.iter().enumerate().try_for_each(|(index, r)| check_receipt(r, Place::InList { list, index })),
        Some(other) => Err(wrong(Field::top(list), other, Expected::Receipts)),
    }
}

/// Type and range checks on every field the report reads, so that nothing read later
/// can be a string posing as a number, negative, infinite or absurd.
pub(super) fn check_record(rec: &Value) -> Result<(), RecordError> {
    let Value::Object(obj) = rec else {
        return Err(RecordError::NotAnObject { found: rec.clone() });
    };
    check_str(obj, "kind", Place::Top)?;
    match obj.get("kind").and_then(Value::as_str) {
        Some("validation_index") => check_str(obj, "arm", Place::Top),
        Some("forced_cancel") => {
            check_str(obj, "provider", Place::Top)?;
            check_str(obj, "phase", Place::Top)?;
            match obj.get("receipt") {
                None | Some(Value::Null) => Ok(()),
                Some(r) => check_receipt(r, Place::Receipt),
            }
        }
        Some(kind) if REQUEST_KINDS.contains(&kind) => {
            check_str(obj, "policy", Place::Top)?;
            check_str(obj, "winner", Place::Top)?;
            millis(obj.get("winner_total_ms"), Field::top("winner_total_ms"), MAX_OFFSET_MS)?;
            millis(obj.get("winner_valid_at_ms"), Field::top("winner_valid_at_ms"), MAX_OFFSET_MS)?;
            check_count(obj, "budget_refusals")?;
            check_count(obj, "hedges_denied")?;
            match obj.get("attempts") {
                None | Some(Value::Array(_)) => {}
                Some(other) => return Err(wrong(Field::top("attempts"), other, Expected::Array)),
            }
            check_receipts(obj, "receipts")?;
            check_receipts(obj, "cancellations")?;
            match obj.get("cancellation") {
                None | Some(Value::Null) => Ok(()),
                Some(r) => check_receipt(r, Place::Cancellation),
            }
        }
        _ => Ok(()),
    }
}
