//! Learned policies on stream races under tokio's paused clock: a stream job resolves at
//! its first *content* event, so the model learns each provider's time to the first
//! token, not to the first byte (every stream here sends its role chunk at once). An
//! `adaptive` route hedges a stalled stream at the learned first-token quantile; an
//! `auto` route learns which provider stalls and makes the other one primary.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use async_trait::async_trait;
use bytes::Bytes;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tailcut_core::engine::{Hedger, RaceSettings, RunScope};
use tailcut_core::ledger::{BudgetLimits, MemoryLedger};
use tailcut_core::policy::learned::LearnedPolicy;
use tailcut_core::receipt::Evidence;
use tailcut_core::stream::{FirstEvent, StreamEvent, StreamHandoff, StreamJob};
use tailcut_core::trace::RequestTrace;
use tailcut_core::{Capabilities, Job, JobRequest, Pricing, Provider, ProviderApi, ProviderError, RateNanoUsdPerSec};
use tailcut_model::{AdaptiveSettings, AutoSettings, LearnedKind, ModelConfig};
use tokio::time::Instant;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A stream whose role chunk comes at once and whose first token comes `first(n)` after
/// the n-th submission (0-based), then one more token and the end.
struct Varying {
    name: String,
    first: fn(usize) -> Duration,
    submits: AtomicUsize,
}

impl std::fmt::Debug for Varying {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Varying").field("name", &self.name).finish()
    }
}

#[async_trait]
impl ProviderApi for Varying {
    fn capabilities(&self) -> Capabilities {
        Capabilities { reports_queued: false, cancel_evidence: Evidence::RequestChannelClosed, reports_billed_time: false }
    }

    async fn submit(&self, request: &JobRequest) -> Result<Arc<dyn Job>, ProviderError> {
        let first = (self.first)(self.submits.fetch_add(1, Ordering::SeqCst));
        Ok(Arc::new(StreamJob::start(&self.name, request, move |tx| async move {
            let script = [
                (ms(0), StreamEvent::Preamble(Bytes::from_static(b"data: {\"role\":\"assistant\"}\n\n"))),
                (first, StreamEvent::Content(Bytes::from_static(b"data: {\"content\":\"x\"}\n\n"))),
                (ms(5), StreamEvent::Content(Bytes::from_static(b"data: {\"content\":\"y\"}\n\n"))),
                (ms(5), StreamEvent::Done),
            ];
            for (delay, event) in script {
                tokio::time::sleep(delay).await;
                if !tx.send(event) {
                    return;
                }
            }
        })))
    }
}

fn hedger(a: fn(usize) -> Duration, b: fn(usize) -> Duration) -> Hedger {
    let provider = |name: &str, first| {
        let pricing = Pricing { rate: RateNanoUsdPerSec(1000), idle_window: Duration::ZERO, expected_run: Duration::from_secs(1) };
        Provider { name: name.into(), api: Arc::new(Varying { name: name.into(), first, submits: AtomicUsize::new(0) }), pricing }
    };
    Hedger::new(
        vec![provider("a", a), provider("b", b)],
        Arc::new(FirstEvent),
        Arc::new(MemoryLedger::new(BudgetLimits::UNLIMITED)),
        RaceSettings { max_live: 2, ..RaceSettings::default() },
        None,
    )
}

/// Runs `n` streamed requests one after another, takes each winner's stream, and feeds
/// every settled trace back to the policy. Returns the traces and each request's time
/// to its first token.
async fn drive(h: &Hedger, policy: &LearnedPolicy, n: usize) -> Vec<(RequestTrace, Duration)> {
    let mut out = Vec::new();
    for i in 0..n {
        let handoff = StreamHandoff::new();
        let request = JobRequest::new(format!("s{i}"), serde_json::json!({"stream": true}));
        let t0 = Instant::now();
        let outcome = h.run_scoped(policy, request, RunScope::new().handoff(handoff.clone())).await.unwrap();
        let ttft = t0.elapsed();
        let winner = outcome.winner.clone().expect("a stream wins");
        assert!(handoff.take(&winner).is_some(), "the winner's stream is handed over");
        let trace = outcome.settled.wait().await.unwrap();
        policy.observe_trace(&trace, t0);
        out.push((trace, ttft));
        tokio::time::sleep(ms(100)).await;
    }
    out
}

#[tokio::test(start_paused = true)]
async fn adaptive_hedges_a_stalled_stream_at_the_learned_first_token_quantile() {
    // `a`: the first token 100-119 ms after the role chunk, and 3 s on every tenth
    // request; `b`: 50 ms.
    let h = hedger(|n| if n % 10 == 9 { ms(3000) } else { ms(100 + (n % 10) as u64 * 2) }, |_| ms(50));
    let kind = LearnedKind::Adaptive(AdaptiveSettings {
        primary: 0,
        hedge: 1,
        quantile: 0.8,
        min_samples: 20,
        min_delay_s: 0.0,
        max_delay_s: 10.0,
        budget: 0.2,
    });
    let policy = LearnedPolicy::try_new(h.providers(), "adaptive:a->b", kind, None, ModelConfig::default(), 1).unwrap();
    let runs = drive(&h, &policy, 60).await;
    // Unhedged while learning: the stalled streams took their 3 s.
    assert!(runs[..20].iter().all(|(t, _)| !t.decisions.hedge_launched));
    assert!(runs[9].1 >= ms(3000), "{:?}", runs[9].1);
    // Then hedged at the learned p80 of the *first token* (≈ 115 ms; the first byte
    // came at 0 ms, which would hedge every request at once).
    let (last_stall, ttft) = &runs[59];
    let choice = last_stall.decisions.learned.as_ref().unwrap();
    assert!(choice.reason.contains("p80"), "{choice:?}");
    assert!(last_stall.decisions.hedge_launched, "{last_stall:?}");
    let hedge_at = last_stall.attempts[1].submit_offset_ms;
    assert!((90.0..200.0).contains(&hedge_at), "hedged at {hedge_at} ms");
    assert_eq!(last_stall.winner.as_deref(), Some("b"));
    assert!(*ttft < ms(300), "the stalled stream's first token came from the hedge: {ttft:?}");
    // The beliefs in the trace are the first-token quantiles.
    let a = &choice.model[0];
    assert_eq!(&*a.provider, "a");
    assert!(a.p50_s.unwrap() > 0.09 && a.p50_s.unwrap() < 0.13, "{a:?}");
    // Hedges only where the primary is slow: about the stalled tenth plus p80's share.
    let hedged = runs[20..].iter().filter(|(t, _)| t.decisions.hedge_launched).count();
    assert!(hedged <= 12, "{hedged} of 40 hedged");
}

#[tokio::test(start_paused = true)]
async fn auto_learns_which_stream_stalls_and_makes_the_other_primary() {
    // `a` stalls 2 s before its first token on every third request; `b` answers in 30 ms.
    let h = hedger(|n| if n % 3 == 0 { ms(2000) } else { ms(20) }, |_| ms(30));
    let kind = LearnedKind::Auto(AutoSettings {
        deadline_s: 0.25,
        target_miss: 0.01,
        max_extra: 1.0,
        poll_s: 0.01,
        safety_s: 0.035,
        escalate_s: 0.1,
        ..AutoSettings::default()
    });
    let policy = LearnedPolicy::try_new(h.providers(), "auto:a,b", kind, None, ModelConfig::default(), 1).unwrap();
    let runs = drive(&h, &policy, 40).await;
    for (t, ttft) in &runs[30..] {
        let c = t.decisions.learned.as_ref().unwrap();
        // `b` is primary (alone, or with a hedge to `a` the model expects never to fire).
        assert!(&*c.plan == "single:b" || c.plan.starts_with("hedge:b->a@"), "{c:?}");
        assert!(c.predicted_miss.unwrap() <= 0.01, "{c:?}");
        assert!(c.model.iter().all(|b| b.samples >= 5), "{c:?}");
        assert_eq!(t.attempts[0].provider, "b");
        assert_eq!(t.winner.as_deref(), Some("b"));
        assert!(*ttft < ms(250), "{ttft:?}");
    }
    let slow = runs.iter().filter(|(_, ttft)| *ttft >= ms(250)).count();
    assert!(slow <= 4, "{slow} requests missed 250 ms while learning");
}
