//! One simulated job: its timeline (queued, running, finished), its result and
//! metrics, and cancels that stop it (free in the queue, billed until confirmed while
//! running, or leaked).

use async_trait::async_trait;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tailcut_core::validate::sine_wav;
use tailcut_core::{CancelContext, CancelScope, Job, JobResult, JobState, MicroUsd, Payload, ProviderError, Receipt};
use tokio::sync::Notify;
use tokio::time::{sleep_until, Instant};

use crate::pool::{Draws, Inner, Mode};
use crate::profile::SimOutput;

#[derive(Debug)]
pub(crate) struct Timeline {
    pub(crate) end: Instant,
    pub(crate) cancelled_at: Option<Instant>,
    /// The cancel arrived while the job was queued: no worker ever ran it, so it
    /// executed (and is billed) nothing, whatever its planned run was.
    pub(crate) cancelled_in_queue: bool,
    pub(crate) leaked: bool,
}

pub(crate) struct SimJob {
    pub(crate) provider: Arc<Inner>,
    pub(crate) id: String,
    pub(crate) submitted: Instant,
    pub(crate) start: Instant,
    pub(crate) mode: Mode,
    pub(crate) worker: usize,
    pub(crate) prev_busy: Instant,
    pub(crate) span: usize,
    pub(crate) draws: Draws,
    pub(crate) timeline: Mutex<Timeline>,
    pub(crate) notify: Notify,
}

impl std::fmt::Debug for SimJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimJob").field("id", &self.id).field("mode", &self.mode).finish_non_exhaustive()
    }
}

impl SimJob {
    fn timeline(&self) -> MutexGuard<'_, Timeline> {
        self.timeline.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn finished_state(&self) -> JobState {
        if self.draws.fails {
            JobState::Failed
        } else {
            JobState::Completed
        }
    }

    fn state_at(&self, now: Instant) -> JobState {
        let t = self.timeline();
        if t.cancelled_at.is_some_and(|c| now >= c) {
            return JobState::Cancelled;
        }
        let coarse = |s| if self.provider.profile.reports_queued { s } else { JobState::Pending };
        if now < self.start || t.cancelled_in_queue {
            coarse(JobState::Queued)
        } else if now < t.end {
            coarse(JobState::Running)
        } else {
            self.finished_state()
        }
    }

    fn metrics(&self) -> serde_json::Map<String, serde_json::Value> {
        let name = &self.provider.name;
        let mut m = serde_json::Map::new();
        m.insert("sim_mode".into(), self.mode.label().into());
        let (exec_ms, left_queue) = {
            let t = self.timeline();
            match t.cancelled_at.filter(|_| t.cancelled_in_queue) {
                // Never ran: no execution; it waited until the cancel took it out.
                Some(c) => (0, c),
                None => (t.end.saturating_duration_since(self.start).as_millis() as u64, self.start),
            }
        };
        m.insert(format!("{name}_execution_ms"), exec_ms.into());
        if self.provider.profile.reports_queued {
            let delay_ms = left_queue.saturating_duration_since(self.submitted).as_secs_f64() * 1000.0;
            m.insert(format!("{name}_delay_ms"), serde_json::json!((delay_ms * 10.0).round() / 10.0));
        }
        m
    }

    fn payload(&self) -> Payload {
        match self.provider.profile.output {
            SimOutput::Json => {
                let body = serde_json::json!({"provider": self.provider.name, "job_id": self.id, "output": "ok"}).to_string();
                let bytes = if self.draws.malformed { body.as_bytes()[..body.len() / 2].to_vec() } else { body.into_bytes() };
                Payload { bytes: bytes.into(), content_type: "application/json".into() }
            }
            SimOutput::Wav => {
                let amplitude = if self.draws.malformed { 1e-6 } else { 0.3 };
                Payload { bytes: sine_wav(1.0, 16_000, 220.0, amplitude).into(), content_type: "audio/wav".into() }
            }
        }
    }

    /// Shortens the job to end at `at` and releases its worker from then on.
    fn stop_at(&self, at: Instant, queued: bool) {
        let mut st = self.provider.lock();
        if let Some(span) = st.spans.get_mut(self.span) {
            span.1 = if queued { span.0 } else { at.max(span.0) };
        }
        let old_end = self.timeline().end;
        if let Some(w) = st.workers.get_mut(self.worker) {
            if w.busy_until == old_end {
                if queued && w.jobs == 1 {
                    // A cold worker that never started: it never existed for billing.
                    w.alive = false;
                    st.cold_starts = st.cold_starts.saturating_sub(1);
                } else if queued {
                    w.busy_until = self.prev_busy;
                } else {
                    w.busy_until = at;
                }
            }
            if let Some(w) = st.workers.get_mut(self.worker) {
                w.jobs = w.jobs.saturating_sub(u32::from(queued));
            }
        }
    }

    fn cost_between(&self, from: Instant, to: Instant) -> MicroUsd {
        self.provider.rate.cost_of(to.saturating_duration_since(from))
    }
}

#[async_trait]
impl Job for SimJob {
    fn job_id(&self) -> Option<String> {
        Some(self.id.clone())
    }

    async fn status(&self) -> Result<JobState, ProviderError> {
        Ok(self.state_at(Instant::now()))
    }

    async fn result(&self, deadline: Instant) -> JobResult {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (end, cancelled_at) = {
                let t = self.timeline();
                (t.end, t.cancelled_at)
            };
            let now = Instant::now();
            if let Some(c) = cancelled_at.filter(|c| now >= *c) {
                let mut r = JobResult::bare(JobState::Cancelled, Some("cancelled".into()));
                r.finished = c;
                r.metrics = self.metrics();
                return r;
            }
            if now >= end {
                let state = self.finished_state();
                let error = (state == JobState::Failed).then(|| "simulated worker failure".to_string());
                let mut r = JobResult::bare(state, error);
                r.started = Some(self.start);
                r.finished = end;
                r.metrics = self.metrics();
                if state == JobState::Completed {
                    r.payload = Some(self.payload());
                }
                return r;
            }
            if now >= deadline {
                return JobResult::timed_out();
            }
            let wake = cancelled_at.map_or(end, |c| c.min(end)).min(deadline);
            tokio::select! {
                () = sleep_until(wake) => {}
                () = &mut notified => {}
            }
        }
    }

    async fn cancel(&self, ctx: CancelContext) -> Result<Receipt, ProviderError> {
        let mut receipt = ctx.receipt(&self.provider.name, Some(self.id.clone()));
        let now = ctx.sent_at;
        let ack_at = now + Duration::from_secs_f64(self.draws.cancel_ack_ms / 1000.0);
        let state = self.state_at(now);
        if state.is_terminal() {
            // Nothing left to stop: record the terminal state that was already there.
            sleep_until(ack_at).await;
            receipt.record_ack(ctx.ms(ack_at));
            receipt.record_terminal(ctx.ms(ack_at), state);
            receipt.cancel_scope = CancelScope::Request;
            let end = self.timeline().end;
            receipt.execution_ms_before_cancel = Some(end.saturating_duration_since(self.start).as_millis() as f64);
            receipt.note = "job had already finished when the cancel arrived".into();
            return Ok(receipt);
        }
        if now < self.start {
            // Still queued: no worker ran it, nothing is billed. (The worker is released
            // first: `stop_at` recognises it by the job's planned end.)
            self.stop_at(now, true);
            {
                let mut t = self.timeline();
                t.cancelled_at = Some(ack_at);
                t.cancelled_in_queue = true;
                // It never runs, so it cannot finish before the cancel takes effect.
                t.end = t.end.max(ack_at);
            }
            self.notify.notify_waiters();
            sleep_until(ack_at).await;
            receipt.record_ack(ctx.ms(ack_at));
            receipt.record_terminal(ctx.ms(ack_at), JobState::Cancelled);
            receipt.cancel_scope = CancelScope::QueuedJob;
            receipt.execution_ms_before_cancel = Some(0.0);
            receipt.estimated_cost_micro_usd = Some(MicroUsd::ZERO);
            receipt.reconciled_cost_micro_usd = Some(MicroUsd::ZERO);
            receipt.billing_stop_confirmed = true;
            receipt.note = "cancelled in queue; no worker started".into();
            return Ok(receipt);
        }
        receipt.cancel_scope = CancelScope::Request;
        if self.draws.leaks {
            sleep_until(ack_at).await;
            receipt.record_ack(ctx.ms(ack_at));
            let end = self.timeline().end;
            receipt.estimated_cost_micro_usd = Some(self.cost_between(self.start, end));
            receipt.note = "cancel acknowledged but the job kept running (simulated leak)".into();
            self.timeline().leaked = true;
            return Ok(receipt);
        }
        let terminal_at = ack_at + Duration::from_secs_f64(self.draws.cancel_confirm_ms / 1000.0);
        let stop_at = terminal_at.min(self.timeline().end);
        self.stop_at(stop_at, false);
        {
            let mut t = self.timeline();
            t.cancelled_at = Some(terminal_at);
            t.end = t.end.min(terminal_at);
        }
        self.notify.notify_waiters();
        sleep_until(terminal_at).await;
        receipt.record_ack(ctx.ms(ack_at));
        receipt.record_terminal(ctx.ms(terminal_at), self.state_at(terminal_at));
        let executed = stop_at.saturating_duration_since(self.start);
        receipt.execution_ms_before_cancel = Some(executed.as_millis() as f64);
        let cost = self.cost_between(self.start, stop_at);
        receipt.estimated_cost_micro_usd = Some(cost);
        receipt.reconciled_cost_micro_usd = Some(cost);
        receipt.billing_stop_confirmed = true;
        Ok(receipt)
    }
}
