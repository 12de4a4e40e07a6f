//! Paused-clock tests for streams raced by the engine: scripted in-process stream
//! providers (no sockets) under the first-token hedge chain and other policies. Each
//! test checks timing, the hand-over of the winner's stream, receipts and budgets exactly.
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
use tailcut_core::policy::first_token::FirstTokenHedge;
use tailcut_core::policy::{FixedHedge, Policy, Single};
use tailcut_core::receipt::Evidence;
use tailcut_core::stream::{FirstEvent, StreamEvent, StreamHandoff, StreamJob};
use tailcut_core::trace::Role;
use tailcut_core::{
    CancelScope, Capabilities, Job, JobRequest, JobState, MicroUsd, Pricing, Provider, ProviderApi, ProviderError, RaceError,
    RateNanoUsdPerSec,
};
use tokio::time::Instant;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn pre(s: &str) -> StreamEvent {
    StreamEvent::Preamble(Bytes::from(format!("data: {s}\n\n")))
}

fn tok(s: &str) -> StreamEvent {
    StreamEvent::Content(Bytes::from(format!("data: {s}\n\n")))
}

/// What a scripted stream did: submits, and readers that stopped before their script's end.
#[derive(Debug, Default)]
struct Counters {
    submits: AtomicUsize,
    closed: AtomicUsize,
}

/// A stream provider playing a script: each event after its delay (from the previous one).
#[derive(Debug)]
struct ScriptedStream {
    name: String,
    script: Vec<(Duration, StreamEvent)>,
    counters: Arc<Counters>,
}

/// Counts a reader stopped (dropped) before it played its whole script.
struct ClosedGuard(Arc<Counters>, bool);

impl Drop for ClosedGuard {
    fn drop(&mut self) {
        if !self.1 {
            self.0.closed.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[async_trait]
impl ProviderApi for ScriptedStream {
    fn capabilities(&self) -> Capabilities {
        Capabilities { reports_queued: false, cancel_evidence: Evidence::RequestChannelClosed, reports_billed_time: false }
    }

    async fn submit(&self, request: &JobRequest) -> Result<Arc<dyn Job>, ProviderError> {
        self.counters.submits.fetch_add(1, Ordering::SeqCst);
        let (script, counters) = (self.script.clone(), self.counters.clone());
        Ok(Arc::new(StreamJob::start(&self.name, request, move |tx| async move {
            let mut guard = ClosedGuard(counters, false);
            for (delay, event) in script {
                tokio::time::sleep(delay).await;
                if !tx.send(event) {
                    return;
                }
            }
            guard.1 = true;
        })))
    }
}

struct Setup {
    hedger: Hedger,
    counters: Vec<Arc<Counters>>,
}

/// Providers `a`, `b`, `c`, ... with the given scripts; each submission projects 1 µ$.
fn setup(scripts: Vec<Vec<(Duration, StreamEvent)>>, budget: BudgetLimits, max_live: usize) -> Setup {
    let mut providers = Vec::new();
    let mut counters = Vec::new();
    for (i, script) in scripts.into_iter().enumerate() {
        let name = ((b'a' + i as u8) as char).to_string();
        let c = Arc::new(Counters::default());
        counters.push(c.clone());
        let pricing = Pricing { rate: RateNanoUsdPerSec(1000), idle_window: Duration::ZERO, expected_run: Duration::from_secs(1) };
        providers.push(Provider { name: name.clone(), api: Arc::new(ScriptedStream { name, script, counters: c }), pricing });
    }
    let settings = RaceSettings { max_live, ..RaceSettings::default() };
    let hedger = Hedger::new(providers, Arc::new(FirstEvent), Arc::new(MemoryLedger::new(budget)), settings, None);
    Setup { hedger, counters }
}

fn chain(h: &Hedger, delay: Duration) -> FirstTokenHedge {
    let names: Vec<&str> = h.providers().iter().map(|p| p.name.as_str()).collect();
    FirstTokenHedge::try_new(h.providers(), &names, delay).unwrap()
}

fn request() -> JobRequest {
    JobRequest::new("req-1", serde_json::json!({"stream": true}))
}

/// The race's scope: its streams handed over in `handoff`.
fn handing_to(handoff: &StreamHandoff) -> RunScope {
    RunScope::new().handoff(handoff.clone())
}

async fn collect(handoff: &StreamHandoff, winner: &str) -> Vec<StreamEvent> {
    use futures::StreamExt;
    handoff.take(winner).expect("the winner's stream is handed over").into_events().collect().await
}

/// A stream that sends its role chunk at once and its first token after `first`.
fn slow_then_tokens(first: Duration) -> Vec<(Duration, StreamEvent)> {
    vec![(ms(0), pre("role")), (first, tok("x")), (ms(10), tok("y")), (ms(10), StreamEvent::Done)]
}

#[tokio::test(start_paused = true)]
async fn the_next_stream_starts_at_the_first_token_timeout() {
    let t = setup(vec![slow_then_tokens(ms(10_000)), slow_then_tokens(ms(100))], BudgetLimits::UNLIMITED, 2);
    let policy = chain(&t.hedger, ms(500));
    assert_eq!(policy.label(), "stream:a->b@first-token+500ms");
    let handoff = StreamHandoff::new();
    let t0 = Instant::now();
    let out = t.hedger.run_scoped(&policy, request(), handing_to(&handoff)).await.unwrap();
    assert_eq!(out.winner.as_deref(), Some("b"));
    assert_eq!(t0.elapsed(), ms(600), "b started at 500 ms and sent its first token 100 ms later");
    assert_eq!(out.latency, Some(ms(600)));
    assert!(out.decisions.hedge_launched);
    assert!(!handoff.last_start_followed_failure(), "a timer hedge, not a fall-through");
    let trace = out.settled.wait().await.unwrap();
    assert_eq!(trace.policy, "stream:a->b@first-token+500ms");
    assert_eq!(trace.attempts[1].submit_offset_ms, 500.0);
    assert_eq!((trace.attempts[0].role, trace.attempts[1].role), (Role::Primary, Role::Hedge));
    assert_eq!(trace.winner_total_ms, Some(600.0));
    // No hedge before the timeout: a first token at 499 ms wins alone.
    let t = setup(vec![slow_then_tokens(ms(499)), slow_then_tokens(ms(1))], BudgetLimits::UNLIMITED, 2);
    let out = t.hedger.run_scoped(&chain(&t.hedger, ms(500)), request(), handing_to(&StreamHandoff::new())).await.unwrap();
    assert_eq!(out.winner.as_deref(), Some("a"));
    assert_eq!((out.attempts, out.decisions.hedge_launched), (1, false));
    assert_eq!(t.counters[1].submits.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn the_winners_stream_is_handed_over_intact() {
    let winner = vec![
        (ms(0), pre(r#"{"role":"assistant"}"#)),
        (ms(5), pre("keep-alive")),
        (ms(700), tok("one")),
        (ms(1), tok("two")),
        (ms(50), pre("usage")),
        (ms(1), StreamEvent::Done),
    ];
    let loser = vec![(ms(0), pre("loser-role")), (ms(1), pre("loser-keepalive")), (ms(60_000), tok("late"))];
    let t = setup(vec![loser, winner.clone()], BudgetLimits::UNLIMITED, 2);
    let handoff = StreamHandoff::new();
    let out = t.hedger.run_scoped(&chain(&t.hedger, ms(100)), request(), handing_to(&handoff)).await.unwrap();
    assert_eq!(out.winner.as_deref(), Some("b"));
    let payload = out.result.as_ref().and_then(|r| r.payload.as_ref()).unwrap();
    assert_eq!(payload.bytes, Bytes::from("data: one\n\n"), "the race result is the first content event");
    let events = collect(&handoff, "b").await;
    let want: Vec<StreamEvent> = winner.into_iter().map(|(_, e)| e).collect();
    assert_eq!(events, want, "every event of the winner, in order, ending with its end; nothing of the loser");
    assert!(handoff.take("a").is_none(), "the loser's stream is never handed over");
}

#[tokio::test(start_paused = true)]
async fn a_stream_that_ends_before_any_content_wins_with_its_end_and_a_failure_after_it_is_handed_over() {
    let t = setup(vec![vec![(ms(10), pre("role")), (ms(10), StreamEvent::Done)]], BudgetLimits::UNLIMITED, 2);
    let handoff = StreamHandoff::new();
    let out = t.hedger.run_scoped(&chain(&t.hedger, ms(100)), request(), handing_to(&handoff)).await.unwrap();
    assert_eq!(out.winner.as_deref(), Some("a"));
    assert_eq!(collect(&handoff, "a").await, vec![pre("role"), StreamEvent::Done]);

    let broken = vec![(ms(10), tok("x")), (ms(10), StreamEvent::Failed { reason: "engine died".into() }), (ms(10), tok("never"))];
    let t = setup(vec![broken], BudgetLimits::UNLIMITED, 2);
    let handoff = StreamHandoff::new();
    let out = t.hedger.run_scoped(&chain(&t.hedger, ms(100)), request(), handing_to(&handoff)).await.unwrap();
    assert_eq!(out.winner.as_deref(), Some("a"));
    assert_eq!(collect(&handoff, "a").await, vec![tok("x"), StreamEvent::Failed { reason: "engine died".into() }]);
}

#[tokio::test(start_paused = true)]
async fn every_losing_stream_is_closed_with_a_receipt() {
    let scripts = vec![slow_then_tokens(ms(60_000)), slow_then_tokens(ms(60_000)), slow_then_tokens(ms(50))];
    let t = setup(scripts, BudgetLimits::UNLIMITED, 3);
    let handoff = StreamHandoff::new();
    let out = t.hedger.run_scoped(&chain(&t.hedger, ms(200)), request(), handing_to(&handoff)).await.unwrap();
    assert_eq!(out.winner.as_deref(), Some("c"));
    assert_eq!(out.attempts, 3);
    let trace = out.settled.wait().await.unwrap();
    assert_eq!(trace.receipts.len(), 2, "{:?}", trace.receipts);
    for (r, p) in trace.receipts.iter().zip(["a", "b"]) {
        assert_eq!(r.provider, p);
        assert_eq!(r.evidence, Evidence::RequestChannelClosed);
        assert_eq!(r.cancel_scope, CancelScope::Request);
        assert_eq!(r.state_before_cancel, Some(JobState::Pending));
        assert!(!r.leaked, "{r:?}");
        assert_eq!(r.note, "stream closed before its first token");
    }
    assert_eq!(t.counters[0].closed.load(Ordering::SeqCst), 1, "a's stream was closed");
    assert_eq!(t.counters[1].closed.load(Ordering::SeqCst), 1, "b's stream was closed");
    // The winner's stream stays open until the caller is done with it.
    assert_eq!(t.counters[2].closed.load(Ordering::SeqCst), 0);
    drop(handoff.take("c"));
    tokio::task::yield_now().await;
    assert_eq!(t.counters[2].closed.load(Ordering::SeqCst), 1, "dropping the winner's stream closes it");
}

#[tokio::test(start_paused = true)]
async fn the_budget_refuses_launches_before_anything_is_submitted() {
    // One submission fits the budget (1 µ$ each): the hedge is refused and counted.
    let one = BudgetLimits { soft_stop: MicroUsd(1), hard_stop: MicroUsd(1) };
    let t = setup(vec![slow_then_tokens(ms(1_000)), slow_then_tokens(ms(1))], one, 2);
    let out = t.hedger.run_scoped(&chain(&t.hedger, ms(100)), request(), handing_to(&StreamHandoff::new())).await.unwrap();
    assert_eq!(out.winner.as_deref(), Some("a"));
    assert_eq!(out.attempts, 1);
    assert_eq!(out.decisions.budget_refusals, 1);
    assert!(!out.decisions.hedge_launched);
    assert_eq!(t.counters[1].submits.load(Ordering::SeqCst), 0, "the refused hedge was never submitted");
    // No budget at all: the request is refused and nothing reaches a provider.
    let none = BudgetLimits { soft_stop: MicroUsd(0), hard_stop: MicroUsd(0) };
    let t = setup(vec![slow_then_tokens(ms(1))], none, 2);
    let refused = t.hedger.run_scoped(&chain(&t.hedger, ms(100)), request(), handing_to(&StreamHandoff::new())).await.unwrap_err();
    assert!(matches!(refused, RaceError::Budget(_)), "{refused:?}");
    assert_eq!(t.counters[0].submits.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn a_failure_before_the_first_token_falls_through_at_once() {
    let failing = vec![(ms(0), pre("role")), (ms(50), StreamEvent::Failed { reason: "HTTP 500".into() })];
    let t = setup(vec![failing, slow_then_tokens(ms(20))], BudgetLimits::UNLIMITED, 2);
    let handoff = StreamHandoff::new();
    let t0 = Instant::now();
    let out = t.hedger.run_scoped(&chain(&t.hedger, ms(5_000)), request(), handing_to(&handoff)).await.unwrap();
    assert_eq!(out.winner.as_deref(), Some("b"));
    assert_eq!(t0.elapsed(), ms(70), "b started when a failed at 50 ms, not at the 5 s timeout");
    assert!(out.decisions.hedge_launched);
    assert!(handoff.last_start_followed_failure());
    assert_eq!(handoff.failures(), vec![("a".to_string(), "HTTP 500".to_string())]);
    let trace = out.settled.wait().await.unwrap();
    assert!(trace.receipts.is_empty(), "a failed stream needs no cancel");
    assert_eq!(trace.attempts[0].outcome, Some(JobState::Failed));
    assert_eq!(trace.attempts[0].valid, Some(false));
    // Every stream failing: no winner, every failure named.
    let fail = |why: &str| vec![(ms(10), StreamEvent::Failed { reason: why.into() })];
    let t = setup(vec![fail("HTTP 500"), fail("HTTP 503")], BudgetLimits::UNLIMITED, 2);
    let handoff = StreamHandoff::new();
    let out = t.hedger.run_scoped(&chain(&t.hedger, ms(5_000)), request(), handing_to(&handoff)).await.unwrap();
    assert_eq!((out.winner, out.attempts), (None, 2));
    assert_eq!(handoff.failures().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn any_policy_drives_streams() {
    // A plain timer hedge over two streams: the same hand-over and receipts.
    let t = setup(vec![slow_then_tokens(ms(10_000)), slow_then_tokens(ms(10))], BudgetLimits::UNLIMITED, 2);
    let policy = FixedHedge::try_new(t.hedger.providers(), "a", "b", ms(300)).unwrap();
    let handoff = StreamHandoff::new();
    let out = t.hedger.run_scoped(&policy, request(), handing_to(&handoff)).await.unwrap();
    assert_eq!(out.winner.as_deref(), Some("b"));
    assert_eq!(collect(&handoff, "b").await, vec![pre("role"), tok("x"), tok("y"), StreamEvent::Done]);
    let trace = out.settled.wait().await.unwrap();
    assert_eq!(trace.receipts.len(), 1);
    assert_eq!(trace.receipts[0].evidence, Evidence::RequestChannelClosed);
}

#[tokio::test(start_paused = true)]
async fn the_total_deadline_closes_every_stream_with_a_receipt() {
    let t = setup(vec![slow_then_tokens(ms(60_000)), slow_then_tokens(ms(60_000))], BudgetLimits::UNLIMITED, 2);
    let stop_at = Instant::now() + ms(1_000);
    let out =
        t.hedger.run_scoped(&chain(&t.hedger, ms(100)), request(), handing_to(&StreamHandoff::new()).stop_at(Some(stop_at))).await.unwrap();
    assert_eq!(out.winner, None);
    assert!(out.decisions.stopped_by_caller);
    let trace = out.settled.wait().await.unwrap();
    assert_eq!(trace.receipts.len(), 2);
    let closed: Vec<usize> = t.counters.iter().map(|c| c.closed.load(Ordering::SeqCst)).collect();
    assert_eq!(closed, vec![1, 1]);
}

/// A stream provider whose reader sends a token (and then the stream's end, when
/// `end_first`), works on for 100 ms and counts itself finished.
#[derive(Debug)]
struct Lingering {
    end_first: bool,
    finished: Arc<AtomicUsize>,
}

#[async_trait]
impl ProviderApi for Lingering {
    fn capabilities(&self) -> Capabilities {
        Capabilities { reports_queued: false, cancel_evidence: Evidence::RequestChannelClosed, reports_billed_time: false }
    }

    async fn submit(&self, request: &JobRequest) -> Result<Arc<dyn Job>, ProviderError> {
        let (end_first, finished) = (self.end_first, self.finished.clone());
        Ok(Arc::new(StreamJob::start("p", request, move |tx| async move {
            tx.send(tok("a"));
            if end_first {
                tx.send(StreamEvent::Done);
            }
            tokio::time::sleep(ms(100)).await;
            finished.fetch_add(1, Ordering::SeqCst);
        })))
    }
}

/// A race of one [`Lingering`] provider; its stream, handed over.
async fn lingering_race(end_first: bool, finished: &Arc<AtomicUsize>) -> StreamHandoff {
    let pricing = Pricing { rate: RateNanoUsdPerSec(1000), idle_window: Duration::ZERO, expected_run: Duration::from_secs(1) };
    let api = Arc::new(Lingering { end_first, finished: finished.clone() });
    let providers = vec![Provider { name: "p".into(), api, pricing }];
    let ledger = Arc::new(MemoryLedger::new(BudgetLimits::UNLIMITED));
    let hedger = Hedger::new(providers, Arc::new(FirstEvent), ledger, RaceSettings::default(), None);
    let handoff = StreamHandoff::new();
    let policy = Single::try_new(hedger.providers(), "p").unwrap();
    let out = hedger.run_scoped(&policy, request(), handing_to(&handoff)).await.unwrap();
    assert_eq!(out.winner.as_deref(), Some("p"));
    handoff
}

/// A reader that sent its stream's end may finish by itself after the stream it fed is
/// dropped (a provider reads the reply's last bytes so that its connection is kept); a
/// reader still streaming is stopped with its stream.
#[tokio::test(start_paused = true)]
async fn a_reader_past_its_end_may_finish_but_one_still_streaming_is_stopped_with_its_stream() {
    let finished = Arc::new(AtomicUsize::new(0));

    let handoff = lingering_race(true, &finished).await;
    assert_eq!(collect(&handoff, "p").await, vec![tok("a"), StreamEvent::Done]);
    tokio::time::sleep(ms(200)).await;
    assert_eq!(finished.load(Ordering::SeqCst), 1, "the reader past its end was stopped with its stream");

    let handoff = lingering_race(false, &finished).await;
    drop(handoff.take("p").expect("the winner's stream is handed over"));
    tokio::time::sleep(ms(200)).await;
    assert_eq!(finished.load(Ordering::SeqCst), 1, "a reader still streaming outlived its dropped stream");
}
