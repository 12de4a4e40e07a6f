//! Tenants: API keys (stored as SHA-256), per-key token-bucket rate limits and per-key
//! budgets charged through the core ledger alongside the global one; and the per-route
//! hedge-load cap.

use sha2::{Digest, Sha256};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tailcut_core::engine::HedgeGate;
use tailcut_core::ledger::{BudgetGate, BudgetLimits, Charge, LedgerError, LedgerSummary, MemoryLedger};
use tailcut_core::MicroUsd;

/// Lowercase hex SHA-256.
pub fn sha256_hex(key: &str) -> String {
    Sha256::digest(key.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// A token bucket.
#[derive(Debug)]
pub struct Bucket {
    rate: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl Bucket {
    /// `rate` tokens per second, holding at most `burst`.
    pub fn new(rate: f64) -> Bucket {
        let burst = rate.max(1.0);
        Bucket { rate, burst, state: Mutex::new((burst, Instant::now())) }
    }

    /// Takes a token if one is available.
    pub fn take(&self) -> bool {
        let Ok(mut s) = self.state.lock() else { return false };
        let now = Instant::now();
        let refill = now.duration_since(s.1).as_secs_f64() * self.rate;
        s.0 = (s.0 + refill).min(self.burst);
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
    /// Budget.
    pub ledger: Option<Arc<MemoryLedger>>,
    /// Allowed routes (None: all).
    pub routes: Option<Vec<String>>,
}

tokio::task_local! {
    /// The current request's tenant ledger (charged together with the global one).
    pub static TENANT_LEDGER: Option<Arc<MemoryLedger>>;
}

/// Charges the tenant's ledger (if any) and the global ledger, both or neither.
#[derive(Debug)]
pub struct TenantGate {
    /// The global ledger.
    pub global: Arc<dyn BudgetGate>,
}

impl BudgetGate for TenantGate {
    fn charge(&self, charge: &Charge<'_>) -> Result<MicroUsd, LedgerError> {
        let tenant = TENANT_LEDGER.try_with(|t| t.clone()).ok().flatten();
        if let Some(t) = &tenant {
            t.charge(charge)?;
        }
        match self.global.charge(charge) {
            Ok(total) => Ok(total),
            Err(e) => {
                if let Some(t) = &tenant {
                    let _ = t.reconcile(charge.provider, charge.request_id, MicroUsd(-charge.amount.0), "refund: global budget refused");
                }
                Err(e)
            }
        }
    }

    fn reconcile(&self, provider: &str, request_id: &str, delta: MicroUsd, note: &str) -> Result<(), LedgerError> {
        self.global.reconcile(provider, request_id, delta, note)
    }

    fn summary(&self) -> Result<LedgerSummary, LedgerError> {
        self.global.summary()
    }
}

impl Tenant {
    /// A tenant from config.
    pub fn new(name: &str, rate: Option<f64>, budget_usd: Option<f64>, routes: Option<Vec<String>>) -> Tenant {
        Tenant {
            name: name.to_string(),
            bucket: rate.map(Bucket::new),
            ledger: budget_usd.map(|b| {
                let m = MicroUsd::from_usd(b);
                Arc::new(MemoryLedger::new(BudgetLimits { soft_stop: m, hard_stop: m }))
            }),
            routes,
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
        let window = Window { second: [u64::MAX; WINDOW_S], requests: [0; WINDOW_S], extras: [0; WINDOW_S] };
        SlidingHedgeGate { percent, burst, started: Instant::now(), window: Mutex::new(window) }
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
        let allowed = f64::from(self.burst) + self.percent / 100.0 * requests as f64;
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
    fn bucket_limits_rate() {
        let b = Bucket::new(5.0);
        let ok = (0..20).filter(|_| b.take()).count();
        assert_eq!(ok, 5);
    }
}
