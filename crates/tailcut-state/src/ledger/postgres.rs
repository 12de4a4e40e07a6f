//! The ledger gateway replicas share on PostgreSQL (feature `postgres`): budgets leased in
//! slices, charged locally, every charge one durable row.
//!
//! How no number of replicas can overspend:
//!
//! - A budget (`global`, or `account:NAME` for a key) is a row of `budget_scopes` with
//!   `spent` (charges of closed leases, plus reconciliations) and `leased` (granted on
//!   open leases). A replica takes a slice with one statement that reads and moves the
//!   row under its row lock, and only while `limit - spent - leased` covers the charge:
//!   so `spent + leased <= limit` always holds, whatever the number of replicas.
//! - A replica charges a submission against its open slice under a local lock (no
//!   database lock per request), then writes the charge's row (`projected`, naming its
//!   lease) before the submission goes out. The row is written only while the lease is
//!   open (`FOR SHARE` on the lease), so a charge can never land on a closed lease.
//! - Closing a lease (`FOR UPDATE` on it: it waits for charges being written) adds the
//!   sum of its charge rows to `spent` and gives back the rest of the slice: `returned`
//!   by its replica (on drain, or when it takes a new slice), `reclaimed` by a survivor
//!   once the replica has been dead for the lease TTL. Both are recorded as ledger rows.
//! - Slices shrink as the budget runs out (at most a quarter of what is left, never less
//!   than the charge), so replicas still get slices near the limit. What another replica
//!   holds is not available to this one: near the limit a charge may be refused while
//!   other replicas still hold unused slices ("spent" lags "reserved"); it is never let
//!   through past the limit.
//! - The soft stop: a slice records how much of it was granted below the soft stop
//!   (`soft_room`); a request's first submission is charged only from that part.
//!
//! [`PgLedger::reconciliation`] shows every micro-dollar: per budget, what was charged,
//! reconciled, leased, returned and reclaimed, and whether the totals agree.

use super::ReconcileEntry;
use crate::pg::commit::{close_lease, ChargeRow, InFlight, Written, GLOBAL};
use crate::pg::{PgError, PgState, Slice};
use tailcut_core::ledger::{Account, BudgetGate, BudgetLimits, Charge, ChargeFuture, LedgerError, LedgerSummary};
use tailcut_core::MicroUsd;
mod behind;
mod books;

use books::reconciliation;
pub use books::{Reconciliation, ScopeReconciliation};
use std::fmt;
use std::sync::Arc;

fn account_scope(name: &str) -> String {
    format!("account:{name}")
}

fn storage(e: PgError) -> LedgerError {
    match e {
        PgError::Ledger(e) => e,
        e => LedgerError::Database { backend: "postgres", reason: e.to_string() },
    }
}

/// A ledger on PostgreSQL shared by any number of gateway replicas.
#[derive(Clone)]
pub struct PgLedger {
    state: Arc<PgState>,
    limits: BudgetLimits,
}

impl fmt::Debug for PgLedger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgLedger").field("replica", &self.state.replica()).field("limits", &self.limits).finish()
    }
}

impl PgLedger {
    /// The ledger on `state` with these global limits.
    pub fn new(state: Arc<PgState>, limits: BudgetLimits) -> PgLedger {
        PgLedger { state, limits }
    }

    /// The limits in force.
    pub fn limits(&self) -> BudgetLimits {
        self.limits
    }

    /// The state it runs on.
    pub fn state(&self) -> &Arc<PgState> {
        &self.state
    }

    async fn charge_in(&self, charge: &Charge<'_>, account: Option<&Account>) -> Result<MicroUsd, LedgerError> {
        let amount = charge.amount.0;
        let limited = account.and_then(|a| a.limit.map(|l| (account_scope(&a.name), l)));
        for _ in 0..8 {
            // Until its row is written, the leases it names are not closed by a refill.
            let Some((lease, account_lease, in_flight)) =
                self.take_or_refill(amount, charge.opens_request, limited.as_ref(), account).await?
            else {
                continue;
            };
            let row = ChargeRow {
                provider: charge.provider.to_string(),
                request_id: charge.request_id.to_string(),
                micro_usd: amount,
                account: account.map(|a| a.name.clone()),
                lease,
                account_lease,
            };
            if self.state.settings().write_behind && self.state.leases_fresh() {
                // The lease is the durable reservation: the submission goes out now, its
                // row follows (a drain waits for it). Not when the heartbeat is late: a
                // survivor could reclaim the lease before the row lands.
                let (l, opens, account) = (self.clone(), charge.opens_request, account.cloned());
                self.state.spawn(async move { l.write_behind(row, in_flight, opens, account).await });
                return Ok(charge.amount);
            }
            // Written with the charges of the same moment (group commit); durable when
            // this returns.
            let written = self.state.charges.write(row).await.map_err(storage)?;
            match written {
                Written::Yes => return Ok(charge.amount),
                Written::LeaseClosed => continue,
            }
        }
        Err(LedgerError::LeaseLost)
    }

    /// Takes `amount` from the open slices ([`PgLedger::take_local`]); when they cannot
    /// cover it, refills them once and returns `None` (the caller tries again).
    async fn take_or_refill(
        &self,
        amount: i64,
        opens: bool,
        limited: Option<&(String, MicroUsd)>,
        account: Option<&Account>,
    ) -> Result<Option<(i64, Option<i64>, InFlight)>, LedgerError> {
        if let Some(taken) = self.take_local(amount, opens, limited.map(|(s, _)| s.as_str())) {
            return Ok(Some(taken));
        }
        self.refill(amount, opens, limited, account).await?;
        Ok(None)
    }

    /// Takes `amount` from the open slices (global, and the account's); returns their
    /// lease ids, held in flight (counted under the same lock as the take, so a refill
    /// cannot close them in between), or `None` when a slice is missing or short (nothing
    /// taken then).
    fn take_local(&self, amount: i64, opens: bool, account_scope: Option<&str>) -> Option<(i64, Option<i64>, InFlight)> {
        let mut local = self.state.leases.lock().ok()?;
        let global = *local.slices.get(GLOBAL).filter(|s| s.fits(amount, opens))?;
        let account = match account_scope {
            Some(scope) => Some(*local.slices.get(scope).filter(|s| s.fits(amount, false))?),
            None => None,
        };
        if let Some(s) = local.slices.get_mut(GLOBAL) {
            s.take(amount, opens);
        }
        if let (Some(scope), Some(_)) = (account_scope, account) {
            if let Some(s) = local.slices.get_mut(scope) {
                s.take(amount, false);
            }
        }
        let account_lease = account.map(|a| a.lease);
        let held = InFlight::held(&self.state, &mut local, global.lease, account_lease);
        Some((global.lease, account_lease, held))
    }

    /// Replaces the slices too small for `amount` with new ones (one refill at a time per
    /// replica), or refuses the charge when a budget cannot cover it.
    async fn refill(
        &self,
        amount: i64,
        opens: bool,
        limited: Option<&(String, MicroUsd)>,
        account: Option<&Account>,
    ) -> Result<(), LedgerError> {
        let _one = self.state.refill.lock().await;
        let short = |scope: &str, opens: bool| -> bool {
            self.state.leases.lock().map_or(true, |l| !l.slices.get(scope).is_some_and(|s| s.fits(amount, opens)))
        };
        let want = self.state.settings().lease_slice.0.max(amount);
        if short(GLOBAL, opens) {
            let soft = if opens { self.limits.soft_stop.0 } else { self.limits.hard_stop.0 };
            self.lease(GLOBAL, self.limits.hard_stop.0, self.limits.soft_stop.0, amount, want, opens).await.map_err(|e| match e {
                Refused::Budget { spent, leased } => LedgerError::BudgetExceeded {
                    limit_name: if opens && spent + leased + amount > soft { "soft_stop" } else { "hard_stop" },
                    limit: if opens && spent + leased + amount > soft { self.limits.soft_stop } else { self.limits.hard_stop },
                    spent: MicroUsd(spent + leased),
                    requested: MicroUsd(amount),
                },
                Refused::Storage(e) => e,
            })?;
        }
        if let (Some((scope, limit)), Some(a)) = (limited, account) {
            if short(scope, false) {
                self.lease(scope, limit.0, limit.0, amount, want, false).await.map_err(|e| match e {
                    Refused::Budget { spent, leased } => LedgerError::AccountBudgetExceeded {
                        account: a.name.clone(),
                        limit: *limit,
                        spent: MicroUsd(spent + leased),
                        requested: MicroUsd(amount),
                    },
                    Refused::Storage(e) => e,
                })?;
            }
        }
        Ok(())
    }

    /// In one transaction: returns this replica's open slice of `scope` (if any) and takes
    /// a new one of at most `want` (at least `min`) while `limit - spent - leased` covers
    /// `min` (for a request's first charge, while the soft stop does).
    async fn lease(&self, scope: &str, limit: i64, soft: i64, min: i64, want: i64, opens: bool) -> Result<(), Refused> {
        // The slice being replaced: closed in the same transaction, unless charges taken
        // from it are still being written (then the last of them closes it).
        let old = self.state.leases.lock().ok().and_then(|mut l| {
            let old = l.slices.remove(scope)?;
            if l.in_flight.get(&old.lease).is_some_and(|n| *n > 0) {
                l.retired.insert(old.lease);
                return None;
            }
            Some(old)
        });
        let st = self.state.clone();
        let scope_owned = scope.to_string();
        let granted = self
            .state
            .run(async move {
                let mut c = st.client().await?;
                let tx = c.transaction().await?;
                if let Some(old) = old {
                    close_lease(&tx, old.lease, "returned", st.replica()).await?;
                }
                tx.execute("INSERT INTO budget_scopes (scope) VALUES ($1) ON CONFLICT DO NOTHING", &[&scope_owned]).await?;
                // The check and the grant in one statement, under the scope row's lock.
                // numeric: an unlimited budget is i64::MAX, and spent may be negative.
                let row = tx
                    .query_opt(
                        "WITH s AS (
                             SELECT scope, spent, leased,
                                    LEAST($3::bigint::numeric, GREATEST($4::bigint::numeric, ($2::bigint::numeric - spent - leased) / 4))::bigint AS g
                             FROM budget_scopes
                             WHERE scope = $1 AND $2::bigint::numeric - spent - leased >= $4::bigint::numeric
                               AND (NOT $6 OR $5::bigint::numeric - spent - leased >= $4::bigint::numeric)
                             FOR UPDATE)
                         UPDATE budget_scopes b SET leased = b.leased + s.g FROM s WHERE b.scope = s.scope
                         RETURNING s.g, s.spent, s.leased",
                        &[&scope_owned, &limit, &want, &min, &soft, &opens],
                    )
                    .await?;
                let Some(row) = row else {
                    let r = tx.query_one("SELECT spent, leased FROM budget_scopes WHERE scope = $1", &[&scope_owned]).await?;
                    tx.commit().await?;
                    return Ok(Err((r.get::<_, i64>(0), r.get::<_, i64>(1))));
                };
                let (g, spent, leased): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
                // The part of the slice below the soft stop.
                let soft_room = i64::try_from((i128::from(soft) - i128::from(spent) - i128::from(leased)).clamp(0, i128::from(g))).unwrap_or(0);
                let id: i64 = tx
                    .query_one(
                        "INSERT INTO budget_leases (scope, replica, granted, soft_room) VALUES ($1, $2, $3, $4) RETURNING id",
                        &[&scope_owned, &st.replica(), &g, &soft_room],
                    )
                    .await?
                    .get(0);
                tx.commit().await?;
                Ok(Ok(Slice { lease: id, left: g, soft_left: soft_room }))
            })
            .await
            .map_err(|e| Refused::Storage(storage(e)))?;
        match granted {
            Ok(slice) => {
                if let Ok(mut l) = self.state.leases.lock() {
                    l.slices.insert(scope.to_string(), slice);
                }
                Ok(())
            }
            Err((spent, leased)) => Err(Refused::Budget { spent, leased }),
        }
    }

    /// Gives back every slice this replica holds (on drain): each lease is closed as
    /// `returned`, its charges moving to `spent`, once every queued charge row is written
    /// (waiting at most 30 s). Returns the amount given back.
    pub async fn return_leases(&self) -> Result<MicroUsd, LedgerError> {
        if !self.flush(std::time::Duration::from_secs(30)).await {
            let left = self.state.leases.lock().map_or(0, |l| l.in_flight.values().sum::<usize>());
            tailcut_core::log::warn("charge_rows_unwritten_at_drain", || serde_json::json!({"rows": left}));
        }
        let _one = self.state.refill.lock().await;
        if let Ok(mut l) = self.state.leases.lock() {
            l.slices.clear();
            l.retired.clear(); // closed below, with every open lease of this replica
        }
        let st = self.state.clone();
        let replica = st.replica().to_string();
        self.state.run(async move { close_leases_of(&st, &replica, "returned").await }).await.map_err(storage)
    }

    /// Claims every dead replica (no heartbeat for the lease TTL) and closes its open
    /// leases as `reclaimed`. Returns the replicas taken over and the amount reclaimed.
    pub async fn reclaim_dead(&self) -> Result<(Vec<String>, MicroUsd), LedgerError> {
        let st = self.state.clone();
        self.state
            .run(async move {
                let dead = st.claim_dead_replicas().await?;
                let mut total = MicroUsd::ZERO;
                for r in &dead {
                    total += close_leases_of(&st, r, "reclaimed").await?;
                }
                Ok((dead, total))
            })
            .await
            .map_err(storage)
    }

    /// Every budget's books, to the micro-dollar.
    pub async fn reconciliation(&self) -> Result<Reconciliation, LedgerError> {
        let st = self.state.clone();
        self.state.run(async move { reconciliation(&st).await }).await.map_err(storage)
    }

    async fn reconcile_in(&self, row: ReconcileEntry) -> Result<(), LedgerError> {
        let st = self.state.clone();
        self.state
            .run(async move {
                let mut c = st.client().await?;
                let tx = c.transaction().await?;
                tx.execute(
                    "INSERT INTO ledger_entries (kind, provider, request_id, micro_usd, note, account, replica)
                     VALUES ('reconcile', $1, $2, $3, $4, $5, $6)",
                    &[&row.provider, &row.request_id, &row.delta.0, &row.note, &row.account, &st.replica()],
                )
                .await?;
                tx.execute("UPDATE budget_scopes SET spent = spent + $1 WHERE scope = 'global'", &[&row.delta.0]).await?;
                if let Some(a) = &row.account {
                    tx.execute(
                        "INSERT INTO budget_scopes (scope, spent) VALUES ($1, $2) ON CONFLICT (scope) DO UPDATE SET spent = budget_scopes.spent + $2",
                        &[&account_scope(a), &row.delta.0],
                    )
                    .await?;
                }
                tx.commit().await?;
                Ok(())
            })
            .await
            .map_err(storage)
    }
}

enum Refused {
    Budget { spent: i64, leased: i64 },
    Storage(LedgerError),
}

/// Closes every open lease of `replica` as `how`, one transaction each.
async fn close_leases_of(st: &PgState, replica: &str, how: &str) -> Result<MicroUsd, PgError> {
    let mut c = st.client().await?;
    let ids: Vec<i64> = c
        .query("SELECT id FROM budget_leases WHERE replica = $1 AND closed_at IS NULL", &[&replica])
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut total = MicroUsd::ZERO;
    for id in ids {
        let tx = c.transaction().await?;
        total += close_lease(&tx, id, how, st.replica()).await?;
        tx.commit().await?;
    }
    Ok(total)
}

impl BudgetGate for PgLedger {
    fn charge(&self, charge: &Charge<'_>) -> Result<MicroUsd, LedgerError> {
        block(self, |l, c| Box::pin(async move { l.charge_in(&c.as_charge(), None).await }), OwnedCharge::from(charge), None)
    }

    fn charge_account(&self, charge: &Charge<'_>, account: &Account) -> Result<MicroUsd, LedgerError> {
        block(
            self,
            |l, c| {
                Box::pin(async move {
                    let a = c.account.clone();
                    l.charge_in(&c.as_charge(), a.as_ref()).await
                })
            },
            OwnedCharge::from(charge),
            Some(account.clone()),
        )
    }

    fn charge_async<'a>(&'a self, charge: &'a Charge<'a>) -> ChargeFuture<'a> {
        Box::pin(self.charge_in(charge, None))
    }

    fn charge_account_async<'a>(&'a self, charge: &'a Charge<'a>, account: &'a Account) -> ChargeFuture<'a> {
        Box::pin(self.charge_in(charge, Some(account)))
    }

    fn reconcile(&self, provider: &str, request_id: &str, delta: MicroUsd, note: &str) -> Result<(), LedgerError> {
        let (l, row) = (self.clone(), ReconcileEntry::new(provider, request_id, delta, note, None));
        self.state.block_on(async move { l.reconcile_in(row).await.map_err(PgError::from) }).map_err(storage)
    }

    fn reconcile_account(&self, provider: &str, request_id: &str, delta: MicroUsd, note: &str, account: &str) -> Result<(), LedgerError> {
        let (l, row) = (self.clone(), ReconcileEntry::new(provider, request_id, delta, note, Some(account)));
        self.state.block_on(async move { l.reconcile_in(row).await.map_err(PgError::from) }).map_err(storage)
    }

    fn account_spent(&self, account: &str) -> Result<MicroUsd, LedgerError> {
        let (st, a) = (self.state.clone(), account.to_string());
        self.state
            .block_on(async move {
                let c = st.client().await?;
                let v: i64 = c
                    .query_one(
                        "SELECT COALESCE(SUM(micro_usd), 0)::bigint FROM ledger_entries WHERE account = $1 AND kind IN ('projected', 'reconcile')",
                        &[&a],
                    )
                    .await?
                    .get(0);
                Ok(MicroUsd(v))
            })
            .map_err(storage)
    }

    fn summary(&self) -> Result<LedgerSummary, LedgerError> {
        let st = self.state.clone();
        self.state
            .block_on(async move {
                let c = st.client().await?;
                let rows = c
                    .query(
                        "SELECT provider, COALESCE(SUM(micro_usd), 0)::bigint, COUNT(*) FILTER (WHERE kind = 'projected')
                         FROM ledger_entries WHERE kind IN ('projected', 'reconcile') GROUP BY provider ORDER BY provider",
                        &[],
                    )
                    .await?;
                let mut s = LedgerSummary::default();
                for r in rows {
                    let (p, v, n): (String, i64, i64) = (r.get(0), r.get(1), r.get(2));
                    s.total += MicroUsd(v);
                    s.charges += u64::try_from(n).unwrap_or(0);
                    s.by_provider.push((p, MicroUsd(v)));
                }
                Ok(s)
            })
            .map_err(storage)
    }
}

/// A charge that owns its strings, to cross onto the state's runtime.
struct OwnedCharge {
    provider: String,
    request_id: String,
    amount: MicroUsd,
    opens_request: bool,
    account: Option<Account>,
}

impl OwnedCharge {
    fn from(c: &Charge<'_>) -> OwnedCharge {
        OwnedCharge {
            provider: c.provider.to_string(),
            request_id: c.request_id.to_string(),
            amount: c.amount,
            opens_request: c.opens_request,
            account: None,
        }
    }

    fn as_charge(&self) -> Charge<'_> {
        Charge { provider: &self.provider, request_id: &self.request_id, amount: self.amount, opens_request: self.opens_request }
    }
}

type BoxedCharge = std::pin::Pin<Box<dyn std::future::Future<Output = Result<MicroUsd, LedgerError>> + Send>>;

/// A synchronous charge: run on the state's runtime, this thread blocked until done.
fn block(
    l: &PgLedger,
    f: fn(PgLedger, OwnedCharge) -> BoxedCharge,
    mut c: OwnedCharge,
    account: Option<Account>,
) -> Result<MicroUsd, LedgerError> {
    c.account = account;
    let fut = f(l.clone(), c);
    match l.state.block_on(async move { Ok(fut.await) }) {
        Ok(r) => r,
        Err(e) => Err(storage(e)),
    }
}
