//! Cerebrium's synchronous REST inference under `/v4/{project}/{app}/{function}`.

use super::shared::*;

pub(super) fn router() -> Router<Arc<State>> {
    Router::new().route("/v4/{p}/{a}/{f}", post(cerebrium_run))
}

async fn cerebrium_run(S(st): St, Json(input): Json<Value>) -> Response {
    if let Some(r) = interfere(&st).await {
        return r;
    }
    let id = st.create(input);
    let mut guard = DisconnectGuard { state: st.clone(), id: id.clone(), done: false };
    let b = st.behaviour();
    if let Some(r) = work(&st, b.queue + b.run).await {
        return r;
    }
    guard.done = true;
    let v = st.view(&id);
    if b.malformed {
        return raw(StatusCode::OK, "{\"run_id\": \"x\", \"result\": {");
    }
    if b.fail {
        return body(StatusCode::INTERNAL_SERVER_ERROR, json!({"run_id": id, "error": "function raised"}));
    }
    body(StatusCode::OK, json!({"run_id": id, "run_time_ms": v.map_or(0, |v| v.execution_ms) as f64, "result": st.output(&id)}))
}
