//! A replacement the hedge-load cap, the budget or the live cap refuses must not cost the
//! race the attempt it would have replaced (issue 27, item 1): a policy asks for the
//! launch before it gives anything up, and a refused cutover keeps the primary running.
//!
//! The property: for any gate answers, budget, live cap, policy and provider behaviour,
//! a race whose primary would deliver a valid result never ends without a winner because
//! the primary was cancelled for a replacement that was never submitted.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use proptest::prelude::*;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tailcut_core::engine::{HedgeGate, Hedger, RaceSettings};
use tailcut_core::ledger::{BudgetLimits, MemoryLedger};
use tailcut_core::policy::first_token::FirstTokenHedge;
use tailcut_core::policy::learned::LearnedPolicy;
use tailcut_core::policy::{Cascade, Cutover, DeadlineTier, FixedHedge, Policy, QueueTimers};
use tailcut_core::trace::{RefusedBy, RequestTrace, Role};
use tailcut_core::validate::NonEmpty;
use tailcut_core::{JobRequest, JobState, MicroUsd, Pricing, Provider, RateNanoUsdPerSec};
use tailcut_model::{AutoSettings, LearnedKind, ModelConfig};
use tailcut_sim::{SimProfile, SimProvider};
use tailcut_testkit::scripts::{script_strategy, ScriptOdds};
use tailcut_testkit::{Output, Recorder, Script, ScriptedProvider};
use tokio::time::Instant;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// A hedge-load cap that answers as scripted, then `rest` for ever.
#[derive(Debug)]
struct ScriptedGate {
    answers: Mutex<VecDeque<bool>>,
    rest: AtomicBool,
}

impl ScriptedGate {
    fn new(answers: Vec<bool>, rest: bool) -> ScriptedGate {
        ScriptedGate { answers: Mutex::new(answers.into()), rest: AtomicBool::new(rest) }
    }
}

impl HedgeGate for ScriptedGate {
    fn request_started(&self) {}
    fn try_extra(&self) -> bool {
        self.answers.lock().unwrap().pop_front().unwrap_or_else(|| self.rest.load(Ordering::SeqCst))
    }
}

fn script() -> impl Strategy<Value = Script> {
    script_strategy(ScriptOdds { submit_fails_per_256: 25, status_fails_per_256: 10, cancel_may_panic: false })
}

/// A primary that is often still queued at the cutover poll (2.5 s) and then delivers.
fn primary() -> impl Strategy<Value = Script> {
    (script(), 0u64..20_000, 0u64..60_000).prop_map(|(s, queued, run)| Script {
        queued_for: ms(queued),
        finish_after: ms(queued + run),
        ..s
    })
}

fn policy(kind: u8, providers: &[Provider], delay_ms: u64) -> Box<dyn Policy> {
    let timers = QueueTimers::default();
    match kind % 5 {
        0 => Box::new(Cutover::try_new(providers, "p", "h", timers).unwrap()),
        1 => Box::new(Cascade::try_new(providers, "p", "h", "f", timers).unwrap()),
        2 => Box::new(DeadlineTier::try_new(providers, "p", "h", "f", timers).unwrap()),
        3 => Box::new(FixedHedge::try_new(providers, "p", "h", ms(delay_ms)).unwrap()),
        _ => Box::new(FirstTokenHedge::try_new(providers, &["p", "h", "f"], ms(delay_ms)).unwrap()),
    }
}

/// Every launch is projected at one second of 1 $/s: 1 $ a launch.
fn priced(p: ScriptedProvider) -> Provider {
    Provider {
        pricing: Pricing {
            rate: RateNanoUsdPerSec::from_usd_per_s(1.0),
            idle_window: Duration::ZERO,
            expected_run: Duration::from_secs(1),
        },
        ..p.entry()
    }
}

/// Whether the primary would have delivered a valid result had nobody cancelled it.
fn would_deliver(p: &Script) -> bool {
    !p.submit_fails && p.output == Output::Valid && p.finish_after < Duration::from_secs(300)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 768, ..ProptestConfig::default() })]

    #[test]
    fn a_refused_replacement_never_costs_the_race_its_primary(
        p in primary(), h in script(), f in script(),
        gate in prop::collection::vec(any::<bool>(), 0..6), rest in any::<bool>(),
        extra_budget in 0i64..4, kind in any::<u8>(), delay in 0u64..20_000, max_live in 1usize..4,
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
        rt.block_on(async move {
            let recorder = Recorder::new();
            let providers = vec![
                priced(ScriptedProvider::new("p", true, vec![p], &recorder)),
                priced(ScriptedProvider::new("h", true, vec![h], &recorder)),
                priced(ScriptedProvider::new("f", false, vec![f], &recorder)),
            ];
            let launch = providers[0].pricing.projected_submission();
            // Room for the primary and `extra_budget` more launches, at most.
            let limit = MicroUsd(launch.0 * (1 + extra_budget) + launch.0 / 2);
            let ledger = MemoryLedger::new(BudgetLimits { soft_stop: limit, hard_stop: limit });
            let settings = RaceSettings { max_live, cap: Duration::from_secs(300) };
            let gate: Arc<dyn HedgeGate> = Arc::new(ScriptedGate::new(gate, rest));
            let hedger = Hedger::with_gate(providers, Arc::new(NonEmpty), Arc::new(ledger), settings, None, Some(gate), Default::default());
            let policy = policy(kind, hedger.providers(), delay);
            let out = hedger.run(policy.as_ref(), JobRequest::new("r", serde_json::json!({}))).await.unwrap();
            let trace = out.settled.wait().await.unwrap();
            check_kept(&trace, would_deliver(&p))
        })?;
    }
}

/// A race without a winner whose primary would have delivered must have cut over to a
/// replacement that was actually submitted; a refused cutover is recorded, with the
/// primary never cancelled before the race ended.
fn check_kept(trace: &RequestTrace, primary_would_deliver: bool) -> Result<(), TestCaseError> {
    let primary = &trace.attempts[0];
    let submitted_after_poll = |t: &RequestTrace| {
        let poll = t.decisions.poll_at_ms.unwrap_or(f64::MAX);
        t.attempts.iter().skip(1).any(|a| a.role == Role::Hedge && a.submit_error.is_none() && a.submit_offset_ms >= poll)
    };
    if trace.winner.is_none() && primary_would_deliver {
        prop_assert!(
            trace.decisions.cutover_fired && submitted_after_poll(trace),
            "the race ended without a winner though its primary would have delivered, and no replacement was submitted: \
             decisions {:?}, attempts {:?}",
            trace.decisions,
            trace.attempts.iter().map(|a| (&a.provider, a.role, a.submit_error.is_some(), a.outcome)).collect::<Vec<_>>()
        );
    }
    if trace.decisions.cutover_fired {
        prop_assert!(submitted_after_poll(trace), "a cutover fired with no replacement submitted: {:?}", trace.decisions);
        prop_assert!(trace.decisions.cutover_refused.is_none());
    }
    if trace.decisions.cutover_refused.is_some() {
        let cancelled_at_cutover = trace.receipts.iter().any(|r| r.reason.contains("cutover"));
        prop_assert!(!cancelled_at_cutover && primary.job_id.is_some(), "a refused cutover still cancelled the primary");
    }
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_cutover_the_gate_refuses_keeps_the_primary_and_says_why() {
    let recorder = Recorder::new();
    let providers = vec![
        ScriptedProvider::new("p", true, vec![Script::valid_after(ms(6_000)).queued_for(ms(4_000))], &recorder).entry(),
        ScriptedProvider::new("h", true, vec![Script::valid_after(ms(1_000))], &recorder).entry(),
    ];
    let gate: Arc<dyn HedgeGate> = Arc::new(ScriptedGate::new(vec![], false));
    let ledger = Arc::new(MemoryLedger::new(BudgetLimits::UNLIMITED));
    let hedger = Hedger::with_gate(providers, Arc::new(NonEmpty), ledger, RaceSettings::default(), None, Some(gate), Default::default());
    let policy = Cutover::try_new(hedger.providers(), "p", "h", QueueTimers::default()).unwrap();
    let out = hedger.run(&policy, JobRequest::new("r", serde_json::json!({}))).await.unwrap();
    assert_eq!(out.winner.as_deref(), Some("p"), "{:?}", out.decisions);
    let d = &out.decisions;
    assert_eq!(
        (d.state_at_poll, d.cutover_fired, d.cutover_refused, d.hedges_denied),
        (Some(JobState::Queued), false, Some(RefusedBy::HedgeGate), 1)
    );
    assert!(recorder.lives().iter().all(|l| !l.cancel_called), "nothing was cancelled");
    assert!(recorder.submits("h").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_cutover_whose_replacement_cannot_be_submitted_keeps_the_primary() {
    let recorder = Recorder::new();
    let broken = Script { submit_fails: true, ..Script::valid_after(ms(1_000)) };
    let providers = vec![
        ScriptedProvider::new("p", true, vec![Script::valid_after(ms(6_000)).queued_for(ms(4_000))], &recorder).entry(),
        ScriptedProvider::new("h", true, vec![broken], &recorder).entry(),
    ];
    let ledger = Arc::new(MemoryLedger::new(BudgetLimits::UNLIMITED));
    let hedger = Hedger::new(providers, Arc::new(NonEmpty), ledger, RaceSettings::default(), None);
    let policy = Cutover::try_new(hedger.providers(), "p", "h", QueueTimers::default()).unwrap();
    let out = hedger.run(&policy, JobRequest::new("r", serde_json::json!({}))).await.unwrap();
    assert_eq!(out.winner.as_deref(), Some("p"), "{:?}", out.decisions);
    assert_eq!(out.decisions.cutover_refused, Some(RefusedBy::SubmitFailed));
    assert!(recorder.lives().iter().all(|l| !l.cancel_called));
}

#[tokio::test(start_paused = true)]
async fn a_learned_cutover_the_gate_refuses_keeps_the_primary() {
    // `auto` learns to cut RunPod over to Cerebrium (as in tests/learned.rs), then the
    // hedge-load cap starts refusing every extra attempt.
    let sim = |name: &str, profile: SimProfile, seed: u64| Provider {
        name: name.into(),
        api: Arc::new(SimProvider::new(name, profile.clone(), seed)),
        pricing: Pricing {
            rate: RateNanoUsdPerSec::from_usd_per_s(profile.rate_usd_per_s),
            idle_window: Duration::from_secs_f64(profile.idle_window_s),
            expected_run: Duration::from_secs(10),
        },
    };
    let providers = vec![sim("runpod", SimProfile::runpod(), 1), sim("cerebrium", SimProfile::cerebrium(), 2)];
    let gate = Arc::new(ScriptedGate::new(vec![], true));
    let ledger = Arc::new(MemoryLedger::new(BudgetLimits::UNLIMITED));
    let h = Hedger::with_gate(providers, Arc::new(NonEmpty), ledger, RaceSettings::default(), None, Some(gate.clone()), Default::default());
    let auto = AutoSettings { max_extra: 1.0, ..AutoSettings::default() };
    let policy = LearnedPolicy::try_new(h.providers(), "auto", LearnedKind::Auto(auto), None, ModelConfig::default(), 1).unwrap();
    let mut refused = 0;
    for i in 0..120 {
        if i == 40 {
            gate.rest.store(false, Ordering::SeqCst);
        }
        let t0 = Instant::now();
        let outcome = h.run(&policy, JobRequest::new(format!("r{i}"), serde_json::json!({}))).await.unwrap();
        let trace = outcome.settled.wait().await.unwrap();
        policy.observe_trace(&trace, t0);
        if i >= 40 {
            let plan = trace.decisions.learned.as_ref().map(|c| c.plan.to_string()).unwrap_or_default();
            assert!(!trace.decisions.cutover_fired, "request {i}: the gate refuses every extra attempt");
            if plan.starts_with("cutover") && trace.decisions.state_at_poll == Some(JobState::Queued) {
                refused += usize::from(trace.decisions.cutover_refused == Some(RefusedBy::HedgeGate));
                assert_eq!(trace.winner.as_deref(), Some("runpod"), "request {i}: the kept primary wins: {:?}", trace.decisions);
            }
        }
        tokio::time::sleep(Duration::from_secs(600)).await;
    }
    assert!(refused >= 1, "no learned cutover met the refusing gate");
}
