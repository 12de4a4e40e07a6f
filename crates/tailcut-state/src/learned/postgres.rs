//! Learned models in the shared PostgreSQL state (table `learned_models`, created by its
//! migrations), so a replica that starts, or restarts, decides with what the others
//! learned. Called off the serving threads (the saver runs on a blocking thread).

use super::{now_ms, ModelStore, StoreError};
use crate::pg::PgState;
use std::sync::Arc;

/// Models in the shared PostgreSQL state.
#[derive(Debug)]
pub struct PgModelStore {
    pg: Arc<PgState>,
}

impl PgModelStore {
    /// The store on `pg`.
    pub fn new(pg: Arc<PgState>) -> PgModelStore {
        PgModelStore { pg }
    }
}

impl ModelStore for PgModelStore {
    fn load(&self, key: &str) -> Result<Option<String>, StoreError> {
        let (pg, key) = (self.pg.clone(), key.to_string());
        Ok(self.pg.block_on(async move {
            let c = pg.client().await?;
            let row = c.query_opt("SELECT model_json FROM learned_models WHERE route = $1", &[&key]).await?;
            Ok(row.map(|r| r.get::<_, String>(0)))
        })?)
    }

    fn save(&self, key: &str, json: &str) -> Result<(), StoreError> {
        let (pg, key, json, now) = (self.pg.clone(), key.to_string(), json.to_string(), now_ms());
        self.pg.block_on(async move {
            pg.execute(
                "INSERT INTO learned_models (route, model_json, saved_at) VALUES ($1, $2, $3)
                 ON CONFLICT (route) DO UPDATE SET model_json = excluded.model_json, saved_at = excluded.saved_at",
                vec![Box::new(key), Box::new(json), Box::new(now)],
            )
            .await
            .map(|_| ())
        })?;
        Ok(())
    }
}
