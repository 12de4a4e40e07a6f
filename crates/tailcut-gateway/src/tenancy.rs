//! Tenants: API keys (stored as SHA-256), per-key token-bucket rate limits, per-key
//! budgets and per-key caps on running jobs; and the per-route hedge-load cap.
//!
//! A key's budget is an [`Account`] in the gateway's one ledger (the SQLite file of
//! `budget.ledger`, or memory for `":memory:"`), kept under the key's name: the key's
//! requests race with it in their `RunScope`, so each submission is checked against and
//! charged to the key's account and the global limits in one transaction
//! ([`BudgetGate::charge_account`](tailcut_core::ledger::BudgetGate::charge_account)), and a key's spend survives `SIGHUP` reloads, restarts
//! and `kill -9` exactly as the global spend does.

use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tailcut_core::engine::HedgeGate;
use tailcut_core::ledger::Account;
use tailcut_core::MicroUsd;
use tokio::time::Instant;

/// Lowercase hex SHA-256.
pub fn sha256_hex(key: &str) -> String {
    Sha256::digest(key.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// How many gateway replicas share the limits: 1 for one gateway; on PostgreSQL, the
/// live replicas counted at each heartbeat (`PgState::live_replicas`). A limit shared by
/// N replicas gives each 1/N of it (see docs/replicas.md for the tolerance).
pub type Replicas = Arc<AtomicUsize>;

/// One replica alone.
pub fn single_replica() -> Replicas {
    Arc::new(AtomicUsize::new(1))
}

fn share(replicas: &Replicas) -> f64 {
    replicas.load(Ordering::Relaxed).max(1) as f64
}

/// A token bucket.
#[derive(Debug)]
pub struct Bucket {
    rate: f64,
    burst: f64,
    replicas: Replicas,
    state: Mutex<(f64, Instant)>,
}

impl Bucket {
    /// `rate` tokens per second, holding at most `burst`.
    pub fn new(rate: f64) -> Bucket {
        Bucket::shared(rate, single_replica())
    }

    /// `rate` tokens per second across `replicas`: this one refills at `rate / N` and
    /// holds at most `burst / N` (at least one token).
    pub fn shared(rate: f64, replicas: Replicas) -> Bucket {
        let burst = rate.max(1.0);
        let start = (burst / share(&replicas)).max(1.0);
        Bucket { rate, burst, replicas, state: Mutex::new((start, Instant::now())) }
    }

    /// Takes a token if one is available.
    pub fn take(&self) -> bool {
        let Ok(mut s) = self.state.lock() else { return false };
        let now = Instant::now();
        let n = share(&self.replicas);
        let refill = now.duration_since(s.1).as_secs_f64() * self.rate / n;
        s.0 = (s.0 + refill).min((self.burst / n).max(1.0));
        s.1 = now;
        if s.0 >= 1.0 {
            s.0 -= 1.0;
            true
        } else {
            false
        }
    }
}

/// One tenant.
#[derive(Debug)]
pub struct Tenant {
    /// Name.
    pub name: String,
    /// Rate limit.
    pub bucket: Option<Bucket>,
    /// The key's account in the gateway's ledger, when it has a budget (charged with the
    /// global limits on each launch of the key's races: their `RunScope`'s account).
    pub ledger: Option<Arc<Account>>,
    /// Allowed routes (None: all).
    pub routes: Option<Vec<String>>,
    /// May open the status page (`/ui`).
    pub admin: bool,
    /// Most jobs the key may have running at once (None: no cap of its own).
    pub max_running_jobs: Option<usize>,
}

/// How many jobs each key has running, by key name: kept by the process (not a
/// configuration), so a reload neither forgets running jobs nor lets a key start more.
#[derive(Debug, Default)]
pub struct RunningJobs {
    counts: Mutex<std::collections::HashMap<String, usize>>,
}

/// One running job of a key: its count goes down when this drops.
#[derive(Debug)]
pub struct RunningJob {
    jobs: Arc<RunningJobs>,
    key: String,
}

impl RunningJobs {
    /// A slot for one more running job of `key`, unless it already has `cap`.
    pub fn start(self: &Arc<Self>, key: &str, cap: usize) -> Option<RunningJob> {
        let mut counts = self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = counts.entry(key.to_string()).or_insert(0);
        if *n >= cap {
            return None;
        }
        *n += 1;
        Some(RunningJob { jobs: self.clone(), key: key.to_string() })
    }

    /// Jobs `key` has running.
    pub fn running(&self, key: &str) -> usize {
        self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(key).copied().unwrap_or(0)
    }
}

impl Drop for RunningJob {
    fn drop(&mut self) {
        let mut counts = self.jobs.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = counts.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.key);
            }
        }
    }
}

impl Tenant {
    /// A tenant from config. A key with a budget gets an account under its name (names
    /// are unique, checked at load), so its spend is found again after a reload or restart.
    pub fn new(name: &str, rate: Option<f64>, budget_usd: Option<f64>, routes: Option<Vec<String>>) -> Tenant {
        Tenant::shared(name, rate, budget_usd, routes, &single_replica())
    }

    /// [`Tenant::new`] for a gateway of `replicas` replicas: its rate limit is shared
    /// among them.
    pub fn shared(name: &str, rate: Option<f64>, budget_usd: Option<f64>, routes: Option<Vec<String>>, replicas: &Replicas) -> Tenant {
        Tenant {
            name: name.to_string(),
            bucket: rate.map(|r| Bucket::shared(r, replicas.clone())),
            ledger: budget_usd.map(|b| Arc::new(Account { name: name.to_string(), limit: Some(MicroUsd::from_usd(b)) })),
            routes,
            admin: false,
            max_running_jobs: None,
        }
    }
}

/// At most `percent`% extra attempts over the last minute (plus a burst allowance),
/// in the spirit of "The Tail at Scale" and gRPC's retry throttling. Requests and extra
/// attempts are counted per second over a 60-second window, so memory and the cost per
/// request stay constant at any rate.
#[derive(Debug)]
pub struct SlidingHedgeGate {
    percent: f64,
    burst: u32,
    replicas: Replicas,
    started: Instant,
    window: Mutex<Window>,
}

/// Seconds in the window.
const WINDOW_S: usize = 60;

/// Per-second counts; slot `i` holds second `second[i]` (since the gate started).
#[derive(Debug)]
struct Window {
    second: [u64; WINDOW_S],
    requests: [u64; WINDOW_S],
    extras: [u64; WINDOW_S],
}

impl Window {
    /// The slot for second `now`, emptied first if it held an older second.
    fn slot(&mut self, now: u64) -> usize {
        let i = (now % WINDOW_S as u64) as usize;
        if self.second[i] != now {
            self.second[i] = now;
            self.requests[i] = 0;
            self.extras[i] = 0;
        }
        i
    }

    /// Requests and extra attempts over the window ending at second `now`.
    fn totals(&self, now: u64) -> (u64, u64) {
        (0..WINDOW_S)
            .filter(|&i| self.second[i] <= now && now - self.second[i] < WINDOW_S as u64)
            .fold((0, 0), |(r, e), i| (r + self.requests[i], e + self.extras[i]))
    }
}

impl SlidingHedgeGate {
    /// A cap of `percent`% with `burst` extra attempts always allowed, over 60 s.
    pub fn new(percent: f64, burst: u32) -> SlidingHedgeGate {
        SlidingHedgeGate::shared(percent, burst, single_replica())
    }

    /// The cap across `replicas`: the percentage holds as it is (each replica keeps its
    /// extras within `percent` of its own requests, so all replicas together keep theirs
    /// within `percent` of all requests); the burst is divided among them.
    pub fn shared(percent: f64, burst: u32, replicas: Replicas) -> SlidingHedgeGate {
        let window = Window { second: [u64::MAX; WINDOW_S], requests: [0; WINDOW_S], extras: [0; WINDOW_S] };
        SlidingHedgeGate { percent, burst, replicas, started: Instant::now(), window: Mutex::new(window) }
    }

    fn now(&self) -> u64 {
        self.started.elapsed().as_secs()
    }
}

impl HedgeGate for SlidingHedgeGate {
    fn request_started(&self) {
        let now = self.now();
        if let Ok(mut w) = self.window.lock() {
            let i = w.slot(now);
            w.requests[i] += 1;
        }
    }

    fn try_extra(&self) -> bool {
        let now = self.now();
        let Ok(mut w) = self.window.lock() else { return false };
        let i = w.slot(now);
        let (requests, extras) = w.totals(now);
        let allowed = f64::from(self.burst) / share(&self.replicas) + self.percent / 100.0 * requests as f64;
        if (extras as f64) < allowed {
            w.extras[i] += 1;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha_matches_sha256sum() {
        assert_eq!(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn hedge_gate_allows_burst_then_percent() {
        let g = SlidingHedgeGate::new(10.0, 2);
        for _ in 0..100 {
            g.request_started();
        }
        let allowed = (0..50).filter(|_| g.try_extra()).count();
        assert_eq!(allowed, 12, "2 burst + 10% of 100");
    }

    #[test]
    fn the_window_forgets_seconds_older_than_a_minute() {
        let mut w = Window { second: [u64::MAX; WINDOW_S], requests: [0; WINDOW_S], extras: [0; WINDOW_S] };
        for now in [0, 1, 59] {
            let i = w.slot(now);
            w.requests[i] += 10;
        }
        assert_eq!(w.totals(59), (30, 0));
        assert_eq!(w.totals(60), (20, 0), "second 0 left the window");
        let i = w.slot(61); // reuses second 1's slot
        w.extras[i] += 1;
        assert_eq!(w.totals(61), (10, 1));
        assert_eq!(w.totals(200), (0, 0));
    }

    #[test]
    fn a_tenants_account_is_charged_with_the_global_limits_and_survives_a_restart() {
        use tailcut_core::ledger::{BudgetGate, BudgetLimits, Charge, LedgerError};
        use tailcut_state::ledger::SqliteLedger;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.sqlite");
        let limits = BudgetLimits { soft_stop: MicroUsd(1_000_000), hard_stop: MicroUsd(1_000_000) };
        let charge = |amount| Charge { provider: "p", request_id: "r", amount: MicroUsd(amount), opens_request: true };
        {
            let tenant = Tenant::new("team-a", None, Some(0.05), None);
            let gate = SqliteLedger::open(&path, limits).unwrap();
            gate.charge_account(&charge(30_000), tenant.ledger.as_deref().unwrap()).unwrap();
            // A race without a tenant's account: the global limits only.
            gate.charge(&charge(1)).unwrap();
        }
        // A restart (or a reload: a new ledger over the same file) still counts the key's spend.
        let gate = SqliteLedger::open(&path, limits).unwrap();
        let tenant = Tenant::new("team-a", None, Some(0.05), None);
        let account = tenant.ledger.as_deref().unwrap();
        let refused = gate.charge_account(&charge(30_000), account);
        assert!(matches!(refused, Err(LedgerError::AccountBudgetExceeded { .. })), "{refused:?}");
        assert_eq!(gate.summary().unwrap().total, MicroUsd(30_001), "a refused charge moves no total");
        gate.charge_account(&charge(20_000), account).unwrap();
        assert_eq!(gate.account_spent("team-a").unwrap(), MicroUsd(50_000));
    }

    #[test]
    fn limits_shared_by_replicas_give_each_its_share() {
        let replicas = single_replica();
        replicas.store(4, Ordering::Relaxed);
        let b = Bucket::shared(20.0, replicas.clone());
        assert_eq!((0..40).filter(|_| b.take()).count(), 5, "a quarter of the burst on each of 4 replicas");
        let g = SlidingHedgeGate::shared(10.0, 8, replicas);
        for _ in 0..100 {
            g.request_started();
        }
        assert_eq!((0..50).filter(|_| g.try_extra()).count(), 12, "8/4 burst + 10% of this replica's 100 requests");
    }

    #[test]
    fn bucket_limits_rate() {
        let b = Bucket::new(5.0);
        let ok = (0..20).filter(|_| b.take()).count();
        assert_eq!(ok, 5);
    }
}
