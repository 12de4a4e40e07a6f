//! fal's queue API under `/{owner}/{app}` (no cancelled state).

use super::shared::*;

pub(super) fn router() -> Router<Arc<State>> {
    Router::new()
        .route("/{o}/{a}", post(fal_submit))
        .route("/{o}/{a}/requests/{id}/status", get(fal_status))
        .route("/{o}/{a}/requests/{id}", get(fal_result))
        .route("/{o}/{a}/requests/{id}/cancel", put(fal_cancel))
}

async fn fal_submit(S(st): St, Path((o, a)): Path<(String, String)>, Json(input): Json<Value>) -> Response {
    let id = st.create(input);
    let base = format!("{}/{o}/{a}/requests/{id}", st.base);
    body(
        StatusCode::OK,
        json!({"request_id": id, "response_url": base, "status_url": format!("{base}/status"), "cancel_url": format!("{base}/cancel"), "status": "IN_QUEUE", "queue_position": 0}),
    )
}

async fn fal_status(S(st): St, Path((_o, _a, id)): Path<(String, String, String)>) -> Response {
    if let Some(r) = interfere(&st).await {
        return r;
    }
    let Some(v) = st.view(&id) else { return not_found() };
    match v.phase {
        Phase::Queued => body(StatusCode::ACCEPTED, json!({"status": "IN_QUEUE", "queue_position": 0})),
        Phase::Running => body(StatusCode::ACCEPTED, json!({"status": "IN_PROGRESS", "logs": null})),
        Phase::Completed | Phase::Expired => body(
            StatusCode::OK,
            json!({"status": "COMPLETED", "metrics": {"inference_time": v.execution_ms as f64 / 1000.0}, "error": null, "error_type": null}),
        ),
        Phase::Failed => body(StatusCode::OK, json!({"status": "COMPLETED", "error": "model raised", "error_type": "runner_error"})),
        // fal has no cancelled state: a cancelled request ends COMPLETED.
        Phase::Cancelled => {
            body(StatusCode::OK, json!({"status": "COMPLETED", "error": "Request cancelled by the client.", "error_type": "cancelled"}))
        }
    }
}

async fn fal_result(S(st): St, Path((_o, _a, id)): Path<(String, String, String)>) -> Response {
    if let Some(r) = interfere(&st).await {
        return r;
    }
    let Some(v) = st.view(&id) else { return not_found() };
    match v.phase {
        Phase::Completed if st.malformed(&id) => raw(StatusCode::OK, "{\"audio_base64\": \"UklG"),
        Phase::Completed => body(StatusCode::OK, st.output(&id)),
        Phase::Failed => body(StatusCode::INTERNAL_SERVER_ERROR, json!({"detail": "model raised"})),
        Phase::Cancelled => {
            body(StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST), json!({"detail": "Request cancelled by the client."}))
        }
        Phase::Expired => not_found(),
        _ => body(StatusCode::BAD_REQUEST, json!({"detail": "Request is still in progress"})),
    }
}

async fn fal_cancel(S(st): St, Path((_o, _a, id)): Path<(String, String, String)>) -> Response {
    match st.cancel(&id) {
        None => body(StatusCode::NOT_FOUND, json!({"status": "NOT_FOUND"})),
        Some(Phase::Queued) => body(StatusCode::OK, json!({"status": "OK"})),
        Some(Phase::Running) => body(StatusCode::ACCEPTED, json!({"status": "CANCELLATION_REQUESTED"})),
        Some(_) => body(StatusCode::BAD_REQUEST, json!({"status": "ALREADY_COMPLETED"})),
    }
}
