//! Observation: what the gateway tells operators and clients about a request besides its
//! reply. JSON log lines, the metrics a settled race records, and the names of the
//! response headers that describe a race (`x-tailcut-winner`, ...).

use crate::metrics::{Metrics, RouteSeries};
use axum::http::HeaderValue;
use axum::response::Response;
use serde_json::{json, Value};
use std::sync::Arc;
use tailcut_core::engine::Settled;
use tailcut_core::trace::{Decisions, RequestTrace};

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

/// Why a whole reply's race launched an extra attempt (`none` when it did not).
pub(crate) fn hedge_reason(d: &Decisions) -> &'static str {
    if d.cutover_fired {
        "queued_cutover"
    } else if d.safety_hedge_fired {
        "safety_hedge"
    } else if d.escalation_fired {
        "escalation"
    } else if d.hedge_launched {
        "timer"
    } else {
        "none"
    }
}

/// Counts attempts, wins, hedges, cancels and leaks of a settled request.
pub(crate) fn record_metrics(m: &Metrics, series: &RouteSeries, trace: &RequestTrace) {
    let route = series.route();
    for a in &trace.attempts {
        let spend = a.projected_cost_micro_usd.0 as f64;
        match series.provider(&a.provider) {
            Some(p) => {
                m.add_series(&p.attempts, 1.0);
                m.add_series(&p.spend, spend);
            }
            None => {
                m.inc("tailcut_attempts_total", &[("route", route), ("upstream", &a.provider)]);
                m.add("tailcut_spend_micro_usd_total", &[("route", route), ("upstream", &a.provider)], spend);
            }
        }
    }
    if let Some(w) = &trace.winner {
        match series.provider(w) {
            Some(p) => m.add_series(&p.wins, 1.0),
            None => m.inc("tailcut_wins_total", &[("route", route), ("upstream", w)]),
        }
    }
    if trace.decisions.hedged() {
        m.inc("tailcut_hedges_total", &[("route", route), ("reason", hedge_reason(&trace.decisions))]);
    }
    if trace.decisions.hedges_denied > 0 {
        m.add("tailcut_hedges_denied_total", &[("route", route)], f64::from(trace.decisions.hedges_denied));
    }
    for r in &trace.receipts {
        m.inc("tailcut_cancels_total", &[("route", route), ("evidence", r.evidence.wire())]);
        if r.leaked {
            m.inc("tailcut_leaks_total", &[("route", route)]);
        }
    }
}

/// Records a race's metrics once its losers are settled: at once when they already are
/// (no clone, no task), else from a task (a reply never waits for loser cleanup).
pub(crate) fn record_when_settled<R>(m: &Arc<Metrics>, route: &Arc<R>, settled: Settled)
where
    R: AsRef<RouteSeries> + Send + Sync + 'static,
{
    match settled.ready() {
        Ok(t) => record_metrics(m, route.as_ref().as_ref(), &t),
        Err(pending) => {
            let (m, route) = (m.clone(), route.clone());
            tokio::spawn(async move {
                if let Some(t) = pending.wait().await {
                    record_metrics(&m, route.as_ref().as_ref(), &t);
                }
            });
        }
    }
}

/// The gateway's response header names, built at compile time (a name given as a
/// string is parsed and checked on every insert).
pub(crate) mod names {
    use axum::http::HeaderName;
    /// The request id, propagated or generated.
    pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
    /// The provider whose reply the client got.
    pub const WINNER: HeaderName = HeaderName::from_static("x-tailcut-winner");
    /// Attempts launched for the request.
    pub const ATTEMPTS: HeaderName = HeaderName::from_static("x-tailcut-attempts");
    /// Why a hedge launched (`none` when none did).
    pub const HEDGE_REASON: HeaderName = HeaderName::from_static("x-tailcut-hedge-reason");
    /// The route that served the request.
    pub const ROUTE: HeaderName = HeaderName::from_static("x-tailcut-route");
}

/// Names the request id on a reply built elsewhere than a whole proxied reply (errors,
/// the jobs API), whose headers come from the route's template.
pub(crate) fn with_request_id(mut resp: Response, request_id: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(request_id) {
        resp.headers_mut().insert(names::REQUEST_ID, v);
    }
    resp
}
