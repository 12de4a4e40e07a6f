//! # tailcut-testkit
//!
//! [`ScriptedProvider`]: a provider whose every job follows a [`Script`] (how long it
//! queues, when it finishes, whether its output is valid, how its cancel behaves), and
//! which records each job's provider-side life so tests can check what the engine did:
//! how many jobs were alive at once, when each was submitted, which were cancelled.
//!
//! Beside it: [`config`], the configuration fragments the gateway and CLI tests share;
//! [`cli`], the processes, fixtures and output checks of tests that run the binary;
//! [`fuzz`], a case under a time bound and byte-level damage of valid inputs;
//! [`postgres`], a real throwaway PostgreSQL server on a free local port.

#![warn(missing_docs)]
// clippy.toml's disallowed methods (bare `tokio::spawn`, `std::time::Instant::now`) are
// allowed here: test helpers: tests spawn and read the wall clock freely.
#![allow(clippy::disallowed_methods)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    reason = "test support: a failed fixture should stop the test that uses it, loudly"
)]

pub mod cli;
pub mod config;
pub mod fuzz;
pub mod learned;
pub mod ledger;
pub mod postgres;
pub mod scripts;

use async_trait::async_trait;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tailcut_core::receipt::Evidence;
use tailcut_core::{
    CancelContext, CancelScope, Capabilities, Job, JobRequest, JobResult, JobState, Payload, Pricing, Provider, ProviderApi, ProviderError,
    Receipt,
};
use tokio::sync::Notify;
use tokio::time::{sleep, sleep_until, Instant};

/// What a job's output will be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// A non-empty payload: valid under `nonempty`.
    Valid,
    /// An empty payload: completed but invalid.
    Invalid,
    /// The job fails.
    Fails,
    /// The result future panics.
    Panics,
}

/// How a job answers a cancel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelBehaviour {
    /// Acknowledged at once and confirmed terminal after the delay.
    Confirm(Duration),
    /// The cancel call errors; the job keeps running.
    Error,
    /// Acknowledged after the delay, but the job keeps running.
    Leak(Duration),
    /// The cancel call panics; the job keeps running.
    Panic,
}

/// One job's behaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Script {
    /// How long the submit call takes.
    pub submit_delay: Duration,
    /// The submit call fails.
    pub submit_fails: bool,
    /// How long after submit the job stays queued.
    pub queued_for: Duration,
    /// How long after submit the result arrives.
    pub finish_after: Duration,
    /// What the result is.
    pub output: Output,
    /// How cancels behave.
    pub cancel: CancelBehaviour,
    /// Status polls fail.
    pub status_fails: bool,
}

impl Script {
    /// Valid after `finish_after`, running from the start, cancels confirmed in 300 ms.
    pub fn valid_after(finish_after: Duration) -> Script {
        Script {
            submit_delay: Duration::ZERO,
            submit_fails: false,
            queued_for: Duration::ZERO,
            finish_after,
            output: Output::Valid,
            cancel: CancelBehaviour::Confirm(Duration::from_millis(300)),
            status_fails: false,
        }
    }

    /// Queued for `d` first.
    pub fn queued_for(self, d: Duration) -> Script {
        Script { queued_for: d, ..self }
    }

    /// With this output.
    pub fn output(self, output: Output) -> Script {
        Script { output, ..self }
    }

    /// With this cancel behaviour.
    pub fn cancel(self, cancel: CancelBehaviour) -> Script {
        Script { cancel, ..self }
    }

    /// With this submit latency.
    pub fn submit_delay(self, d: Duration) -> Script {
        Script { submit_delay: d, ..self }
    }
}

/// Provider-side record of one job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobLife {
    /// Provider key.
    pub provider: String,
    /// When the provider accepted it.
    pub submitted: Instant,
    /// When it stopped existing (finished, or cancel confirmed).
    pub ended: Instant,
    /// Whether `cancel` was called on it.
    pub cancel_called: bool,
}

/// Job lives shared by every scripted provider in a test.
#[derive(Clone, Debug, Default)]
pub struct Recorder {
    lives: Arc<Mutex<Vec<JobLife>>>,
}

impl Recorder {
    /// A fresh recorder.
    pub fn new() -> Recorder {
        Recorder::default()
    }

    /// Every job so far.
    pub fn lives(&self) -> Vec<JobLife> {
        self.lives.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Submit times per provider.
    pub fn submits(&self, provider: &str) -> Vec<Instant> {
        self.lives().into_iter().filter(|l| l.provider == provider).map(|l| l.submitted).collect()
    }

    /// Most jobs alive at any instant (lives are half-open `[submitted, ended)`).
    pub fn max_alive(&self) -> usize {
        let mut events: Vec<(Instant, i32)> = Vec::new();
        for l in self.lives() {
            if l.ended > l.submitted {
                events.push((l.submitted, 1));
                events.push((l.ended, -1));
            }
        }
        // Ends sort before starts at the same instant.
        events.sort_by_key(|&(t, d)| (t, d));
        let (mut cur, mut max) = (0i32, 0i32);
        for (_, d) in events {
            cur += d;
            max = max.max(cur);
        }
        max as usize
    }

    fn push(&self, life: JobLife) -> usize {
        let mut l = self.lives.lock().unwrap_or_else(|e| e.into_inner());
        l.push(life);
        l.len() - 1
    }

    fn update(&self, index: usize, f: impl FnOnce(&mut JobLife)) {
        let mut l = self.lives.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(life) = l.get_mut(index) {
            f(life);
        }
    }
}

/// A provider that plays scripts in order (then repeats the last one).
#[derive(Debug)]
pub struct ScriptedProvider {
    name: String,
    reports_queued: bool,
    scripts: Mutex<VecDeque<Script>>,
    last: Mutex<Script>,
    recorder: Recorder,
}

impl ScriptedProvider {
    /// A provider called `name` that plays `scripts`.
    pub fn new(name: &str, reports_queued: bool, scripts: Vec<Script>, recorder: &Recorder) -> ScriptedProvider {
        let last = scripts.last().copied().unwrap_or(Script::valid_after(Duration::from_secs(1)));
        ScriptedProvider {
            name: name.into(),
            reports_queued,
            scripts: Mutex::new(scripts.into()),
            last: Mutex::new(last),
            recorder: recorder.clone(),
        }
    }

    /// Wraps it as a provider entry with zero pricing.
    pub fn entry(self) -> Provider {
        Provider { name: self.name.clone(), api: Arc::new(self), pricing: Pricing::default() }
    }

    fn next_script(&self) -> Script {
        let mut q = self.scripts.lock().unwrap_or_else(|e| e.into_inner());
        match q.pop_front() {
            Some(s) => {
                *self.last.lock().unwrap_or_else(|e| e.into_inner()) = s;
                s
            }
            None => *self.last.lock().unwrap_or_else(|e| e.into_inner()),
        }
    }
}

#[async_trait]
impl ProviderApi for ScriptedProvider {
    fn capabilities(&self) -> Capabilities {
        Capabilities { reports_queued: self.reports_queued, cancel_evidence: Evidence::ConfirmedTerminal, reports_billed_time: false }
    }

    async fn submit(&self, _request: &JobRequest) -> Result<Arc<dyn Job>, ProviderError> {
        let script = self.next_script();
        if !script.submit_delay.is_zero() {
            sleep(script.submit_delay).await;
        }
        if script.submit_fails {
            return Err(ProviderError::Transport { reason: "scripted submit failure".into() });
        }
        let submitted = Instant::now();
        let finish = submitted + script.finish_after;
        let index = self.recorder.push(JobLife { provider: self.name.clone(), submitted, ended: finish, cancel_called: false });
        Ok(Arc::new(ScriptedJob {
            name: self.name.clone(),
            index,
            reports_queued: self.reports_queued,
            script,
            submitted,
            stopped: Mutex::new(None),
            notify: Notify::new(),
            recorder: self.recorder.clone(),
        }))
    }
}

#[derive(Debug)]
struct ScriptedJob {
    name: String,
    index: usize,
    reports_queued: bool,
    script: Script,
    submitted: Instant,
    stopped: Mutex<Option<Instant>>,
    notify: Notify,
    recorder: Recorder,
}

impl ScriptedJob {
    fn stopped(&self) -> Option<Instant> {
        *self.stopped.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn finish(&self) -> Instant {
        self.submitted + self.script.finish_after
    }

    fn state_at(&self, now: Instant) -> JobState {
        if self.stopped().is_some_and(|s| now >= s) {
            JobState::Cancelled
        } else if now < self.submitted + self.script.queued_for {
            if self.reports_queued {
                JobState::Queued
            } else {
                JobState::Pending
            }
        } else if now < self.finish() {
            if self.reports_queued {
                JobState::Running
            } else {
                JobState::Pending
            }
        } else if self.script.output == Output::Fails {
            JobState::Failed
        } else {
            JobState::Completed
        }
    }
}

#[async_trait]
impl Job for ScriptedJob {
    fn job_id(&self) -> Option<String> {
        Some(format!("{}-{}", self.name, self.index))
    }

    async fn status(&self) -> Result<JobState, ProviderError> {
        if self.script.status_fails {
            return Err(ProviderError::Transport { reason: "scripted status failure".into() });
        }
        Ok(self.state_at(Instant::now()))
    }

    async fn result(&self, deadline: Instant) -> JobResult {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let now = Instant::now();
            if let Some(s) = self.stopped().filter(|s| now >= *s) {
                let mut r = JobResult::bare(JobState::Cancelled, None);
                r.finished = s;
                return r;
            }
            if now >= self.finish() {
                let mut r = match self.script.output {
                    Output::Valid => {
                        let mut r = JobResult::bare(JobState::Completed, None);
                        r.payload = Some(Payload { bytes: bytes::Bytes::from_static(b"ok"), content_type: "text/plain".into() });
                        r
                    }
                    Output::Invalid => JobResult::bare(JobState::Completed, None),
                    Output::Fails => JobResult::bare(JobState::Failed, Some("scripted failure".into())),
                    Output::Panics => panic!("scripted result panic"),
                };
                r.finished = self.finish();
                return r;
            }
            if now >= deadline {
                return JobResult::timed_out();
            }
            let wake = self.stopped().map_or(self.finish(), |s| s.min(self.finish())).min(deadline);
            tokio::select! {
                () = sleep_until(wake) => {}
                () = &mut notified => {}
            }
        }
    }

    async fn cancel(&self, ctx: CancelContext) -> Result<Receipt, ProviderError> {
        self.recorder.update(self.index, |l| l.cancel_called = true);
        let mut receipt = ctx.receipt(&self.name, self.job_id());
        match self.script.cancel {
            CancelBehaviour::Error => Err(ProviderError::Rejected { status: 500, message: "scripted cancel failure".into() }),
            CancelBehaviour::Panic => panic!("scripted cancel panic"),
            CancelBehaviour::Leak(after) => {
                sleep(after).await;
                receipt.record_ack(ctx.ms(Instant::now()));
                receipt.cancel_scope = CancelScope::Request;
                Ok(receipt)
            }
            CancelBehaviour::Confirm(after) => {
                let was_queued = self.state_at(ctx.sent_at) == JobState::Queued;
                receipt.record_ack(ctx.ms(ctx.sent_at));
                let at = ctx.sent_at + after;
                if self.finish() > at {
                    *self.stopped.lock().unwrap_or_else(|e| e.into_inner()) = Some(at);
                    self.recorder.update(self.index, |l| l.ended = l.ended.min(at));
                    self.notify.notify_waiters();
                }
                sleep_until(at).await;
                let state = self.state_at(at);
                receipt.record_terminal(ctx.ms(at), state);
                receipt.cancel_scope = if was_queued { CancelScope::QueuedJob } else { CancelScope::Request };
                Ok(receipt)
            }
        }
    }
}
