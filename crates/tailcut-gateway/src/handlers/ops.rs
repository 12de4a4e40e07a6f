//! The operations paths: `/healthz`, `/readyz` (503 while draining), `/metrics`
//! (Prometheus text), `/admin/models` (learned models, admin keys), and the JSON answers for an unknown path or method.

use crate::error::{ApiError, NotFound};
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub(crate) async fn healthz() -> Response {
    Json(json!({"status": "ok"})).into_response()
}

pub(crate) async fn readyz(State(st): State<Arc<AppState>>) -> Response {
    if st.draining.load(Ordering::Relaxed) {
        return (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"status": "draining"}))).into_response();
    }
    Json(json!({"status": "ready", "routes": st.rt().config.routes.len()})).into_response()
}

pub(crate) async fn metrics(State(st): State<Arc<AppState>>) -> Response {
    let mut text = st.metrics.render();
    let limit = st.in_flight_limit;
    let in_flight = limit.saturating_sub(st.in_flight.available_permits());
    text.push_str(&format!(
        "# TYPE tailcut_in_flight gauge\ntailcut_in_flight {in_flight}\n# TYPE tailcut_in_flight_limit gauge\ntailcut_in_flight_limit {limit}\n"
    ));
    text.push_str(&format!(
        "# TYPE tailcut_connections gauge\ntailcut_connections {}\n# TYPE tailcut_connections_limit gauge\ntailcut_connections_limit {}\n",
        st.connections.open(),
        st.connections.cap()
    ));
    let rt = st.rt();
    crate::budgets::write_gauges(&rt, &mut text);
    rt.learned.write_gauges(&mut text);
    ([("content-type", "text/plain; version=0.0.4")], text).into_response()
}

/// `GET /admin/models`: every learned route's live model as JSON (admin keys, as `/ui`);
/// `tailcut model show --from-gateway` prints it as tables.
pub(crate) async fn models(State(st): State<Arc<AppState>>, headers: axum::http::HeaderMap) -> Response {
    let rt = st.rt();
    if let Err(e) = crate::ui::admin(&rt, &headers) {
        return e.into_response();
    }
    let mut resp = Json(rt.learned.to_json()).into_response();
    resp.headers_mut().insert("cache-control", axum::http::HeaderValue::from_static("no-store"));
    resp
}

pub(crate) async fn method_not_allowed() -> Response {
    ApiError::MethodNotAllowed.into_response()
}

pub(crate) async fn not_found() -> Response {
    ApiError::from(NotFound::Path).into_response()
}
