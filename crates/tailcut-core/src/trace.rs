//! Request traces: one JSONL record per request, appended and flushed line by line.
//!
//! The schema is documented in `docs/trace-schema.md`. Times are milliseconds since the
//! request started (its t0), with 0.1 ms resolution. Payload bytes and credentials are
//! never written.

use crate::job::JobState;
use crate::money::MicroUsd;
use crate::receipt::Receipt;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The `kind` of a tailcut request record.
pub const REQUEST_KIND: &str = "tailcut_request";
/// Current schema version of [`RequestTrace`].
pub const SCHEMA_VERSION: u32 = 1;

/// What an attempt was launched as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The first choice.
    Primary,
    /// The second provider (timer hedge, cutover target, safety hedge).
    Hedge,
    /// The third provider (cascade escalation, deadline tier).
    Fallback,
    /// One of several launched at once by an immediate race.
    Racer,
}

/// The decisions a policy took, flattened into the record's top level so that
/// reference-style readers find `hedge_launched`, `cutover_fired`, ... where they expect.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Decisions {
    /// A second attempt was launched (timer hedge, immediate race).
    #[serde(default)]
    pub hedge_launched: bool,
    /// The primary was found queued at the poll and abandoned for the hedge.
    #[serde(default)]
    pub cutover_fired: bool,
    /// The primary was kept and a safety hedge launched later.
    #[serde(default)]
    pub safety_hedge_fired: bool,
    /// The primary was still queued at the poll, but its replacement could not launch
    /// (why: the hedge-load cap, the budget, the live-attempt cap, or a failed submit), so
    /// the primary was kept running. Absent when no cutover was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cutover_refused: Option<RefusedBy>,
    /// A third provider was launched.
    #[serde(default)]
    pub escalation_fired: bool,
    /// Escalation was due but the live-attempt cap blocked it (never cleared).
    #[serde(default)]
    pub escalation_skipped_at_capacity: bool,
    /// State of the primary at the cutover poll.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_at_poll: Option<JobState>,
    /// When the poll started, ms since t0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_at_ms: Option<f64>,
    /// How long the poll took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_latency_ms: Option<f64>,
    /// Why the poll failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_error: Option<String>,
    /// Launches the budget refused.
    #[serde(default)]
    pub budget_refusals: u32,
    /// Extra attempts the hedge-load cap refused.
    #[serde(default)]
    pub hedges_denied: u32,
    /// The caller stopped the race (e.g. a DELETE on a job, or shutdown).
    #[serde(default)]
    pub stopped_by_caller: bool,
    /// What a learned policy (`adaptive`, `singler`, `auto`) chose and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned: Option<LearnedChoice>,
}

/// What refused a launch that would have replaced a running attempt (a cutover's target).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusedBy {
    /// The hedge-load cap (`hedge_load`, or a learned policy's own extra-load budget).
    HedgeGate,
    /// The ledger refused the projected charge.
    Budget,
    /// The live-attempt cap (`race.max_live`) was reached.
    LiveCap,
    /// The replacement's submit failed.
    SubmitFailed,
}

/// A learned policy's choice for one request, so `report` can explain every hedge.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LearnedChoice {
    /// The plan run (`cutover:runpod->cerebrium@q2.5s+s8.5s`, `hedge:a->b@1.09s`, ...).
    /// Shared (`Arc<str>`): a busy route repeats its last explanation without copying it.
    pub plan: std::sync::Arc<str>,
    /// Why, in words, with the numbers the model gave.
    pub reason: std::sync::Arc<str>,
    /// Predicted P(latency > deadline) (`auto`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_miss: Option<f64>,
    /// Predicted cost, $ (`auto`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_cost_usd: Option<f64>,
    /// Predicted extra attempts (`auto`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_extra: Option<f64>,
    /// What the model knew of each of the policy's providers when it decided: samples,
    /// the learned quantiles, the idle gap and P(warm) at that gap.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model: Vec<ProviderBelief>,
}

/// One provider as a learned policy's model saw it at a decision.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProviderBelief {
    /// Provider name (shared with the policy's list).
    pub provider: std::sync::Arc<str>,
    /// Attempts the model has observed (0: a cold model).
    pub samples: u64,
    /// Learned median latency, s (streams: time to the first content token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_s: Option<f64>,
    /// Learned p95, s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p95_s: Option<f64>,
    /// Learned p99, s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_s: Option<f64>,
    /// Time since this provider last served a request, s (unknown before its first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_gap_s: Option<f64>,
    /// P(warm | that idle gap), when the provider ever reported warmth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_warm: Option<f64>,
}

impl Decisions {
    /// Whether any extra attempt was launched.
    pub fn hedged(&self) -> bool {
        self.hedge_launched || self.cutover_fired || self.safety_hedge_fired || self.escalation_fired
    }
}

/// One status poll of an attempt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatePoll {
    /// When it started, ms since t0.
    pub at_ms: f64,
    /// The state seen (`UNKNOWN` when the poll failed).
    pub state: JobState,
    /// The poll's error, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One attempt in a request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttemptTrace {
    /// Provider key.
    pub provider: String,
    /// What it was launched as.
    pub role: Role,
    /// Provider job id.
    pub job_id: Option<String>,
    /// When its submit started, ms since t0 (the launch offset).
    pub submit_offset_ms: f64,
    /// When its submit returned, ms since t0.
    pub submit_returned_ms: f64,
    /// Status polls made during the race (not the pre-cancel poll, which is in the receipt).
    #[serde(default)]
    pub polls: Vec<StatePoll>,
    /// Final state seen by the race; null when the race ended before it resolved.
    pub outcome: Option<JobState>,
    /// Validator verdict; null when unresolved.
    pub valid: Option<bool>,
    /// Why it was invalid.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// Its own wall time from submit to result, ms.
    pub wall_ms: Option<f64>,
    /// Provider metrics from its result.
    #[serde(default)]
    pub metrics: serde_json::Map<String, serde_json::Value>,
    /// Projected cost charged to the ledger before submitting.
    pub projected_cost_micro_usd: MicroUsd,
    /// The submit error, when the submit failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submit_error: Option<String>,
}

/// One request, as written to the trace file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestTrace {
    /// Always [`REQUEST_KIND`] (borrowed when written, so a record costs no allocation
    /// for it).
    pub kind: std::borrow::Cow<'static, str>,
    /// [`SCHEMA_VERSION`] at writing time.
    pub schema_version: u32,
    /// UTC time the record was written (RFC 3339).
    pub ts: String,
    /// Caller's request id.
    pub request_id: String,
    /// Policy label (`hedge:runpod->cerebrium@10s`).
    pub policy: String,
    /// The policy's kind; absent in records written before it was recorded (read
    /// those with [`RequestTrace::kind_of_policy`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_kind: Option<crate::PolicyKind>,
    /// Decision flags.
    #[serde(flatten)]
    pub decisions: Decisions,
    /// Every attempt, in launch order.
    pub attempts: Vec<AttemptTrace>,
    /// Winning provider, or null when no valid result arrived.
    pub winner: Option<String>,
    /// The winner's own wall time, ms.
    pub winner_valid_at_ms: Option<f64>,
    /// End-to-end latency: the winner's launch offset plus its wall time, ms.
    pub winner_total_ms: Option<f64>,
    /// Every loser receipt, in launch order of the attempts.
    pub receipts: Vec<Receipt>,
    /// Sum of the projected charges.
    pub projected_cost_micro_usd: MicroUsd,
}

impl RequestTrace {
    /// The policy's kind: the recorded one, or for a record written before kinds were
    /// recorded, the one its label names.
    pub fn kind_of_policy(&self) -> Option<crate::PolicyKind> {
        self.policy_kind.or_else(|| crate::PolicyKind::from_legacy_label(&self.policy))
    }
}

/// Current UTC time in RFC 3339 with milliseconds.
pub fn now_rfc3339() -> String {
    rfc3339_millis(std::time::SystemTime::now())
}

/// `at` in RFC 3339 with milliseconds (`2026-07-14T09:30:05.250Z`). Every request's
/// record carries one, so each thread keeps the formatted second and writes only the
/// milliseconds after it.
pub fn rfc3339_millis(at: std::time::SystemTime) -> String {
    use std::cell::RefCell;
    thread_local! {
        static SECOND: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    let Ok(since) = at.duration_since(std::time::UNIX_EPOCH) else {
        return humantime::format_rfc3339_millis(at).to_string();
    };
    let (secs, millis) = (since.as_secs(), since.subsec_millis());
    SECOND.with(|cell| {
        let Ok(mut cached) = cell.try_borrow_mut() else {
            return humantime::format_rfc3339_millis(at).to_string();
        };
        if cached.0 != secs {
            let whole = humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs)).to_string();
            cached.1 = whole.trim_end_matches('Z').to_string();
            cached.0 = secs;
        }
        let mut out = String::with_capacity(cached.1.len() + 5);
        out.push_str(&cached.1);
        out.push('.');
        out.push(char::from(b'0' + (millis / 100) as u8));
        out.push(char::from(b'0' + (millis / 10 % 10) as u8));
        out.push(char::from(b'0' + (millis % 10) as u8));
        out.push('Z');
        out
    })
}

/// Why a trace could not be written.
#[derive(Debug, thiserror::Error)]
#[error("trace file {path}: {source}")]
pub struct TraceError {
    /// The file.
    pub path: PathBuf,
    /// The I/O error.
    #[source]
    pub source: std::io::Error,
}

/// Appends JSON lines to a file, flushing each one.
#[derive(Debug)]
pub struct TraceWriter {
    path: PathBuf,
    file: Mutex<BufWriter<File>>,
}

impl TraceWriter {
    /// Opens `path` for appending, creating parent directories.
    pub fn append(path: &Path) -> Result<TraceWriter, TraceError> {
        let err = |source| TraceError { path: path.to_path_buf(), source };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(err)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path).map_err(err)?;
        Ok(TraceWriter { path: path.to_path_buf(), file: Mutex::new(BufWriter::new(file)) })
    }

    /// The file written to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes one record as a line and flushes it.
    pub fn write<T: Serialize>(&self, record: &T) -> Result<(), TraceError> {
        let err = |source| TraceError { path: self.path.clone(), source };
        let mut line = serde_json::to_vec(record).map_err(|e| err(std::io::Error::other(e)))?;
        line.push(b'\n');
        let mut f = self.file.lock().map_err(|_| err(std::io::Error::other("trace lock poisoned")))?;
        f.write_all(&line).map_err(err)?;
        f.flush().map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::rfc3339_millis;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn timestamps_match_a_full_format_across_seconds_and_days() {
        // Within one second (cached), across a second, a day and a year boundary, and back.
        let base = 1_798_761_598_990u64; // 2026-12-31T23:59:58.990Z
        for ms in [0u64, 5, 9, 10, 999, 1000, 1001, 1999, 2010, 86_400_000, 3, 0, 123_456_789] {
            let at = UNIX_EPOCH + Duration::from_millis(base + ms);
            assert_eq!(rfc3339_millis(at), humantime::format_rfc3339_millis(at).to_string(), "at +{ms} ms");
        }
        let epoch = UNIX_EPOCH + Duration::from_millis(7);
        assert_eq!(rfc3339_millis(epoch), "1970-01-01T00:00:00.007Z");
    }
}
