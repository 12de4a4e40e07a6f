//! What a `tailcut_request` record says of a learned decision, for calibration: the
//! predicted miss and cost from its `learned` object, the deadline the prediction was
//! made for (from an `auto` policy label), and each attempt's running time, from which a
//! realized cost is priced. Fields other than these are ignored, so records from newer
//! writers (more fields in `learned`) read the same.

use serde::Serialize;
use serde_json::Value;

use super::field::number_in;
use super::MAX_OFFSET_MS;
use crate::error::{Expected, Field, Place, RecordError};

/// Largest predicted cost accepted, $ (a request costing more is a bad record).
pub const MAX_PREDICTED_USD: f64 = 1e6;

/// One attempt's share of the spend.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttemptSpend {
    /// Provider key.
    pub provider: String,
    /// Seconds it ran (its wall time, or until the race ended when it was cancelled).
    pub ran_s: f64,
    /// A worker was started for it (false: cancelled while still queued, assumed unbilled).
    pub started: bool,
}

/// A learned decision as recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LearnedFacts {
    /// The plan run.
    pub plan: String,
    /// Predicted P(latency > deadline) (`auto`; None for explorations, `adaptive`, `singler`).
    pub predicted_miss: Option<f64>,
    /// Predicted cost, $ (active plus billed idle, as the engine records it).
    pub predicted_cost_usd: Option<f64>,
    /// The deadline of an `auto` label (`auto:a,b@250ms/miss1%`), s.
    pub deadline_s: Option<f64>,
    /// Every attempt's running time.
    pub attempts: Vec<AttemptSpend>,
}

/// The deadline in an `auto` policy label (`auto:a,b@250ms/miss1%` → 0.25 s).
pub fn auto_deadline(label: &str) -> Option<f64> {
    let rest = label.strip_prefix("auto:")?;
    let at = rest.rfind('@')?;
    let ms = rest[at + 1..].split("ms").next()?;
    ms.parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0).map(|x| x / 1000.0)
}

/// Reads a request record's `learned` object: `None` when it has none.
pub fn learned_facts(rec: &Value, policy: &str) -> Result<Option<LearnedFacts>, RecordError> {
    let learned = match rec.get("learned") {
        None | Some(Value::Null) => return Ok(None),
        Some(l @ Value::Object(_)) => l,
        Some(_) => return Err(RecordError::LearnedNotAnObject),
    };
    let number = |key: &'static str, range: (f64, f64), expected: Expected| {
        number_in(learned.get(key), Field::at(Place::Learned, key), range, expected, expected)
    };
    let predicted_miss = number("predicted_miss", (0.0, 1.0), Expected::Probability)?;
    let predicted_cost_usd = number("predicted_cost_usd", (0.0, MAX_PREDICTED_USD), Expected::Dollars)?;
    let f = |a: &Value, k: &str| a.get(k).and_then(Value::as_f64).filter(|x| x.is_finite() && (0.0..=MAX_OFFSET_MS).contains(x));
    let attempts: &[Value] = rec.get("attempts").and_then(Value::as_array).map_or(&[], Vec::as_slice);
    let end_ms = rec
        .get("winner_total_ms")
        .and_then(Value::as_f64)
        .or_else(|| attempts.iter().filter_map(|a| Some(f(a, "submit_offset_ms").unwrap_or(0.0) + f(a, "wall_ms")?)).reduce(f64::max));
    let receipts: &[Value] = rec.get("receipts").and_then(Value::as_array).map_or(&[], Vec::as_slice);
    let queued_at_cancel = |job: Option<&str>| {
        job.is_some()
            && receipts.iter().any(|r| {
                r.get("job_id").and_then(Value::as_str) == job && r.get("state_before_cancel").and_then(Value::as_str) == Some("IN_QUEUE")
            })
    };
    let spends = attempts
        .iter()
        .map(|a| {
            let offset = f(a, "submit_offset_ms").unwrap_or(0.0);
            let started = !queued_at_cancel(a.get("job_id").and_then(Value::as_str)) && a.get("submit_error").is_none();
            let ran_ms = match (f(a, "wall_ms"), end_ms) {
                _ if !started => 0.0,
                (Some(w), _) => w,
                (None, Some(end)) => (end - offset).max(0.0),
                (None, None) => 0.0,
            };
            AttemptSpend { provider: a.get("provider").and_then(Value::as_str).unwrap_or("?").to_string(), ran_s: ran_ms / 1000.0, started }
        })
        .collect();
    Ok(Some(LearnedFacts {
        plan: learned.get("plan").and_then(Value::as_str).unwrap_or("?").to_string(),
        predicted_miss,
        predicted_cost_usd,
        deadline_s: auto_deadline(policy),
        attempts: spends,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn auto_labels_give_their_deadline() {
        assert_eq!(auto_deadline("auto:a,b@250ms/miss1%"), Some(0.25));
        assert_eq!(auto_deadline("auto:runpod,modal,cerebrium@60000ms/miss5%"), Some(60.0));
        assert_eq!(auto_deadline("hedge:a->b@10s"), None);
        assert_eq!(auto_deadline("auto:a@xms"), None);
    }

    #[test]
    fn predictions_and_spend_are_read_and_extra_fields_ignored() {
        let rec = json!({
            "policy": "auto:a,b@250ms/miss1%",
            "learned": {"plan": "hedge:a->b@0.1s", "reason": "r", "predicted_miss": 0.02, "predicted_cost_usd": 0.001, "level": 0.7, "new": {"x": 1}},
            "winner_total_ms": 150.0,
            "attempts": [
                {"provider": "a", "job_id": "j1", "submit_offset_ms": 0.0, "wall_ms": null},
                {"provider": "b", "job_id": "j2", "submit_offset_ms": 100.0, "wall_ms": 50.0}
            ],
            "receipts": [{"job_id": "j1", "state_before_cancel": "IN_PROGRESS"}]
        });
        let f = learned_facts(&rec, "auto:a,b@250ms/miss1%").unwrap().unwrap();
        assert_eq!((f.predicted_miss, f.predicted_cost_usd, f.deadline_s), (Some(0.02), Some(0.001), Some(0.25)));
        assert_eq!(f.attempts[0], AttemptSpend { provider: "a".into(), ran_s: 0.15, started: true });
        assert_eq!(f.attempts[1], AttemptSpend { provider: "b".into(), ran_s: 0.05, started: true });
        // Cancelled while queued: not started, nothing ran.
        let mut q = rec.clone();
        q["receipts"][0]["state_before_cancel"] = json!("IN_QUEUE");
        let f = learned_facts(&q, "x").unwrap().unwrap();
        assert_eq!(f.attempts[0], AttemptSpend { provider: "a".into(), ran_s: 0.0, started: false });
        assert_eq!(f.deadline_s, None);
    }

    #[test]
    fn bad_predictions_are_errors_naming_the_key() {
        let e = learned_facts(&json!({"learned": {"predicted_miss": 1.5}}), "p").unwrap_err();
        assert!(matches!(&e, RecordError::OutOfRange { field, .. } if *field == Field::at(Place::Learned, "predicted_miss")), "{e}");
        assert_eq!(e.to_string(), "`learned.predicted_miss` is 1.5: expected a probability between 0 and 1");
        let e = learned_facts(&json!({"learned": {"predicted_cost_usd": -1}}), "p").unwrap_err();
        assert_eq!(e.to_string(), "`learned.predicted_cost_usd` is -1: expected dollars between 0 and 1000000");
        let e = learned_facts(&json!({"learned": {"predicted_miss": "x"}}), "p").unwrap_err();
        assert!(matches!(&e, RecordError::WrongType { expected: Expected::Probability, found, .. } if found == "x"), "{e}");
        assert_eq!(e.to_string(), "`learned.predicted_miss` is \"x\": expected a probability between 0 and 1");
        assert_eq!(learned_facts(&json!({"learned": null}), "p").unwrap(), None);
        assert_eq!(learned_facts(&json!({}), "p").unwrap(), None);
    }
}
