//! JSON log lines on stderr, one per event (`TAILCUT_LOG=off` silences them). Every
//! module logs through here; [`crate::observe`] re-exports it beside the metrics.

use serde_json::{json, Value};

/// Whether JSON logs are on (`TAILCUT_LOG=off` turns them off).
fn logging() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("TAILCUT_LOG").map_or(true, |v| v != "off"))
}

/// One JSON log line on stderr. The fields are built only when logging is on, so a
/// silenced gateway pays nothing for them on the request path.
pub(crate) fn log(event: &str, fields: impl FnOnce() -> Value) {
    if !logging() {
        return;
    }
    let mut v = json!({"ts": tailcut_core::trace::now_rfc3339(), "event": event});
    if let (Some(m), Value::Object(f)) = (v.as_object_mut(), fields()) {
        m.extend(f);
    }
    eprintln!("{v}");
}

/// One JSON log line for an event outside a request (e.g. from the `serve` command).
pub fn log_event(event: &str, fields: Value) {
    log(event, || fields);
}
