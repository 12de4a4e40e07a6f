//! What a gateway does so that its jobs outlive it, and so that replicas on one
//! PostgreSQL share them: each job attempt's provider job id is stored when its submit
//! returns ([`crate::recorded::Recorded`]); the jobs a dead gateway left running are marked `interrupted`
//! and their provider jobs cancelled by id, with receipts ([`cancel_orphans`]); a loop
//! ([`spawn_replica_loop`]) takes over the jobs of dead gateways: on SQLite, of dead
//! processes sharing the file; on PostgreSQL, it also passes on `DELETE`s made on other
//! replicas to the races this one runs and reclaims dead replicas' budget leases; and a
//! drain gives this replica's leases back and marks it stopped ([`release`]).

use crate::observe::log;
use crate::state::AppState;
use crate::store::Orphan;
use serde_json::{json, Value};
use std::sync::Arc;
use tailcut_core::{CancelContext, Receipt};

/// Cancels the provider jobs a dead gateway left in flight, by id, through the current
/// configuration's providers of that name, and stores each receipt in its job's row.
/// Returns the receipts (a provider that is gone, or cannot address a job by id, gets a
/// receipt saying the job was not cancelled: leaked).
pub(crate) async fn cancel_orphans(st: &AppState, orphans: Vec<Orphan>) -> Vec<Receipt> {
    let rt = st.rt();
    let mut all = Vec::new();
    let mut by_job: std::collections::BTreeMap<String, Vec<Value>> = std::collections::BTreeMap::new();
    for o in orphans {
        let api = rt.jobs.values().flat_map(|r| r.hedger.providers().iter()).find(|p| p.name == o.provider).map(|p| p.api.clone());
        let epoch = tokio::time::Instant::now();
        let job = api.as_ref().and_then(|a| a.attach(&o.provider_job_id));
        let receipt = match job {
            None => Receipt::cancel_failed(
                &o.provider,
                Some(o.provider_job_id.clone()),
                0.0,
                "orphaned by a gateway that stopped: no configured provider of this name can address a job by id",
            ),
            Some(job) => {
                let state_before = job.status().await.ok();
                let ctx =
                    CancelContext { reason: "orphan_of_stopped_gateway".into(), epoch, sent_at: tokio::time::Instant::now(), state_before };
                match job.cancel(ctx).await {
                    Ok(r) => r,
                    Err(e) => Receipt::cancel_failed(&o.provider, Some(o.provider_job_id.clone()), 0.0, &e.to_string()),
                }
            }
        };
        log("orphan_cancelled", || json!({"job": o.job, "receipt": receipt}));
        by_job.entry(o.job.clone()).or_default().push(serde_json::to_value(&receipt).unwrap_or(Value::Null));
        all.push(receipt);
    }
    for (job, receipts) in by_job {
        if let Err(e) = st.store.set_orphan_receipts(&job, &Value::Array(receipts)).await {
            log("orphan_receipts_not_stored", || json!({"job": job, "error": e.to_string()}));
        }
    }
    all
}

/// Cancels, in the background, the provider jobs this gateway's previous process left
/// running (found when the state was built: [`AppState::new`]).
pub(crate) fn cancel_startup_orphans(state: &Arc<AppState>) {
    let orphans = std::mem::take(&mut *state.orphans.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    if orphans.is_empty() {
        return;
    }
    let st = state.clone();
    // On the tracker: the drain waits for these cancels and their receipts too.
    state.tasks.spawn(async move {
        cancel_orphans(&st, orphans).await;
    });
}

/// How often a replica looks for `DELETE`s of its jobs made on other replicas (or
/// processes sharing its SQLite file).
const CANCEL_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// On PostgreSQL: every 200 ms, stops the races whose jobs were deleted on another
/// replica; every `lease_ttl / 3`, reclaims the budget leases of replicas dead for the
/// lease TTL and takes over their running jobs (interrupted, provider jobs cancelled).
/// On SQLite: the same for processes sharing the store's file (`DELETE`s every 200 ms,
/// dead processes' jobs every `lease_ttl / 3`: [`crate::store::JobStore::take_over_dead`]).
/// Both loops run on the gateway's tracker and end when the drain starts.
pub(crate) fn spawn_replica_loop(state: &Arc<AppState>) {
    #[cfg(feature = "postgres")]
    {
        let Some(pg) = state.pg.clone() else { return spawn_sqlite_takeover(state) };
        let st = state.clone();
        let takeover_every = pg.settings().lease_ttl / 3;
        state.tasks.spawn_loop(async move {
            let mut last_takeover = tokio::time::Instant::now();
            loop {
                tokio::time::sleep(CANCEL_POLL).await;
                forward_cancels(&st).await;
                if last_takeover.elapsed() >= takeover_every {
                    last_takeover = tokio::time::Instant::now();
                    take_over_dead(&st, &pg).await;
                }
            }
        });
    }
    #[cfg(not(feature = "postgres"))]
    spawn_sqlite_takeover(state)
}

/// Stops the races of this gateway's jobs that a `DELETE` elsewhere asked to stop.
async fn forward_cancels(st: &AppState) {
    match st.store.cancel_requests().await {
        Ok(ids) => {
            for id in ids {
                let stop = st.running.lock().ok().and_then(|mut r| r.remove(&id));
                if let Some(tx) = stop {
                    log("job_cancel_from_another_replica", || json!({"job": id}));
                    let _ = tx.send(());
                }
            }
        }
        Err(e) => log("job_cancel_poll_failed", || json!({"error": e.to_string()})),
    }
}

/// On SQLite: every 200 ms, stops the races whose jobs were deleted on another process
/// sharing the file; every `lease_ttl / 3`, takes over the jobs of dead processes on
/// the file (off the serving threads: the claim waits for the file's write lock).
fn spawn_sqlite_takeover(state: &Arc<AppState>) {
    let st = state.clone();
    let every = st.rt().config.state.lease_ttl / 3;
    state.tasks.spawn_loop(async move {
        let mut last_takeover = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(CANCEL_POLL).await;
            forward_cancels(&st).await;
            if last_takeover.elapsed() < every {
                continue;
            }
            last_takeover = tokio::time::Instant::now();
            let s = st.clone();
            match tokio::task::spawn_blocking(move || s.store.take_over_dead()).await {
                Ok(Ok((0, _))) => {}
                Ok(Ok((jobs, orphans))) => {
                    log("jobs_interrupted", || json!({"count": jobs, "provider_jobs_to_cancel": orphans.len()}));
                    cancel_orphans(&st, orphans).await;
                }
                Ok(Err(e)) => log("process_takeover_failed", || json!({"error": e.to_string()})),
                Err(_) => {}
            }
        }
    });
}

#[cfg(feature = "postgres")]
async fn take_over_dead(st: &Arc<AppState>, pg: &Arc<tailcut_state::pg::PgState>) {
    let ledger = tailcut_state::ledger::PgLedger::new(pg.clone(), st.rt().config.budget.limits);
    let (dead, reclaimed) = match ledger.reclaim_dead().await {
        Ok(r) => r,
        Err(e) => {
            log("replica_takeover_failed", || json!({"error": e.to_string()}));
            return;
        }
    };
    if dead.is_empty() {
        return;
    }
    match st.store.take_over(dead.clone()).await {
        Ok((jobs, orphans)) => {
            log(
                "replicas_taken_over",
                || json!({"replicas": dead, "reclaimed_micro_usd": reclaimed.0, "jobs_interrupted": jobs, "provider_jobs_to_cancel": orphans.len()}),
            );
            cancel_orphans(st, orphans).await;
        }
        Err(e) => log("replica_takeover_failed", || json!({"replicas": dead, "error": e.to_string()})),
    }
}

/// At the end of a drain: on PostgreSQL, gives back this replica's budget leases; on
/// either, marks it stopped (so nobody waits to take it over).
pub(crate) async fn release(state: &AppState) {
    if let Err(e) = state.store.mark_stopped().await {
        log("process_not_marked_stopped", || json!({"error": e.to_string()}));
    }
    #[cfg(feature = "postgres")]
    if let Some(pg) = &state.pg {
        let ledger = tailcut_state::ledger::PgLedger::new(pg.clone(), state.rt().config.budget.limits);
        match ledger.return_leases().await {
            Ok(returned) => log("budget_leases_returned", || json!({"micro_usd": returned.0})),
            Err(e) => log("budget_leases_not_returned", || json!({"error": e.to_string()})),
        }
        let st = pg.clone();
        if let Err(e) = pg.run(async move { st.mark_stopped().await }).await {
            log("replica_not_marked_stopped", || json!({"error": e.to_string()}));
        }
    }
    #[cfg(not(feature = "postgres"))]
    let _ = state;
}

#[cfg(test)]
mod tests;
