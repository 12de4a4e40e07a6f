//! Paused-clock tests for every policy edge. Each test scripts the providers, runs one
//! request through the real engine, and checks decisions, timing and receipts exactly.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use std::sync::Arc;
use std::time::Duration;
use tailcut_core::engine::{Hedger, RaceSettings};
use tailcut_core::ledger::{BudgetLimits, MemoryLedger};
use tailcut_core::policy::{Cascade, Cutover, DeadlineTier, FixedHedge, ImmediateRace, Policy, QueueTimers, Single};
use tailcut_core::receipt::Evidence;
use tailcut_core::validate::NonEmpty;
use tailcut_core::{CancelScope, JobRequest, MicroUsd, Pricing, RaceError, RateNanoUsdPerSec};
use tailcut_testkit::{CancelBehaviour, Output, Recorder, Script, ScriptedProvider};
use tokio::time::Instant;

fn s(secs: f64) -> Duration {
    Duration::from_secs_f64(secs)
}

struct Setup {
    hedger: Hedger,
    recorder: Recorder,
}

fn setup(primary: Vec<Script>, hedge: Vec<Script>, fallback: Vec<Script>) -> Setup {
    let recorder = Recorder::new();
    let providers = vec![
        ScriptedProvider::new("p", true, primary, &recorder).entry(),
        ScriptedProvider::new("h", false, hedge, &recorder).entry(),
        ScriptedProvider::new("f", false, fallback, &recorder).entry(),
    ];
    let hedger =
        Hedger::new(providers, Arc::new(NonEmpty), Arc::new(MemoryLedger::new(BudgetLimits::UNLIMITED)), RaceSettings::default(), None);
    Setup { hedger, recorder }
}

fn req() -> JobRequest {
    JobRequest::new("req-1", serde_json::json!({"text": "hello"}))
}

fn fixed(h: &Hedger, delay: f64) -> FixedHedge {
    FixedHedge::try_new(h.providers(), "p", "h", s(delay)).unwrap()
}

fn cutover(h: &Hedger) -> Cutover {
    Cutover::try_new(h.providers(), "p", "h", QueueTimers::default()).unwrap()
}

fn cascade(h: &Hedger) -> Cascade {
    Cascade::try_new(h.providers(), "p", "h", "f", QueueTimers::default()).unwrap()
}

#[tokio::test(start_paused = true)]
async fn no_hedge_when_primary_is_valid_one_ms_before_the_delay() {
    let t = setup(vec![Script::valid_after(s(9.999))], vec![Script::valid_after(s(1.0))], vec![]);
    let out = t.hedger.run(&fixed(&t.hedger, 10.0), req()).await.unwrap();
    assert_eq!(out.winner.as_deref(), Some("p"));
    assert!(!out.decisions.hedge_launched);
    assert_eq!(t.recorder.submits("h").len(), 0);
    assert_eq!(out.latency, Some(s(9.999)));
}

#[tokio::test(start_paused = true)]
async fn hedge_not_sent_before_delay_and_sent_at_delay() {
    let t = setup(vec![Script::valid_after(s(100.0))], vec![Script::valid_after(s(15.0))], vec![]);
    let hedger = t.hedger.clone();
    let start = Instant::now();
    let task = tokio::spawn(async move {
        let policy = fixed(&hedger, 10.0);
        hedger.run(&policy, req()).await
    });
    tokio::time::sleep(s(10.0) - Duration::from_millis(1)).await;
    assert_eq!(t.recorder.submits("h").len(), 0, "no hedge at delay - 1 ms");
    tokio::time::sleep(Duration::from_millis(1)).await;
    tokio::task::yield_now().await;
    assert_eq!(t.recorder.submits("h"), vec![start + s(10.0)], "hedge at exactly the delay");
    let out = task.await.unwrap().unwrap();
    assert_eq!(out.winner.as_deref(), Some("h"));
    assert_eq!(out.latency, Some(s(25.0)));
    let trace = out.settled.wait().await.unwrap();
    assert_eq!(trace.receipts.len(), 1);
    assert_eq!(trace.receipts[0].provider, "p");
    assert_eq!(trace.winner_total_ms, Some(25_000.0));
}

#[tokio::test(start_paused = true)]
async fn hedge_delay_counts_from_primary_submit_return_and_latency_includes_launch_offset() {
    let primary = Script::valid_after(s(100.0)).submit_delay(s(0.25));
    let hedge = Script::valid_after(s(15.0)).submit_delay(s(0.1));
    let t = setup(vec![primary], vec![hedge], vec![]);
    let start = Instant::now();
    let out = t.hedger.run(&fixed(&t.hedger, 10.0), req()).await.unwrap();
    // Hedge submit starts at 0.25 + 10 and its job exists 0.1 s later.
    assert_eq!(t.recorder.submits("h"), vec![start + s(10.35)]);
    // End-to-end = launch offset (10.25) + hedge wall (0.1 submit + 15).
    assert_eq!(out.latency, Some(s(25.35)));
    let trace = out.settled.wait().await.unwrap();
    assert_eq!(trace.winner_total_ms, Some(25_350.0));
    assert_eq!(trace.winner_valid_at_ms, Some(15_100.0));
    assert_eq!(trace.attempts[1].submit_offset_ms, 10_250.0);
}

#[tokio::test(start_paused = true)]
async fn fast_invalid_primary_triggers_hedge_at_once() {
    let t = setup(vec![Script::valid_after(s(1.0)).output(Output::Invalid)], vec![Script::valid_after(s(15.0))], vec![]);
    let start = Instant::now();
    let out = t.hedger.run(&fixed(&t.hedger, 10.0), req()).await.unwrap();
    assert_eq!(t.recorder.submits("h"), vec![start + s(1.0)]);
    assert_eq!(out.winner.as_deref(), Some("h"));
    assert_eq!(out.latency, Some(s(16.0)));
    let trace = out.settled.wait().await.unwrap();
    assert!(trace.receipts.is_empty(), "a finished invalid primary is not cancelled");
    assert_eq!(trace.attempts[0].valid, Some(false));
}

#[tokio::test(start_paused = true)]
async fn invalid_result_never_wins_even_when_first() {
    let t = setup(vec![Script::valid_after(s(20.0))], vec![Script::valid_after(s(1.0)).output(Output::Fails)], vec![]);
    let out = t.hedger.run(&fixed(&t.hedger, 5.0), req()).await.unwrap();
    assert_eq!(out.winner.as_deref(), Some("p"));
    assert_eq!(out.latency, Some(s(20.0)));
}

#[tokio::test(start_paused = true)]
async fn both_invalid_gives_no_winner_and_no_receipts() {
    let t =
        setup(vec![Script::valid_after(s(20.0)).output(Output::Invalid)], vec![Script::valid_after(s(3.0)).output(Output::Fails)], vec![]);
    let out = t.hedger.run(&fixed(&t.hedger, 10.0), req()).await.unwrap();
    assert_eq!(out.winner, None);
    assert_eq!(out.latency, None);
    assert!(out.settled.wait().await.unwrap().receipts.is_empty());
}

#[tokio::test(start_paused = true)]
async fn cutover_while_queued_cancels_primary_and_switches() {
    let primary = Script::valid_after(s(100.0)).queued_for(s(20.0));
    let t = setup(vec![primary], vec![Script::valid_after(s(15.0))], vec![]);
    let start = Instant::now();
    let out = t.hedger.run(&cutover(&t.hedger), req()).await.unwrap();
    assert!(out.decisions.cutover_fired);
    assert!(!out.decisions.safety_hedge_fired);
    assert_eq!(t.recorder.submits("h"), vec![start + s(2.5)]);
    assert_eq!(out.winner.as_deref(), Some("h"));
    assert_eq!(out.latency, Some(s(17.5)));
    let trace = out.settled.wait().await.unwrap();
    assert_eq!(trace.decisions.state_at_poll, Some(tailcut_core::JobState::Queued));
    assert_eq!(trace.decisions.poll_at_ms, Some(2500.0));
    let r = &trace.receipts[0];
    assert_eq!(r.provider, "p");
    assert_eq!(r.cancel_scope, CancelScope::QueuedJob);
    assert_eq!(r.evidence, Evidence::ConfirmedTerminal);
    assert!(!r.leaked && !r.was_running);
    assert_eq!(r.reason, "still queued at cutover poll");
}

#[tokio::test(start_paused = true)]
async fn running_primary_is_kept_and_safety_hedge_rescues() {
    let t = setup(vec![Script::valid_after(s(100.0))], vec![Script::valid_after(s(15.0))], vec![]);
    let start = Instant::now();
    let out = t.hedger.run(&cutover(&t.hedger), req()).await.unwrap();
    assert!(!out.decisions.cutover_fired);
    assert!(out.decisions.safety_hedge_fired);
    assert_eq!(out.decisions.state_at_poll, Some(tailcut_core::JobState::Running));
    assert_eq!(t.recorder.submits("h"), vec![start + s(8.5)]);
    assert_eq!(out.latency, Some(s(23.5)));
    let trace = out.settled.wait().await.unwrap();
    assert_eq!(trace.receipts.len(), 1);
    assert!(trace.receipts[0].was_running);
    assert_eq!(trace.receipts[0].cancel_scope, CancelScope::Request);
}

#[tokio::test(start_paused = true)]
async fn cancel_failure_keeps_primary_racing_and_it_wins() {
    let primary = Script::valid_after(s(40.0)).queued_for(s(20.0)).cancel(CancelBehaviour::Error);
    let t = setup(vec![primary], vec![Script::valid_after(s(5.0)).output(Output::Invalid)], vec![]);
    let out = t.hedger.run(&cutover(&t.hedger), req()).await.unwrap();
    assert!(out.decisions.cutover_fired);
    assert_eq!(out.winner.as_deref(), Some("p"), "the unconfirmed primary stays in the race");
    assert_eq!(out.latency, Some(s(40.0)));
    let trace = out.settled.wait().await.unwrap();
    assert_eq!(trace.receipts.len(), 1);
    let r = &trace.receipts[0];
    assert_eq!(r.evidence, Evidence::NoEvidence);
    assert!(r.leaked);
    assert!(r.note.starts_with("cancel raised:"), "{}", r.note);
}

#[tokio::test(start_paused = true)]
async fn panicking_cancel_becomes_a_leaked_receipt() {
    let t = setup(vec![Script::valid_after(s(100.0)).cancel(CancelBehaviour::Panic)], vec![Script::valid_after(s(1.0))], vec![]);
    let out = t.hedger.run(&fixed(&t.hedger, 2.0), req()).await.unwrap();
    assert_eq!(out.winner.as_deref(), Some("h"));
    let trace = out.settled.wait().await.unwrap();
    assert!(trace.receipts[0].leaked);
    assert!(trace.receipts[0].note.contains("panicked"));
}

#[tokio::test(start_paused = true)]
async fn panicking_result_is_a_failed_attempt() {
    let t = setup(vec![Script::valid_after(s(1.0)).output(Output::Panics)], vec![Script::valid_after(s(2.0))], vec![]);
    let out = t.hedger.run(&fixed(&t.hedger, 10.0), req()).await.unwrap();
    assert_eq!(out.winner.as_deref(), Some("h"));
    assert_eq!(out.latency, Some(s(3.0)));
}

#[tokio::test(start_paused = true)]
async fn escalation_waits_while_two_attempts_are_live() {
    let t = setup(vec![Script::valid_after(s(100.0))], vec![Script::valid_after(s(60.0))], vec![Script::valid_after(s(14.0))]);
    let out = t.hedger.run(&cascade(&t.hedger), req()).await.unwrap();
    assert!(out.decisions.safety_hedge_fired);
    assert!(out.decisions.escalation_skipped_at_capacity);
    assert!(!out.decisions.escalation_fired);
    assert_eq!(out.winner.as_deref(), Some("h"));
    assert_eq!(out.latency, Some(s(68.5)));
    assert_eq!(t.recorder.submits("f").len(), 0);
    assert_eq!(t.recorder.max_alive(), 2);
}

#[tokio::test(start_paused = true)]
async fn cascade_escalates_at_25s_after_cutover_with_a_stalled_hedge() {
    let primary = Script::valid_after(s(100.0)).queued_for(s(20.0));
    let t = setup(vec![primary], vec![Script::valid_after(s(100.0))], vec![Script::valid_after(s(14.0))]);
    let start = Instant::now();
    let out = t.hedger.run(&cascade(&t.hedger), req()).await.unwrap();
    assert!(out.decisions.cutover_fired && out.decisions.escalation_fired);
    assert_eq!(t.recorder.submits("f"), vec![start + s(25.0)]);
    assert_eq!(out.winner.as_deref(), Some("f"));
    assert_eq!(out.latency, Some(s(39.0)));
    let trace = out.settled.wait().await.unwrap();
    assert_eq!(trace.receipts.len(), 2, "both losers have receipts");
    assert_eq!(trace.receipts[0].cancel_scope, CancelScope::QueuedJob);
    assert_eq!(trace.receipts[1].provider, "h");
    assert_eq!(trace.attempts.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn cascade_escalates_early_when_nothing_is_pending() {
    let primary = Script::valid_after(s(100.0)).queued_for(s(20.0));
    let t = setup(vec![primary], vec![Script::valid_after(s(5.0)).output(Output::Invalid)], vec![Script::valid_after(s(14.0))]);
    let start = Instant::now();
    let out = t.hedger.run(&cascade(&t.hedger), req()).await.unwrap();
    // Hedge invalid at 7.5 s; the primary's queued cancel was confirmed at 2.8 s.
    assert_eq!(t.recorder.submits("f"), vec![start + s(7.5)]);
    assert_eq!(out.latency, Some(s(21.5)));
}

#[tokio::test(start_paused = true)]
async fn unconfirmed_cancel_blocks_escalation_and_keeps_counting_as_live() {
    let primary = Script::valid_after(s(100.0)).queued_for(s(20.0)).cancel(CancelBehaviour::Leak(s(0.3)));
    let t = setup(vec![primary], vec![Script::valid_after(s(100.0))], vec![Script::valid_after(s(14.0))]);
    let out = t.hedger.run(&cascade(&t.hedger), req()).await.unwrap();
    assert!(out.decisions.escalation_skipped_at_capacity);
    assert_eq!(t.recorder.submits("f").len(), 0);
    assert_eq!(out.winner.as_deref(), Some("p"));
    assert!(t.recorder.max_alive() <= 2);
}

#[tokio::test(start_paused = true)]
async fn deadline_tier_races_hedge_and_fallback_after_a_queued_primary() {
    let primary = Script::valid_after(s(100.0)).queued_for(s(20.0));
    let t = setup(vec![primary], vec![Script::valid_after(s(30.0))], vec![Script::valid_after(s(10.0))]);
    let start = Instant::now();
    let policy = DeadlineTier::try_new(t.hedger.providers(), "p", "h", "f", QueueTimers::default()).unwrap();
    let out = t.hedger.run(&policy, req()).await.unwrap();
    assert!(out.decisions.cutover_fired);
    assert_eq!(t.recorder.submits("h"), vec![start + s(2.5)]);
    // The fallback launches once the queued primary's cancel is confirmed (300 ms).
    assert_eq!(t.recorder.submits("f"), vec![start + s(2.8)]);
    assert_eq!(out.winner.as_deref(), Some("f"));
    assert!(t.recorder.max_alive() <= 2);
}

#[tokio::test(start_paused = true)]
async fn immediate_race_launches_the_next_racer_when_one_fails() {
    let t = setup(
        vec![Script::valid_after(s(1.0)).output(Output::Fails)],
        vec![Script::valid_after(s(50.0))],
        vec![Script::valid_after(s(5.0))],
    );
    let policy = ImmediateRace::try_new(t.hedger.providers(), &["p", "h", "f"]).unwrap();
    let start = Instant::now();
    let out = t.hedger.run(&policy, req()).await.unwrap();
    assert_eq!(t.recorder.submits("f"), vec![start + s(1.0)]);
    assert_eq!(out.winner.as_deref(), Some("f"));
    assert_eq!(out.latency, Some(s(6.0)));
}

#[tokio::test(start_paused = true)]
async fn callers_result_never_waits_for_loser_cleanup() {
    let slow_cancel = Script::valid_after(s(100.0)).cancel(CancelBehaviour::Confirm(s(60.0)));
    let t = setup(vec![slow_cancel], vec![Script::valid_after(s(3.0))], vec![]);
    let start = Instant::now();
    let policy = ImmediateRace::try_new(t.hedger.providers(), &["p", "h"]).unwrap();
    let out = t.hedger.run(&policy, req()).await.unwrap();
    assert_eq!(Instant::now() - start, s(3.0), "returned at the winner's time");
    let trace = out.settled.wait().await.unwrap();
    assert_eq!(Instant::now() - start, s(63.0), "cleanup finished later, in the background");
    assert_eq!(trace.receipts[0].terminal_ms, Some(63_000.0));
}

#[tokio::test(start_paused = true)]
async fn single_provider_timeout_is_a_censored_result() {
    let t = setup(vec![Script::valid_after(s(400.0))], vec![], vec![]);
    let policy = Single::try_new(t.hedger.providers(), "p").unwrap();
    let out = t.hedger.run(&policy, req()).await.unwrap();
    assert_eq!(out.winner, None);
    let trace = out.settled.wait().await.unwrap();
    assert_eq!(trace.attempts[0].outcome, Some(tailcut_core::JobState::TimedOut));
}

#[tokio::test(start_paused = true)]
async fn failed_submit_moves_on_at_once() {
    let mut bad = Script::valid_after(s(1.0));
    bad.submit_fails = true;
    let t = setup(vec![bad], vec![Script::valid_after(s(4.0))], vec![]);
    let out = t.hedger.run(&fixed(&t.hedger, 10.0), req()).await.unwrap();
    assert_eq!(out.winner.as_deref(), Some("h"));
    assert_eq!(out.latency, Some(s(4.0)));
    let trace = out.settled.wait().await.unwrap();
    assert!(trace.attempts[0].submit_error.is_some());
}

#[tokio::test(start_paused = true)]
async fn cutover_policy_refuses_a_primary_without_queue_signal() {
    let t = setup(vec![], vec![], vec![]);
    let err = Cutover::try_new(t.hedger.providers(), "h", "p", QueueTimers::default()).unwrap_err();
    assert!(err.to_string().contains("cannot tell queued from running"), "{err}");
    assert!(FixedHedge::try_new(t.hedger.providers(), "p", "zz", s(1.0)).is_err());
    assert!(FixedHedge::try_new(t.hedger.providers(), "p", "p", s(1.0)).is_err());
    assert_eq!(fixed(&t.hedger, 10.0).label(), "hedge:p->h@10s");
    assert_eq!(cutover(&t.hedger).label(), "cutover:p->h@q2.5s+s8.5s");
    assert_eq!(cascade(&t.hedger).label(), "cascade:p->h->f@q2.5s+s8.5s+e25s");
}

#[tokio::test(start_paused = true)]
async fn budget_refuses_the_first_submission_and_skips_a_hedge() {
    let recorder = Recorder::new();
    let priced = |name: &str, scripts, queued| {
        let mut e = ScriptedProvider::new(name, queued, scripts, &recorder).entry();
        e.pricing = Pricing { rate: RateNanoUsdPerSec(1_000_000), idle_window: Duration::ZERO, expected_run: s(10.0) };
        e
    };
    // Each submission is projected at $0.01 (10 s at $0.001/s).
    let providers = vec![priced("p", vec![Script::valid_after(s(30.0))], true), priced("h", vec![Script::valid_after(s(1.0))], false)];
    let limits = BudgetLimits { soft_stop: MicroUsd(10_000), hard_stop: MicroUsd(15_000) };
    let hedger = Hedger::new(providers, Arc::new(NonEmpty), Arc::new(MemoryLedger::new(limits)), RaceSettings::default(), None);
    let policy = FixedHedge::try_new(hedger.providers(), "p", "h", s(5.0)).unwrap();
    let out = hedger.run(&policy, req()).await.unwrap();
    assert_eq!(out.decisions.budget_refusals, 1, "the hedge would cross the hard stop");
    assert_eq!(out.winner.as_deref(), Some("p"));
    let err = hedger.run(&policy, req()).await.unwrap_err();
    assert!(matches!(err, RaceError::Budget(_)), "{err}");
    assert_eq!(recorder.lives().len(), 1, "nothing was submitted after the refusal");
}

#[tokio::test(start_paused = true)]
async fn stopping_a_race_cancels_every_live_attempt_with_receipts() {
    let t = setup(vec![Script::valid_after(s(100.0))], vec![Script::valid_after(s(100.0))], vec![]);
    let policy = ImmediateRace::try_new(t.hedger.providers(), &["p", "h"]).unwrap();
    let out = t.hedger.run_until(&policy, req(), tokio::time::sleep(s(5.0))).await.unwrap();
    assert_eq!(out.winner, None);
    assert!(out.decisions.stopped_by_caller);
    let trace = out.settled.wait().await.unwrap();
    assert_eq!(trace.receipts.len(), 2);
    assert!(trace.receipts.iter().all(|r| !r.leaked));
}

#[derive(Debug)]
struct NoHedges;

impl tailcut_core::engine::HedgeGate for NoHedges {
    fn request_started(&self) {}
    fn try_extra(&self) -> bool {
        false
    }
}

#[tokio::test(start_paused = true)]
async fn hedge_gate_can_refuse_extra_attempts() {
    let recorder = Recorder::new();
    let providers = vec![
        ScriptedProvider::new("p", true, vec![Script::valid_after(s(30.0))], &recorder).entry(),
        ScriptedProvider::new("h", false, vec![Script::valid_after(s(1.0))], &recorder).entry(),
    ];
    let hedger = Hedger::with_gate(
        providers,
        Arc::new(NonEmpty),
        Arc::new(MemoryLedger::new(BudgetLimits::UNLIMITED)),
        RaceSettings::default(),
        None,
        Some(Arc::new(NoHedges)),
        Default::default(),
    );
    let policy = FixedHedge::try_new(hedger.providers(), "p", "h", s(5.0)).unwrap();
    let out = hedger.run(&policy, req()).await.unwrap();
    assert_eq!(out.decisions.hedges_denied, 1);
    assert_eq!(out.winner.as_deref(), Some("p"));
    assert_eq!(recorder.submits("h").len(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_deadline_stops_the_race_on_the_policy_timer() {
    // Before the hedge is due: the race stops at the deadline, with nothing launched after.
    let t = setup(vec![Script::valid_after(s(100.0))], vec![Script::valid_after(s(100.0))], vec![]);
    let policy = FixedHedge::try_new(t.hedger.providers(), "p", "h", s(10.0)).unwrap();
    let t0 = tokio::time::Instant::now();
    let out = t.hedger.run_by(&policy, req(), t0 + s(5.0)).await.unwrap();
    assert_eq!(t0.elapsed(), s(5.0));
    assert_eq!((out.winner.as_deref(), out.attempts), (None, 1));
    assert!(out.decisions.stopped_by_caller && !out.decisions.hedge_launched);
    let trace = out.settled.wait().await.unwrap();
    assert_eq!(trace.receipts.len(), 1);
    // After it: the hedge launches at 10 s, and both attempts are cancelled at 15 s.
    let t0 = tokio::time::Instant::now();
    let out = t.hedger.run_by(&policy, req(), t0 + s(15.0)).await.unwrap();
    assert_eq!(t0.elapsed(), s(15.0));
    assert_eq!((out.winner.as_deref(), out.attempts), (None, 2));
    assert!(out.decisions.stopped_by_caller && out.decisions.hedge_launched);
    let trace = out.settled.wait().await.unwrap();
    assert_eq!(trace.receipts.len(), 2);
    assert!(trace.receipts.iter().all(|r| !r.leaked));
    // A winner before the deadline is a normal outcome.
    let t = setup(vec![Script::valid_after(s(2.0))], vec![], vec![]);
    let policy = FixedHedge::try_new(t.hedger.providers(), "p", "h", s(10.0)).unwrap();
    let out = t.hedger.run_by(&policy, req(), tokio::time::Instant::now() + s(5.0)).await.unwrap();
    assert_eq!(out.winner.as_deref(), Some("p"));
    assert!(!out.decisions.stopped_by_caller);
}

#[tokio::test(start_paused = true)]
async fn deadline_tier_keeps_a_running_primary_and_fires_the_safety_hedge() {
    let t = setup(vec![Script::valid_after(s(100.0))], vec![Script::valid_after(s(5.0))], vec![Script::valid_after(s(50.0))]);
    let start = Instant::now();
    let policy = DeadlineTier::try_new(t.hedger.providers(), "p", "h", "f", QueueTimers::default()).unwrap();
    let out = t.hedger.run(&policy, req()).await.unwrap();
    assert!(!out.decisions.cutover_fired);
    assert!(out.decisions.safety_hedge_fired);
    assert!(!out.decisions.escalation_fired, "the fallback waits for a free slot");
    assert_eq!(t.recorder.submits("h"), vec![start + s(8.5)]);
    assert_eq!(t.recorder.submits("f").len(), 0);
    assert_eq!(out.winner.as_deref(), Some("h"));
}

#[tokio::test(start_paused = true)]
async fn deadline_tier_stopped_before_the_safety_time_records_no_safety_hedge() {
    // The race stops at 5 s, before the safety hedge is due at 8.5 s: nothing launches
    // after the primary, so the trace must not claim a safety hedge.
    let t = setup(vec![Script::valid_after(s(100.0))], vec![Script::valid_after(s(5.0))], vec![Script::valid_after(s(5.0))]);
    let policy = DeadlineTier::try_new(t.hedger.providers(), "p", "h", "f", QueueTimers::default()).unwrap();
    let out = t.hedger.run_by(&policy, req(), Instant::now() + s(5.0)).await.unwrap();
    assert_eq!((out.winner.as_deref(), out.attempts), (None, 1));
    assert!(out.decisions.stopped_by_caller);
    assert!(!out.decisions.safety_hedge_fired, "{:?}", out.decisions);
    assert!(!out.decisions.hedged());
}

#[tokio::test(start_paused = true)]
async fn the_race_records_each_attempts_role_and_the_decision_it_launched_for() {
    use tailcut_core::trace::Role;
    let roles = |trace: &tailcut_core::trace::RequestTrace| trace.attempts.iter().map(|a| a.role).collect::<Vec<_>>();
    // An immediate race: the second racer is a hedge.
    let t = setup(vec![Script::valid_after(s(5.0))], vec![Script::valid_after(s(50.0))], vec![]);
    let policy = ImmediateRace::try_new(t.hedger.providers(), &["p", "h"]).unwrap();
    let out = t.hedger.run(&policy, req()).await.unwrap();
    assert!(out.decisions.hedge_launched && !out.decisions.safety_hedge_fired);
    assert_eq!(roles(&out.settled.wait().await.unwrap()), [Role::Racer, Role::Racer]);
    // A cascade that cuts over, then escalates: primary, hedge (the cutover target), fallback.
    let primary = Script::valid_after(s(100.0)).queued_for(s(20.0));
    let t = setup(vec![primary], vec![Script::valid_after(s(100.0))], vec![Script::valid_after(s(14.0))]);
    let out = t.hedger.run(&cascade(&t.hedger), req()).await.unwrap();
    let d = &out.decisions;
    assert!(d.cutover_fired && d.escalation_fired && !d.hedge_launched && !d.safety_hedge_fired, "{d:?}");
    assert_eq!(roles(&out.settled.wait().await.unwrap()), [Role::Primary, Role::Hedge, Role::Fallback]);
    // A kept primary and a safety hedge.
    let t = setup(vec![Script::valid_after(s(100.0))], vec![Script::valid_after(s(5.0))], vec![]);
    let out = t.hedger.run(&cutover(&t.hedger), req()).await.unwrap();
    let d = &out.decisions;
    assert!(d.safety_hedge_fired && !d.cutover_fired && !d.hedge_launched, "{d:?}");
    assert_eq!(roles(&out.settled.wait().await.unwrap()), [Role::Primary, Role::Hedge]);
}
