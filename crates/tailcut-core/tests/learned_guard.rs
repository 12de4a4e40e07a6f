//! `auto`'s live guard (issue 28 items 1 and 6) on the real engine under tokio's paused
//! clock: every settled request is judged against the deadline and moves the miss
//! controller's working level, as the replay's and the scenarios' `auto` does.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use std::sync::Arc;
use std::time::Duration;
use tailcut_core::engine::{Hedger, RaceSettings};
use tailcut_core::ledger::{BudgetLimits, MemoryLedger};
use tailcut_core::policy::learned::LearnedPolicy;
use tailcut_core::validate::NonEmpty;
use tailcut_model::{AutoSettings, LearnedKind, ModelConfig};
use tailcut_testkit::learned::drive;
use tailcut_testkit::{Recorder, Script, ScriptedProvider};

fn s(secs: f64) -> Duration {
    Duration::from_secs_f64(secs)
}

/// `auto` over two providers that answer after `p` and `h` seconds, 250 ms deadline, 5 %.
fn route(p: f64, h: f64) -> (Hedger, LearnedPolicy) {
    let recorder = Recorder::new();
    let providers = vec![
        ScriptedProvider::new("p", false, vec![Script::valid_after(s(p))], &recorder).entry(),
        ScriptedProvider::new("h", false, vec![Script::valid_after(s(h))], &recorder).entry(),
    ];
    let hedger = Hedger::new(
        providers,
        Arc::new(NonEmpty),
        Arc::new(MemoryLedger::new(BudgetLimits::UNLIMITED)),
        RaceSettings { max_live: 2, ..RaceSettings::default() },
        None,
    );
    let auto = AutoSettings { deadline_s: 0.25, target_miss: 0.05, max_extra: 0.1, max_live: 2, ..AutoSettings::default() };
    let policy = LearnedPolicy::try_new(hedger.providers(), "auto", LearnedKind::Auto(auto), None, ModelConfig::live(), 1).unwrap();
    (hedger, policy)
}

#[tokio::test(start_paused = true)]
async fn the_working_level_moves_live_with_every_settled_request() {
    // Both providers take 300 ms: every request misses the 250 ms deadline, whatever
    // the plan. Each miss lowers α_t by γ·(1 − α) = 0.019.
    let (h, policy) = route(0.3, 0.3);
    assert_eq!(policy.working_level(), Some(0.05));
    let traces = drive(&h, &policy, 20, s(0.05)).await;
    let level = policy.working_level().unwrap();
    assert!(level < 0.05 - 0.01, "the working level never moved: {level}");
    assert_eq!(policy.settled(), 20);
    // α_20 = 0.05 − 20 · 0.02 · 0.95 exactly (every request missed).
    assert!((level - (0.05 - 20.0 * 0.02 * 0.95)).abs() < 1e-9, "{level}");
    // Every request was judged a miss (no plan reaches 250 ms here).
    assert!(traces.iter().all(|t| t.winner_total_ms.unwrap() > 250.0));

    // Requests that meet the deadline raise it again, by γ·α = 0.001 each, up to α.
    let (h, policy) = route(0.1, 0.1);
    drive(&h, &policy, 10, s(0.05)).await;
    assert_eq!(policy.working_level(), Some(0.05), "capped at the target");
}
