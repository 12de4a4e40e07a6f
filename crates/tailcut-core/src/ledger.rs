//! The cost ledger and its budget gates.
//!
//! Every submission is charged its *projected* cost before it is sent. The charge and
//! the limit check happen in one atomic step, so concurrent requests (and concurrent
//! processes sharing one SQLite file) can never push the total past the hard stop.
//! Two limits:
//!
//! - `soft_stop`: no **new** request may start once its first submission would cross it;
//!   hedges of requests already in flight may still launch, so no request is stranded
//!   half-raced at the soft stop;
//! - `hard_stop`: no submission of any kind may cross it.
//!
//! A charge may also name an [`Account`] (the gateway's per-key budgets): its spend is
//! kept in the same ledger, and its limit is checked and its total moved in the same
//! atomic step as the global ones, so a key's spend survives reloads, restarts and
//! `kill -9` exactly as the global spend does, and neither limit can be crossed by a
//! charge the other refused.
//!
//! [`MemoryLedger`] keeps totals in process (demo, benchmarks, `":memory:"`). The durable
//! ledgers implement [`BudgetGate`] in the `tailcut-state` crate: `SqliteLedger` (WAL
//! mode, `BEGIN IMMEDIATE` transactions, one row per charge) and `PgLedger`, the ledger
//! gateway replicas share on PostgreSQL (budget slices leased per replica and charged
//! locally, so no number of replicas can overspend). They check a charge with
//! [`check`] and [`check_account`], as the memory ledger does.

use crate::money::MicroUsd;
use serde::Serialize;
use std::fmt;
use std::sync::Mutex;

/// The spending limits a ledger enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct BudgetLimits {
    /// New requests are refused once this would be crossed.
    pub soft_stop: MicroUsd,
    /// No submission may cross this.
    pub hard_stop: MicroUsd,
}

impl BudgetLimits {
    /// Effectively unlimited.
    pub const UNLIMITED: BudgetLimits = BudgetLimits { soft_stop: MicroUsd(i64::MAX), hard_stop: MicroUsd(i64::MAX) };
}

/// One projected charge, made before a submission.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Charge<'a> {
    /// Provider the submission goes to.
    pub provider: &'a str,
    /// Request it belongs to.
    pub request_id: &'a str,
    /// Projected cost.
    pub amount: MicroUsd,
    /// True for a request's first submission (subject to the soft stop).
    pub opens_request: bool,
}

/// A spending account inside the ledger (the gateway's API keys, by name), charged
/// together with the global limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    /// The account's name (unique: spend is kept under it).
    pub name: String,
    /// No submission may take the account's total past this (None: recorded, never refused).
    pub limit: Option<MicroUsd>,
}

/// Why a ledger refused or failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum LedgerError {
    /// The charge would cross a limit; nothing was recorded.
    #[error("budget exceeded: {limit_name} {limit} would be crossed (spent {spent}, this submission {requested})")]
    BudgetExceeded {
        /// `soft_stop` or `hard_stop`.
        limit_name: &'static str,
        /// The limit.
        limit: MicroUsd,
        /// Total already committed.
        spent: MicroUsd,
        /// The refused charge.
        requested: MicroUsd,
    },
    /// The charge would cross an account's limit; nothing was recorded (globally either).
    #[error("budget exceeded: the budget {limit} of `{account}` would be crossed (spent {spent}, this submission {requested})")]
    AccountBudgetExceeded {
        /// The account.
        account: String,
        /// Its limit.
        limit: MicroUsd,
        /// What it has spent.
        spent: MicroUsd,
        /// The refused charge.
        requested: MicroUsd,
    },
    /// The store failed; the charge was not recorded and the submission must not go out.
    #[error("ledger storage error: ledger lock poisoned")]
    LockPoisoned,
    /// The store's writer thread is gone; the charge was not recorded.
    #[error("ledger storage error: the ledger writer has stopped")]
    WriterStopped,
    /// The writer thread could not be started.
    #[error("ledger storage error: cannot start the ledger writer thread: {reason}")]
    WriterThread {
        /// The operating system's error.
        reason: String,
    },
    /// The database refused or failed a statement.
    #[error("ledger storage error: {reason}")]
    Database {
        /// `sqlite` or `postgres`.
        backend: &'static str,
        /// The driver's error.
        reason: String,
    },
    /// A budget lease kept closing under a charge.
    #[error("ledger storage error: could not hold a budget lease long enough to charge (leases closed repeatedly)")]
    LeaseLost,
    /// A batched charge came back without its outcome.
    #[error("ledger storage error: a batch of one charge gave no outcome")]
    NoOutcome,
}

/// Totals a ledger reports.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LedgerSummary {
    /// Sum of all projected charges plus reconciliations.
    pub total: MicroUsd,
    /// Number of charges recorded.
    pub charges: u64,
    /// Totals per provider.
    pub by_provider: Vec<(String, MicroUsd)>,
}

/// Charges projected costs against limits, atomically.
pub trait BudgetGate: Send + Sync + fmt::Debug {
    /// Records the charge if it fits under the limits; otherwise refuses it with
    /// [`LedgerError::BudgetExceeded`] and records nothing.
    fn charge(&self, charge: &Charge<'_>) -> Result<MicroUsd, LedgerError>;

    /// Records a correction once actual spend is known (may be negative). Never refused.
    fn reconcile(&self, provider: &str, request_id: &str, delta: MicroUsd, note: &str) -> Result<(), LedgerError>;

    /// Current totals.
    fn summary(&self) -> Result<LedgerSummary, LedgerError>;

    /// Records the charge against the global limits and `account`'s limit in one atomic
    /// step: both totals move, or (refused by either) neither does.
    fn charge_account(&self, charge: &Charge<'_>, account: &Account) -> Result<MicroUsd, LedgerError>;

    /// Records a correction to the global total and `account`'s total in one step.
    fn reconcile_account(&self, provider: &str, request_id: &str, delta: MicroUsd, note: &str, account: &str) -> Result<(), LedgerError>;

    /// What `account` has spent (projected charges plus reconciliations).
    fn account_spent(&self, account: &str) -> Result<MicroUsd, LedgerError>;

    /// [`BudgetGate::charge`] for async callers (the engine charges every launch through
    /// this). A ledger that waits on a network round trip (PostgreSQL) overrides it so no
    /// serving thread blocks; the default charges synchronously.
    fn charge_async<'a>(&'a self, charge: &'a Charge<'a>) -> ChargeFuture<'a> {
        Box::pin(std::future::ready(self.charge(charge)))
    }

    /// [`BudgetGate::charge_account`] for async callers.
    fn charge_account_async<'a>(&'a self, charge: &'a Charge<'a>, account: &'a Account) -> ChargeFuture<'a> {
        Box::pin(std::future::ready(self.charge_account(charge, account)))
    }
}

/// What [`BudgetGate::charge_async`] returns: the total after the charge, or the refusal.
pub type ChargeFuture<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<MicroUsd, LedgerError>> + Send + 'a>>;

/// Refuses `charge` if it would take `account` (which has `spent`) past its limit.
pub fn check_account(account: &Account, spent: MicroUsd, charge: &Charge<'_>) -> Result<(), LedgerError> {
    match account.limit {
        Some(limit) if spent + charge.amount > limit => {
            Err(LedgerError::AccountBudgetExceeded { account: account.name.clone(), limit, spent, requested: charge.amount })
        }
        _ => Ok(()),
    }
}

/// Refuses `charge` if it would cross `limits` with `spent` already committed: the hard
/// stop always, the soft stop for a request's first submission.
pub fn check(limits: &BudgetLimits, spent: MicroUsd, charge: &Charge<'_>) -> Result<(), LedgerError> {
    let after = spent + charge.amount;
    if after > limits.hard_stop {
        return Err(LedgerError::BudgetExceeded { limit_name: "hard_stop", limit: limits.hard_stop, spent, requested: charge.amount });
    }
    if charge.opens_request && after > limits.soft_stop {
        return Err(LedgerError::BudgetExceeded { limit_name: "soft_stop", limit: limits.soft_stop, spent, requested: charge.amount });
    }
    Ok(())
}

// === impl MemoryLedger ===

/// An in-process ledger (lost on exit). Used by the demo and benchmarks.
#[derive(Debug)]
pub struct MemoryLedger {
    limits: BudgetLimits,
    state: Mutex<MemoryState>,
}

#[derive(Debug, Default)]
struct MemoryState {
    total: MicroUsd,
    charges: u64,
    by_provider: std::collections::BTreeMap<String, MicroUsd>,
    accounts: std::collections::HashMap<String, MicroUsd>,
}

impl MemoryState {
    fn record(&mut self, charge: &Charge<'_>) -> MicroUsd {
        self.total += charge.amount;
        self.charges += 1;
        match self.by_provider.get_mut(charge.provider) {
            Some(v) => *v += charge.amount,
            None => {
                self.by_provider.insert(charge.provider.to_string(), charge.amount);
            }
        }
        self.total
    }
}

impl MemoryLedger {
    /// An empty ledger with these limits.
    pub fn new(limits: BudgetLimits) -> MemoryLedger {
        MemoryLedger { limits, state: Mutex::new(MemoryState::default()) }
    }
}

impl BudgetGate for MemoryLedger {
    fn charge(&self, charge: &Charge<'_>) -> Result<MicroUsd, LedgerError> {
        let mut s = self.state.lock().map_err(|_| LedgerError::LockPoisoned)?;
        check(&self.limits, s.total, charge)?;
        Ok(s.record(charge))
    }

    fn charge_account(&self, charge: &Charge<'_>, account: &Account) -> Result<MicroUsd, LedgerError> {
        let mut s = self.state.lock().map_err(|_| LedgerError::LockPoisoned)?;
        check(&self.limits, s.total, charge)?;
        let spent = s.accounts.get(&account.name).copied().unwrap_or_default();
        check_account(account, spent, charge)?;
        s.accounts.insert(account.name.clone(), spent + charge.amount);
        Ok(s.record(charge))
    }

    fn reconcile_account(&self, provider: &str, _request_id: &str, delta: MicroUsd, _note: &str, account: &str) -> Result<(), LedgerError> {
        let mut s = self.state.lock().map_err(|_| LedgerError::LockPoisoned)?;
        s.total += delta;
        *s.by_provider.entry(provider.to_string()).or_default() += delta;
        *s.accounts.entry(account.to_string()).or_default() += delta;
        Ok(())
    }

    fn account_spent(&self, account: &str) -> Result<MicroUsd, LedgerError> {
        let s = self.state.lock().map_err(|_| LedgerError::LockPoisoned)?;
        Ok(s.accounts.get(account).copied().unwrap_or_default())
    }

    fn reconcile(&self, provider: &str, _request_id: &str, delta: MicroUsd, _note: &str) -> Result<(), LedgerError> {
        let mut s = self.state.lock().map_err(|_| LedgerError::LockPoisoned)?;
        s.total += delta;
        *s.by_provider.entry(provider.to_string()).or_default() += delta;
        Ok(())
    }

    fn summary(&self) -> Result<LedgerSummary, LedgerError> {
        let s = self.state.lock().map_err(|_| LedgerError::LockPoisoned)?;
        Ok(LedgerSummary { total: s.total, charges: s.charges, by_provider: s.by_provider.iter().map(|(k, v)| (k.clone(), *v)).collect() })
    }
}
