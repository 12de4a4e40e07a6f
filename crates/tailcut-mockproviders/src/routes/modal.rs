//! The Modal web-endpoint wrapper shipped in `examples/modal_job_endpoint.py`.

use super::shared::*;

pub(super) fn router() -> Router<Arc<State>> {
    Router::new()
        .route("/submit", post(modal_submit))
        .route("/status/{id}", get(modal_status))
        .route("/result/{id}", get(modal_result))
        .route("/cancel/{id}", post(modal_cancel))
        .route("/health", get(|| async { Json(json!({"ok": true})) }))
}

async fn modal_submit(S(st): St, Json(input): Json<Value>) -> Response {
    let id = st.create(input);
    body(StatusCode::OK, json!({"call_id": format!("fc-{id}")}))
}

fn modal_input_status(p: Phase) -> &'static str {
    match p {
        Phase::Queued | Phase::Running => "PENDING",
        Phase::Completed => "SUCCESS",
        Phase::Failed => "FAILURE",
        Phase::Cancelled => "TERMINATED",
        Phase::Expired => "EXPIRED",
    }
}

async fn modal_status(S(st): St, Path(id): Path<String>) -> Response {
    if let Some(r) = interfere(&st).await {
        return r;
    }
    let Some(v) = st.view(id.trim_start_matches("fc-")) else { return not_found() };
    body(StatusCode::OK, json!({"call_id": id, "status": modal_input_status(v.phase)}))
}

async fn modal_result(S(st): St, Path(id): Path<String>) -> Response {
    if let Some(r) = interfere(&st).await {
        return r;
    }
    let job = id.trim_start_matches("fc-");
    let Some(v) = st.view(job) else { return not_found() };
    match v.phase {
        Phase::Queued | Phase::Running => body(StatusCode::ACCEPTED, json!({"status": "PENDING"})),
        Phase::Completed if st.malformed(job) => raw(StatusCode::OK, "{\"result\": "),
        Phase::Completed => body(StatusCode::OK, json!({"result": st.output(job)})),
        Phase::Failed => body(StatusCode::INTERNAL_SERVER_ERROR, json!({"status": "FAILURE", "error": "function raised"})),
        Phase::Cancelled => body(StatusCode::CONFLICT, json!({"status": "TERMINATED"})),
        Phase::Expired => body(StatusCode::GONE, json!({"status": "EXPIRED"})),
    }
}

async fn modal_cancel(S(st): St, Path(id): Path<String>) -> Response {
    match st.cancel(id.trim_start_matches("fc-")) {
        None => not_found(),
        Some(_) => body(StatusCode::OK, json!({"cancelled": true})),
    }
}
