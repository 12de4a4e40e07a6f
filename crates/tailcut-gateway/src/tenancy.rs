//! Tenants: API keys (stored as SHA-256), per-key token-bucket rate limits and per-key
//! budgets charged through the core ledger alongside the global one; and the per-route
//! hedge-load cap.

use sha2::{Digest, Sha256};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
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
/// in the spirit of "The Tail at Scale" and gRPC's retry throttling.
#[derive(Debug)]
pub struct SlidingHedgeGate {
    percent: f64,
    burst: u32,
    window: Duration,
    events: Mutex<(VecDeque<Instant>, VecDeque<Instant>)>,
}

impl SlidingHedgeGate {
    /// A cap of `percent`% with `burst` extra attempts always allowed, over 60 s.
    pub fn new(percent: f64, burst: u32) -> SlidingHedgeGate {
        SlidingHedgeGate { percent, burst, window: Duration::from_secs(60), events: Mutex::new((VecDeque::new(), VecDeque::new())) }
    }

    fn prune(&self, q: &mut VecDeque<Instant>, now: Instant) {
        while q.front().is_some_and(|t| now.duration_since(*t) > self.window) {
            q.pop_front();
        }
    }
}

impl HedgeGate for SlidingHedgeGate {
    fn request_started(&self) {
        if let Ok(mut e) = self.events.lock() {
            let now = Instant::now();
            e.0.push_back(now);
            let (reqs, _) = &mut *e;
            while reqs.front().is_some_and(|t| now.duration_since(*t) > self.window) {
                reqs.pop_front();
            }
        }
    }

    fn try_extra(&self) -> bool {
        let Ok(mut e) = self.events.lock() else { return false };
        let now = Instant::now();
        let (reqs, extras) = &mut *e;
        self.prune(reqs, now);
        self.prune(extras, now);
        let allowed = f64::from(self.burst) + self.percent / 100.0 * reqs.len() as f64;
        if (extras.len() as f64) < allowed {
            extras.push_back(now);
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
    fn bucket_limits_rate() {
        let b = Bucket::new(5.0);
        let ok = (0..20).filter(|_| b.take()).count();
        assert_eq!(ok, 5);
    }
}
