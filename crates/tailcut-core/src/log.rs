//! Structured log events: what the libraries have to say outside a return value (a lease
//! not returned, a heartbeat that failed, a request served). Each event is a name and a
//! JSON object of fields, emitted through `tracing` under the target [`TARGET`]; the
//! binary decides whether and how they are written (`tailcut`'s logger prints one JSON
//! line per event on stderr). With no subscriber installed, an event costs one check and
//! its fields are never built.

use serde_json::Value;

/// The `tracing` target of every tailcut event.
pub const TARGET: &str = "tailcut";

/// An informational event: `fields` is called only when someone listens.
pub fn info(event: &str, fields: impl FnOnce() -> Value) {
    if tracing::enabled!(target: TARGET, tracing::Level::INFO) {
        let fields = fields();
        tracing::info!(target: TARGET, event, fields = %fields);
    }
}

/// A warning: something went wrong that the caller cannot be told about (a background
/// write failed, a lease was not returned).
pub fn warn(event: &str, fields: impl FnOnce() -> Value) {
    if tracing::enabled!(target: TARGET, tracing::Level::WARN) {
        let fields = fields();
        tracing::warn!(target: TARGET, event, fields = %fields);
    }
}
