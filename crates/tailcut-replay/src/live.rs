//! Live request traces: per-arm latency, hedging and cancellation statistics.
//!
//! Reads tailcut's `tailcut_request` records and the reference tool's
//! `hedged_request`, `state_aware_request`, `cascade_request` and `single_request`
//! records (joined to `validation_index` records by request id when present, the arm
//! coming from the index), plus `forced_cancel` cancel-audit records. Missing receipt
//! fields are unknown, never assumed: legacy receipts without an `evidence` field get
//! one inferred only from what they did record (an observed terminal state, an ack).
//!
//! Every record is checked as it is read, and a bad one is an error naming its file and
//! line (or counted under `skip_bad_lines`): a line that is not UTF-8 JSON, longer than
//! the cap, a number field holding anything but a finite number in range, a receipt whose
//! ack or terminal time precedes its cancel. A `tailcut_request` with an empty `attempts`
//! array was never sent (the first submission was refused): it is counted as refused,
//! not as a latency miss.

use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, Read};
use std::path::PathBuf;
use tailcut_stats::{max_finite, quantile_linear, quantile_nearest, sort_latencies, wilson};

use crate::rounds::{json_message, show, utf8_problem, ReplayError, DEFAULT_MAX_LINE_BYTES};

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
fn seconds_after(label: &str, marker: &str) -> Result<Option<f64>, String> {
    let Some(at) = label.find(marker) else { return Ok(None) };
    let rest = &label[at + marker.len()..];
    let Some(end) = rest.find('s') else { return Ok(None) };
    let Ok(v) = rest[..end].parse::<f64>() else { return Ok(None) };
    if v.is_finite() && (0.0..=MAX_OFFSET_MS / 1000.0).contains(&v) {
        Ok(Some(v))
    } else {
        Err(format!("policy label `{label}` launches at {}s: expected seconds between 0 and {}", show(v), show(MAX_OFFSET_MS / 1000.0)))
    }
}

/// Normalises one engine record; `None` for other kinds, an error when a legacy record's
/// latency cannot be rebuilt from its policy label.
pub fn live_row(rec: &Value) -> Result<Option<LiveRow>, String> {
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
    Ok(Some(LiveRow { arm: policy, latency_s, latency_estimated, winner, hedge_launched, cutover, safety, escalation, receipts, refused }))
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
    /// `file:line: message` of the first skipped lines.
    pub skipped_examples: Vec<String>,
}

impl LiveTraces {
    fn reject(&mut self, skip_bad_lines: bool, err: ReplayError) -> Result<(), ReplayError> {
        if !skip_bad_lines {
            return Err(err);
        }
        self.skipped += 1;
        if self.skipped_examples.len() < 5 {
            self.skipped_examples.push(err.to_string());
        }
        Ok(())
    }
}

const REQUEST_KINDS: [&str; 5] = ["tailcut_request", "hedged_request", "state_aware_request", "cascade_request", "single_request"];

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
fn check_record(rec: &Value) -> Result<(), String> {
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

/// Options of [`read_live_with`].
#[derive(Debug, Clone, Copy, Default)]
pub struct LiveOptions {
    /// Skip bad lines (counting them) instead of failing.
    pub skip_bad_lines: bool,
    /// Longest line accepted, bytes (0 = [`DEFAULT_MAX_LINE_BYTES`]).
    pub max_line_bytes: usize,
}

/// Reads live traces. Bad lines are errors naming file and line unless `skip_bad_lines`.
pub fn read_live(paths: &[PathBuf], skip_bad_lines: bool) -> Result<LiveTraces, ReplayError> {
    read_live_with(paths, LiveOptions { skip_bad_lines, ..LiveOptions::default() })
}

/// A record and where it was read.
struct Located {
    rec: Value,
    file: std::sync::Arc<str>,
    line: u64,
}

impl Located {
    fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }

    fn error(&self, message: String) -> ReplayError {
        ReplayError::Malformed { file: self.file.to_string(), line: self.line, message }
    }
}

/// Reads live traces with explicit options.
pub fn read_live_with(paths: &[PathBuf], opts: LiveOptions) -> Result<LiveTraces, ReplayError> {
    let max_line = if opts.max_line_bytes == 0 { DEFAULT_MAX_LINE_BYTES } else { opts.max_line_bytes };
    let mut engine: Vec<Located> = Vec::new();
    let mut index: Vec<Located> = Vec::new();
    let mut out = LiveTraces::default();
    let mut buf: Vec<u8> = Vec::new();
    for path in paths {
        let file = path.display().to_string();
        let shared: std::sync::Arc<str> = std::sync::Arc::from(file.as_str());
        let io = |source| ReplayError::Io { file: file.clone(), source };
        let mut reader = std::io::BufReader::with_capacity(1 << 16, std::fs::File::open(path).map_err(io)?);
        let mut line = 0u64;
        loop {
            buf.clear();
            let n = (&mut reader).take(max_line as u64 + 1).read_until(b'\n', &mut buf).map_err(io)?;
            if n == 0 {
                break;
            }
            line += 1;
            let bad = |message: String| ReplayError::Malformed { file: file.clone(), line, message };
            if buf.last() != Some(&b'\n') && buf.len() > max_line {
                out.reject(opts.skip_bad_lines, ReplayError::LineTooLong { file: file.clone(), line, limit: max_line })?;
                // Read past the rest of the line.
                loop {
                    let (done, used) = {
                        let rest = reader.fill_buf().map_err(io)?;
                        match memchr::memchr(b'\n', rest) {
                            Some(i) => (true, i + 1),
                            None => (rest.is_empty(), rest.len()),
                        }
                    };
                    reader.consume(used);
                    if done {
                        break;
                    }
                }
                continue;
            }
            if buf.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if let Some(problem) = utf8_problem(&buf) {
                out.reject(opts.skip_bad_lines, bad(problem))?;
                continue;
            }
            let rec: Value = match serde_json::from_slice(&buf) {
                Ok(v) => v,
                Err(e) => {
                    out.reject(opts.skip_bad_lines, bad(json_message(&e)))?;
                    continue;
                }
            };
            if let Err(message) = check_record(&rec) {
                out.reject(opts.skip_bad_lines, bad(message))?;
                continue;
            }
            let located = |rec| Located { rec, file: shared.clone(), line };
            match rec.get("kind").and_then(Value::as_str) {
                Some("validation_index") => index.push(located(rec)),
                Some("forced_cancel") => {
                    let receipt = rec.get("receipt").cloned().unwrap_or(Value::Null);
                    out.audits.push(AuditRow {
                        provider: rec.get("provider").and_then(Value::as_str).unwrap_or("?").to_string(),
                        phase: rec.get("phase").and_then(Value::as_str).unwrap_or("?").to_string(),
                        has_terminal_status: receipt.get("terminal_status").is_some_and(|s| !s.is_null()),
                        receipt: receipt_facts(&receipt),
                    });
                }
                _ => engine.push(located(rec)),
            }
        }
    }
    if index.is_empty() {
        for l in &engine {
            match live_row(&l.rec) {
                Ok(row) => out.rows.extend(row),
                Err(message) => out.reject(opts.skip_bad_lines, l.error(message))?,
            }
        }
        return Ok(out);
    }
    // Joined by request id: an id seen twice on either side cannot be joined, and would
    // count a request twice.
    let mut by_id: BTreeMap<String, Located> = BTreeMap::new();
    for l in engine {
        let Some(id) = l.rec.get("request_id").map(Value::to_string) else { continue };
        if let Some(first) = by_id.get(&id) {
            let message = format!("duplicate request_id {id} (first at {}); the validation index cannot join it", first.at());
            out.reject(opts.skip_bad_lines, l.error(message))?;
            continue;
        }
        by_id.insert(id, l);
    }
    let mut indexed: BTreeMap<String, String> = BTreeMap::new();
    for idx in index {
        let id = idx.rec.get("request_id").map(|v| v.to_string()).unwrap_or_default();
        if let Some(first) = indexed.get(&id) {
            let message = format!("duplicate validation_index for request_id {id} (first at {first}); it would count twice");
            out.reject(opts.skip_bad_lines, idx.error(message))?;
            continue;
        }
        indexed.insert(id.clone(), idx.at());
        let mut merged = by_id.get(&id).map_or(Value::Null, |l| l.rec.clone());
        if let (Value::Object(m), Value::Object(ix)) = (&mut merged, &idx.rec) {
            for (k, v) in ix {
                if k != "kind" {
                    m.insert(k.clone(), v.clone());
                }
            }
        }
        let row = match live_row(&merged) {
            Ok(row) => row,
            Err(message) => {
                out.reject(opts.skip_bad_lines, idx.error(message))?;
                continue;
            }
        };
        if let Some(mut row) = row {
            if let Some(arm) = idx.rec.get("arm").and_then(Value::as_str) {
                row.arm = arm.to_string();
            }
            out.rows.push(row);
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
    /// Requests in the traces, refused ones included.
    pub n: usize,
    /// Requests never sent to any provider (refused at the first submission); not part
    /// of the latency statistics below.
    pub refused: usize,
    /// Requests sent: `n - refused`, the denominator of `valid`, the quantiles and `misses`.
    pub sent: usize,
    /// Sent requests with a valid result.
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
    /// Sent requests without a valid result by the deadline.
    pub misses: u64,
    /// Wilson 95% interval of the miss rate (`misses / sent`).
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
    /// Winners of the sent requests by provider (`none` for no valid result).
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

/// Summarises rows sharing an arm label. Refused requests (never sent) are counted
/// apart and left out of every latency statistic.
pub fn summarize_arm(arm: &str, all_rows: &[&LiveRow], deadline_s: f64) -> ArmSummary {
    let n = all_rows.len();
    let rows: Vec<&LiveRow> = all_rows.iter().copied().filter(|r| !r.refused).collect();
    let sent = rows.len();
    let mut lat: Vec<f64> = rows.iter().map(|r| r.latency_s).collect();
    sort_latencies(&mut lat);
    let misses = lat.iter().filter(|&&l| l > deadline_s).count() as u64;
    let (lo, hi) = wilson(misses, sent as u64);
    let receipts: Vec<&ReceiptFacts> = rows.iter().flat_map(|r| r.receipts.iter()).collect();
    let mut winners = BTreeMap::new();
    for r in &rows {
        *winners.entry(r.winner.clone().unwrap_or_else(|| "none".into())).or_insert(0) += 1;
    }
    let mut evidence = BTreeMap::new();
    for r in &receipts {
        *evidence.entry(r.evidence.clone()).or_insert(0) += 1;
    }
    ArmSummary {
        arm: arm.to_string(),
        n,
        refused: n - sent,
        sent,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn write(bytes: &[u8]) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(bytes).unwrap();
        f
    }

    fn request(id: u32, extra: &str) -> String {
        format!(
            r#"{{"kind":"tailcut_request","request_id":"r{id}","policy":"single:runpod","winner":"runpod","winner_total_ms":5000.0,"attempts":[{{}}],"receipts":[]{extra}}}"#
        ) + "\n"
    }

    fn err(text: &[u8]) -> String {
        let f = write(text);
        let e = read_live(&[f.path().to_path_buf()], false).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}:", f.path().display())), "names the file: {e}");
        e
    }

    #[test]
    fn refused_requests_are_not_latency_misses() {
        let refused = r#"{"kind":"tailcut_request","request_id":"b","policy":"single:runpod","winner":null,"winner_total_ms":null,"attempts":[],"receipts":[]}"#;
        let failed = r#"{"kind":"tailcut_request","request_id":"c","policy":"single:runpod","winner":null,"winner_total_ms":null,"attempts":[{"provider":"runpod"}],"receipts":[]}"#;
        let text = format!("{}{refused}\n{refused}\n{failed}\n", request(1, ""));
        let f = write(text.as_bytes());
        let t = read_live(&[f.path().to_path_buf()], false).unwrap();
        let a = &summarize(&t.rows, 60.0)[0];
        assert_eq!((a.n, a.refused, a.sent, a.valid, a.misses), (4, 2, 2, 1, 1));
        assert_eq!(a.winners.values().sum::<usize>(), 2, "winners count sent requests only: {:?}", a.winners);
        assert_eq!(a.p50_s, Some(5.0));
    }

    #[test]
    fn numbers_are_type_and_range_checked_naming_line_and_key() {
        let cases = [
            (r#","winner_total_ms":-5"#, "`winner_total_ms` is -5: expected milliseconds between 0 and 1e9"),
            (r#","winner_total_ms":"5000""#, "`winner_total_ms` is \"5000\": expected a number of milliseconds or null"),
            (r#","winner_valid_at_ms":1e308"#, "`winner_valid_at_ms` is 1e308"),
            (
                r#","receipts":[{"provider":"modal","cancel_sent_ms":-1e308,"cancel_ack_ms":1e308}]"#,
                "`receipts[0].cancel_sent_ms` is -1e308",
            ),
            (r#","receipts":[{"provider":"modal","cancel_sent_ms":10,"cancel_ack_ms":4}]"#, "`receipts[0].cancel_ack_ms` (4) is before"),
            (r#","receipts":[{"provider":"modal","leaked":"false"}]"#, "`receipts[0].leaked` is \"false\": expected true, false or null"),
            (r#","budget_refusals":-1"#, "`budget_refusals` is -1"),
            (r#","attempts":{}"#, "`attempts` is an object: expected an array"),
        ];
        for (extra, expected) in cases {
            // serde_json keeps the last of a repeated key, so `extra` overrides the defaults.
            let e = err(format!("{}{}", request(1, ""), request(2, extra)).as_bytes());
            assert!(e.contains(":2: malformed record: ") && e.contains(expected), "{extra}: {e}");
        }
        // A legacy record rebuilds the winner's launch offset from its policy label.
        for label in ["runpod->modal@1e308s", "runpod->modal@nans", "runpod->modal@-5s"] {
            let legacy =
                format!(r#"{{"kind":"hedged_request","request_id":1,"policy":"{label}","winner":"modal","winner_valid_at_ms":3000}}"#);
            let e = err(format!("{legacy}\n").as_bytes());
            assert!(e.contains(&format!(":1: malformed record: policy label `{label}` launches at ")), "{e}");
        }
        let audit =
            r#"{"kind":"forced_cancel","provider":"runpod","phase":"early","receipt":{"cancel_sent_ms":1e308,"cancel_ack_ms":-1e308}}"#;
        assert!(err(format!("{audit}\n").as_bytes()).contains(":1: malformed record: `receipt.cancel_sent_ms` is 1e308"));
    }

    #[test]
    fn bad_lines_are_counted_under_skip_bad_lines() {
        let mut text = request(1, "").into_bytes();
        text.extend_from_slice(b"{\"kind\":\"tailcut_request\",\"note\":\"\xff\"}\n");
        text.extend_from_slice(request(3, r#","winner_total_ms":-5"#).as_bytes());
        text.extend_from_slice(b"[1,2]\n");
        text.extend_from_slice(request(5, "").as_bytes());
        let e = err(&text);
        assert!(e.contains(":2: malformed record: not valid UTF-8 (invalid byte at column 35)"), "{e}");
        let f = write(&text);
        let t = read_live(&[f.path().to_path_buf()], true).unwrap();
        assert_eq!((t.rows.len(), t.skipped), (2, 3));
        assert!(t.skipped_examples[2].contains(":4: malformed record: expected a JSON object, found an array"), "{:?}", t.skipped_examples);
    }

    #[test]
    fn long_lines_are_read_up_to_the_cap_then_named() {
        let pad = |n: usize| request(1, &format!(r#","pad":"{}""#, "x".repeat(n)));
        let text = [pad(5 << 20), request(2, ""), pad(3 << 20), request(4, "")].concat();
        let f = write(text.as_bytes());
        let t = read_live(&[f.path().to_path_buf()], false).unwrap();
        assert_eq!(t.rows.len(), 4);
        let capped = LiveOptions { skip_bad_lines: false, max_line_bytes: 4 << 20 };
        let e = read_live_with(&[f.path().to_path_buf()], capped).unwrap_err().to_string();
        assert!(e.contains(":1: line longer than 4194304 bytes"), "{e}");
        let t = read_live_with(&[f.path().to_path_buf()], LiveOptions { skip_bad_lines: true, ..capped }).unwrap();
        assert_eq!((t.rows.len(), t.skipped), (3, 1));
    }

    #[test]
    fn a_repeated_id_in_a_joined_trace_is_an_error() {
        let engine = r#"{"kind":"hedged_request","request_id":7,"policy":"runpod->modal@10s","winner":"runpod","winner_valid_at_ms":3000}"#;
        let index = r#"{"kind":"validation_index","request_id":7,"arm":"hedge"}"#;
        let e = err(format!("{engine}\n{index}\n{index}\n").as_bytes());
        assert!(e.contains(":3: malformed record: duplicate validation_index for request_id 7 (first at "), "{e}");
        let e = err(format!("{engine}\n{engine}\n{index}\n").as_bytes());
        assert!(e.contains(":2: malformed record: duplicate request_id 7"), "{e}");
    }
}
