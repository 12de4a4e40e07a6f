//! Learned models in a SQLite file (the ledger's): table `learned_models(route TEXT
//! PRIMARY KEY, model_json TEXT NOT NULL, saved_at_ms INTEGER NOT NULL)`, created by the
//! numbered migrations of component `learned_models`.

use super::{now_ms, ModelStore, StoreError};
use crate::sqlite_schema::{self, Migration, Step};
use rusqlite::{params, Connection, OptionalExtension};
use std::path::Path;
use std::sync::Mutex;

/// The learned-model table's migrations in a SQLite file (component `learned_models`).
/// Never edit one that has shipped: add the next.
const MIGRATIONS: &[Migration] = &[Migration {
    version: 1,
    name: "learned_models",
    steps: &[Step::Sql(
        "CREATE TABLE IF NOT EXISTS learned_models (route TEXT PRIMARY KEY, model_json TEXT NOT NULL, saved_at_ms INTEGER NOT NULL)",
    )],
}];

/// Models in a SQLite file.
#[derive(Debug)]
pub struct SqliteModelStore {
    conn: Mutex<Connection>,
}

impl SqliteModelStore {
    /// Opens (creating) the table in `path`.
    pub fn open(path: &Path) -> Result<SqliteModelStore, StoreError> {
        if let Some(parent) = path.parent().filter(|x| !x.as_os_str().is_empty()) {
            let _ = std::fs::create_dir_all(parent);
        }
        let mut conn = sqlite_schema::open(path)?;
        sqlite_schema::migrate(&mut conn, "learned_models", MIGRATIONS)?;
        Ok(SqliteModelStore { conn: Mutex::new(conn) })
    }
}

impl ModelStore for SqliteModelStore {
    fn load(&self, key: &str) -> Result<Option<String>, StoreError> {
        let conn = self.conn.lock().map_err(|_| StoreError::Poisoned)?;
        Ok(conn.query_row("SELECT model_json FROM learned_models WHERE route = ?1", params![key], |r| r.get(0)).optional()?)
    }

    fn save(&self, key: &str, json: &str) -> Result<(), StoreError> {
        let conn = self.conn.lock().map_err(|_| StoreError::Poisoned)?;
        conn.execute(
            "INSERT INTO learned_models (route, model_json, saved_at_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT(route) DO UPDATE SET model_json = excluded.model_json, saved_at_ms = excluded.saved_at_ms",
            params![key, json, now_ms()],
        )?;
        Ok(())
    }
}
