//! The checks a live record passes as it is read: every field the summaries use holds
//! the type and range expected, and a receipt's ack or terminal time does not precede its
//! cancel. Messages name the key and quote the value.

use serde_json::Value;

use super::record::{MAX_CLOCK_MS, MAX_OFFSET_MS, REQUEST_KINDS};
use crate::rounds::show;

/// A value as quoted in a message: short values whole, long ones cut.
fn brief(v: &Value) -> String {
    match v {
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
        other => {
            let text = other.to_string();
            if text.chars().count() > 40 {
                format!("{}…", text.chars().take(40).collect::<String>())
            } else {
                text
            }
        }
    }
}

/// An optional string field (null allowed).
fn check_str(obj: &serde_json::Map<String, Value>, key: &str, path: &str) -> Result<(), String> {
    match obj.get(key) {
        None | Some(Value::Null | Value::String(_)) => Ok(()),
        Some(other) => Err(format!("`{path}{key}` is {}: expected a string", brief(other))),
    }
}

/// An optional boolean field (null allowed).
fn check_bool(obj: &serde_json::Map<String, Value>, key: &str, path: &str) -> Result<(), String> {
    match obj.get(key) {
        None | Some(Value::Null | Value::Bool(_)) => Ok(()),
        Some(other) => Err(format!("`{path}{key}` is {}: expected true, false or null", brief(other))),
    }
}

/// An optional number field in `[0, max]` (null allowed).
fn check_num(obj: &serde_json::Map<String, Value>, key: &str, path: &str, max: f64) -> Result<Option<f64>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(x) if x.is_finite() && (0.0..=max).contains(&x) => Ok(Some(x)),
            x => Err(format!("`{path}{key}` is {}: expected milliseconds between 0 and {}", x.map_or(n.to_string(), show), show(max))),
        },
        Some(other) => Err(format!("`{path}{key}` is {}: expected a number of milliseconds or null", brief(other))),
    }
}

/// An optional count (a non-negative integer).
fn check_count(obj: &serde_json::Map<String, Value>, key: &str) -> Result<(), String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Number(n)) if n.as_u64().is_some_and(|c| c <= u64::from(u32::MAX)) => Ok(()),
        Some(other) => Err(format!("`{key}` is {}: expected a count (a non-negative integer)", brief(other))),
    }
}

fn check_receipt(r: &Value, path: &str) -> Result<(), String> {
    let Value::Object(obj) = r else {
        return Err(format!("`{}` is {}: expected a receipt object", path.trim_end_matches('.'), brief(r)));
    };
    for key in ["provider", "evidence", "terminal_status"] {
        check_str(obj, key, path)?;
    }
    for key in ["leaked", "was_running"] {
        check_bool(obj, key, path)?;
    }
    let sent = check_num(obj, "cancel_sent_ms", path, MAX_CLOCK_MS)?;
    for key in ["cancel_ack_ms", "terminal_ms"] {
        if let (Some(t), Some(sent)) = (check_num(obj, key, path, MAX_CLOCK_MS)?, sent) {
            if t < sent {
                return Err(format!("`{path}{key}` ({}) is before `{path}cancel_sent_ms` ({})", show(t), show(sent)));
            }
        }
    }
    Ok(())
}

fn check_receipts(obj: &serde_json::Map<String, Value>, key: &str) -> Result<(), String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(list)) => list.iter().enumerate().try_for_each(|(i, r)| check_receipt(r, &format!("{key}[{i}]."))),
        Some(other) => Err(format!("`{key}` is {}: expected an array of receipts", brief(other))),
    }
}

/// Type and range checks on every field the report reads, so that nothing read later
/// can be a string posing as a number, negative, infinite or absurd.
pub(super) fn check_record(rec: &Value) -> Result<(), String> {
    let Value::Object(obj) = rec else {
        return Err(format!("expected a JSON object, found {}", brief(rec)));
    };
    check_str(obj, "kind", "")?;
    match obj.get("kind").and_then(Value::as_str) {
        Some("validation_index") => check_str(obj, "arm", ""),
        Some("forced_cancel") => {
            check_str(obj, "provider", "")?;
            check_str(obj, "phase", "")?;
            match obj.get("receipt") {
                None | Some(Value::Null) => Ok(()),
                Some(r) => check_receipt(r, "receipt."),
            }
        }
        Some(kind) if REQUEST_KINDS.contains(&kind) => {
            check_str(obj, "policy", "")?;
            check_str(obj, "winner", "")?;
            check_num(obj, "winner_total_ms", "", MAX_OFFSET_MS)?;
            check_num(obj, "winner_valid_at_ms", "", MAX_OFFSET_MS)?;
            check_count(obj, "budget_refusals")?;
            check_count(obj, "hedges_denied")?;
            match obj.get("attempts") {
                None | Some(Value::Array(_)) => {}
                Some(other) => return Err(format!("`attempts` is {}: expected an array", brief(other))),
            }
            check_receipts(obj, "receipts")?;
            check_receipts(obj, "cancellations")?;
            match obj.get("cancellation") {
                None | Some(Value::Null) => Ok(()),
                Some(r) => check_receipt(r, "cancellation."),
            }
        }
        _ => Ok(()),
    }
}
