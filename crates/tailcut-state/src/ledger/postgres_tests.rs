//! `PgLedger` against a real PostgreSQL (tailcut-testkit's `PgServer`): several replicas
//! (each its own `PgState`, as separate processes would have) on one database.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests: a failed step stops the test")]

use super::*;
use crate::pg::{PgSettings, PgState};
use std::sync::Arc;
use std::time::Duration;
use tailcut_core::ledger::*;
use tailcut_core::MicroUsd;
use tailcut_testkit::postgres::PgServer;

fn replica(url: &str, slice: i64, ttl: Duration) -> Arc<PgState> {
    replica_with(url, slice, ttl, false)
}

fn replica_with(url: &str, slice: i64, ttl: Duration, write_behind: bool) -> Arc<PgState> {
    PgState::connect(PgSettings { url: url.to_string(), pool_size: 8, lease_ttl: ttl, lease_slice: MicroUsd(slice), write_behind }).unwrap()
}

fn charge(amount: i64, opens: bool) -> Charge<'static> {
    Charge { provider: "p", request_id: "r", amount: MicroUsd(amount), opens_request: opens }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn charges_come_from_leased_slices_and_the_books_balance_to_the_micro_dollar() {
    let Some(pg) = PgServer::start() else { return };
    let limits = BudgetLimits { soft_stop: MicroUsd(900), hard_stop: MicroUsd(1_000) };
    let l = PgLedger::new(replica(&pg.url(), 300, Duration::from_secs(30)), limits);
    for _ in 0..7 {
        l.charge_async(&charge(100, true)).await.unwrap();
    }
    let r = l.reconciliation().await.unwrap();
    assert!(r.balanced, "{r:#?}");
    let g = &r.scopes[0];
    assert_eq!((g.scope.as_str(), g.charged, g.charges), ("global", 700, 7));
    assert!(g.spent + g.leased <= 1_000, "{g:?}");
    // The soft stop: a new request's first charge past 900 is refused, a hedge is not.
    l.charge_async(&charge(100, true)).await.unwrap();
    l.charge_async(&charge(100, true)).await.unwrap();
    let refused = l.charge_async(&charge(100, true)).await;
    assert!(matches!(refused, Err(LedgerError::BudgetExceeded { limit_name: "soft_stop", .. })), "{refused:?}");
    l.charge_async(&charge(100, false)).await.unwrap();
    let refused = l.charge_async(&charge(1, false)).await;
    assert!(matches!(refused, Err(LedgerError::BudgetExceeded { limit_name: "hard_stop", .. })), "{refused:?}");
    assert_eq!(l.summary().unwrap().total, MicroUsd(1_000));
    assert_eq!(l.summary().unwrap().charges, 10);
    l.return_leases().await.unwrap();
    let r = l.reconciliation().await.unwrap();
    assert!(r.balanced, "{r:#?}");
    assert_eq!((r.scopes[0].spent, r.scopes[0].leased, r.scopes[0].open_leases), (1_000, 0, 0));
    // A reconciliation moves the total, and the books still balance.
    l.reconcile("p", "r", MicroUsd(-50), "actual cost known").unwrap();
    let r = l.reconciliation().await.unwrap();
    assert!(r.balanced && r.scopes[0].spent == 950 && r.scopes[0].reconciled == -50, "{r:#?}");
}

/// The overspend race at the ledger: three replicas, 600 concurrent charges of random
/// sizes, a per-key budget and a global hard stop. Neither limit is ever crossed, the
/// budgets are used up to within one charge of each limit's reach, and the books balance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_and_600_concurrent_charges_never_overspend() {
    let Some(pg) = PgServer::start() else { return };
    let url = pg.url();
    let limits = BudgetLimits { soft_stop: MicroUsd(50_000), hard_stop: MicroUsd(50_000) };
    let replicas: Vec<PgLedger> = (0..3).map(|_| PgLedger::new(replica(&url, 5_000, Duration::from_secs(30)), limits)).collect();
    let key = Arc::new(Account { name: "team-a".into(), limit: Some(MicroUsd(20_000)) });
    let mut tasks = Vec::new();
    for i in 0..600u64 {
        let l = replicas[(i % 3) as usize].clone();
        let key = key.clone();
        tasks.push(tokio::spawn(async move {
            let amount = 50 + (i * 7919 % 251) as i64;
            let c = Charge { provider: "p", request_id: "r", amount: MicroUsd(amount), opens_request: i % 4 != 0 };
            let r = if i % 2 == 0 { l.charge_account_async(&c, &key).await } else { l.charge_async(&c).await };
            (i % 2 == 0, r.map(|_| amount))
        }));
    }
    let (mut keyed, mut total) = (0i64, 0i64);
    for t in tasks {
        let (is_key, r) = t.await.unwrap();
        match r {
            Ok(a) => {
                total += a;
                if is_key {
                    keyed += a;
                }
            }
            Err(LedgerError::BudgetExceeded { .. } | LedgerError::AccountBudgetExceeded { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert!(keyed <= 20_000 && total <= 50_000, "keyed {keyed}, total {total}");
    let r = replicas[0].reconciliation().await.unwrap();
    assert!(r.balanced, "{r:#?}");
    assert_eq!(r.scopes[0].charged, total, "the ledger holds exactly the charges that were let through");
    assert_eq!(replicas[0].account_spent("team-a").unwrap(), MicroUsd(keyed));
    for l in &replicas {
        l.return_leases().await.unwrap();
    }
    let r = replicas[0].reconciliation().await.unwrap();
    assert!(r.balanced && r.scopes.iter().all(|s| s.leased == 0), "{r:#?}");
    // With nothing leased any more, the budgets were used up to their last slices: a
    // charge of the largest size no longer fits one of them.
    assert!(total > 50_000 - 300 || keyed > 20_000 - 300, "keyed {keyed}, total {total}: budgets left unused");
    // The charges were group-committed: rows written in one transaction share its
    // timestamp, so there are fewer distinct timestamps than rows.
    let st = replicas[0].state().clone();
    let (rows, commits): (i64, i64) = replicas[0]
        .state()
        .run(async move {
            let c = st.client().await?;
            let r = c.query_one("SELECT count(*), count(DISTINCT ts) FROM ledger_entries WHERE kind = 'projected'", &[]).await?;
            Ok((r.get(0), r.get(1)))
        })
        .await
        .unwrap();
    assert!(commits < rows, "{rows} charge rows in {commits} commits: not batched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_replicas_lease_is_reclaimed_after_the_ttl_and_recorded() {
    let Some(pg) = PgServer::start() else { return };
    let url = pg.url();
    let limits = BudgetLimits { soft_stop: MicroUsd(10_000), hard_stop: MicroUsd(10_000) };
    let ttl = Duration::from_millis(900);
    let dead = PgLedger::new(replica(&url, 8_000, ttl), limits);
    dead.charge_async(&charge(1_000, true)).await.unwrap();
    let survivor = PgLedger::new(replica(&url, 8_000, ttl), limits);
    // The dead replica's slice is a quarter of the budget (2 500, of which 1 500 unused):
    // the survivor cannot take 8 000.
    assert!(survivor.charge_async(&charge(8_000, true)).await.is_err());
    let dead_id = dead.state().replica().to_string();
    drop(dead); // no drain: its heartbeat stops, as with kill -9
    let (claimed, reclaimed) = survivor.reclaim_dead().await.unwrap();
    assert!(claimed.is_empty() && reclaimed == MicroUsd::ZERO, "not before the TTL");
    tokio::time::sleep(ttl * 2).await;
    let (claimed, reclaimed) = survivor.reclaim_dead().await.unwrap();
    assert_eq!((claimed, reclaimed), (vec![dead_id], MicroUsd(1_500)));
    assert_eq!(survivor.reclaim_dead().await.unwrap().0.len(), 0, "claimed once");
    survivor.charge_async(&charge(8_000, true)).await.unwrap();
    let r = survivor.reconciliation().await.unwrap();
    assert!(r.balanced, "{r:#?}");
    assert_eq!((r.scopes[0].charged, r.scopes[0].reclaimed), (9_000, 1_500));
    let st = survivor.state().clone();
    let row: (i64, String) = survivor
        .state()
        .run(async move {
            let c = st.client().await?;
            let r = c.query_one("SELECT micro_usd, note FROM ledger_entries WHERE kind = 'reclaimed'", &[]).await?;
            Ok((r.get(0), r.get(1)))
        })
        .await
        .unwrap();
    assert_eq!(row.0, 1_500, "the ledger records the reclaim: {}", row.1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_run_once_when_replicas_start_together() {
    let Some(pg) = PgServer::start() else { return };
    let url = pg.url();
    let starts: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn({
                let url = url.clone();
                move || replica(&url, 100, Duration::from_secs(30))
            })
        })
        .collect();
    let states: Vec<Arc<PgState>> = starts.into_iter().map(|t| t.join().unwrap()).collect();
    let v = states[0].schema_version().await.unwrap();
    assert_eq!(v, crate::pg::MIGRATIONS.last().unwrap().version);
}

/// Group commit, as a property: any number of concurrent charges (random amounts, over
/// one to three replicas, some with a key's budget, slices small enough that leases close
/// and charges retry while batches are in flight) leave exactly one row per charge, and
/// the ledger's sums equal the charges' sums, globally and per key, to the micro-dollar.
#[test]
fn concurrent_charges_leave_one_row_each_and_the_sums_agree() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    let Some(pg) = PgServer::start() else { return };
    let case = std::sync::atomic::AtomicUsize::new(0);
    let strategy = (prop::collection::vec((1i64..5_000, any::<bool>()), 1..160), 1usize..=3, 2_000i64..40_000, any::<bool>());
    let mut runner = TestRunner::new(Config { cases: 6, failure_persistence: None, ..Config::default() });
    runner
        .run(&strategy, |(charges, replicas, slice, write_behind)| {
            let url = pg.database(&format!("group_{}", case.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
            let (want_total, want_keyed, r) = rt.block_on(async {
                let limits = BudgetLimits { soft_stop: MicroUsd(1_000_000_000), hard_stop: MicroUsd(1_000_000_000) };
                let ledgers: Vec<PgLedger> = (0..replicas)
                    .map(|_| PgLedger::new(replica_with(&url, slice, Duration::from_secs(30), write_behind), limits))
                    .collect();
                let key = Arc::new(Account { name: "k".into(), limit: Some(MicroUsd(1_000_000_000)) });
                let tasks: Vec<_> = charges
                    .iter()
                    .enumerate()
                    .map(|(i, &(amount, keyed))| {
                        let (l, key) = (ledgers[i % replicas].clone(), key.clone());
                        tokio::spawn(async move {
                            let rid = format!("r{i}");
                            let c = Charge { provider: "p", request_id: &rid, amount: MicroUsd(amount), opens_request: i % 3 != 0 };
                            if keyed {
                                l.charge_account_async(&c, &key).await
                            } else {
                                l.charge_async(&c).await
                            }
                        })
                    })
                    .collect();
                for t in tasks {
                    t.await.unwrap().unwrap();
                }
                for l in &ledgers {
                    assert!(l.flush(Duration::from_secs(30)).await, "rows written behind still queued");
                }
                // Slices replaced while their charges were in flight are closed once
                // those are written: soon at most one open lease per replica and budget.
                let until = std::time::Instant::now() + Duration::from_secs(10);
                let mut r = ledgers[0].reconciliation().await.unwrap();
                while r.scopes.iter().any(|s| s.open_leases > replicas as i64) && std::time::Instant::now() < until {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    r = ledgers[0].reconciliation().await.unwrap();
                }
                let total: i64 = charges.iter().map(|c| c.0).sum();
                let keyed: i64 = charges.iter().filter(|c| c.1).map(|c| c.0).sum();
                (total, keyed, r)
            });
            prop_assert!(r.balanced, "{r:#?}");
            prop_assert!(r.scopes.iter().all(|s| s.open_leases <= replicas as i64), "replaced slices left open: {r:#?}");
            let g = &r.scopes[0];
            prop_assert_eq!((g.charges, g.charged), (charges.len() as i64, want_total));
            let k = r.scopes.iter().find(|s| s.scope == "account:k");
            let keyed_n = charges.iter().filter(|c| c.1).count() as i64;
            prop_assert_eq!(k.map_or((0, 0), |k| (k.charges, k.charged)), (keyed_n, want_keyed));
            Ok(())
        })
        .unwrap();
}

/// `write_behind`: a charge returns while its row cannot be written yet (another session
/// holds the ledger table locked), and a clean drain writes every queued row before it
/// returns the lease, so the books hold every charge, one row each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn written_behind_charges_do_not_wait_for_their_rows_and_a_drain_writes_them_all() {
    let Some(pg) = PgServer::start() else { return };
    let url = pg.url();
    let limits = BudgetLimits { soft_stop: MicroUsd(1_000_000), hard_stop: MicroUsd(1_000_000) };
    let l = PgLedger::new(replica_with(&url, 100_000, Duration::from_secs(30), true), limits);
    let key = Account { name: "k".into(), limit: Some(MicroUsd(1_000_000)) };
    l.charge_account_async(&charge(10, true), &key).await.unwrap(); // takes the leases
    assert!(l.flush(Duration::from_secs(10)).await);
    let (locker, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    locker.batch_execute("BEGIN; LOCK TABLE ledger_entries IN EXCLUSIVE MODE").await.unwrap();
    let started = std::time::Instant::now();
    for _ in 0..50 {
        l.charge_account_async(&charge(10, true), &key).await.unwrap();
    }
    let took = started.elapsed();
    assert!(took < Duration::from_millis(900), "the charges waited for their rows: {took:?}");
    assert!(!l.flush(Duration::from_millis(300)).await, "rows were written through the table lock");
    let unlock = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(700)).await;
        locker.batch_execute("COMMIT").await.unwrap();
    });
    l.return_leases().await.unwrap();
    let r = l.reconciliation().await.unwrap();
    assert!(r.balanced, "{r:#?}");
    for s in &r.scopes {
        assert_eq!((s.charges, s.charged, s.leased, s.open_leases), (51, 510, 0, 0), "{r:#?}");
        assert_eq!(s.spent, 510, "every queued row counted when its lease was returned: {r:#?}");
    }
    unlock.await.unwrap();
}
