//! Group commit of charge rows: the submissions of one replica that are charged at the
//! same time have their `projected` rows written together, one statement (one
//! transaction, one WAL flush) per batch, by a writer task on the state's runtime.
//!
//! A submission hands its row to the writer and waits until the batch holding it has
//! committed (or failed): nothing goes out before its charge is durable, as before. What
//! changes is the cost under load: rows that arrive while a batch commits wait for the
//! next one and share its round trip and flush, instead of queueing for a statement
//! each. At most [`writers`] batches are in flight (half the pool); while one of them is
//! free, a row is written at once, alone (no timer, no added wait at low load), and
//! PostgreSQL flushes concurrent commits together; once all are busy, rows gather.
//!
//! The batch statement keeps the rule of one row: a row is written only while the
//! leases it names are open (`FOR SHARE` on them, held to the commit, so a lease being
//! closed waits for the batch and counts its rows). Rows whose lease was closed meanwhile
//! are not written, and their submissions charge again (see `PgLedger::charge_in`).

use crate::pg::{LocalLeases, PgError};
use std::collections::BTreeSet;
use std::sync::Arc;
use tailcut_core::MicroUsd;
use tokio::sync::{mpsc, oneshot, Semaphore};

/// Batches written at the same time (each on its own pooled connection): half the pool,
/// at least 2, leaving the rest for leases, jobs and heartbeats.
pub(crate) fn writers(pool_size: usize) -> usize {
    (pool_size / 2).max(2)
}

/// The most rows in one batch.
const MAX_BATCH: usize = 512;

/// One charge row to write.
#[derive(Debug, Clone)]
pub(crate) struct ChargeRow {
    pub(crate) provider: String,
    pub(crate) request_id: String,
    pub(crate) micro_usd: i64,
    pub(crate) account: Option<String>,
    /// The global lease it is charged against.
    pub(crate) lease: i64,
    /// The account's lease, for a key with a budget.
    pub(crate) account_lease: Option<i64>,
}

/// A charge taken from this replica's slices whose row is not written yet: while it
/// lives, a refill does not close the leases it names (it retires them instead), so a
/// refill does not send the charges in flight on the old slice round again. When the last
/// charge on a retired lease ends (written, refused or dropped), the lease is closed as
/// `returned` in the background; a drain closes whatever is still open.
pub(crate) struct InFlight {
    state: Arc<crate::pg::PgState>,
    leases: [Option<i64>; 2],
}

impl InFlight {
    /// Counts a charge on `lease` (and `account_lease`) in flight in `local`, the replica's
    /// leases already locked by the caller (the same lock as the take from the slices).
    pub(crate) fn held(state: &Arc<crate::pg::PgState>, local: &mut LocalLeases, lease: i64, account_lease: Option<i64>) -> InFlight {
        let leases = [Some(lease), account_lease];
        for id in leases.iter().flatten() {
            *local.in_flight.entry(*id).or_insert(0) += 1;
        }
        InFlight { state: state.clone(), leases }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut to_close = Vec::new();
        let mut flushed = false;
        if let Ok(mut l) = self.state.leases.lock() {
            for id in self.leases.iter().flatten() {
                let left = l.in_flight.get_mut(id).map(|n| {
                    *n = n.saturating_sub(1);
                    *n
                });
                if left == Some(0) {
                    l.in_flight.remove(id);
                    if l.retired.remove(id) {
                        to_close.push(*id);
                    }
                }
            }
            flushed = l.in_flight.is_empty();
        }
        if flushed {
            self.state.flushed.notify_waiters();
        }
        for id in to_close {
            let st = self.state.clone();
            self.state.spawn(async move {
                let closed = async {
                    let mut c = st.client().await?;
                    let tx = c.transaction().await?;
                    close_lease(&tx, id, "returned", st.replica()).await?;
                    tx.commit().await?;
                    Ok::<_, PgError>(())
                };
                if let Err(e) = closed.await {
                    // It stays open until the drain returns it (or a survivor reclaims it).
                    tailcut_core::log::warn("budget_lease_not_returned", || serde_json::json!({"lease": id, "error": e.to_string()}));
                }
            });
        }
    }
}

/// What became of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Written {
    /// It is committed.
    Yes,
    /// A lease it names was closed before it could be written: charge again.
    LeaseClosed,
}

struct Pending {
    row: ChargeRow,
    done: oneshot::Sender<Result<Written, PgError>>,
}

/// The handle submissions write their charge rows through.
#[derive(Debug)]
pub(crate) struct ChargeWriter {
    tx: mpsc::UnboundedSender<Pending>,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending").field("row", &self.row).finish_non_exhaustive()
    }
}

impl ChargeWriter {
    /// Starts the writer task on `handle` (the state's runtime); it ends when the writer
    /// is dropped and the rows queued before have been written.
    pub(crate) fn start(handle: &tokio::runtime::Handle, pool: deadpool_postgres::Pool, replica: String, writers: usize) -> ChargeWriter {
        let (tx, rx) = mpsc::unbounded_channel();
        handle.spawn(run(rx, pool, Arc::from(replica), writers));
        ChargeWriter { tx }
    }

    /// Writes `row` with the next batch; returns once that batch has committed.
    pub(crate) async fn write(&self, row: ChargeRow) -> Result<Written, PgError> {
        let (done, wait) = oneshot::channel();
        self.tx.send(Pending { row, done }).map_err(|_| PgError::Closed)?;
        wait.await.map_err(|_| PgError::Closed)?
    }
}

async fn run(mut rx: mpsc::UnboundedReceiver<Pending>, pool: deadpool_postgres::Pool, replica: Arc<str>, writers: usize) {
    let writers = Arc::new(Semaphore::new(writers));
    loop {
        // A free writer first: rows arriving while every writer is busy gather into the
        // next batch.
        let Ok(permit) = writers.clone().acquire_owned().await else { return };
        let mut batch = Vec::with_capacity(16);
        if rx.recv_many(&mut batch, MAX_BATCH).await == 0 {
            return;
        }
        let (pool, replica) = (pool.clone(), replica.clone());
        // Runs on the PostgreSQL state's own runtime (`run` is spawned there), bounded by its
        // batch's writer permit; a server's drain returns its leases after its races settle.
        #[allow(clippy::disallowed_methods)]
        tokio::spawn(async move {
            let rows: Vec<&ChargeRow> = batch.iter().map(|p| &p.row).collect();
            let outcome = write_batch(&pool, &replica, &rows).await;
            let n = batch.len();
            for (p, r) in batch.into_iter().zip(outcome_per_row(outcome, n)) {
                let _ = p.done.send(r);
            }
            drop(permit);
        });
    }
}

/// Each row's outcome from the batch's: the written flags, or the batch's error for all.
fn outcome_per_row(outcome: Result<Vec<Written>, PgError>, n: usize) -> Box<dyn Iterator<Item = Result<Written, PgError>> + Send> {
    match outcome {
        Ok(v) => Box::new(v.into_iter().map(Ok)),
        Err(e) => Box::new(std::iter::repeat_n(Err(e), n)),
    }
}

/// Text PostgreSQL accepts (no NUL): a request id is the caller's header, and one bad
/// row must not fail the batch it shares.
fn text(s: &str) -> String {
    if s.contains('\0') {
        s.replace('\0', "\u{fffd}")
    } else {
        s.to_string()
    }
}

/// Writes `rows` in one statement: those whose leases are all open (locked `FOR SHARE`
/// until the commit), the others not. Returns each row's outcome, in order.
pub(crate) async fn write_batch(pool: &deadpool_postgres::Pool, replica: &str, rows: &[&ChargeRow]) -> Result<Vec<Written>, PgError> {
    let leases: BTreeSet<i64> = rows.iter().flat_map(|r| std::iter::once(r.lease).chain(r.account_lease)).collect();
    let leases: Vec<i64> = leases.into_iter().collect();
    let providers: Vec<String> = rows.iter().map(|r| text(&r.provider)).collect();
    let request_ids: Vec<String> = rows.iter().map(|r| text(&r.request_id)).collect();
    let amounts: Vec<i64> = rows.iter().map(|r| r.micro_usd).collect();
    let accounts: Vec<Option<String>> = rows.iter().map(|r| r.account.as_deref().map(text)).collect();
    let row_leases: Vec<i64> = rows.iter().map(|r| r.lease).collect();
    let account_leases: Vec<Option<i64>> = rows.iter().map(|r| r.account_lease).collect();
    let c = pool.get().await?;
    let stmt = c
        .prepare_cached(
            "WITH open AS MATERIALIZED (
                 SELECT id FROM budget_leases WHERE id = ANY($7::bigint[]) AND closed_at IS NULL FOR SHARE),
             ins AS (
                 INSERT INTO ledger_entries (kind, provider, request_id, micro_usd, account, lease, account_lease, replica)
                 SELECT 'projected', r.provider, r.request_id, r.micro_usd, r.account, r.lease, r.account_lease, $8
                 FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::bigint[], $6::bigint[])
                      AS r(provider, request_id, micro_usd, account, lease, account_lease)
                 WHERE r.lease IN (SELECT id FROM open)
                   AND (r.account_lease IS NULL OR r.account_lease IN (SELECT id FROM open))
                 RETURNING 1)
             SELECT ARRAY(SELECT id FROM open), (SELECT count(*) FROM ins)",
        )
        .await?;
    let row = c.query_one(&stmt, &[&providers, &request_ids, &amounts, &accounts, &row_leases, &account_leases, &leases, &replica]).await?;
    let open: Vec<i64> = row.get(0);
    let inserted: i64 = row.get(1);
    let open: BTreeSet<i64> = open.into_iter().collect();
    let written: Vec<Written> =
        rows.iter()
            .map(|r| {
                if open.contains(&r.lease) && r.account_lease.is_none_or(|a| open.contains(&a)) {
                    Written::Yes
                } else {
                    Written::LeaseClosed
                }
            })
            .collect();
    // The rows written were chosen by the same set of open leases.
    debug_assert_eq!(usize::try_from(inserted).ok(), Some(written.iter().filter(|w| **w == Written::Yes).count()));
    Ok(written)
}

/// The scope of the global budget.
pub(crate) const GLOBAL: &str = "global";

/// Closes lease `id` if it is open: its charges (summed under the lease's row lock, so
/// charges being written are counted) move to `spent`, the rest is given back and
/// recorded as a `how` row (`returned` or `reclaimed`). Returns the amount given back.
pub(crate) async fn close_lease(tx: &deadpool_postgres::Transaction<'_>, id: i64, how: &str, by: &str) -> Result<MicroUsd, PgError> {
    let Some(row) = tx.query_opt("SELECT scope, granted FROM budget_leases WHERE id = $1 AND closed_at IS NULL FOR UPDATE", &[&id]).await?
    else {
        return Ok(MicroUsd::ZERO);
    };
    let (scope, granted): (String, i64) = (row.get(0), row.get(1));
    let column = if scope == GLOBAL { "lease" } else { "account_lease" };
    let charged: i64 = tx
        .query_one(
            &format!("SELECT COALESCE(SUM(micro_usd), 0)::bigint FROM ledger_entries WHERE kind = 'projected' AND {column} = $1"),
            &[&id],
        )
        .await?
        .get(0);
    let unused = granted - charged;
    tx.execute("UPDATE budget_leases SET closed_at = now(), closed_how = $2, charged = $3 WHERE id = $1", &[&id, &how, &charged]).await?;
    tx.execute("UPDATE budget_scopes SET spent = spent + $2, leased = leased - $3 WHERE scope = $1", &[&scope, &charged, &granted]).await?;
    let account = scope.strip_prefix("account:").map(str::to_string);
    let note = format!("lease {id} of {scope}: granted {granted}, charged {charged}, {how} {unused} (by {by})");
    let (lease, account_lease) = if scope == GLOBAL { (Some(id), None) } else { (None, Some(id)) };
    tx.execute(
        "INSERT INTO ledger_entries (kind, micro_usd, note, account, lease, account_lease, replica) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        &[&how, &unused, &note, &account, &lease, &account_lease, &by],
    )
    .await?;
    Ok(MicroUsd(unused))
}
