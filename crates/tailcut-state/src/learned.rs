//! Where learned models are kept between runs, by key (`{route}/{slot}`), as the JSON of
//! a `tailcut_model::Model`: [`ModelStore`], with one file per backend
//! (`learned/sqlite.rs`: table `learned_models` in the ledger's SQLite file;
//! `learned/postgres.rs`: the replicas' shared state) and [`MemoryModelStore`]. Several
//! gateway replicas sharing one store share what they learned (the last save wins).
//!
//! The store is synchronous: the gateway loads models while it builds a runtime and saves
//! them from a blocking thread (its saver), never on a serving thread.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

#[cfg(feature = "postgres")]
mod postgres;
mod sqlite;
#[cfg(feature = "postgres")]
pub use postgres::PgModelStore;
pub use sqlite::SqliteModelStore;

/// Why the model store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite.
    #[error("learned-model store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL.
    #[cfg(feature = "postgres")]
    #[error("learned-model store: {0}")]
    Pg(#[from] crate::pg::PgError),
    /// A model could not be written as JSON.
    #[error("learned-model store: {0}")]
    Encode(#[from] serde_json::Error),
    /// A lock was poisoned by a thread that panicked holding it.
    #[error("learned-model store: its lock was poisoned")]
    Poisoned,
}

/// Where learned models are kept between runs, by key (`{route}/{slot}`).
pub trait ModelStore: Send + Sync + std::fmt::Debug {
    /// The stored model JSON of `key`, if any.
    fn load(&self, key: &str) -> Result<Option<String>, StoreError>;
    /// Stores `json` under `key`, replacing what was there.
    fn save(&self, key: &str, json: &str) -> Result<(), StoreError>;
}

/// Models in memory: kept across reloads, lost on restart.
#[derive(Debug, Default)]
pub struct MemoryModelStore {
    rows: Mutex<HashMap<String, String>>,
}

impl ModelStore for MemoryModelStore {
    fn load(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self.rows.lock().map_err(|_| StoreError::Poisoned)?.get(key).cloned())
    }

    fn save(&self, key: &str, json: &str) -> Result<(), StoreError> {
        self.rows.lock().map_err(|_| StoreError::Poisoned)?.insert(key.to_string(), json.to_string());
        Ok(())
    }
}

/// The shared PostgreSQL state's store (`[state] url = "postgres://…"`).
#[cfg(feature = "postgres")]
pub fn pg_store(pg: Arc<crate::pg::PgState>) -> Arc<dyn ModelStore> {
    Arc::new(PgModelStore::new(pg))
}

/// The store without shared state: the ledger's SQLite file, or memory without one.
pub fn open_store(ledger: Option<&Path>) -> Result<Arc<dyn ModelStore>, StoreError> {
    Ok(match ledger {
        Some(p) => Arc::new(SqliteModelStore::open(p)?),
        None => Arc::new(MemoryModelStore::default()),
    })
}

/// Wall-clock milliseconds, as the rows record a save.
fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
