//! Property tests: for random provider behaviours and every built-in policy, the
//! live-attempt cap holds on the provider side, every loser has a receipt, and only a
//! valid result ever wins.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use proptest::prelude::*;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tailcut_core::engine::{Hedger, RaceSettings};
use tailcut_core::ledger::{BudgetLimits, MemoryLedger};
use tailcut_core::policy::{Cascade, Cutover, DeadlineTier, FixedHedge, ImmediateRace, Policy, QueueTimers, Single};
use tailcut_core::validate::NonEmpty;
use tailcut_core::JobRequest;
use tailcut_testkit::scripts::{script_strategy, ScriptOdds};
use tailcut_testkit::{Recorder, Script, ScriptedProvider};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn script() -> impl Strategy<Value = Script> {
    script_strategy(ScriptOdds { submit_fails_per_256: 10, status_fails_per_256: 20, cancel_may_panic: true })
}

fn policy(kind: u8, providers: &[tailcut_core::Provider], delay_ms: u64) -> Box<dyn Policy> {
    let timers = QueueTimers::default();
    match kind % 6 {
        0 => Box::new(Single::try_new(providers, "p").unwrap()),
        1 => Box::new(ImmediateRace::try_new(providers, &["p", "h", "f"]).unwrap()),
        2 => Box::new(FixedHedge::try_new(providers, "p", "h", ms(delay_ms)).unwrap()),
        3 => Box::new(Cutover::try_new(providers, "p", "h", timers).unwrap()),
        4 => Box::new(Cascade::try_new(providers, "p", "h", "f", timers).unwrap()),
        _ => Box::new(DeadlineTier::try_new(providers, "p", "h", "f", timers).unwrap()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn live_cap_and_receipts_hold(
        p in script(), h in script(), f in script(),
        kind in any::<u8>(), delay in 0u64..20_000, max_live in 1usize..4,
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
        rt.block_on(async move {
            let recorder = Recorder::new();
            let providers = vec![
                ScriptedProvider::new("p", true, vec![p], &recorder).entry(),
                ScriptedProvider::new("h", true, vec![h], &recorder).entry(),
                ScriptedProvider::new("f", false, vec![f], &recorder).entry(),
            ];
            let settings = RaceSettings { max_live, cap: Duration::from_secs(300) };
            let hedger = Hedger::new(providers, Arc::new(NonEmpty), Arc::new(MemoryLedger::new(BudgetLimits::UNLIMITED)), settings, None);
            let policy = policy(kind, hedger.providers(), delay);
            let out = hedger.run(policy.as_ref(), JobRequest::new("r", serde_json::json!({}))).await.unwrap();
            let trace = out.settled.wait().await.unwrap();

            // Provider-side: never more than max_live jobs alive at once.
            prop_assert!(recorder.max_alive() <= max_live, "max alive {} > cap {}", recorder.max_alive(), max_live);

            // The winner, if any, delivered a valid result.
            if let Some(w) = &trace.winner {
                let a = trace.attempts.iter().find(|a| &a.provider == w).unwrap();
                prop_assert_eq!(a.valid, Some(true));
            }

            // Every attempt that had not delivered when the race ended has a receipt.
            let with_receipt: HashSet<_> = trace.receipts.iter().filter_map(|r| r.job_id.clone()).collect();
            for a in &trace.attempts {
                let is_winner = trace.winner.as_deref() == Some(a.provider.as_str()) && a.valid == Some(true);
                if a.submit_error.is_none() && !is_winner && a.outcome.is_none() {
                    prop_assert!(with_receipt.contains(a.job_id.as_ref().unwrap()), "loser {:?} has no receipt", a.job_id);
                }
            }

            // Provider-side: any job still running when the race returned was cancelled.
            for life in recorder.lives() {
                let won = trace.winner.as_deref() == Some(life.provider.as_str());
                if !won && life.ended > trace_end(&trace, &recorder) {
                    prop_assert!(life.cancel_called, "{} job still alive after the race was never cancelled", life.provider);
                }
            }
            Ok(())
        })?;
    }
}

/// When the race ended: the winner's arrival, or the last attempt's resolution.
fn trace_end(trace: &tailcut_core::trace::RequestTrace, recorder: &Recorder) -> tokio::time::Instant {
    let first = recorder.lives().iter().map(|l| l.submitted).min().unwrap_or_else(tokio::time::Instant::now);
    // t0 precedes the first submit by the primary's submit delay; use the attempt offsets.
    let t0 = first
        - Duration::from_secs_f64(trace.attempts.iter().find(|a| a.submit_error.is_none()).map_or(0.0, |a| a.submit_returned_ms) / 1000.0);
    let end_ms = match trace.winner_total_ms {
        Some(ms) => ms,
        None => trace.attempts.iter().filter_map(|a| a.wall_ms.map(|w| a.submit_offset_ms + w)).fold(0.0, f64::max),
    };
    t0 + Duration::from_secs_f64(end_ms / 1000.0)
}
