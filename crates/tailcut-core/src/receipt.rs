//! Cancellation receipts: what was observed when a loser was cancelled.
//!
//! A receipt starts conservative — [`Evidence::NoEvidence`] and `leaked = true` — and
//! only observed proof upgrades it. `terminal_status` is set only from a state that was
//! actually observed, never from the cancel call's response. A cancel that errors is a
//! leaked receipt ([`Receipt::cancel_failed`]), never an error that could lose a race.

use crate::job::JobState;
use crate::money::MicroUsd;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

/// How strong the proof is that a cancelled job stopped. Declared strongest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Evidence {
    /// The job was polled to a terminal state after the cancel.
    ConfirmedTerminal,
    /// The provider acknowledged the cancel; no terminal state could be observed.
    ProviderAck,
    /// The in-flight synchronous request (or stream) was closed after the cancel.
    RequestChannelClosed,
    /// Nothing was observed.
    NoEvidence,
}

impl Evidence {
    /// The wire value, e.g. `confirmed_terminal`.
    pub fn wire(self) -> &'static str {
        match self {
            Evidence::ConfirmedTerminal => "confirmed_terminal",
            Evidence::ProviderAck => "provider_ack",
            Evidence::RequestChannelClosed => "request_channel_closed",
            Evidence::NoEvidence => "no_evidence",
        }
    }
}

/// What the cancel stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelScope {
    /// A job still waiting in the provider's queue.
    QueuedJob,
    /// One running request.
    Request,
    /// The whole container or worker.
    Container,
    /// Not known.
    Unknown,
}

/// The record of one loser cancellation. Times are milliseconds since the request
/// started (the race's t0), so they can be compared across attempts and processes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    /// Provider key.
    pub provider: String,
    /// Provider job id, when one was issued.
    pub job_id: Option<String>,
    /// Why the engine cancelled it ("lost the race", "still queued at cutover poll").
    #[serde(default)]
    pub reason: String,
    /// State polled just before the cancel was sent (null when the poll failed).
    pub state_before_cancel: Option<JobState>,
    /// Whether the job was running (not merely queued) when cancelled.
    pub was_running: bool,
    /// When the cancel left the client.
    pub cancel_sent_ms: f64,
    /// When the provider acknowledged it.
    pub cancel_ack_ms: Option<f64>,
    /// When a terminal state was observed.
    pub terminal_ms: Option<f64>,
    /// The observed terminal state; never taken from the cancel call's response.
    pub terminal_status: Option<JobState>,
    /// How long the job executed before it stopped.
    pub execution_ms_before_cancel: Option<f64>,
    /// Modelled spend of the loser.
    pub estimated_cost_micro_usd: Option<MicroUsd>,
    /// Provider-reported spend of the loser.
    pub reconciled_cost_micro_usd: Option<MicroUsd>,
    /// Strength of the proof that it stopped.
    pub evidence: Evidence,
    /// What the cancel stopped.
    pub cancel_scope: CancelScope,
    /// A terminal state was observed, not assumed.
    pub confirmed_terminal: bool,
    /// The provider's final billed execution was captured.
    pub billing_stop_confirmed: bool,
    /// True until stopping is evidenced.
    pub leaked: bool,
    /// Free text.
    #[serde(default)]
    pub note: String,
}

/// Milliseconds from `epoch` to `at`, with 0.1 ms resolution.
pub fn offset_ms(epoch: Instant, at: Instant) -> f64 {
    let micros = at.saturating_duration_since(epoch).as_micros() as f64;
    (micros / 100.0).round() / 10.0
}

impl Receipt {
    /// A receipt with nothing proven: no evidence, leaked, unknown scope.
    pub fn unproven(provider: impl Into<String>, job_id: Option<String>, sent_ms: f64) -> Receipt {
        Receipt {
            provider: provider.into(),
            job_id,
            reason: String::new(),
            state_before_cancel: None,
            was_running: false,
            cancel_sent_ms: sent_ms,
            cancel_ack_ms: None,
            terminal_ms: None,
            terminal_status: None,
            execution_ms_before_cancel: None,
            estimated_cost_micro_usd: None,
            reconciled_cost_micro_usd: None,
            evidence: Evidence::NoEvidence,
            cancel_scope: CancelScope::Unknown,
            confirmed_terminal: false,
            billing_stop_confirmed: false,
            leaked: true,
            note: String::new(),
        }
    }

    /// The receipt for a cancel call that failed or raised: no evidence, leaked.
    pub fn cancel_failed(provider: impl Into<String>, job_id: Option<String>, sent_ms: f64, error: &str) -> Receipt {
        let mut r = Receipt::unproven(provider, job_id, sent_ms);
        let mut note = format!("cancel raised: {error}");
        if note.len() > 200 {
            let mut cut = 200;
            while !note.is_char_boundary(cut) {
                cut -= 1;
            }
            note.truncate(cut);
        }
        r.note = note;
        r
    }

    /// Raises the evidence to `level` if that is stronger; never lowers it.
    fn raise(&mut self, level: Evidence) {
        if level < self.evidence {
            self.evidence = level;
        }
    }

    /// The provider acknowledged the cancel at `at_ms`. Not proof that it stopped:
    /// `leaked` stays as it was.
    pub fn record_ack(&mut self, at_ms: f64) {
        self.cancel_ack_ms = Some(at_ms);
        self.raise(Evidence::ProviderAck);
    }

    /// A terminal state was observed at `at_ms`. Ignored unless `state` really is terminal.
    pub fn record_terminal(&mut self, at_ms: f64, state: JobState) {
        if !state.is_terminal() {
            return;
        }
        self.terminal_ms = Some(at_ms);
        self.terminal_status = Some(state);
        self.confirmed_terminal = true;
        self.leaked = false;
        self.raise(Evidence::ConfirmedTerminal);
    }

    /// The synchronous request channel closed after the cancel at `at_ms`: the request
    /// is no longer being served, though no terminal state was observed.
    pub fn record_channel_closed(&mut self, at_ms: f64) {
        if self.cancel_ack_ms.is_none() {
            self.cancel_ack_ms = Some(at_ms);
        }
        self.leaked = false;
        self.raise(Evidence::RequestChannelClosed);
    }

    /// Milliseconds from send to acknowledgement.
    pub fn ack_latency_ms(&self) -> Option<f64> {
        self.cancel_ack_ms.map(|a| a - self.cancel_sent_ms)
    }

    /// Milliseconds from send to the observed terminal state.
    pub fn terminal_latency_ms(&self) -> Option<f64> {
        self.terminal_ms.map(|t| t - self.cancel_sent_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_conservative() {
        let r = Receipt::unproven("runpod", Some("j1".into()), 10.0);
        assert_eq!(r.evidence, Evidence::NoEvidence);
        assert!(r.leaked);
        assert!(!r.confirmed_terminal);
        assert_eq!(r.cancel_scope, CancelScope::Unknown);
    }

    #[test]
    fn ack_alone_does_not_clear_leak() {
        let mut r = Receipt::unproven("modal", None, 0.0);
        r.record_ack(250.0);
        assert_eq!(r.evidence, Evidence::ProviderAck);
        assert!(r.leaked);
        assert_eq!(r.ack_latency_ms(), Some(250.0));
    }

    #[test]
    fn only_a_terminal_state_confirms() {
        let mut r = Receipt::unproven("runpod", None, 0.0);
        r.record_terminal(5.0, JobState::Running);
        assert!(r.leaked);
        assert_eq!(r.terminal_status, None);
        r.record_terminal(300.0, JobState::Cancelled);
        assert!(!r.leaked);
        assert!(r.confirmed_terminal);
        assert_eq!(r.evidence, Evidence::ConfirmedTerminal);
        // A later, weaker observation never lowers the evidence.
        r.record_ack(310.0);
        assert_eq!(r.evidence, Evidence::ConfirmedTerminal);
    }

    #[test]
    fn failed_cancel_note_is_truncated() {
        let r = Receipt::cancel_failed("x", None, 0.0, &"é".repeat(300));
        assert!(r.note.len() <= 200);
        assert!(r.leaked);
        assert_eq!(r.evidence, Evidence::NoEvidence);
    }

    #[test]
    fn wire_format_matches_reference_names() {
        let mut r = Receipt::unproven("runpod", Some("j".into()), 1.0);
        r.record_terminal(2.0, JobState::Cancelled);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["evidence"], "confirmed_terminal");
        assert_eq!(v["terminal_status"], "CANCELLED");
        assert_eq!(v["cancel_scope"], "unknown");
    }
}
