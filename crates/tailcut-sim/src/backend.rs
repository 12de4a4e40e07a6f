//! The simulated backend: worker pool, job timelines, cancels and billing.

use crate::profile::{Range, SimOutput, SimProfile};
use async_trait::async_trait;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tailcut_core::receipt::Evidence;
use tailcut_core::validate::sine_wav;
use tailcut_core::{
    CancelContext, CancelScope, Capabilities, Job, JobRequest, JobResult, JobState, MicroUsd, Payload, ProviderApi, ProviderError,
    RateNanoUsdPerSec, Receipt,
};
use tokio::sync::Notify;
use tokio::time::{sleep_until, Instant};

/// What a simulated provider has charged so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimBilling {
    /// Jobs submitted.
    pub jobs: u64,
    /// Cold starts (new workers).
    pub cold_starts: u64,
    /// Execution seconds × rate: the active-compute model.
    pub active: MicroUsd,
    /// Worker sessions (per-second, from worker start, plus the idle window) × rate.
    pub billed: MicroUsd,
}

/// A simulated serverless GPU provider.
#[derive(Debug, Clone)]
pub struct SimBackend {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    name: String,
    profile: SimProfile,
    seed: u64,
    rate: RateNanoUsdPerSec,
    state: Mutex<PoolState>,
}

#[derive(Debug, Default)]
struct PoolState {
    submitted: u64,
    cold_starts: u64,
    workers: Vec<Worker>,
    /// Execution spans (start, end) of every job; cancels shorten them.
    spans: Vec<(Instant, Instant)>,
    /// Billed milliseconds of closed worker sessions (rounded up to whole seconds each).
    closed_billed_ms: u128,
}

#[derive(Debug)]
struct Worker {
    alive: bool,
    session_start: Instant,
    busy_until: Instant,
    jobs: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Warm,
    ColdFast,
    ColdSlow,
    Queued,
}

impl Mode {
    fn label(self) -> &'static str {
        match self {
            Mode::Warm => "warm",
            Mode::ColdFast => "cold_fast",
            Mode::ColdSlow => "cold_slow",
            Mode::Queued => "queued_behind_busy_worker",
        }
    }
}

/// Everything drawn for one submission, in a fixed order so streams never shift.
struct Draws {
    submit_latency: f64,
    fast: bool,
    cold_fast_queue: f64,
    cold_fast_run: f64,
    cold_slow_queue: f64,
    cold_slow_run: f64,
    warm_dispatch: f64,
    warm_run: f64,
    fails: bool,
    malformed: bool,
    cancel_ack_ms: f64,
    cancel_confirm_ms: f64,
    leaks: bool,
}

fn uniform(rng: &mut ChaCha8Rng, (lo, hi): Range) -> f64 {
    lo + (hi - lo) * rng.gen::<f64>()
}

impl Draws {
    fn new(seed: u64, n: u64, p: &SimProfile) -> Draws {
        let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(1_000_003).wrapping_add(n));
        Draws {
            submit_latency: uniform(&mut rng, p.submit_latency_s),
            fast: rng.gen::<f64>() < p.cold_fast_p,
            cold_fast_queue: uniform(&mut rng, p.cold_fast_queue_s),
            cold_fast_run: uniform(&mut rng, p.cold_fast_run_s),
            cold_slow_queue: uniform(&mut rng, p.cold_slow_queue_s),
            cold_slow_run: uniform(&mut rng, p.cold_slow_run_s),
            warm_dispatch: uniform(&mut rng, p.warm_dispatch_s),
            warm_run: uniform(&mut rng, p.warm_run_s),
            fails: rng.gen::<f64>() < p.failure_p,
            malformed: rng.gen::<f64>() < p.malformed_p,
            cancel_ack_ms: uniform(&mut rng, p.cancel_ack_ms),
            cancel_confirm_ms: uniform(&mut rng, p.cancel_confirm_ms),
            leaks: rng.gen::<f64>() < p.leak_p,
        }
    }
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

/// Rounds a session up to the billing quantum, in ms.
fn ceil_quantum_ms(d: Duration, quantum_s: f64) -> u128 {
    let q = ((quantum_s * 1000.0).round() as u128).max(1);
    d.as_millis().div_ceil(q) * q
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, PoolState> {
        // A poisoned lock only means another task panicked mid-update; the pool's
        // numbers are still the best we have.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn idle(&self) -> Duration {
        secs(self.profile.idle_window_s)
    }

    /// Closes the sessions of workers that have scaled to zero by `now`.
    fn retire(&self, st: &mut PoolState, now: Instant) {
        let idle = self.idle();
        let mut closed = 0u128;
        for w in st.workers.iter_mut().filter(|w| w.alive) {
            if w.busy_until + idle <= now {
                w.alive = false;
                closed +=
                    ceil_quantum_ms((w.busy_until + idle).saturating_duration_since(w.session_start), self.profile.billing_granularity_s);
            }
        }
        st.closed_billed_ms += closed;
    }
}

impl SimBackend {
    /// A simulated provider called `name` (used in job ids and metric keys).
    pub fn new(name: &str, profile: SimProfile, seed: u64) -> SimBackend {
        let rate = RateNanoUsdPerSec::from_usd_per_s(profile.rate_usd_per_s);
        SimBackend { inner: Arc::new(Inner { name: name.to_string(), profile, seed, rate, state: Mutex::new(PoolState::default()) }) }
    }

    /// The profile in use.
    pub fn profile(&self) -> &SimProfile {
        &self.inner.profile
    }

    /// Charges so far, counting live workers as if they scale to zero after their idle
    /// window.
    pub fn billing(&self) -> SimBilling {
        let inner = &self.inner;
        let st = inner.lock();
        let active_ms: u128 = st.spans.iter().map(|(s, e)| e.saturating_duration_since(*s).as_millis()).sum();
        let open_ms: u128 = st
            .workers
            .iter()
            .filter(|w| w.alive)
            .map(|w| {
                ceil_quantum_ms(
                    (w.busy_until + inner.idle()).saturating_duration_since(w.session_start),
                    inner.profile.billing_granularity_s,
                )
            })
            .sum();
        let to_micro = |ms: u128| inner.rate.cost_of(Duration::from_millis(ms.min(u64::MAX as u128) as u64));
        SimBilling {
            jobs: st.submitted,
            cold_starts: st.cold_starts,
            active: to_micro(active_ms),
            billed: to_micro(st.closed_billed_ms + open_ms),
        }
    }

    fn plan(&self, now: Instant, d: &Draws) -> (usize, Instant, Instant, Mode, Instant, usize) {
        let inner = &self.inner;
        let mut st = inner.lock();
        inner.retire(&mut st, now);
        st.submitted += 1;
        let idle_worker =
            st.workers.iter().enumerate().filter(|(_, w)| w.alive && w.busy_until <= now).max_by_key(|(_, w)| w.busy_until).map(|(i, _)| i);
        let alive = st.workers.iter().filter(|w| w.alive).count();
        let (worker, start, end, mode, prev_busy) = if let Some(i) = idle_worker {
            let start = now + secs(d.warm_dispatch);
            let w = &mut st.workers[i];
            let prev = w.busy_until;
            (i, start, start + secs(d.warm_run), Mode::Warm, prev)
        } else if alive < inner.profile.max_workers {
            let (queue, run, mode) = if d.fast {
                (d.cold_fast_queue, d.cold_fast_run, Mode::ColdFast)
            } else {
                (d.cold_slow_queue, d.cold_slow_run, Mode::ColdSlow)
            };
            let start = now + secs(queue);
            let end = start + secs(run);
            st.cold_starts += 1;
            st.workers.push(Worker { alive: true, session_start: start, busy_until: start, jobs: 0 });
            (st.workers.len() - 1, start, end, mode, start)
        } else {
            let i = st.workers.iter().enumerate().filter(|(_, w)| w.alive).min_by_key(|(_, w)| w.busy_until).map_or(0, |(i, _)| i);
            let prev = st.workers[i].busy_until;
            let start = prev + secs(d.warm_dispatch);
            (i, start, start + secs(d.warm_run), Mode::Queued, prev)
        };
        let w = &mut st.workers[worker];
        w.busy_until = end;
        w.jobs += 1;
        st.spans.push((start, end));
        let span = st.spans.len() - 1;
        (worker, start, end, mode, prev_busy, span)
    }
}

#[async_trait]
impl ProviderApi for SimBackend {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reports_queued: self.inner.profile.reports_queued,
            cancel_evidence: Evidence::ConfirmedTerminal,
            reports_billed_time: true,
        }
    }

    async fn submit(&self, _request: &JobRequest) -> Result<Arc<dyn Job>, ProviderError> {
        let n = {
            let st = self.inner.lock();
            st.submitted + 1
        };
        let draws = Draws::new(self.inner.seed, n, &self.inner.profile);
        if draws.submit_latency > 0.0 {
            tokio::time::sleep(secs(draws.submit_latency)).await;
        }
        let now = Instant::now();
        let (worker, start, end, mode, prev_busy, span) = self.plan(now, &draws);
        let job = SimJob {
            backend: self.inner.clone(),
            id: format!("sim-{}-{n}", self.inner.name),
            submitted: now,
            start,
            mode,
            worker,
            prev_busy,
            span,
            draws,
            timeline: Mutex::new(Timeline { end, cancelled_at: None, cancelled_in_queue: false, leaked: false }),
            notify: Notify::new(),
        };
        Ok(Arc::new(job))
    }
}

#[derive(Debug)]
struct Timeline {
    end: Instant,
    cancelled_at: Option<Instant>,
    /// The cancel arrived while the job was queued: no worker ever ran it, so it
    /// executed (and is billed) nothing, whatever its planned run was.
    cancelled_in_queue: bool,
    leaked: bool,
}

struct SimJob {
    backend: Arc<Inner>,
    id: String,
    submitted: Instant,
    start: Instant,
    mode: Mode,
    worker: usize,
    prev_busy: Instant,
    span: usize,
    draws: Draws,
    timeline: Mutex<Timeline>,
    notify: Notify,
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
        let coarse = |s| if self.backend.profile.reports_queued { s } else { JobState::Pending };
        if now < self.start || t.cancelled_in_queue {
            coarse(JobState::Queued)
        } else if now < t.end {
            coarse(JobState::Running)
        } else {
            self.finished_state()
        }
    }

    fn metrics(&self) -> serde_json::Map<String, serde_json::Value> {
        let name = &self.backend.name;
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
        if self.backend.profile.reports_queued {
            let delay_ms = left_queue.saturating_duration_since(self.submitted).as_secs_f64() * 1000.0;
            m.insert(format!("{name}_delay_ms"), serde_json::json!((delay_ms * 10.0).round() / 10.0));
        }
        m
    }

    fn payload(&self) -> Payload {
        match self.backend.profile.output {
            SimOutput::Json => {
                let body = serde_json::json!({"provider": self.backend.name, "job_id": self.id, "output": "ok"}).to_string();
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
        let mut st = self.backend.lock();
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
        self.backend.rate.cost_of(to.saturating_duration_since(from))
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
        let mut receipt = ctx.receipt(&self.backend.name, Some(self.id.clone()));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> JobRequest {
        JobRequest::new("r", serde_json::json!({}))
    }

    #[tokio::test(start_paused = true)]
    async fn same_seed_same_draws() {
        let a = SimBackend::new("runpod", SimProfile::runpod(), 7);
        let b = SimBackend::new("runpod", SimProfile::runpod(), 7);
        for _ in 0..5 {
            let rq = req();
            let (ja, jb) = tokio::join!(a.submit(&rq), b.submit(&rq));
            let (ja, jb) = (ja.unwrap(), jb.unwrap());
            let deadline = Instant::now() + Duration::from_secs(300);
            let (ra, rb) = tokio::join!(ja.result(deadline), jb.result(deadline));
            assert_eq!(ra.finished, rb.finished);
            assert_eq!(ra.state, rb.state);
            tokio::time::advance(Duration::from_secs(200)).await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn queued_then_running_then_completed() {
        let p = SimProfile { cold_fast_p: 1.0, submit_latency_s: (0.0, 0.0), failure_p: 0.0, malformed_p: 0.0, ..SimProfile::runpod() };
        let sim = SimBackend::new("runpod", p, 1);
        let job = sim.submit(&req()).await.unwrap();
        assert_eq!(job.status().await.unwrap(), JobState::Queued);
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(job.status().await.unwrap(), JobState::Running);
        let r = job.result(Instant::now() + Duration::from_secs(300)).await;
        assert_eq!(r.state, JobState::Completed);
        assert!(r.metrics.contains_key("runpod_delay_ms"));
        assert_eq!(job.status().await.unwrap(), JobState::Completed);
    }

    #[tokio::test(start_paused = true)]
    async fn coarse_providers_report_pending() {
        let sim = SimBackend::new("modal", SimProfile::modal(), 1);
        let job = sim.submit(&req()).await.unwrap();
        assert_eq!(job.status().await.unwrap(), JobState::Pending);
        assert!(!sim.capabilities().reports_queued);
    }

    #[tokio::test(start_paused = true)]
    async fn queued_cancel_is_free_and_confirmed() {
        let p = SimProfile { cold_fast_p: 0.0, submit_latency_s: (0.0, 0.0), ..SimProfile::runpod() };
        let sim = SimBackend::new("runpod", p, 3);
        let job = sim.submit(&req()).await.unwrap();
        let epoch = Instant::now();
        let ctx = CancelContext { reason: "test".into(), epoch, sent_at: Instant::now(), state_before: Some(JobState::Queued) };
        let (receipt, result) = tokio::join!(job.cancel(ctx), job.result(Instant::now() + Duration::from_secs(300)));
        let receipt = receipt.unwrap();
        assert_eq!(receipt.cancel_scope, CancelScope::QueuedJob);
        assert_eq!(receipt.evidence, Evidence::ConfirmedTerminal);
        assert!(!receipt.leaked);
        assert_eq!(receipt.estimated_cost_micro_usd, Some(MicroUsd::ZERO));
        assert_eq!(result.state, JobState::Cancelled);
        let bill = sim.billing();
        assert_eq!(bill.billed, MicroUsd::ZERO);
        assert_eq!(bill.active, MicroUsd::ZERO);
        // What the provider reports agrees: no execution, queued until the cancel.
        assert_eq!(result.metrics["runpod_execution_ms"], 0);
        let delay = result.metrics["runpod_delay_ms"].as_f64().unwrap();
        assert!((250.0..=310.0).contains(&delay), "queued until the cancel took effect: {delay}");
    }

    #[tokio::test(start_paused = true)]
    async fn running_cancel_bills_until_confirmed_stop() {
        let p = SimProfile { cold_fast_p: 0.0, submit_latency_s: (0.0, 0.0), idle_window_s: 0.0, ..SimProfile::runpod() };
        let sim = SimBackend::new("runpod", p, 3);
        let job = sim.submit(&req()).await.unwrap();
        tokio::time::advance(Duration::from_secs(40)).await;
        let epoch = Instant::now();
        let ctx = CancelContext { reason: "test".into(), epoch, sent_at: Instant::now(), state_before: Some(JobState::Running) };
        let receipt = job.cancel(ctx).await.unwrap();
        assert_eq!(receipt.terminal_status, Some(JobState::Cancelled));
        assert!(receipt.confirmed_terminal && !receipt.leaked && receipt.was_running);
        let ack = receipt.ack_latency_ms().unwrap();
        assert!((250.0..=310.0).contains(&ack), "{ack}");
        let exec = receipt.execution_ms_before_cancel.unwrap();
        assert!(exec > 10_000.0 && exec < 40_000.0, "{exec}");
        assert!(sim.billing().active > MicroUsd::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn leaked_cancel_says_so() {
        let p = SimProfile { leak_p: 1.0, submit_latency_s: (0.0, 0.0), cold_fast_p: 1.0, ..SimProfile::runpod() };
        let sim = SimBackend::new("runpod", p, 3);
        let job = sim.submit(&req()).await.unwrap();
        tokio::time::advance(Duration::from_secs(3)).await;
        let epoch = Instant::now();
        let ctx = CancelContext { reason: "t".into(), epoch, sent_at: Instant::now(), state_before: Some(JobState::Running) };
        let receipt = job.cancel(ctx).await.unwrap();
        assert!(receipt.leaked);
        assert_eq!(receipt.evidence, Evidence::ProviderAck);
        // The job keeps running to completion.
        let r = job.result(Instant::now() + Duration::from_secs(300)).await;
        assert_ne!(r.state, JobState::Cancelled);
    }

    #[tokio::test(start_paused = true)]
    async fn warm_worker_is_reused_within_idle_window() {
        let p = SimProfile { submit_latency_s: (0.0, 0.0), failure_p: 0.0, ..SimProfile::runpod() };
        let sim = SimBackend::new("runpod", p, 5);
        let j1 = sim.submit(&req()).await.unwrap();
        j1.result(Instant::now() + Duration::from_secs(300)).await;
        tokio::time::advance(Duration::from_secs(10)).await;
        let j2 = sim.submit(&req()).await.unwrap();
        let r2 = j2.result(Instant::now() + Duration::from_secs(300)).await;
        assert_eq!(r2.metrics["sim_mode"], "warm");
        assert_eq!(sim.billing().cold_starts, 1);
        // After the idle window it scales to zero.
        tokio::time::advance(Duration::from_secs(61)).await;
        let j3 = sim.submit(&req()).await.unwrap();
        let r3 = j3.result(Instant::now() + Duration::from_secs(300)).await;
        assert_ne!(r3.metrics["sim_mode"], "warm");
        assert_eq!(sim.billing().cold_starts, 2);
    }

    #[tokio::test(start_paused = true)]
    async fn cap_right_censors() {
        let p = SimProfile { cold_fast_p: 0.0, submit_latency_s: (0.0, 0.0), ..SimProfile::runpod() };
        let sim = SimBackend::new("runpod", p, 3);
        let job = sim.submit(&req()).await.unwrap();
        let r = job.result(Instant::now() + Duration::from_secs(5)).await;
        assert_eq!(r.state, JobState::TimedOut);
    }
}
