//! The binary's logger: every `tailcut` event the libraries emit through `tracing`
//! ([`tailcut_core::log`]) becomes one JSON object per line on stderr: `ts`, `event` and
//! the event's fields, the shape the gateway's log lines have always had. `TAILCUT_LOG=off` installs nothing,
//! so events cost one check and their fields are never built. Events of other targets
//! (dependencies' own `tracing` output) are not written.

use std::io::Write;
use tracing::field::{Field, Visit};
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

/// Installs the JSON-lines logger as the process's subscriber, unless `TAILCUT_LOG=off`.
pub fn install() {
    if std::env::var("TAILCUT_LOG").is_ok_and(|v| v == "off") {
        return;
    }
    let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry().with(JsonLines));
}

/// Writes `tailcut` events as JSON lines on stderr.
#[derive(Debug)]
struct JsonLines;

impl<S: Subscriber> Layer<S> for JsonLines {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> tracing::subscriber::Interest {
        if is_ours(meta) {
            tracing::subscriber::Interest::always()
        } else {
            tracing::subscriber::Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>, _: Context<'_, S>) -> bool {
        is_ours(meta)
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut fields = EventFields::default();
        event.record(&mut fields);
        let line = json_line(&tailcut_core::trace::now_rfc3339(), &fields.event, &fields.fields);
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
}

fn is_ours(meta: &Metadata<'_>) -> bool {
    meta.target() == tailcut_core::log::TARGET
}

/// The two fields a `tailcut` event carries: its name and its JSON object.
#[derive(Debug, Default)]
struct EventFields {
    event: String,
    fields: String,
}

impl Visit for EventFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "event" {
            self.event = value.to_string();
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        // `fields = %json` arrives as a Display value, which tracing records through Debug.
        if field.name() == "fields" {
            self.fields = format!("{value:?}");
        }
    }
}

/// One JSON object on one line: `ts`, `event` and the members of `fields` (a JSON
/// object), keys in the order serde_json's map keeps them, as the gateway always wrote.
fn json_line(ts: &str, event: &str, fields: &str) -> String {
    let mut map = match serde_json::from_str::<serde_json::Value>(fields) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    map.insert("ts".into(), ts.into());
    map.insert("event".into(), event.into());
    let mut line = serde_json::Value::Object(map).to_string();
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_the_event_then_its_fields_in_one_object() {
        let line = json_line("2026-12-04T00:00:00Z", "request", r#"{"request_id":"r1","status":200}"#);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v, serde_json::json!({"ts": "2026-12-04T00:00:00Z", "event": "request", "request_id": "r1", "status": 200}));
        assert!(line.ends_with("}\n") && line.lines().count() == 1);
        let empty: serde_json::Value = serde_json::from_str(&json_line("t", "draining", "{}")).unwrap();
        assert_eq!(empty, serde_json::json!({"ts": "t", "event": "draining"}));
    }
}
