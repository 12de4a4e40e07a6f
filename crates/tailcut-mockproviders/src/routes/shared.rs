//! What every kind's routes share: JSON replies, injected faults (hangs, 503, 429), and
//! the broken replies of a vanished server.

pub(crate) use crate::engine::{Phase, State};
pub(crate) use axum::body::Body;
pub(crate) use axum::extract::{Path, State as S};
pub(crate) use axum::http::{header, HeaderMap, StatusCode};
pub(crate) use axum::response::{IntoResponse, Response};
pub(crate) use axum::routing::{get, post, put};
pub(crate) use axum::{Json, Router};
pub(crate) use serde_json::{json, Value};
pub(crate) use std::sync::atomic::Ordering;
pub(crate) use std::sync::Arc;

pub(crate) type St = S<Arc<State>>;

pub(crate) fn body(status: StatusCode, v: Value) -> Response {
    (status, Json(v)).into_response()
}

pub(crate) fn raw(status: StatusCode, text: &'static str) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], text).into_response()
}

/// Hang, 503 or 429 as the behaviour dictates for status-type calls.
pub(crate) async fn interfere(state: &State) -> Option<Response> {
    if state.behaviour().hang_status {
        futures::future::pending::<()>().await;
    }
    match state.injected_error() {
        Some((503, _)) => Some(body(StatusCode::SERVICE_UNAVAILABLE, json!({"error": "temporarily unavailable"}))),
        Some((429, after)) => Some(
            (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, after.to_string())], Json(json!({"error": "rate limited"})))
                .into_response(),
        ),
        _ => None,
    }
}

pub(crate) fn not_found() -> Response {
    body(StatusCode::NOT_FOUND, json!({"error": "job not found"}))
}

/// A response whose body breaks at once: the client sees the connection die.
pub(crate) fn broken() -> Response {
    let s = futures::stream::once(async { Err::<bytes::Bytes, std::io::Error>(std::io::Error::other("server vanished")) });
    Response::builder()
        .status(StatusCode::OK)
        .body(Body::from_stream(s))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

pub(crate) async fn gone(S(st): St, req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    if st.vanished.load(Ordering::SeqCst) {
        return broken();
    }
    next.run(req).await
}

/// Sleeps, or returns a broken response if the server vanishes first.
pub(crate) async fn work(st: &State, d: std::time::Duration) -> Option<Response> {
    tokio::select! {
        () = tokio::time::sleep(d) => None,
        () = st.vanishing() => Some(broken()),
    }
}

/// Counts a disconnect (and cancels the job) when a synchronous or streaming request is
/// dropped before completion.
pub(crate) struct DisconnectGuard {
    pub state: Arc<State>,
    pub id: String,
    pub done: bool,
}

impl Drop for DisconnectGuard {
    fn drop(&mut self) {
        if !self.done {
            self.state.disconnects.fetch_add(1, Ordering::SeqCst);
            if let Ok(mut jobs) = self.state.jobs.lock() {
                if let Some(j) = jobs.get_mut(&self.id) {
                    j.cancel_requested = true;
                    if !j.ignore_cancel {
                        j.cancelled_at = Some(tokio::time::Instant::now());
                    }
                }
            }
        }
    }
}
