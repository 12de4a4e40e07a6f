//! Charge rows written behind the lease (`[state] charge_rows = "write_behind"`): the
//! task that writes a row after its submission went out (charging it again from a new
//! slice if its lease was reclaimed under it), and the wait for every queued row that a
//! drain makes before it returns the leases.

use super::{account_scope, PgLedger};
use crate::pg::commit::{ChargeRow, InFlight, Written};
use tailcut_core::ledger::Account;

impl PgLedger {
    /// Writes the row of a charge whose submission has gone out (`write_behind`), holding
    /// its leases in flight until it is written. Its lease can be closed under it only by
    /// a survivor that took this replica for dead (its heartbeat lapsed for the lease
    /// TTL): then the charge is taken again from a new slice, since the submission is
    /// out. A row that cannot be written (the database unreachable for ~25 s, or no
    /// budget left for the retaken charge) is logged as `charge_row_unrecorded`.
    pub(super) async fn write_behind(&self, mut row: ChargeRow, mut in_flight: InFlight, opens: bool, account: Option<Account>) {
        let limited = account.as_ref().and_then(|a| a.limit.map(|l| (account_scope(&a.name), l)));
        let mut failures = 0u32;
        let unrecorded = |row: &ChargeRow, why: String| {
            tailcut_core::log::warn("charge_row_unrecorded", || {
                serde_json::json!({"request_id": row.request_id, "provider": row.provider,
                    "micro_usd": row.micro_usd, "account": row.account, "lease": row.lease, "error": why})
            });
        };
        loop {
            match self.state.charges.write(row.clone()).await {
                Ok(Written::Yes) => return,
                Ok(Written::LeaseClosed) => {
                    // The old lease stays held until the new one is: a drain waiting for
                    // rows in flight never sees none while this one is between leases.
                    let old = in_flight;
                    let mut taken = None;
                    for _ in 0..8 {
                        match self.take_or_refill(row.micro_usd, opens, limited.as_ref(), account.as_ref()).await {
                            Ok(Some(t)) => {
                                taken = Some(t);
                                break;
                            }
                            Ok(None) => {}
                            Err(e) => {
                                return unrecorded(&row, format!("its lease was reclaimed and it could not be charged again: {e}"));
                            }
                        }
                    }
                    let Some((lease, account_lease, held)) = taken else {
                        return unrecorded(&row, "its lease was reclaimed and it could not be charged again".into());
                    };
                    in_flight = held;
                    drop(old);
                    (row.lease, row.account_lease) = (lease, account_lease);
                }
                Err(e) => {
                    failures += 1;
                    if failures >= 8 {
                        drop(in_flight);
                        return unrecorded(&row, e.to_string());
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(100 << failures.min(6))).await;
                }
            }
        }
    }

    /// Waits, at most `limit`, until every charge row this replica has queued is written
    /// (or given up on). True when none is left.
    pub async fn flush(&self, limit: std::time::Duration) -> bool {
        let until = tokio::time::Instant::now() + limit;
        loop {
            // Created before the check: a wake-up between the check and the wait is kept.
            let flushed = self.state.flushed.notified();
            if self.state.leases.lock().map_or(true, |l| l.in_flight.is_empty()) {
                return true;
            }
            if tokio::time::timeout_at(until, flushed).await.is_err() {
                return false;
            }
        }
    }
}
