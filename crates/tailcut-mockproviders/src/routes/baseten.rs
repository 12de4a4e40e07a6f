//! Baseten async predict, plus a webhook collector at `/collector/{id}`.

use super::shared::*;

pub(super) fn router() -> Router<Arc<State>> {
    Router::new()
        .route("/environments/{env}/async_predict", post(baseten_submit))
        .route("/async_request/{id}", get(baseten_status).delete(baseten_cancel))
        .route("/environments/{env}/async_queue_status", get(baseten_queue))
        .route("/collector/{id}", get(baseten_collected))
}

fn baseten_status_str(p: Phase) -> &'static str {
    match p {
        Phase::Queued => "QUEUED",
        Phase::Running => "IN_PROGRESS",
        Phase::Completed => "SUCCEEDED",
        Phase::Failed => "FAILED",
        Phase::Cancelled => "CANCELED",
        Phase::Expired => "EXPIRED",
    }
}

async fn baseten_submit(S(st): St, Json(req): Json<Value>) -> Response {
    let Some(input) = req.get("model_input").cloned() else {
        return body(StatusCode::BAD_REQUEST, json!({"error": "model_input is required"}));
    };
    let id = st.create(input);
    body(StatusCode::CREATED, json!({"request_id": id}))
}

async fn baseten_status(S(st): St, Path(id): Path<String>) -> Response {
    if let Some(r) = interfere(&st).await {
        return r;
    }
    let Some(v) = st.view(&id) else { return not_found() };
    body(
        StatusCode::OK,
        json!({"request_id": id, "model_id": "m", "deployment_id": "d", "status": baseten_status_str(v.phase), "webhook_status": if v.phase == Phase::Completed { "SUCCEEDED" } else { "PENDING" }, "errors": []}),
    )
}

async fn baseten_cancel(S(st): St, Path(id): Path<String>) -> Response {
    let Some(v) = st.view(&id) else { return not_found() };
    if v.phase == Phase::Queued {
        st.cancel(&id);
        body(StatusCode::OK, json!({"request_id": id, "canceled": true, "message": "Request canceled"}))
    } else {
        body(StatusCode::OK, json!({"request_id": id, "canceled": false, "message": "Only QUEUED requests can be canceled"}))
    }
}

async fn baseten_queue(S(st): St) -> Response {
    let _ = st;
    body(StatusCode::OK, json!({"model_id": "m", "deployment_id": "d", "num_queued_requests": 0, "num_in_progress_requests": 0}))
}

/// The user's webhook collector: outputs stored by request id.
async fn baseten_collected(S(st): St, Path(id): Path<String>) -> Response {
    let Some(v) = st.view(&id) else { return not_found() };
    match v.phase {
        Phase::Completed if st.malformed(&id) => raw(StatusCode::OK, "{\"data\": "),
        Phase::Completed => body(StatusCode::OK, json!({"request_id": id, "data": st.output(&id)})),
        _ => not_found(),
    }
}
