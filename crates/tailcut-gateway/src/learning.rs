//! Learned routes: the live models of `adaptive`, `singler` and `auto` routes, where they
//! are kept between runs, and how operators see them.
//!
//! This module owns:
//! - [`ModelStore`], the storage of learned models by key (`{route}/{slot}`, a slot being
//!   one raced kind of request: `chat`, `chat_stream`, ..., `jobs`), kept beside the
//!   ledger: in the shared PostgreSQL state (`[state] url = "postgres://…"`: every
//!   replica starts from what the others learned; the last save wins), in the ledger's
//!   SQLite file (table `learned_models`), or in memory (`budget.ledger = ":memory:"`);
//! - `LiveModels`, every learned policy of one runtime: built from the stored models
//!   (range-checked; a corrupt row is logged and the policy starts cold), saved when
//!   changed (by the saver, about once a second, and on drain), exported on `/metrics`
//!   and as JSON for `GET /admin/models` and `tailcut model show --from-gateway`.
//!
//! Each policy is fed every settled race's trace of its slot (`observe`), whole replies
//! with their whole latency, streams with their time to the first content token.

use crate::logline::log;
use crate::metrics::write_gauge;
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tailcut_core::policy::learned::LearnedPolicy;
use tailcut_core::sqlite_schema::{self, Migration, Step};
use tailcut_model::model::{gap_label, GAP_EDGES_S};
use tailcut_model::Model;

/// Why the model store failed.
#[derive(Debug, thiserror::Error)]
#[error("learned-model store: {0}")]
pub struct StoreError(String);

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError(e.to_string())
    }
}

/// Where learned models are kept between runs, by key (`{route}/{slot}`), as the JSON of
/// [`Model`]. Several gateway replicas sharing one store share what they learned (the
/// last save wins).
pub trait ModelStore: Send + Sync + std::fmt::Debug {
    /// The stored model JSON of `key`, if any.
    fn load(&self, key: &str) -> Result<Option<String>, StoreError>;
    /// Stores `json` under `key`, replacing what was there.
    fn save(&self, key: &str, json: &str) -> Result<(), StoreError>;
}

/// The learned-model table's migrations in a SQLite file (component `learned_models`).
const MODEL_MIGRATIONS: &[Migration] = &[Migration {
    version: 1,
    name: "learned_models",
    steps: &[Step::Sql(
        "CREATE TABLE IF NOT EXISTS learned_models (route TEXT PRIMARY KEY, model_json TEXT NOT NULL, saved_at_ms INTEGER NOT NULL)",
    )],
}];

/// Models in a SQLite file (the ledger's): table `learned_models(route TEXT PRIMARY KEY,
/// model_json TEXT NOT NULL, saved_at_ms INTEGER NOT NULL)`.
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
        sqlite_schema::migrate(&mut conn, "learned_models", MODEL_MIGRATIONS)?;
        Ok(SqliteModelStore { conn: Mutex::new(conn) })
    }
}

impl ModelStore for SqliteModelStore {
    fn load(&self, key: &str) -> Result<Option<String>, StoreError> {
        let conn = self.conn.lock().map_err(|_| StoreError("poisoned".into()))?;
        Ok(conn.query_row("SELECT model_json FROM learned_models WHERE route = ?1", params![key], |r| r.get(0)).optional()?)
    }

    fn save(&self, key: &str, json: &str) -> Result<(), StoreError> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        let conn = self.conn.lock().map_err(|_| StoreError("poisoned".into()))?;
        conn.execute(
            "INSERT INTO learned_models (route, model_json, saved_at_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT(route) DO UPDATE SET model_json = excluded.model_json, saved_at_ms = excluded.saved_at_ms",
            params![key, json, now],
        )?;
        Ok(())
    }
}

/// Models in memory: kept across reloads, lost on restart.
#[derive(Debug, Default)]
pub struct MemoryModelStore {
    rows: Mutex<HashMap<String, String>>,
}

impl ModelStore for MemoryModelStore {
    fn load(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self.rows.lock().map_err(|_| StoreError("poisoned".into()))?.get(key).cloned())
    }

    fn save(&self, key: &str, json: &str) -> Result<(), StoreError> {
        self.rows.lock().map_err(|_| StoreError("poisoned".into()))?.insert(key.to_string(), json.to_string());
        Ok(())
    }
}

/// Models in the shared PostgreSQL state (table `learned_models`, created by its
/// migrations), so a replica that starts, or restarts, decides with what the others
/// learned. Called off the serving threads (the saver runs on a blocking thread).
#[cfg(feature = "postgres")]
#[derive(Debug)]
pub struct PgModelStore {
    pg: Arc<tailcut_core::pg::PgState>,
}

#[cfg(feature = "postgres")]
impl ModelStore for PgModelStore {
    fn load(&self, key: &str) -> Result<Option<String>, StoreError> {
        let (pg, key) = (self.pg.clone(), key.to_string());
        self.pg
            .block_on(async move {
                let c = pg.client().await?;
                let row = c.query_opt("SELECT model_json FROM learned_models WHERE route = $1", &[&key]).await?;
                Ok(row.map(|r| r.get::<_, String>(0)))
            })
            .map_err(|e| StoreError(e.to_string()))
    }

    fn save(&self, key: &str, json: &str) -> Result<(), StoreError> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        let (pg, key, json) = (self.pg.clone(), key.to_string(), json.to_string());
        self.pg
            .block_on(async move {
                pg.execute(
                    "INSERT INTO learned_models (route, model_json, saved_at) VALUES ($1, $2, $3)
                     ON CONFLICT (route) DO UPDATE SET model_json = excluded.model_json, saved_at = excluded.saved_at",
                    vec![Box::new(key), Box::new(json), Box::new(now)],
                )
                .await
                .map(|_| ())
            })
            .map_err(|e| StoreError(e.to_string()))
    }
}

/// The shared PostgreSQL state's store (`[state] url = "postgres://…"`).
#[cfg(feature = "postgres")]
pub fn pg_store(pg: Arc<tailcut_core::pg::PgState>) -> Arc<dyn ModelStore> {
    Arc::new(PgModelStore { pg })
}

/// The store without shared state: the ledger's SQLite file, or memory without one.
pub fn open_store(ledger: Option<&Path>) -> Result<Arc<dyn ModelStore>, StoreError> {
    Ok(match ledger {
        Some(p) => Arc::new(SqliteModelStore::open(p)?),
        None => Arc::new(MemoryModelStore::default()),
    })
}

/// Checks a loaded model before a policy trusts it: the providers this policy covers, in
/// its order, and every number in range (finite, not negative; rates and shares within
/// [0, 1] where they are shares). `Model::from_json` has already checked the format.
pub fn check_model(m: &Model, names: &[String]) -> Result<(), String> {
    let have: Vec<&str> = m.providers.iter().map(|p| p.name.as_str()).collect();
    if have != names.iter().map(String::as_str).collect::<Vec<_>>() {
        return Err(format!("covers providers {have:?}, the policy has {names:?}"));
    }
    if !(m.config.half_life.is_finite() && m.config.half_life >= 1.0) {
        return Err(format!("half_life {} is not a number of at least 1", m.config.half_life));
    }
    if !(m.config.slow_quantile > 0.0 && m.config.slow_quantile < 1.0) {
        return Err(format!("slow_quantile {} is not in (0, 1)", m.config.slow_quantile));
    }
    // Every number of the saved form: finite and not negative (JSON has no NaN, but a
    // hand-edited or corrupt row may hold 1e999 or a negative count).
    fn walk(v: &Value, at: &str) -> Result<(), String> {
        match v {
            Value::Number(n) => match n.as_f64() {
                Some(x) if x.is_finite() && (0.0..=1e200).contains(&x) => Ok(()),
                _ => Err(format!("{at} = {n} is out of range (expected a finite number from 0 to 1e200)")),
            },
            Value::Array(a) => a.iter().enumerate().try_for_each(|(i, x)| walk(x, &format!("{at}[{i}]"))),
            Value::Object(o) => o.iter().try_for_each(|(k, x)| walk(x, &format!("{at}.{k}"))),
            _ => Ok(()),
        }
    }
    walk(&serde_json::to_value(m).map_err(|e| e.to_string())?, "model")?;
    for p in &m.providers {
        for (what, v) in [("failure rate", p.failed.rate(0.0, 0.0)), ("invalid rate", p.invalid.rate(0.0, 0.0))] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("{}: {what} {v} is not in [0, 1]", p.name));
            }
        }
        for q in [0.5, 0.99] {
            if p.latency.quantile(q).is_some_and(|x| !x.is_finite() || x < 0.0) {
                return Err(format!("{}: latency quantile {q} is not a finite, non-negative number", p.name));
            }
        }
    }
    Ok(())
}

/// One learned policy of a runtime, with its store key.
#[derive(Debug)]
pub(crate) struct LiveModel {
    /// `{route}/{slot}`.
    pub key: String,
    pub route: String,
    pub slot: &'static str,
    pub policy: Arc<LearnedPolicy>,
    /// The model's update count when last saved or loaded.
    saved: AtomicU64,
}

impl LiveModel {
    /// Feeds a settled race's trace.
    pub(crate) fn observe(&self, trace: &tailcut_core::trace::RequestTrace) {
        self.policy.observe_settled(trace);
    }
}

/// Every learned policy of one runtime, and the store they are saved to.
#[derive(Debug)]
pub(crate) struct LiveModels {
    store: Arc<dyn ModelStore>,
    pub models: Vec<Arc<LiveModel>>,
}

impl LiveModels {
    pub(crate) fn new(store: Arc<dyn ModelStore>) -> LiveModels {
        LiveModels { store, models: Vec::new() }
    }

    /// The stored model of `route/slot` for a policy over `names`, if there is a usable
    /// one: a missing row is a cold start; a corrupt or mismatched one is logged and is a
    /// cold start too, never an error.
    pub(crate) fn stored(&self, route: &str, slot: &str, names: &[String]) -> Option<Model> {
        let key = format!("{route}/{slot}");
        let text = match self.store.load(&key) {
            Ok(Some(t)) => t,
            Ok(None) => return None,
            Err(e) => {
                log("learned_model_unreadable", || json!({"key": key, "error": e.to_string()}));
                return None;
            }
        };
        match Model::from_json(&text).and_then(|m| check_model(&m, names).map(|()| m)) {
            Ok(m) => {
                log("learned_model_loaded", || json!({"key": key, "updates": m.updates}));
                Some(m)
            }
            Err(e) => {
                log("learned_model_rejected", || json!({"key": key, "error": e, "action": "starting cold"}));
                None
            }
        }
    }

    /// Registers a policy built for `route/slot`.
    pub(crate) fn add(&mut self, route: &str, slot: &'static str, policy: Arc<LearnedPolicy>) -> Arc<LiveModel> {
        let saved = AtomicU64::new(policy.updates());
        let m = Arc::new(LiveModel { key: format!("{route}/{slot}"), route: route.to_string(), slot, policy, saved });
        self.models.push(m.clone());
        m
    }

    /// Whether any model learned something since its last save (cheap: a check before a
    /// blocking save is scheduled).
    pub(crate) fn any_changed(&self) -> bool {
        self.models.iter().any(|m| m.policy.updates() != m.saved.load(Ordering::Relaxed))
    }

    /// Saves every model that learned something since its last save; returns how many
    /// were saved. A failed save is logged and retried next time.
    pub(crate) fn save_changed(&self) -> usize {
        let mut n = 0;
        for m in &self.models {
            let updates = m.policy.updates();
            if updates == m.saved.load(Ordering::Relaxed) {
                continue;
            }
            let Some(model) = m.policy.model() else { continue };
            let saved = serde_json::to_string(&model).map_err(|e| StoreError(e.to_string())).and_then(|j| self.store.save(&m.key, &j));
            match saved {
                Ok(()) => {
                    m.saved.store(updates, Ordering::Relaxed);
                    n += 1;
                }
                Err(e) => log("learned_model_save_failed", || json!({"key": m.key, "error": e.to_string()})),
            }
        }
        n
    }

    /// The learned gauges for `/metrics`: per route, slot and provider the learned
    /// latency quantiles (`tailcut_learned_latency_seconds{quantile}`), the samples
    /// (`tailcut_learned_samples`), the share of attempts known only through cancels long
    /// past every latency seen, which plans count as never ending
    /// (`tailcut_learned_unseen_tail`), and P(warm) per idle-gap bucket
    /// (`tailcut_learned_p_warm{gap}`, only buckets with observations).
    pub(crate) fn write_gauges(&self, out: &mut String) {
        if self.models.is_empty() {
            return;
        }
        let mut lat: Vec<(Vec<(&str, String)>, f64)> = Vec::new();
        let mut samples: Vec<(Vec<(&str, String)>, f64)> = Vec::new();
        let mut warm: Vec<(Vec<(&str, String)>, f64)> = Vec::new();
        let mut unseen: Vec<(Vec<(&str, String)>, f64)> = Vec::new();
        let models: Vec<(&LiveModel, Model)> = self.models.iter().filter_map(|m| Some((m.as_ref(), m.policy.model()?))).collect();
        for (live, model) in &models {
            for p in &model.providers {
                let base = vec![("route", live.route.clone()), ("slot", live.slot.to_string()), ("provider", p.name.clone())];
                samples.push((base.clone(), p.samples() as f64));
                unseen.push((base.clone(), p.latency.masses_known().1));
                for (q, label) in [(0.5, "0.5"), (0.95, "0.95"), (0.99, "0.99")] {
                    if let Some(x) = p.latency.quantile_reached(q).filter(|x| x.is_finite()) {
                        let mut l = base.clone();
                        l.push(("quantile", label.to_string()));
                        lat.push((l, x));
                    }
                }
                for (k, r) in p.warm_by_gap.iter().enumerate().take(GAP_EDGES_S.len() + 1) {
                    if r.samples() > 0 {
                        let mut l = base.clone();
                        l.push(("gap", gap_label(k)));
                        warm.push((l, r.rate(0.0, 0.0)));
                    }
                }
            }
        }
        for (name, rows) in [
            ("tailcut_learned_samples", &samples),
            ("tailcut_learned_latency_seconds", &lat),
            ("tailcut_learned_unseen_tail", &unseen),
            ("tailcut_learned_p_warm", &warm),
        ] {
            let labels: Vec<Vec<(&str, &str)>> = rows.iter().map(|(l, _)| l.iter().map(|(k, v)| (*k, v.as_str())).collect()).collect();
            let refs: Vec<(&[(&str, &str)], f64)> = labels.iter().zip(rows.iter()).map(|(l, (_, v))| (l.as_slice(), *v)).collect();
            if !refs.is_empty() {
                write_gauge(out, name, &refs);
            }
        }
    }

    /// Every live model as JSON (`GET /admin/models`): route, slot, policy label and the
    /// model in its saved form, which `tailcut model show` reads.
    pub(crate) fn to_json(&self) -> Value {
        let models: Vec<Value> = self
            .models
            .iter()
            .map(|m| {
                json!({
                    "key": m.key, "route": m.route, "slot": m.slot, "policy": tailcut_core::policy::Policy::label(m.policy.as_ref()),
                    "model": m.policy.model(),
                })
            })
            .collect();
        json!({ "models": models })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailcut_model::{ModelConfig, Observation, Outcome};

    fn model() -> Model {
        let mut m = Model::new(&[("a".into(), 0.001, 0.0), ("b".into(), 0.001, 0.0)], ModelConfig::default());
        for i in 0..20 {
            m.observe(&Observation {
                provider: i % 2,
                outcome: Outcome::Valid { latency_s: 0.01 },
                queue_s: None,
                idle_gap_s: Some(1.0),
                warm: Some(true),
            });
        }
        m
    }

    #[test]
    fn sqlite_store_round_trips_and_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.sqlite");
        let s = SqliteModelStore::open(&path).unwrap();
        assert_eq!(s.load("r/chat").unwrap(), None);
        s.save("r/chat", "{\"x\":1}").unwrap();
        s.save("r/chat", "{\"x\":2}").unwrap();
        drop(s);
        let s = SqliteModelStore::open(&path).unwrap();
        assert_eq!(s.load("r/chat").unwrap().as_deref(), Some("{\"x\":2}"));
    }

    #[test]
    fn a_loaded_model_is_range_checked() {
        let names = vec!["a".to_string(), "b".to_string()];
        let m = model();
        assert_eq!(check_model(&m, &names), Ok(()));
        assert!(check_model(&m, &["b".to_string(), "a".to_string()]).unwrap_err().contains("covers providers"));
        // A negative count or an absurd number in the stored row is refused.
        let text = serde_json::to_string(&m).unwrap();
        let bad = text.replacen("\"updates\":20", "\"updates\":-5", 1);
        assert_ne!(bad, text);
        let refused = Model::from_json(&bad).and_then(|m| check_model(&m, &names));
        assert!(refused.is_err(), "{refused:?}");
        let huge = text.replacen("\"half_life\":64.0", "\"half_life\":1e300", 1);
        assert_ne!(huge, text);
        assert!(Model::from_json(&huge).and_then(|m| check_model(&m, &names)).is_err());
    }

    #[test]
    fn a_corrupt_row_is_a_cold_start_not_a_panic() {
        let store: Arc<dyn ModelStore> = Arc::new(MemoryModelStore::default());
        store.save("r/chat", "{not json").unwrap();
        store.save("r/chat_stream", &serde_json::to_string(&model()).unwrap()).unwrap();
        let live = LiveModels::new(store);
        let names = vec!["a".to_string(), "b".to_string()];
        assert!(live.stored("r", "chat", &names).is_none());
        assert!(live.stored("r", "completions", &names).is_none(), "no row: cold");
        assert_eq!(live.stored("r", "chat_stream", &names).map(|m| m.updates), Some(20));
    }
}
