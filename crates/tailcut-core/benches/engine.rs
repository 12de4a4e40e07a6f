//! Engine overhead: races per second with instant in-process backends (no timers, no
//! I/O), so what is measured is the engine itself: launch, budget charge, validation,
//! winner selection, loser cancellation and trace-record assembly.
//!
//! Run: `cargo bench -p tailcut-core --bench engine`
// Load generators spawn and read the wall clock freely (clippy.toml's bans are for the
// gateway's own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use async_trait::async_trait;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::sync::Arc;
use std::time::Duration;
use tailcut_core::engine::{Hedger, RaceSettings};
use tailcut_core::ledger::{BudgetLimits, MemoryLedger};
use tailcut_core::policy::{FixedHedge, ImmediateRace, Policy, Single};
use tailcut_core::receipt::Evidence;
use tailcut_core::validate::NonEmpty;
use tailcut_core::{
    CancelContext, Capabilities, Job, JobRequest, JobResult, JobState, Payload, Pricing, Provider, ProviderApi, ProviderError,
    RateNanoUsdPerSec, Receipt,
};
use tokio::time::Instant;

/// How an instant job answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Valid,
    Invalid,
    /// Never answers: it must be cancelled.
    Never,
}

#[derive(Debug)]
struct InstantProvider {
    answer: Answer,
}

#[derive(Debug)]
struct InstantJob {
    answer: Answer,
}

#[async_trait]
impl ProviderApi for InstantProvider {
    fn capabilities(&self) -> Capabilities {
        Capabilities { reports_queued: true, cancel_evidence: Evidence::ConfirmedTerminal, reports_billed_time: false }
    }
    async fn submit(&self, _r: &JobRequest) -> Result<Arc<dyn Job>, ProviderError> {
        Ok(Arc::new(InstantJob { answer: self.answer }))
    }
}

#[async_trait]
impl Job for InstantJob {
    fn job_id(&self) -> Option<String> {
        None
    }
    async fn status(&self) -> Result<JobState, ProviderError> {
        Ok(JobState::Running)
    }
    async fn result(&self, _deadline: Instant) -> JobResult {
        if self.answer == Answer::Never {
            return futures::future::pending().await;
        }
        let mut r = JobResult::bare(JobState::Completed, None);
        if self.answer == Answer::Valid {
            r.payload = Some(Payload { bytes: bytes::Bytes::from_static(b"ok"), content_type: "text/plain".into() });
        }
        r
    }
    async fn cancel(&self, ctx: CancelContext) -> Result<Receipt, ProviderError> {
        let mut r = ctx.receipt("instant", None);
        r.record_terminal(ctx.ms(Instant::now()), JobState::Cancelled);
        Ok(r)
    }
}

fn hedger(primary: Answer) -> Hedger {
    let pricing = Pricing { rate: RateNanoUsdPerSec(306_000), idle_window: Duration::from_secs(60), expected_run: Duration::from_secs(10) };
    let entry = |name: &str, answer| Provider { name: name.into(), api: Arc::new(InstantProvider { answer }), pricing };
    Hedger::new(
        vec![entry("p", primary), entry("h", Answer::Valid)],
        Arc::new(NonEmpty),
        Arc::new(MemoryLedger::new(BudgetLimits::UNLIMITED)),
        RaceSettings::default(),
        None,
    )
}

const BATCH: u64 = 1000;

fn bench_policy(c: &mut Criterion, name: &str, hedger: Hedger, policy: Arc<dyn Policy>) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let request = JobRequest::new("bench", serde_json::json!({"text": "hi"}));
    let mut group = c.benchmark_group("engine");
    group.throughput(Throughput::Elements(BATCH));
    group.bench_function(name, |b| {
        b.iter(|| {
            rt.block_on(async {
                for _ in 0..BATCH {
                    let out = hedger.run(policy.as_ref(), request.clone()).await.unwrap();
                    assert!(out.winner.is_some());
                    out.settled.wait().await.unwrap();
                }
            })
        })
    });
    group.finish();
}

fn engine(c: &mut Criterion) {
    let h = hedger(Answer::Valid);
    let single: Arc<dyn Policy> = Arc::new(Single::try_new(h.providers(), "p").unwrap());
    bench_policy(c, "single", h, single);

    // The primary answers instantly but invalid: the hedge launches at once and wins.
    let h = hedger(Answer::Invalid);
    let hedge: Arc<dyn Policy> = Arc::new(FixedHedge::try_new(h.providers(), "p", "h", Duration::from_secs(10)).unwrap());
    bench_policy(c, "hedged_race_invalid_primary", h, hedge);

    // Both launched at once; the primary never answers, so it is cancelled (in the
    // background) with a receipt that the settled trace waits for.
    let h = hedger(Answer::Never);
    let race: Arc<dyn Policy> = Arc::new(ImmediateRace::try_new(h.providers(), &["p", "h"]).unwrap());
    bench_policy(c, "race_with_loser_cancel", h, race);
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(4)).warm_up_time(Duration::from_secs(1));
    targets = engine
}
criterion_main!(benches);
