//! One live record normalised: a request into a [`LiveRow`] (its arm, latency, hedge
//! flags and receipts), a receipt into [`ReceiptFacts`] (what it proves, nothing assumed),
//! a cancel audit into an [`AuditRow`].

use serde::Serialize;
use serde_json::Value;

use crate::error::RecordError;

/// Largest latency or offset within a request accepted, ms (11.6 days).
pub const MAX_OFFSET_MS: f64 = 1e9;
/// Largest clock reading accepted in a receipt, ms (the reference tool writes raw
/// monotonic milliseconds: 1e12 ms is 31 years of uptime).
pub const MAX_CLOCK_MS: f64 = 1e12;

/// One request, normalised.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveRow {
    /// Arm (validation arm name, else the policy label).
    pub arm: String,
    /// The policy's kind: recorded (`policy_kind`), or named by a legacy record's label.
    pub policy_kind: Option<tailcut_core::PolicyKind>,
    /// End-to-end latency, s (+∞ when no valid result).
    pub latency_s: f64,
    /// The latency had to be reconstructed (legacy record without `winner_total_ms`).
    pub latency_estimated: bool,
    /// Winning provider.
    pub winner: Option<String>,
    /// Timer hedge or extra racer launched.
    pub hedge_launched: bool,
    /// Cutover fired.
    pub cutover: bool,
    /// Safety hedge fired.
    pub safety: bool,
    /// Escalation fired.
    pub escalation: bool,
    /// Receipts.
    pub receipts: Vec<ReceiptFacts>,
    /// Never sent to any provider: a `tailcut_request` with no attempt (the budget or
    /// the live-attempt cap refused its first submission).
    pub refused: bool,
    /// A learned policy's decision (`tailcut_request` records with a `learned` object).
    pub learned: Option<super::learned::LearnedFacts>,
    /// The provider of the attempt launched as the primary (`role = "primary"`), when the
    /// record lists its attempts.
    pub primary: Option<String>,
}

/// What a receipt says, read loosely.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReceiptFacts {
    /// Provider.
    pub provider: String,
    /// Evidence level (recorded or inferred).
    pub evidence: String,
    /// Whether `evidence` was inferred from a legacy receipt.
    pub evidence_inferred: bool,
    /// Leaked flag (missing = leaked, the conservative reading).
    pub leaked: bool,
    /// Was it running when cancelled.
    pub was_running: Option<bool>,
    /// Ack latency, ms.
    pub ack_ms: Option<f64>,
    /// Cancel-to-terminal latency, ms.
    pub terminal_ms: Option<f64>,
}

fn f(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64)
}

fn truthy(v: &Value, k: &str) -> bool {
    match v.get(k) {
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|x| x != 0.0),
        Some(Value::String(s)) => !s.is_empty(),
        _ => false,
    }
}

const TERMINAL: [&str; 4] = ["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"];

/// Reads a receipt object leniently.
pub fn receipt_facts(r: &Value) -> ReceiptFacts {
    let sent = f(r, "cancel_sent_ms");
    let ack = f(r, "cancel_ack_ms");
    let terminal = f(r, "terminal_ms");
    let status_is_terminal = r.get("terminal_status").and_then(Value::as_str).is_some_and(|s| TERMINAL.contains(&s));
    let (evidence, inferred) = match r.get("evidence").and_then(Value::as_str) {
        Some(e) => (e.to_string(), false),
        None if status_is_terminal && terminal.is_some() => ("confirmed_terminal".to_string(), true),
        None if ack.is_some() => ("provider_ack".to_string(), true),
        None => ("no_evidence".to_string(), true),
    };
    ReceiptFacts {
        provider: r.get("provider").and_then(Value::as_str).unwrap_or("?").to_string(),
        evidence,
        evidence_inferred: inferred,
        leaked: r.get("leaked").and_then(Value::as_bool).unwrap_or(true),
        was_running: r.get("was_running").and_then(Value::as_bool),
        ack_ms: ack.zip(sent).map(|(a, s)| a - s),
        terminal_ms: terminal.zip(sent).map(|(t, s)| t - s),
    }
}

/// The seconds after `marker` in a policy label (`@10s`): `None` when absent or not a
/// number, an error when a number out of range.
fn seconds_after(label: &str, marker: &str) -> Result<Option<f64>, RecordError> {
    let Some(at) = label.find(marker) else { return Ok(None) };
    let rest = &label[at + marker.len()..];
    let Some(end) = rest.find('s') else { return Ok(None) };
    let Ok(v) = rest[..end].parse::<f64>() else { return Ok(None) };
    if v.is_finite() && (0.0..=MAX_OFFSET_MS / 1000.0).contains(&v) {
        Ok(Some(v))
    } else {
        Err(RecordError::LaunchOutOfRange { label: label.to_string(), seconds: v, max: MAX_OFFSET_MS / 1000.0 })
    }
}

/// Normalises one engine record; `None` for other kinds, an error when a legacy record's
/// latency cannot be rebuilt from its policy label.
pub fn live_row(rec: &Value) -> Result<Option<LiveRow>, RecordError> {
    let Some(kind) = rec.get("kind").and_then(Value::as_str) else { return Ok(None) };
    if !REQUEST_KINDS.contains(&kind) {
        return Ok(None);
    }
    let policy = rec.get("policy").and_then(Value::as_str).unwrap_or("?").to_string();
    let winner = rec.get("winner").and_then(Value::as_str).map(str::to_string);
    let hedge_launched = truthy(rec, "hedge_launched");
    let cutover = truthy(rec, "cutover_fired");
    let safety = truthy(rec, "safety_hedge_fired");
    let escalation = truthy(rec, "escalation_fired");
    let (latency_s, latency_estimated) = match rec.get("winner_total_ms") {
        Some(v) => (v.as_f64().filter(|x| *x != 0.0).map_or(f64::INFINITY, |ms| ms / 1000.0), false),
        None => match (winner.as_ref(), f(rec, "winner_valid_at_ms")) {
            (Some(w), Some(valid_at)) => {
                // Legacy record: rebuild the winner's launch offset from the policy label.
                let primary = policy.split(':').next_back().unwrap_or("").split("->").next().unwrap_or("");
                let offset = if w == primary {
                    0.0
                } else if cutover {
                    seconds_after(&policy, "@q")?.unwrap_or(0.0)
                } else if safety {
                    seconds_after(&policy, "+s")?.unwrap_or(0.0)
                } else {
                    seconds_after(&policy, "@")?.unwrap_or(0.0)
                };
                (offset + valid_at / 1000.0, offset > 0.0)
            }
            _ => (f64::INFINITY, false),
        },
    };
    let mut receipts = Vec::new();
    if let Some(Value::Array(list)) = rec.get("receipts") {
        receipts.extend(list.iter().map(receipt_facts));
    } else if let Some(Value::Array(list)) = rec.get("cancellations") {
        receipts.extend(list.iter().map(receipt_facts));
    } else if let Some(r @ Value::Object(_)) = rec.get("cancellation") {
        receipts.push(receipt_facts(r));
    }
    let refused = matches!(rec.get("attempts"), Some(Value::Array(a)) if a.is_empty());
    let learned = super::learned::learned_facts(rec, &policy)?;
    let primary = match rec.get("attempts") {
        Some(Value::Array(list)) => list
            .iter()
            .find(|a| a.get("role").and_then(Value::as_str) == Some("primary"))
            .and_then(|a| a.get("provider"))
            .and_then(Value::as_str)
            .map(str::to_string),
        _ => None,
    };
    let policy_kind = match rec.get("policy_kind") {
        Some(v) => Some(serde_json::from_value(v.clone()).map_err(|source| RecordError::PolicyKind { source })?),
        None => tailcut_core::PolicyKind::from_legacy_label(&policy),
    };
    Ok(Some(LiveRow {
        policy_kind,
        arm: policy,
        latency_s,
        latency_estimated,
        winner,
        hedge_launched,
        cutover,
        safety,
        escalation,
        receipts,
        refused,
        learned,
        primary,
    }))
}

/// A cancel-audit record.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRow {
    /// Provider.
    pub provider: String,
    /// `early` or `late`.
    pub phase: String,
    /// The receipt.
    pub receipt: ReceiptFacts,
    /// Terminal status was present (any value).
    pub has_terminal_status: bool,
}

/// The record kinds that are requests.
pub(super) const REQUEST_KINDS: [&str; 5] =
    ["tailcut_request", "hedged_request", "state_aware_request", "cascade_request", "single_request"];
