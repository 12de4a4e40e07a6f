//! A generic JSON job API: `POST /jobs`, `GET /jobs/{id}`, `DELETE /jobs/{id}`.

use super::shared::*;

pub(super) fn router() -> Router<Arc<State>> {
    Router::new().route("/jobs", post(generic_submit)).route("/jobs/{id}", get(generic_status).delete(generic_cancel))
}

async fn generic_submit(S(st): St, Json(req): Json<Value>) -> Response {
    let id = st.create(req);
    body(StatusCode::ACCEPTED, json!({"job": {"id": id}}))
}

async fn generic_status(S(st): St, Path(id): Path<String>) -> Response {
    if let Some(r) = interfere(&st).await {
        return r;
    }
    let Some(v) = st.view(&id) else { return not_found() };
    if v.phase == Phase::Completed && st.malformed(&id) {
        return raw(StatusCode::OK, "{\"state\": \"done\", \"result\": ");
    }
    let state = match v.phase {
        Phase::Queued => "waiting",
        Phase::Running => "working",
        Phase::Completed => "done",
        Phase::Failed => "error",
        Phase::Cancelled => "cancelled",
        Phase::Expired => return not_found(),
    };
    let mut out = json!({"id": id, "state": state, "timing": {"queue_ms": v.delay_ms, "exec_ms": v.execution_ms}});
    if v.phase == Phase::Completed {
        out["result"] = st.output(&id);
    }
    body(StatusCode::OK, out)
}

async fn generic_cancel(S(st): St, Path(id): Path<String>) -> Response {
    match st.cancel(&id) {
        None => not_found(),
        Some(_) => body(StatusCode::OK, json!({"id": id, "cancelling": true})),
    }
}
