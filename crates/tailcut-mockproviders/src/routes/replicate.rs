//! Replicate predictions under `/v1`.

use super::shared::*;

pub(super) fn router() -> Router<Arc<State>> {
    Router::new()
        .route("/v1/predictions", post(replicate_create))
        .route("/v1/models/{o}/{n}/predictions", post(replicate_create_model))
        .route("/v1/deployments/{o}/{n}/predictions", post(replicate_create_model))
        .route("/v1/predictions/{id}", get(replicate_get))
        .route("/v1/predictions/{id}/cancel", post(replicate_cancel))
        .route("/v1/account", get(|| async { Json(json!({"type": "user", "username": "mock"})) }))
}

fn replicate_status(p: Phase) -> &'static str {
    match p {
        Phase::Queued => "starting",
        Phase::Running => "processing",
        Phase::Completed | Phase::Expired => "succeeded",
        Phase::Failed => "failed",
        Phase::Cancelled => "canceled",
    }
}

fn replicate_obj(st: &State, id: &str) -> Option<Value> {
    let v = st.view(id)?;
    let done = matches!(v.phase, Phase::Completed | Phase::Failed | Phase::Cancelled | Phase::Expired);
    let mut out = json!({
        "id": id, "model": "mock/model", "version": "hidden", "input": v.input, "logs": "",
        "output": null, "data_removed": v.phase == Phase::Expired, "error": null,
        "status": replicate_status(v.phase), "created_at": "2026-12-02T00:00:00Z",
        "urls": {"get": format!("{}/v1/predictions/{id}", st.base), "cancel": format!("{}/v1/predictions/{id}/cancel", st.base)}
    });
    if v.phase == Phase::Completed {
        out["output"] = st.output(id);
    }
    if v.phase == Phase::Failed {
        out["error"] = json!("prediction failed");
    }
    if done {
        out["metrics"] =
            json!({"predict_time": v.execution_ms as f64 / 1000.0, "total_time": (v.delay_ms + v.execution_ms) as f64 / 1000.0});
    }
    Some(out)
}

async fn replicate_create(S(st): St, Json(req): Json<Value>) -> Response {
    if req.get("version").is_none() {
        return body(StatusCode::UNPROCESSABLE_ENTITY, json!({"title": "Invalid input", "status": 422, "detail": "version is required"}));
    }
    let id = st.create(req.get("input").cloned().unwrap_or(Value::Null));
    replicate_obj(&st, &id).map_or_else(not_found, |v| body(StatusCode::CREATED, v))
}

async fn replicate_create_model(S(st): St, Json(req): Json<Value>) -> Response {
    let id = st.create(req.get("input").cloned().unwrap_or(Value::Null));
    replicate_obj(&st, &id).map_or_else(not_found, |v| body(StatusCode::CREATED, v))
}

async fn replicate_get(S(st): St, Path(id): Path<String>) -> Response {
    if let Some(r) = interfere(&st).await {
        return r;
    }
    if st.malformed(&id) && st.view(&id).is_some_and(|v| v.phase == Phase::Completed) {
        return raw(StatusCode::OK, "{\"id\": \"x\", \"status\": \"succeeded\", \"output\": [");
    }
    replicate_obj(&st, &id).map_or_else(
        || body(StatusCode::NOT_FOUND, json!({"title": "Not found", "status": 404, "detail": "Not found."})),
        |v| body(StatusCode::OK, v),
    )
}

async fn replicate_cancel(S(st): St, Path(id): Path<String>) -> Response {
    match st.cancel(&id) {
        None => not_found(),
        Some(_) => replicate_obj(&st, &id).map_or_else(not_found, |v| body(StatusCode::OK, v)),
    }
}
