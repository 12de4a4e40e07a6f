//! The job store in the replicas' shared PostgreSQL (its tables come with the state's
//! migrations, `crate::pg::MIGRATIONS`). Every call is awaited on the state's own runtime
//! ([`PgState::run`]), so a round trip to the database never blocks a serving thread.
//! Jobs belong to the replica running them; a surviving replica takes over a dead one's
//! once its lease has expired ([`JobBackend::take_over`]).

use super::{now_ms, parse, JobBackend, JobEnd, JobRow, Orphan, StoreResult, INTERRUPTED};
use crate::pg::PgState;
use std::sync::Arc;

/// The PostgreSQL backend.
#[derive(Debug)]
pub(super) struct PgJobs {
    pub(super) state: Arc<PgState>,
}

#[async_trait::async_trait]
impl JobBackend for PgJobs {
    fn replica(&self) -> Option<String> {
        Some(self.state.replica().to_string())
    }

    fn take_over_dead(&self) -> StoreResult<(Vec<String>, Vec<Orphan>)> {
        Ok((Vec::new(), Vec::new()))
    }

    async fn take_over(&self, dead: Vec<String>) -> StoreResult<(usize, Vec<Orphan>)> {
        let s = self.state.clone();
        Ok(self
            .state
            .run(async move {
                let mut c = s.client().await?;
                let tx = c.transaction().await?;
                let rows = tx
                    .query(
                        "SELECT a.job_id, a.provider, a.provider_job_id FROM job_attempts a JOIN jobs j ON j.id = a.job_id
                         WHERE j.state = 'running' AND j.replica = ANY($1) AND a.provider_job_id IS NOT NULL
                         ORDER BY a.job_id, a.seq FOR UPDATE OF j",
                        &[&dead],
                    )
                    .await?;
                let orphans = rows.iter().map(|r| Orphan { job: r.get(0), provider: r.get(1), provider_job_id: r.get(2) }).collect();
                let n = tx
                    .execute(
                        "UPDATE jobs SET state = 'interrupted', finished_ms = $2, error = $3 WHERE state = 'running' AND replica = ANY($1)",
                        &[&dead, &now_ms(), &INTERRUPTED],
                    )
                    .await?;
                tx.commit().await?;
                Ok((n as usize, orphans))
            })
            .await?)
    }

    async fn mark_stopped(&self) -> StoreResult<()> {
        // The replica's row is marked stopped by the state (`PgState::mark_stopped`).
        Ok(())
    }

    async fn insert(&self, id: &str, route: &str, owner: &str) -> StoreResult<()> {
        self.state
            .execute(
                "INSERT INTO jobs (id, route, state, created_ms, owner, replica) VALUES ($1, $2, 'running', $3, $4, $5)",
                vec![
                    Box::new(id.to_string()),
                    Box::new(route.to_string()),
                    Box::new(now_ms()),
                    Box::new(owner.to_string()),
                    Box::new(self.state.replica().to_string()),
                ],
            )
            .await?;
        Ok(())
    }

    async fn record_attempt(&self, id: &str, seq: i32, provider: &str, provider_job_id: Option<&str>) -> StoreResult<()> {
        self.state
            .execute(
                "INSERT INTO job_attempts (job_id, seq, provider, provider_job_id, submitted_ms) VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (job_id, seq) DO UPDATE SET provider = $3, provider_job_id = $4",
                vec![
                    Box::new(id.to_string()),
                    Box::new(seq),
                    Box::new(provider.to_string()),
                    Box::new(provider_job_id.map(str::to_string)),
                    Box::new(now_ms()),
                ],
            )
            .await?;
        Ok(())
    }

    async fn finish(&self, end: JobEnd) -> StoreResult<()> {
        self.state
            .execute(
                "UPDATE jobs SET state = $2, finished_ms = $3, result = $4, winner = $5, trace = $6, error = $7 WHERE id = $1 AND state = 'running'",
                vec![
                    Box::new(end.id),
                    Box::new(end.state),
                    Box::new(now_ms()),
                    Box::new(end.result),
                    Box::new(end.winner),
                    Box::new(end.trace),
                    Box::new(end.error),
                ],
            )
            .await?;
        Ok(())
    }

    async fn get(&self, id: &str) -> StoreResult<Option<JobRow>> {
        let (s, id) = (self.state.clone(), id.to_string());
        let row = self
            .state
            .run(async move {
                let c = s.client().await?;
                let r = c
                    .query_opt("SELECT id, route, state, created_ms, result, winner, trace, error, owner FROM jobs WHERE id = $1", &[&id])
                    .await?;
                Ok(r.map(|r| JobRow {
                    id: r.get(0),
                    route: r.get(1),
                    state: r.get(2),
                    created_ms: r.get(3),
                    result: parse(r.get(4)),
                    winner: r.get(5),
                    trace: parse(r.get(6)),
                    error: r.get(7),
                    owner: r.get(8),
                }))
            })
            .await?;
        Ok(row)
    }

    async fn request_cancel(&self, id: &str) -> StoreResult<()> {
        self.state
            .execute("UPDATE jobs SET cancel_requested = true WHERE id = $1 AND state = 'running'", vec![Box::new(id.to_string())])
            .await?;
        Ok(())
    }

    async fn cancel_requests(&self) -> StoreResult<Vec<String>> {
        let s = self.state.clone();
        Ok(self
            .state
            .run(async move {
                let c = s.client().await?;
                let rows =
                    c.query("SELECT id FROM jobs WHERE replica = $1 AND state = 'running' AND cancel_requested", &[&s.replica()]).await?;
                Ok(rows.iter().map(|r| r.get(0)).collect())
            })
            .await?)
    }

    async fn set_trace(&self, id: &str, trace: String) -> StoreResult<()> {
        self.state.execute("UPDATE jobs SET trace = $2 WHERE id = $1", vec![Box::new(id.to_string()), Box::new(trace)]).await?;
        Ok(())
    }

    async fn cleanup(&self, cutoff_ms: i64) -> StoreResult<usize> {
        Ok(self.state.execute("DELETE FROM jobs WHERE finished_ms IS NOT NULL AND finished_ms <= $1", vec![Box::new(cutoff_ms)]).await?
            as usize)
    }
}
