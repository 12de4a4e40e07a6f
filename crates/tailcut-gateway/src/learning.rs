//! Learned routes: the live models of `adaptive`, `singler` and `auto` routes, where they
//! are kept between runs, and how operators see them.
//!
//! This module owns:
//! - which [`ModelStore`] keeps learned models by key (`{route}/{slot}`, a slot being one
//!   raced kind of request: `chat`, `chat_stream`, ..., `jobs`): the shared PostgreSQL
//!   state (`[state] url = "postgres://…"`: every replica starts from what the others
//!   learned; the last save wins), the ledger's SQLite file, or memory
//!   (`budget.ledger = ":memory:"`); the stores themselves are `tailcut_state::learned`;
//! - `LiveModels`, every learned policy of one runtime: built from the stored models
//!   (range-checked; a corrupt row is logged and the policy starts cold), saved when
//!   changed (by the saver, about once a second, and on drain), exported on `/metrics`
//!   and as JSON for `GET /admin/models` and `tailcut model show --from-gateway`.
//!
//! Each policy is fed every settled race's trace of its slot (`observe`), whole replies
//! with their whole latency, streams with their time to the first content token.

use crate::logline::log;
use crate::metrics::write_gauge;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tailcut_core::policy::learned::LearnedPolicy;
use tailcut_model::model::{gap_label, GAP_EDGES_S};
use tailcut_model::Model;

pub use tailcut_state::learned::{open_store, MemoryModelStore, ModelStore, SqliteModelStore, StoreError};
#[cfg(feature = "postgres")]
pub use tailcut_state::learned::{pg_store, PgModelStore};

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
        match Model::from_json(&text).map_err(|e| e.to_string()).and_then(|m| check_model(&m, names).map(|()| m)) {
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
            let saved = serde_json::to_string(&model).map_err(StoreError::from).and_then(|j| self.store.save(&m.key, &j));
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
    /// (`tailcut_learned_unseen_tail`), the shifts its detector found (each restarted the
    /// provider's learned shape: `tailcut_learned_shifts`), and P(warm) per idle-gap
    /// bucket (`tailcut_learned_p_warm{gap}`, only buckets with observations).
    pub(crate) fn write_gauges(&self, out: &mut String) {
        if self.models.is_empty() {
            return;
        }
        let mut lat: Vec<(Vec<(&str, String)>, f64)> = Vec::new();
        let mut samples: Vec<(Vec<(&str, String)>, f64)> = Vec::new();
        let mut warm: Vec<(Vec<(&str, String)>, f64)> = Vec::new();
        let mut unseen: Vec<(Vec<(&str, String)>, f64)> = Vec::new();
        let mut shifts: Vec<(Vec<(&str, String)>, f64)> = Vec::new();
        let models: Vec<(&LiveModel, Model)> = self.models.iter().filter_map(|m| Some((m.as_ref(), m.policy.model()?))).collect();
        for (live, model) in &models {
            for p in &model.providers {
                let base = vec![("route", live.route.clone()), ("slot", live.slot.to_string()), ("provider", p.name.clone())];
                samples.push((base.clone(), p.samples() as f64));
                unseen.push((base.clone(), p.latency.masses_known().1));
                shifts.push((base.clone(), p.shift.shifts as f64));
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
            ("tailcut_learned_shifts", &shifts),
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
        let refused = Model::from_json(&bad).map_err(|e| e.to_string()).and_then(|m| check_model(&m, &names));
        assert!(refused.is_err(), "{refused:?}");
        let huge = text.replacen("\"half_life\":64.0", "\"half_life\":1e300", 1);
        assert_ne!(huge, text);
        assert!(Model::from_json(&huge).map_err(|e| e.to_string()).and_then(|m| check_model(&m, &names)).is_err());
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
