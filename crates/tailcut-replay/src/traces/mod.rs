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
//!
//! The parts, leaves first: `field` (one optional number field read, or its typed
//! error), `evidence` (the reference tool's request records as
//! observations for the provider model, losers right-censored), `learned` (a learned decision's predictions and each
//! attempt's running time, for calibration), `record` (one request or receipt record normalised),
//! `check` (the field checks a record passes as it is read), `read` (files into
//! [`LiveTraces`], joining validation indexes) and `summary` (per-arm statistics and the
//! cancel-audit matrix).

mod check;
mod evidence;
mod field;
mod learned;
mod read;
mod record;
mod summary;

pub use evidence::{reference_observations, EVIDENCE_KINDS};
pub use learned::{auto_deadline, learned_facts, AttemptSpend, LearnedFacts};
pub use read::{read_live, read_live_with, LiveOptions, LiveTraces};
pub use record::{live_row, receipt_facts, AuditRow, LiveRow, ReceiptFacts, MAX_CLOCK_MS, MAX_OFFSET_MS};
pub use summary::{audit_matrix, group_by_arm, summarize, summarize_arm, ArmSummary, AuditCell, Spread};

#[cfg(test)]
mod tests;
