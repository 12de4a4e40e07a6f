//! The gateway's log events, one per thing that happened (`request`, `draining`, ...).
//! Every module logs through here; [`crate::observe`] re-exports it beside the metrics.
//! Events go out through [`tailcut_core::log`] (`tracing`): the `tailcut` binary writes
//! each as one JSON line on stderr (`TAILCUT_LOG=off` silences them), and a gateway
//! embedded without a subscriber pays one check per event.

use serde_json::Value;

/// One log event. The fields are built only when someone listens, so a silenced
/// gateway pays nothing for them on the request path.
pub(crate) fn log(event: &str, fields: impl FnOnce() -> Value) {
    tailcut_core::log::info(event, fields);
}

/// One log event outside a request (e.g. from the `serve` command).
pub fn log_event(event: &str, fields: Value) {
    log(event, || fields);
}
