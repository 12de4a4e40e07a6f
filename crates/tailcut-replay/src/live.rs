//! Live request traces: per-arm latency, hedging and cancellation statistics.
//!
//! Reads tailcut's `tailcut_request` records and the reference tool's
//! `hedged_request`, `state_aware_request`, `cascade_request` and `single_request`
//! records (joined to `validation_index` records by request id when present, the arm
//! coming from the index), plus `forced_cancel` cancel-audit records. Missing receipt
//! fields are unknown, never assumed: legacy receipts without an `evidence` field get
//! one inferred only from what they did record (an observed terminal state, an ack).

use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::PathBuf;
use tailcut_stats::{max_finite, quantile_linear, quantile_nearest, sort_latencies, wilson};

use crate::rounds::ReplayError;

/// One request, normalised.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveRow {
    /// Arm (validation arm name, else the policy label).
    pub arm: String,
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

fn seconds_after(label: &str, marker: &str) -> Option<f64> {
    let rest = &label[label.find(marker)? + marker.len()..];
    let end = rest.find('s')?;
    rest[..end].parse().ok()
}

/// Normalises one engine record; `None` for other kinds.
pub fn live_row(rec: &Value) -> Option<LiveRow> {
    let kind = rec.get("kind")?.as_str()?;
    if !matches!(kind, "tailcut_request" | "hedged_request" | "state_aware_request" | "cascade_request" | "single_request") {
        return None;
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
                    seconds_after(&policy, "@q").unwrap_or(0.0)
                } else if safety {
                    seconds_after(&policy, "+s").unwrap_or(0.0)
                } else {
                    seconds_after(&policy, "@").unwrap_or(0.0)
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
    Some(LiveRow { arm: policy, latency_s, latency_estimated, winner, hedge_launched, cutover, safety, escalation, receipts })
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

/// Everything read from live traces.
#[derive(Debug, Clone, Default)]
pub struct LiveTraces {
    /// Requests, in file order (joined to validation arms when present).
    pub rows: Vec<LiveRow>,
    /// Cancel-audit records.
    pub audits: Vec<AuditRow>,
    /// Malformed lines skipped.
    pub skipped: u64,
}

/// Reads live traces. Malformed lines are errors naming file and line unless `skip_bad_lines`.
pub fn read_live(paths: &[PathBuf], skip_bad_lines: bool) -> Result<LiveTraces, ReplayError> {
    let mut engine: Vec<(Option<String>, Value)> = Vec::new();
    let mut index: Vec<Value> = Vec::new();
    let mut out = LiveTraces::default();
    for path in paths {
        let file = path.display().to_string();
        let reader = std::io::BufReader::new(std::fs::File::open(path).map_err(|source| ReplayError::Io { file: file.clone(), source })?);
        for (i, line) in reader.lines().enumerate() {
            let line = line.map_err(|source| ReplayError::Io { file: file.clone(), source })?;
            if line.trim().is_empty() {
                continue;
            }
            let rec: Value = match serde_json::from_str(&line) {
                Ok(v) => v,
                Err(e) if skip_bad_lines => {
                    let _ = e;
                    out.skipped += 1;
                    continue;
                }
                Err(e) => return Err(ReplayError::Malformed { file, line: i as u64 + 1, message: e.to_string() }),
            };
            match rec.get("kind").and_then(Value::as_str) {
                Some("validation_index") => index.push(rec),
                Some("forced_cancel") => {
                    let receipt = rec.get("receipt").cloned().unwrap_or(Value::Null);
                    out.audits.push(AuditRow {
                        provider: rec.get("provider").and_then(Value::as_str).unwrap_or("?").to_string(),
                        phase: rec.get("phase").and_then(Value::as_str).unwrap_or("?").to_string(),
                        has_terminal_status: receipt.get("terminal_status").is_some_and(|s| !s.is_null()),
                        receipt: receipt_facts(&receipt),
                    });
                }
                _ => {
                    let id = rec.get("request_id").map(|v| v.to_string());
                    engine.push((id, rec));
                }
            }
        }
    }
    if index.is_empty() {
        out.rows = engine.iter().filter_map(|(_, r)| live_row(r)).collect();
    } else {
        let mut by_id: BTreeMap<String, Value> = BTreeMap::new();
        for (id, rec) in engine {
            if let Some(id) = id {
                by_id.insert(id, rec);
            }
        }
        for idx in index {
            let id = idx.get("request_id").map(|v| v.to_string()).unwrap_or_default();
            let mut merged = by_id.get(&id).cloned().unwrap_or(Value::Null);
            if let (Value::Object(m), Value::Object(ix)) = (&mut merged, &idx) {
                for (k, v) in ix {
                    if k != "kind" {
                        m.insert(k.clone(), v.clone());
                    }
                }
            }
            if let Some(mut row) = live_row(&merged) {
                if let Some(arm) = idx.get("arm").and_then(Value::as_str) {
                    row.arm = arm.to_string();
                }
                out.rows.push(row);
            }
        }
    }
    Ok(out)
}

/// Min / median / max of a list.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    /// Smallest.
    pub min: f64,
    /// Median (nearest estimator).
    pub median: f64,
    /// Largest.
    pub max: f64,
}

fn spread(mut v: Vec<f64>) -> Option<Spread> {
    if v.is_empty() {
        return None;
    }
    sort_latencies(&mut v);
    Some(Spread { min: v[0], median: quantile_nearest(&v, 0.5), max: v[v.len() - 1] })
}

/// One arm's summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmSummary {
    /// Arm.
    pub arm: String,
    /// Requests.
    pub n: usize,
    /// Requests with a valid result.
    pub valid: usize,
    /// Quantiles by the reference estimator (null = no valid result at that rank).
    pub p50_s: Option<f64>,
    /// 90th percentile.
    pub p90_s: Option<f64>,
    /// 95th percentile.
    pub p95_s: Option<f64>,
    /// Linear-interpolation quantiles.
    pub p50_linear_s: Option<f64>,
    /// Linear p90.
    pub p90_linear_s: Option<f64>,
    /// Linear p95.
    pub p95_linear_s: Option<f64>,
    /// Largest finite latency.
    pub max_s: Option<f64>,
    /// Deadline used for misses.
    pub deadline_s: f64,
    /// Misses over the deadline.
    pub misses: u64,
    /// Wilson 95% interval of the miss rate.
    pub miss_ci95: [f64; 2],
    /// Requests that launched any extra attempt.
    pub hedged: usize,
    /// Timer hedges.
    pub hedges: usize,
    /// Cutovers.
    pub cutovers: usize,
    /// Safety hedges.
    pub safety_hedges: usize,
    /// Escalations.
    pub escalations: usize,
    /// Winners by provider (`none` for no valid result).
    pub winners: BTreeMap<String, usize>,
    /// Receipts.
    pub receipts: usize,
    /// Receipts by evidence level.
    pub evidence: BTreeMap<String, usize>,
    /// Evidence levels inferred from legacy receipts.
    pub evidence_inferred: usize,
    /// Leaked receipts.
    pub leaked: usize,
    /// Cancel ack latency, ms.
    pub ack_ms: Option<Spread>,
    /// Cancel-to-terminal latency, ms.
    pub terminal_ms: Option<Spread>,
    /// Latencies rebuilt from legacy records.
    pub latencies_estimated: usize,
}

fn fin(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// Summarises rows sharing an arm label.
pub fn summarize_arm(arm: &str, rows: &[&LiveRow], deadline_s: f64) -> ArmSummary {
    let mut lat: Vec<f64> = rows.iter().map(|r| r.latency_s).collect();
    sort_latencies(&mut lat);
    let n = rows.len();
    let misses = lat.iter().filter(|&&l| l > deadline_s).count() as u64;
    let (lo, hi) = wilson(misses, n as u64);
    let receipts: Vec<&ReceiptFacts> = rows.iter().flat_map(|r| r.receipts.iter()).collect();
    let mut winners = BTreeMap::new();
    for r in rows {
        *winners.entry(r.winner.clone().unwrap_or_else(|| "none".into())).or_insert(0) += 1;
    }
    let mut evidence = BTreeMap::new();
    for r in &receipts {
        *evidence.entry(r.evidence.clone()).or_insert(0) += 1;
    }
    ArmSummary {
        arm: arm.to_string(),
        n,
        valid: lat.iter().filter(|l| l.is_finite()).count(),
        p50_s: fin(quantile_nearest(&lat, 0.5)),
        p90_s: fin(quantile_nearest(&lat, 0.9)),
        p95_s: fin(quantile_nearest(&lat, 0.95)),
        p50_linear_s: fin(quantile_linear(&lat, 0.5)),
        p90_linear_s: fin(quantile_linear(&lat, 0.9)),
        p95_linear_s: fin(quantile_linear(&lat, 0.95)),
        max_s: fin(max_finite(&lat)),
        deadline_s,
        misses,
        miss_ci95: [lo, hi],
        hedged: rows.iter().filter(|r| r.hedge_launched || r.cutover || r.safety || r.escalation).count(),
        hedges: rows.iter().filter(|r| r.hedge_launched).count(),
        cutovers: rows.iter().filter(|r| r.cutover).count(),
        safety_hedges: rows.iter().filter(|r| r.safety).count(),
        escalations: rows.iter().filter(|r| r.escalation).count(),
        winners,
        receipts: receipts.len(),
        evidence,
        evidence_inferred: receipts.iter().filter(|r| r.evidence_inferred).count(),
        leaked: receipts.iter().filter(|r| r.leaked).count(),
        ack_ms: spread(receipts.iter().filter_map(|r| r.ack_ms).collect()),
        terminal_ms: spread(receipts.iter().filter_map(|r| r.terminal_ms).collect()),
        latencies_estimated: rows.iter().filter(|r| r.latency_estimated).count(),
    }
}

/// Per-arm summaries in first-seen order, then an `all` row when there are several arms.
pub fn summarize(rows: &[LiveRow], deadline_s: f64) -> Vec<ArmSummary> {
    let mut order: Vec<&str> = Vec::new();
    for r in rows {
        if !order.contains(&r.arm.as_str()) {
            order.push(&r.arm);
        }
    }
    let mut out: Vec<ArmSummary> = order
        .iter()
        .map(|arm| {
            let group: Vec<&LiveRow> = rows.iter().filter(|r| r.arm == *arm).collect();
            summarize_arm(arm, &group, deadline_s)
        })
        .collect();
    if order.len() > 1 {
        let all: Vec<&LiveRow> = rows.iter().collect();
        out.push(summarize_arm("all", &all, deadline_s));
    }
    out
}

/// Cancel-audit matrix cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditCell {
    /// Provider.
    pub provider: String,
    /// Phase.
    pub phase: String,
    /// Attempts.
    pub attempts: usize,
    /// Terminal status present and not leaked.
    pub terminal: usize,
    /// Leaked.
    pub leaked: usize,
    /// Was running when cancelled.
    pub was_running: usize,
    /// Ack latency, ms.
    pub ack_ms: Option<Spread>,
}

/// The cancel-audit matrix, in first-seen order.
pub fn audit_matrix(audits: &[AuditRow]) -> Vec<AuditCell> {
    let mut keys: Vec<(String, String)> = Vec::new();
    for a in audits {
        let k = (a.provider.clone(), a.phase.clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.into_iter()
        .map(|(provider, phase)| {
            let group: Vec<&AuditRow> = audits.iter().filter(|a| a.provider == provider && a.phase == phase).collect();
            AuditCell {
                attempts: group.len(),
                terminal: group.iter().filter(|a| a.has_terminal_status && !a.receipt.leaked).count(),
                leaked: group.iter().filter(|a| a.receipt.leaked).count(),
                was_running: group.iter().filter(|a| a.receipt.was_running == Some(true)).count(),
                ack_ms: spread(group.iter().filter_map(|a| a.receipt.ack_ms).collect()),
                provider,
                phase,
            }
        })
        .collect()
}
