//! The simulated provider ([`SimProvider`]): what it has charged so far and how a
//! submission becomes a [`SimJob`](crate::job::SimJob) placed in the worker pool.

use async_trait::async_trait;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tailcut_core::receipt::Evidence;
use tailcut_core::{Capabilities, Job, JobRequest, MicroUsd, ProviderApi, ProviderError, RateNanoUsdPerSec};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::job::{SimJob, Timeline};
use crate::pool::{ceil_quantum_ms, secs, Draws, Inner, PoolState};
use crate::profile::SimProfile;

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
pub struct SimProvider {
    inner: Arc<Inner>,
}

impl SimProvider {
    /// A simulated provider called `name` (used in job ids and metric keys).
    pub fn new(name: &str, profile: SimProfile, seed: u64) -> SimProvider {
        let rate = RateNanoUsdPerSec::from_usd_per_s(profile.rate_usd_per_s);
        SimProvider { inner: Arc::new(Inner { name: name.to_string(), profile, seed, rate, state: Mutex::new(PoolState::default()) }) }
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
}

#[async_trait]
impl ProviderApi for SimProvider {
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
        let (worker, start, end, mode, prev_busy, span) = self.inner.plan(now, &draws);
        let job = SimJob {
            provider: self.inner.clone(),
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
