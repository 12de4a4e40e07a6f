//! Learned policies on the real engine under tokio's paused clock: they learn from the
//! traces they produce, record their reasons, respect the extra-load budget and the
//! live-attempt cap.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use proptest::prelude::*;
use std::sync::Arc;
use std::time::Duration;
use tailcut_core::engine::{Hedger, RaceSettings};
use tailcut_core::ledger::{BudgetLimits, MemoryLedger};
use tailcut_core::policy::learned::LearnedPolicy;
use tailcut_core::validate::NonEmpty;
use tailcut_core::{JobRequest, Pricing, Provider, RateNanoUsdPerSec};
use tailcut_model::{AdaptiveSettings, AutoSettings, LearnedKind, ModelConfig};
use tailcut_sim::{SimProfile, SimProvider};
use tailcut_testkit::learned::drive;
use tailcut_testkit::{Recorder, Script, ScriptedProvider};
use tokio::time::Instant;

fn s(secs: f64) -> Duration {
    Duration::from_secs_f64(secs)
}

fn hedger(primary: Vec<Script>, hedge: Vec<Script>, queued: bool, max_live: usize, recorder: &Recorder) -> Hedger {
    let providers =
        vec![ScriptedProvider::new("p", queued, primary, recorder).entry(), ScriptedProvider::new("h", false, hedge, recorder).entry()];
    Hedger::new(
        providers,
        Arc::new(NonEmpty),
        Arc::new(MemoryLedger::new(BudgetLimits::UNLIMITED)),
        RaceSettings { max_live, ..RaceSettings::default() },
        None,
    )
}

fn adaptive(budget: f64) -> LearnedKind {
    LearnedKind::Adaptive(AdaptiveSettings {
        primary: 0,
        hedge: 1,
        quantile: 0.95,
        min_samples: 20,
        min_delay_s: 0.0,
        max_delay_s: 60.0,
        budget,
    })
}

#[tokio::test(start_paused = true)]
async fn adaptive_learns_the_primary_quantile_then_hedges_a_straggler_there() {
    let recorder = Recorder::new();
    // 40 fast answers around 1 s, then a 10 s straggler.
    let mut primary: Vec<Script> = (0..40).map(|i| Script::valid_after(s(0.9 + (i % 10) as f64 * 0.02))).collect();
    primary.push(Script::valid_after(s(10.0)));
    let h = hedger(primary, vec![Script::valid_after(s(1.0))], false, 2, &recorder);
    let policy = LearnedPolicy::try_new(h.providers(), "adaptive:p->h", adaptive(0.05), None, ModelConfig::default(), 1).unwrap();
    let traces = drive(&h, &policy, 41, s(1.0)).await;
    // Before 20 samples it never hedges and says why.
    assert!(traces[0].decisions.learned.as_ref().unwrap().reason.contains("fewer than 20 samples"));
    assert!(traces[..40].iter().all(|t| !t.decisions.hedge_launched));
    let last = traces.last().unwrap();
    assert!(last.decisions.hedge_launched, "{last:?}");
    let choice = last.decisions.learned.as_ref().unwrap();
    assert!(choice.reason.contains("p95"), "{choice:?}");
    // The hedge fired at the learned p95 (≈ 1.08 s), well before the straggler answered.
    let hedge = &last.attempts[1];
    assert!(hedge.submit_offset_ms > 1000.0 && hedge.submit_offset_ms < 1200.0, "{}", hedge.submit_offset_ms);
    assert_eq!(last.winner.as_deref(), Some("h"));
    let json = serde_json::to_value(last).unwrap();
    assert!(json["learned"]["plan"].as_str().unwrap().starts_with("hedge:p->h@"), "{json}");
}

#[tokio::test(start_paused = true)]
async fn a_spent_budget_denies_the_hedge() {
    let recorder = Recorder::new();
    // Every primary is slow. The bucket starts empty and earns a quarter token per
    // request, so only every fourth request can hedge: the rest are refused.
    let h = hedger(vec![Script::valid_after(s(3.0))], vec![Script::valid_after(s(0.5))], false, 2, &recorder);
    let kind = LearnedKind::Adaptive(AdaptiveSettings {
        primary: 0,
        hedge: 1,
        quantile: 0.5,
        min_samples: 1,
        min_delay_s: 0.0,
        max_delay_s: 1.0,
        budget: 0.25,
    });
    let policy = LearnedPolicy::try_new(h.providers(), "adaptive:p->h", kind, None, ModelConfig::default(), 1).unwrap();
    let traces = drive(&h, &policy, 12, s(1.0)).await;
    assert!(traces[1].decisions.learned.as_ref().unwrap().reason.contains("= 1.000s"), "{:?}", traces[1].decisions);
    let launched = traces.iter().filter(|t| t.decisions.hedge_launched).count();
    let denied: u32 = traces.iter().map(|t| t.decisions.hedges_denied).sum();
    assert_eq!(launched, 3, "one earned token per four requests, none before it is earned");
    assert!(denied >= 5, "denied {denied}");
}

#[tokio::test(start_paused = true)]
async fn auto_learns_to_cut_over_from_a_queued_primary() {
    // Simulated RunPod (queue signal, one cold start in three slow) and Cerebrium, every
    // request after a scale-to-zero wait, as in the 2026-07 benchmark.
    let sim = |name: &str, profile: SimProfile, seed: u64| Provider {
        name: name.into(),
        api: Arc::new(SimProvider::new(name, profile.clone(), seed)),
        pricing: Pricing {
            rate: RateNanoUsdPerSec::from_usd_per_s(profile.rate_usd_per_s),
            idle_window: s(profile.idle_window_s),
            expected_run: s(10.0),
        },
    };
    let providers = vec![sim("runpod", SimProfile::runpod(), 1), sim("cerebrium", SimProfile::cerebrium(), 2)];
    let h = Hedger::new(providers, Arc::new(NonEmpty), Arc::new(MemoryLedger::new(BudgetLimits::UNLIMITED)), RaceSettings::default(), None);
    let auto = AutoSettings { max_extra: 0.5, ..AutoSettings::default() };
    let policy = LearnedPolicy::try_new(h.providers(), "auto", LearnedKind::Auto(auto), None, ModelConfig::default(), 1).unwrap();
    let mut traces = Vec::new();
    for i in 0..80 {
        let t0 = Instant::now();
        let outcome = h.run(&policy, JobRequest::new(format!("r{i}"), serde_json::json!({}))).await.unwrap();
        let trace = outcome.settled.wait().await.unwrap();
        policy.observe_trace(&trace, t0);
        traces.push(trace);
        tokio::time::sleep(s(600.0)).await;
    }
    let late = &traces[40..];
    let plans: Vec<String> = late.iter().map(|t| t.decisions.learned.as_ref().unwrap().plan.to_string()).collect();
    // It learned to pair RunPod with Cerebrium (a queue cutover, or Cerebrium first with
    // RunPod as its hedge) and never runs either alone.
    assert!(plans.iter().all(|p| p.contains("runpod->cerebrium") || p.contains("cerebrium->runpod")), "{plans:?}");
    assert!(plans.iter().filter(|p| p.starts_with("cutover:runpod->cerebrium")).count() >= 5, "{plans:?}");
    // When RunPod was queued at the poll it was cancelled and Cerebrium won.
    let switched: Vec<_> = late.iter().filter(|t| t.decisions.cutover_fired).collect();
    assert!(!switched.is_empty(), "switched {}", switched.len());
    assert!(switched.iter().all(|t| t.winner.as_deref() == Some("cerebrium")));
    let c = late[0].decisions.learned.as_ref().unwrap();
    assert!(c.predicted_miss.is_some() && c.reason.contains("predicted miss"), "{c:?}");
    let misses = late.iter().filter(|t| t.winner_total_ms.is_none_or(|ms| ms > 60_000.0)).count();
    // Single RunPod misses about one in three. Since the simulator stopped reporting a
    // queued cancel as executed (issue 12 item 7), auto also picks `hedge@40.7s` plans whose
    // Cerebrium fallback lands just past 60 s (4 of 40 here): a known weakness of the
    // deadline arithmetic, open in the learned-policies issue.
    assert!(misses <= 6, "{misses} of 40 over 60 s");
    // The model can be saved.
    assert!(policy.model().unwrap().updates >= 80);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, .. ProptestConfig::default() })]

    /// Whatever the providers do, `auto` never has more attempts alive than the race cap.
    #[test]
    fn auto_never_exceeds_the_live_cap(
        lat in prop::collection::vec((0.5f64..120.0, 0.0f64..30.0, any::<bool>()), 30),
        partner in 1.0f64..60.0,
        max_live in 1usize..3,
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
        rt.block_on(async {
            let recorder = Recorder::new();
            let primary: Vec<Script> = lat.iter().map(|(l, q, _)| Script::valid_after(s(l + q)).queued_for(s(*q))).collect();
            let hedge: Vec<Script> = lat.iter().map(|(_, _, b)| Script::valid_after(s(if *b { partner } else { partner * 3.0 }))).collect();
            let h = hedger(primary, hedge, true, max_live, &recorder);
            let auto = AutoSettings { max_live, max_extra: 1.0, target_miss: 0.0, ..AutoSettings::default() };
            let policy = LearnedPolicy::try_new(h.providers(), "auto", LearnedKind::Auto(auto), None, ModelConfig::default(), 3).unwrap();
            drive(&h, &policy, lat.len(), s(1.0)).await;
            prop_assert!(recorder.max_alive() <= max_live, "{} alive with cap {max_live}", recorder.max_alive());
            Ok(())
        })?;
    }
}

/// A saved model carries each provider's last served time, so a policy built from it (a
/// restarted gateway) knows the idle gaps its first decision needs; a model saved
/// without them leaves the gaps unknown.
#[tokio::test(start_paused = true)]
async fn a_policy_built_from_a_saved_model_knows_each_providers_idle_gap() {
    let recorder = Recorder::new();
    let primary: Vec<Script> = (0..8).map(|_| Script::valid_after(s(2.0))).collect();
    let h = hedger(primary, vec![Script::valid_after(s(1.0))], false, 2, &recorder);
    let policy = LearnedPolicy::try_new(h.providers(), "adaptive:p->h", adaptive(0.05), None, ModelConfig::default(), 1).unwrap();
    drive(&h, &policy, 4, s(1.0)).await;
    // The last request's primary answered 2 s after its start, then `drive` slept 1 s.
    let saved = policy.model().unwrap();
    let p = saved.providers[0].last_served_unix_s.expect("the primary served");
    assert!(saved.providers[1].last_served_unix_s.is_none(), "the hedge never launched");
    let text = serde_json::to_string(&saved).unwrap();
    let loaded = tailcut_model::Model::from_json(&text).unwrap();
    assert_eq!(loaded.providers[0].last_served_unix_s, Some(p));

    let restarted =
        LearnedPolicy::try_new(h.providers(), "adaptive:p->h", adaptive(0.05), Some(loaded.clone()), ModelConfig::default(), 1).unwrap();
    let first = drive(&h, &restarted, 1, s(1.0)).await.remove(0);
    let beliefs = &first.decisions.learned.as_ref().unwrap().model;
    let gap = beliefs[0].idle_gap_s.expect("the restored gap");
    // The paused clock does not move the wall clock: the gap is the one at saving (1 s),
    // give or take the real time this test took.
    assert!((0.9..3.0).contains(&gap), "{gap}");
    assert_eq!(beliefs[1].idle_gap_s, None);

    // Without the times (a model fitted offline, or saved by an older build): unknown.
    let mut offline = loaded;
    offline.providers.iter_mut().for_each(|p| p.last_served_unix_s = None);
    let cold_gaps =
        LearnedPolicy::try_new(h.providers(), "adaptive:p->h", adaptive(0.05), Some(offline), ModelConfig::default(), 1).unwrap();
    let first = drive(&h, &cold_gaps, 1, s(1.0)).await.remove(0);
    assert!(first.decisions.learned.as_ref().unwrap().model.iter().all(|b| b.idle_gap_s.is_none()));

    // A saved time that is not a time is refused, naming the provider by its place.
    let bad = text.replacen(&format!("\"last_served_unix_s\":{p}"), "\"last_served_unix_s\":-5.0", 1);
    let err = tailcut_model::Model::from_json(&bad).unwrap_err().to_string();
    assert!(err.contains("providers[0].last_served_unix_s"), "{err}");
}
