//! The simulated provider's worker pool: the draws made for each submission, where a job
//! lands (warm worker, cold start, or queued behind a busy worker), workers scaling to
//! zero and the billed sessions they close.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
use tailcut_core::RateNanoUsdPerSec;
use tokio::time::Instant;

use crate::profile::{Range, SimProfile};

/// The provider's shared state: its settings and the worker pool.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) name: String,
    pub(crate) profile: SimProfile,
    pub(crate) seed: u64,
    pub(crate) rate: RateNanoUsdPerSec,
    pub(crate) state: Mutex<PoolState>,
}

#[derive(Debug, Default)]
pub(crate) struct PoolState {
    pub(crate) submitted: u64,
    pub(crate) cold_starts: u64,
    pub(crate) workers: Vec<Worker>,
    /// Execution spans (start, end) of every job; cancels shorten them.
    pub(crate) spans: Vec<(Instant, Instant)>,
    /// Billed milliseconds of closed worker sessions (rounded up to whole seconds each).
    pub(crate) closed_billed_ms: u128,
}

#[derive(Debug)]
pub(crate) struct Worker {
    pub(crate) alive: bool,
    pub(crate) session_start: Instant,
    pub(crate) busy_until: Instant,
    pub(crate) jobs: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Warm,
    ColdFast,
    ColdSlow,
    Queued,
}

impl Mode {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Mode::Warm => "warm",
            Mode::ColdFast => "cold_fast",
            Mode::ColdSlow => "cold_slow",
            Mode::Queued => "queued_behind_busy_worker",
        }
    }
}

/// Everything drawn for one submission, in a fixed order so streams never shift.
pub(crate) struct Draws {
    pub(crate) submit_latency: f64,
    pub(crate) fast: bool,
    pub(crate) cold_fast_queue: f64,
    pub(crate) cold_fast_run: f64,
    pub(crate) cold_slow_queue: f64,
    pub(crate) cold_slow_run: f64,
    pub(crate) warm_dispatch: f64,
    pub(crate) warm_run: f64,
    pub(crate) fails: bool,
    pub(crate) malformed: bool,
    pub(crate) cancel_ack_ms: f64,
    pub(crate) cancel_confirm_ms: f64,
    pub(crate) leaks: bool,
}

fn uniform(rng: &mut ChaCha8Rng, (lo, hi): Range) -> f64 {
    lo + (hi - lo) * rng.gen::<f64>()
}

impl Draws {
    pub(crate) fn new(seed: u64, n: u64, p: &SimProfile) -> Draws {
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

pub(crate) fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

/// Rounds a session up to the billing quantum, in ms.
pub(crate) fn ceil_quantum_ms(d: Duration, quantum_s: f64) -> u128 {
    let q = ((quantum_s * 1000.0).round() as u128).max(1);
    d.as_millis().div_ceil(q) * q
}

impl Inner {
    pub(crate) fn lock(&self) -> MutexGuard<'_, PoolState> {
        // A poisoned lock only means another task panicked mid-update; the pool's
        // numbers are still the best we have.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn idle(&self) -> Duration {
        secs(self.profile.idle_window_s)
    }

    /// Closes the sessions of workers that have scaled to zero by `now`.
    pub(crate) fn retire(&self, st: &mut PoolState, now: Instant) {
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

    /// Places submission `d` arriving at `now`: on an idle warm worker, a new cold one, or
    /// queued behind the busy worker that frees first. Returns the worker, the job's start
    /// and end, how it was placed, the worker's previous busy-until and the job's span.
    pub(crate) fn plan(&self, now: Instant, d: &Draws) -> (usize, Instant, Instant, Mode, Instant, usize) {
        let mut st = self.lock();
        self.retire(&mut st, now);
        st.submitted += 1;
        let idle_worker =
            st.workers.iter().enumerate().filter(|(_, w)| w.alive && w.busy_until <= now).max_by_key(|(_, w)| w.busy_until).map(|(i, _)| i);
        let alive = st.workers.iter().filter(|w| w.alive).count();
        let (worker, start, end, mode, prev_busy) = if let Some(i) = idle_worker {
            let start = now + secs(d.warm_dispatch);
            let w = &mut st.workers[i];
            let prev = w.busy_until;
            (i, start, start + secs(d.warm_run), Mode::Warm, prev)
        } else if alive < self.profile.max_workers {
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
