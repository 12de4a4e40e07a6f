//! Paused-clock tests of a race's `RunScope`: concurrent races on one task and one hedger,
//! each with its own account and job tag, and none of it leaking into another race.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use async_trait::async_trait;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tailcut_core::engine::{Hedger, RaceSettings, RunScope};
use tailcut_core::ledger::{Account, BudgetGate, BudgetLimits, MemoryLedger};
use tailcut_core::policy::{FixedHedge, Single};
use tailcut_core::validate::NonEmpty;
use tailcut_core::{Capabilities, Job, JobRequest, JobTag, MicroUsd, Pricing, Provider, ProviderApi, ProviderError, RateNanoUsdPerSec};
use tailcut_testkit::{Recorder, Script, ScriptedProvider};
use tokio::time::sleep;

fn s(secs: f64) -> Duration {
    Duration::from_secs_f64(secs)
}

/// `p` plays its scripts to the races in submit order; `h` is the hedge. A `p` submission
/// projects 1000 µ$, an `h` one 10 µ$, so a charge on the wrong account shows by amount.
fn hedger(ledger: Arc<MemoryLedger>, p: Vec<Script>, h: Vec<Script>) -> Hedger {
    let recorder = Recorder::new();
    let priced = |us_per_s: i64| Pricing { rate: RateNanoUsdPerSec(us_per_s * 1000), idle_window: Duration::ZERO, expected_run: s(1.0) };
    let providers = vec![
        Provider { pricing: priced(1000), ..ScriptedProvider::new("p", true, p, &recorder).entry() },
        Provider { pricing: priced(10), ..ScriptedProvider::new("h", false, h, &recorder).entry() },
    ];
    Hedger::new(providers, Arc::new(NonEmpty), ledger, RaceSettings::default(), None)
}

fn account(name: &str) -> Option<Arc<Account>> {
    Some(Arc::new(Account { name: name.into(), limit: Some(MicroUsd(1_000_000)) }))
}

fn req(id: &str) -> JobRequest {
    JobRequest::new(id, serde_json::json!({"text": "hello"}))
}

/// Three races interleaved on one task: A (team-a) hedges `p` with `h` at 10 s; B
/// (team-b) starts at 5 s, between A's primary and A's hedge; C (no account) at 7 s.
/// Each launch lands on its own race's account, and C's on none.
#[tokio::test(start_paused = true)]
async fn concurrent_races_on_one_task_charge_each_launch_to_their_own_account() {
    let ledger = Arc::new(MemoryLedger::new(BudgetLimits::UNLIMITED));
    let p = vec![Script::valid_after(s(100.0)), Script::valid_after(s(1.0)), Script::valid_after(s(1.0))];
    let h = hedger(ledger.clone(), p, vec![Script::valid_after(s(5.0))]);
    let hedge = FixedHedge::try_new(h.providers(), "p", "h", s(10.0)).unwrap();
    let single = Single::try_new(h.providers(), "p").unwrap();
    let (price_p, price_h) = (h.providers()[0].pricing.projected_submission(), h.providers()[1].pricing.projected_submission());
    assert_eq!((price_p, price_h), (MicroUsd(1000), MicroUsd(10)));

    let a = h.run_scoped(&hedge, req("a"), RunScope::new().account(account("team-a")));
    let b = async {
        sleep(s(5.0)).await;
        h.run_scoped(&single, req("b"), RunScope::new().account(account("team-b"))).await
    };
    let c = async {
        sleep(s(7.0)).await;
        h.run_scoped(&single, req("c"), RunScope::new()).await
    };
    let (a, b, c) = tokio::join!(a, b, c);
    let (a, b, c) = (a.unwrap(), b.unwrap(), c.unwrap());
    assert_eq!((a.winner.as_deref(), a.attempts), (Some("h"), 2), "A hedged after B and C started");
    assert_eq!((b.winner.as_deref(), c.winner.as_deref()), (Some("p"), Some("p")));

    assert_eq!(ledger.account_spent("team-a").unwrap(), price_p + price_h, "A's primary and A's hedge, nothing else");
    assert_eq!(ledger.account_spent("team-b").unwrap(), price_p, "B's one launch, nothing else");
    assert_eq!(ledger.summary().unwrap().total, price_p + price_p + price_p + price_h, "every launch charged globally once");
}

/// What each submit saw: the provider, and the job tag's id and attempt number.
type Seen = Arc<Mutex<Vec<(&'static str, Option<(String, i32)>)>>>;

/// A provider that records, on each submit, the job tag its request carries.
#[derive(Debug)]
struct Tagged {
    name: &'static str,
    inner: Arc<dyn ProviderApi>,
    seen: Seen,
}

#[async_trait]
impl ProviderApi for Tagged {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn submit(&self, request: &JobRequest) -> Result<Arc<dyn Job>, ProviderError> {
        let tag = request.job().map(|t| (t.id().to_string(), t.next_attempt()));
        self.seen.lock().unwrap().push((self.name, tag));
        self.inner.submit(request).await
    }
}

/// Each attempt's provider reads its own race's job tag, numbered in that race's submit
/// order; a race without one gives its providers none.
#[tokio::test(start_paused = true)]
async fn each_attempt_reads_its_own_races_job_tag() {
    let ledger = Arc::new(MemoryLedger::new(BudgetLimits::UNLIMITED));
    let p = vec![Script::valid_after(s(100.0)), Script::valid_after(s(1.0)), Script::valid_after(s(1.0))];
    let plain = hedger(ledger, p, vec![Script::valid_after(s(5.0))]);
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let providers = ["p", "h"]
        .into_iter()
        .zip(plain.providers())
        .map(|(name, e)| Provider { api: Arc::new(Tagged { name, inner: e.api.clone(), seen: seen.clone() }), ..e.clone() })
        .collect();
    let h = Hedger::new(providers, Arc::new(NonEmpty), Arc::new(MemoryLedger::new(BudgetLimits::UNLIMITED)), RaceSettings::default(), None);
    let hedge = FixedHedge::try_new(h.providers(), "p", "h", s(10.0)).unwrap();
    let single = Single::try_new(h.providers(), "p").unwrap();

    let a = h.run_scoped(&hedge, req("a"), RunScope::new().job(JobTag::new("job-a")));
    let b = async {
        sleep(s(5.0)).await;
        h.run_scoped(&single, req("b"), RunScope::new().job(JobTag::new("job-b"))).await
    };
    let c = async {
        sleep(s(7.0)).await;
        h.run_scoped(&single, req("c"), RunScope::new()).await
    };
    let (a, b, c) = tokio::join!(a, b, c);
    assert_eq!((a.unwrap().attempts, b.unwrap().attempts, c.unwrap().attempts), (2, 1, 1));
    let tag = |id: &str, n: i32| Some((id.to_string(), n));
    assert_eq!(*seen.lock().unwrap(), vec![("p", tag("job-a", 0)), ("p", tag("job-b", 0)), ("p", None), ("h", tag("job-a", 1))]);
}

/// A scope given several stops stops at the first of them (the gateway adds the client's
/// hang-up to whatever stop its caller gave), its live attempt cancelled with a receipt.
#[tokio::test(start_paused = true)]
async fn a_scope_stops_at_the_first_of_its_stops() {
    let ledger = Arc::new(MemoryLedger::new(BudgetLimits::UNLIMITED));
    let h = hedger(ledger, vec![Script::valid_after(s(100.0))], vec![]);
    let single = Single::try_new(h.providers(), "p").unwrap();
    let t0 = tokio::time::Instant::now();
    let scope = RunScope::new().stop(sleep(s(1.0))).stop(std::future::pending());
    let out = h.run_scoped(&single, req("a"), scope).await.unwrap();
    assert_eq!((out.winner, out.decisions.stopped_by_caller), (None, true));
    assert_eq!(t0.elapsed(), s(1.0), "stopped by the first stop, not held by the second");
    assert_eq!(out.settled.wait().await.unwrap().receipts.len(), 1);
}
