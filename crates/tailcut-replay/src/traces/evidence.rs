//! The reference tool's live request records as evidence for the provider model: what
//! each `hedged_request`, `state_aware_request` or `single_request` says about each
//! provider it launched.
//!
//! A launched attempt is known exactly when it won (its own wall time,
//! `winner_valid_at_ms`), and only bounded below when it lost: a loser still running when
//! the winner arrived was cancelled then, so its latency is right-censored at the time it
//! had run (the winner's end minus the loser's launch). A primary abandoned while queued at
//! a cutover poll is censored at the cutover, and its queue delay is known to exceed the
//! poll's offset. A loser with no receipt had ended before the winner without a valid
//! result: a failure (its wall time unknown, taken as its launch offset's bound). A request
//! without a winner failed on every attempt launched. `cascade_request` records (none are
//! committed) are not read.

use serde_json::Value;
use tailcut_model::{Observation, Outcome};

use super::field::millis;
use super::MAX_OFFSET_MS;
use crate::error::{Field, LabelForm, RecordError};

/// The record kinds read here.
pub const EVIDENCE_KINDS: [&str; 3] = ["hedged_request", "state_aware_request", "single_request"];

fn ms(rec: &Value, key: &'static str) -> Result<Option<f64>, RecordError> {
    millis(rec.get(key), Field::top(key), MAX_OFFSET_MS)
}

/// `p->h@10s` (with or without a `hedge:` prefix) → (p, h, delay s).
fn hedge_label(label: &str) -> Option<(&str, &str, f64)> {
    let body = label.strip_prefix("hedge:").unwrap_or(label);
    let (pair, delay) = body.split_once('@')?;
    let (p, h) = pair.split_once("->")?;
    let d = delay.strip_suffix('s')?.parse::<f64>().ok().filter(|d| d.is_finite() && *d >= 0.0)?;
    Some((p, h, d))
}

/// `cutover:p->h@q2.5s+s8.5s` → (p, h).
fn cutover_label(label: &str) -> Option<(&str, &str)> {
    let body = label.strip_prefix("cutover:")?;
    let (pair, _) = body.split_once('@')?;
    pair.split_once("->")
}

/// The observations one reference request record gives, in launch order: `Ok(None)` for
/// other kinds and for records naming a provider not in `names`; an error naming the key
/// for a field out of range or a policy label that cannot be read.
pub fn reference_observations(rec: &Value, names: &[String]) -> Result<Option<Vec<Observation>>, RecordError> {
    let Some(kind) = rec.get("kind").and_then(Value::as_str).filter(|k| EVIDENCE_KINDS.contains(k)) else { return Ok(None) };
    let policy = rec.get("policy").and_then(Value::as_str).unwrap_or("");
    let winner = rec.get("winner").and_then(Value::as_str);
    let valid_at = ms(rec, "winner_valid_at_ms")?.map(|x| x / 1000.0);
    let total = ms(rec, "winner_total_ms")?.map(|x| x / 1000.0);
    let index = |name: &str| names.iter().position(|n| n == name);
    let obs =
        |p: usize, outcome: Outcome, queue_s: Option<f64>| Observation { provider: p, outcome, queue_s, idle_gap_s: None, warm: None };
    let cancelled = |name: &str| {
        let one = rec.get("cancellation").filter(|c| c.is_object()).into_iter();
        let many = rec.get("cancellations").and_then(Value::as_array).into_iter().flatten();
        one.chain(many).any(|c| c.get("provider").and_then(Value::as_str) == Some(name))
    };
    let bad_label = |expected| RecordError::BadLabel { policy: policy.to_string(), expected };
    // The primary, the hedge, and when the hedge was launched (None: never).
    let (p, h, hedge_at): (&str, Option<&str>, Option<f64>) = match kind {
        "single_request" => (policy.strip_prefix("single:").ok_or_else(|| bad_label(LabelForm::Single))?, None, None),
        "hedged_request" => {
            let (p, h, d) = hedge_label(policy).ok_or_else(|| bad_label(LabelForm::Hedge))?;
            let launched = rec.get("hedge_launched").and_then(Value::as_bool).unwrap_or(false);
            // The hedge's offset: exact from a hedge win's two times, else the delay.
            let at = match (winner, total, valid_at) {
                (Some(w), Some(t), Some(v)) if w == h => (t - v).max(0.0),
                _ => d,
            };
            (p, Some(h), launched.then_some(at))
        }
        _ => {
            let (p, h) = cutover_label(policy).ok_or_else(|| bad_label(LabelForm::Cutover))?;
            (p, Some(h), ms(rec, "hedge_submitted_at_ms")?.map(|x| x / 1000.0))
        }
    };
    let (Some(pi), hi) = (index(p), h.map(index)) else { return Ok(None) };
    if hi == Some(None) {
        return Ok(None);
    }
    let hi = hi.flatten();
    let cutover = rec.get("cutover_fired").and_then(Value::as_bool).unwrap_or(false);
    let queued_at_poll = rec.get("state_at_poll").and_then(Value::as_str) == Some("IN_QUEUE");
    let poll_queue = if queued_at_poll { ms(rec, "poll_at_ms")?.map(|x| x / 1000.0 + 0.001) } else { None };
    // When the race ended, from the request's start.
    let end = |winner_at: f64, launched: f64| total.unwrap_or(launched + winner_at);
    let mut out = Vec::with_capacity(2);
    match (winner, valid_at) {
        (Some(w), Some(v)) if w == p => {
            out.push(obs(pi, Outcome::Valid { latency_s: v }, poll_queue));
            if let (Some(hi), Some(at)) = (hi, hedge_at) {
                let ran = (end(v, 0.0) - at).max(0.0);
                out.push(obs(
                    hi,
                    if cancelled(h.unwrap_or("")) { Outcome::Censored { after_s: ran } } else { Outcome::Failed { wall_s: ran } },
                    None,
                ));
            }
        }
        (Some(w), Some(v)) if Some(w) == h => {
            let (Some(hi), at) = (hi, hedge_at.unwrap_or(0.0)) else { return Ok(None) };
            let ended = end(v, at);
            let primary = if cutover {
                // Abandoned while queued at the poll: it had run until the cutover.
                Outcome::Censored { after_s: at }
            } else if cancelled(p) {
                Outcome::Censored { after_s: ended }
            } else {
                Outcome::Failed { wall_s: at }
            };
            out.push(obs(pi, primary, poll_queue));
            out.push(obs(hi, Outcome::Valid { latency_s: v }, None));
        }
        (Some(_), _) => return Ok(None),
        (None, _) => {
            // No valid result from anyone launched.
            let invalid = rec.get("state").and_then(Value::as_str) == Some("COMPLETED");
            out.push(obs(pi, if invalid { Outcome::Invalid { wall_s: 0.0 } } else { Outcome::Failed { wall_s: 0.0 } }, poll_queue));
            if let (Some(hi), Some(_)) = (hi, hedge_at) {
                out.push(obs(hi, Outcome::Failed { wall_s: 0.0 }, None));
            }
        }
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names() -> Vec<String> {
        vec!["runpod".into(), "modal".into(), "cerebrium".into()]
    }

    #[test]
    fn a_primary_win_is_exact_and_a_hedge_win_censors_the_primary_at_the_race_end() {
        let won = json!({"kind": "hedged_request", "policy": "runpod->modal@10s", "hedge_launched": false, "winner": "runpod", "winner_valid_at_ms": 3942.1, "cancellation": null});
        let o = reference_observations(&won, &names()).unwrap().unwrap();
        assert_eq!(o.len(), 1);
        assert!(matches!(o[0].outcome, Outcome::Valid { latency_s } if (latency_s - 3.9421).abs() < 1e-9) && o[0].provider == 0);
        // Legacy record (no winner_total_ms): the hedge launched at the 10 s delay and won
        // 56.6 s later; the cancelled primary had run 66.6 s.
        let lost = json!({"kind": "hedged_request", "policy": "runpod->modal@10s", "hedge_launched": true, "winner": "modal", "winner_valid_at_ms": 56610.6, "cancellation": {"provider": "runpod"}});
        let o = reference_observations(&lost, &names()).unwrap().unwrap();
        assert_eq!(o[0].provider, 0);
        match o[0].outcome {
            Outcome::Censored { after_s } => assert!((after_s - 66.6106).abs() < 1e-9, "{after_s}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(o[1].outcome, Outcome::Valid { latency_s } if (latency_s - 56.6106).abs() < 1e-9) && o[1].provider == 1);
        // With winner_total_ms the hedge's launch is exact.
        let mut exact = lost.clone();
        exact["winner_total_ms"] = json!(60610.6);
        let o = reference_observations(&exact, &names()).unwrap().unwrap();
        assert!(matches!(o[0].outcome, Outcome::Censored { after_s } if (after_s - 60.6106).abs() < 1e-9), "{:?}", o[0]);
        // A primary that ended without a receipt had failed before the hedge won.
        let mut failed = lost.clone();
        failed["cancellation"] = Value::Null;
        assert!(matches!(reference_observations(&failed, &names()).unwrap().unwrap()[0].outcome, Outcome::Failed { .. }));
    }

    #[test]
    fn a_cutover_censors_the_queued_primary_at_the_cutover_with_its_queue_bound() {
        let rec = json!({"kind": "state_aware_request", "policy": "cutover:runpod->cerebrium@q2.5s+s8.5s", "cutover_fired": true, "state_at_poll": "IN_QUEUE", "poll_at_ms": 4458.0, "hedge_submitted_at_ms": 7352.5, "winner": "cerebrium", "winner_valid_at_ms": 18659.2, "cancellation": {"provider": "runpod"}});
        let o = reference_observations(&rec, &names()).unwrap().unwrap();
        assert!(matches!(o[0].outcome, Outcome::Censored { after_s } if (after_s - 7.3525).abs() < 1e-9), "{:?}", o[0]);
        assert!((o[0].queue_s.unwrap() - 4.459).abs() < 1e-9);
        assert!(
            matches!(o[1].outcome, Outcome::Valid { latency_s } if (latency_s - 18.6592).abs() < 1e-9) && o[1].provider == 2,
            "{:?}",
            o[1]
        );
    }

    #[test]
    fn other_kinds_and_unknown_providers_give_nothing_and_bad_fields_are_errors() {
        assert_eq!(reference_observations(&json!({"kind": "forced_cancel"}), &names()).unwrap(), None);
        let other = json!({"kind": "single_request", "policy": "single:replicate", "winner": "replicate", "winner_valid_at_ms": 5.0});
        assert_eq!(reference_observations(&other, &names()).unwrap(), None);
        let bad = json!({"kind": "single_request", "policy": "single:runpod", "winner": "runpod", "winner_valid_at_ms": -5.0});
        let e = reference_observations(&bad, &names()).unwrap_err();
        assert!(matches!(&e, RecordError::OutOfRange { field, .. } if *field == Field::top("winner_valid_at_ms")), "{e}");
        assert_eq!(e.to_string(), "`winner_valid_at_ms` is -5: expected milliseconds between 0 and 1e9");
        let label = json!({"kind": "hedged_request", "policy": "nonsense", "winner": null});
        let e = reference_observations(&label, &names()).unwrap_err();
        assert!(matches!(&e, RecordError::BadLabel { policy, expected: LabelForm::Hedge } if policy == "nonsense"), "{e}");
        assert_eq!(e.to_string(), "`policy` is \"nonsense\": expected PRIMARY->HEDGE@DELAYs");
        let none = json!({"kind": "single_request", "policy": "single:runpod", "winner": null, "state": "FAILED"});
        assert_eq!(reference_observations(&none, &names()).unwrap().unwrap()[0].outcome, Outcome::Failed { wall_s: 0.0 });
    }
}
