//! Settling a race once it ends: the caller's [`Outcome`] at once, then loser cancels,
//! receipts and the trace record in the background, as a task on the hedger's
//! [`TaskTracker`](tokio_util::task::TaskTracker) (never a detached `tokio::spawn`), so
//! whoever owns that tracker can wait for every cancel and receipt.

use super::super::{Outcome, Settled, SettledInner};
use super::{AttemptId, Race};
use crate::receipt::offset_ms;
use crate::trace::{now_rfc3339, AttemptTrace, RequestTrace, REQUEST_KIND, SCHEMA_VERSION};
use futures::stream::FuturesUnordered;
use futures::StreamExt;

impl Race {
    /// Ends the race: returns the outcome at once; losers are cancelled and the trace
    /// record written in the background.
    pub(crate) fn finish(mut self) -> Outcome {
        self.stop = None;
        // Results that are already in are recorded, so finished attempts are never cancelled.
        self.take_ready_results();
        for i in 0..self.attempts.len() {
            if Some(i) != self.winner {
                self.cancel(AttemptId(i), "lost the race");
            }
        }
        let winner = self.winner.map(|i| self.shared.providers[self.attempts[i].provider].name.clone());
        let latency = self.winner.and_then(|i| {
            let a = &self.attempts[i];
            let r = self.winner_result.as_ref()?;
            Some(r.finished.saturating_duration_since(self.t0).max(a.submit_started.saturating_duration_since(self.t0)))
        });
        let projected_cost = self.attempts.iter().map(|a| a.projected).sum();
        let failures = self
            .attempts
            .iter()
            .filter_map(|a| {
                let r = a.resolved.as_ref().filter(|r| !r.valid)?;
                Some((self.shared.providers[a.provider].name.clone(), r.reasons.join("; ")))
            })
            .collect();
        // The caller's copy of the decisions carries the flags and counts; a learned
        // policy's explanation (with its per-provider beliefs) stays in the trace record.
        let learned = self.decisions.learned.take();
        let outcome_head = (self.request.request_id.clone(), self.policy.clone(), self.attempts.len(), self.decisions.clone());
        self.decisions.learned = learned;
        let result = self.winner_result.take();
        let settled = if self.cancels.as_ref().is_none_or(FuturesUnordered::is_empty) {
            let record = self.into_record();
            Settled(SettledInner::Ready(Box::new(record)))
        } else {
            let tasks = self.shared.tasks.clone();
            Settled(SettledInner::Pending(tasks.spawn(async move {
                while let Some((i, receipt)) = match self.cancels.as_mut() {
                    Some(c) => c.next().await,
                    None => None,
                } {
                    self.on_receipt(i, receipt);
                }
                self.into_record()
            })))
        };
        let (request_id, policy, attempts, decisions) = outcome_head;
        Outcome { request_id, policy, winner, result, latency, attempts, failures, decisions, projected_cost, settled }
    }

    fn into_record(mut self) -> RequestTrace {
        let request_id = std::mem::take(&mut self.request.request_id);
        let policy = std::mem::take(&mut self.policy);
        let decisions = std::mem::take(&mut self.decisions);
        let providers = &self.shared.providers;
        let winner = self.winner.map(|i| &self.attempts[i]);
        let winner_valid_at_ms = winner.and_then(|a| a.resolved.as_ref()).map(|r| r.wall_ms);
        let winner_total_ms =
            winner.and_then(|a| a.resolved.as_ref().map(|r| ((offset_ms(self.t0, a.submit_started) + r.wall_ms) * 10.0).round() / 10.0));
        let record = RequestTrace {
            kind: std::borrow::Cow::Borrowed(REQUEST_KIND),
            schema_version: SCHEMA_VERSION,
            ts: now_rfc3339(),
            request_id,
            policy,
            policy_kind: Some(self.policy_kind),
            decisions,
            winner: winner.map(|a| providers[a.provider].name.clone()),
            winner_valid_at_ms,
            winner_total_ms,
            receipts: self.attempts.iter().filter_map(|a| a.receipt.clone()).collect(),
            projected_cost_micro_usd: self.attempts.iter().map(|a| a.projected).sum(),
            attempts: self
                .attempts
                .into_iter()
                .map(|a| AttemptTrace {
                    provider: providers[a.provider].name.clone(),
                    role: a.role,
                    job_id: a.job_id,
                    submit_offset_ms: offset_ms(self.t0, a.submit_started),
                    submit_returned_ms: offset_ms(self.t0, a.submit_returned),
                    polls: a.polls,
                    outcome: a.resolved.as_ref().map(|r| r.state),
                    valid: a.resolved.as_ref().map(|r| r.valid),
                    reasons: a.resolved.as_ref().map(|r| r.reasons.clone()).unwrap_or_default(),
                    wall_ms: a.resolved.as_ref().map(|r| r.wall_ms),
                    metrics: a.resolved.map(|r| r.metrics).unwrap_or_default(),
                    projected_cost_micro_usd: a.projected,
                    submit_error: a.submit_error,
                })
                .collect(),
        };
        if let Some(w) = &self.shared.trace {
            if let Err(e) = w.write(&record) {
                tracing_fallback(&e.to_string());
            }
        }
        record
    }
}

/// Trace-write failures must never fail a request; they are logged (`trace_write_failed`).
fn tracing_fallback(message: &str) {
    crate::log::warn("trace_write_failed", || serde_json::json!({"error": message}));
}
