//! RunPod's serverless queue API under `/v2/{endpoint}`.

use super::shared::*;

pub(super) fn router() -> Router<Arc<State>> {
    Router::new()
        .route("/v2/{ep}/run", post(runpod_run))
        .route("/v2/{ep}/status/{id}", get(runpod_status))
        .route("/v2/{ep}/cancel/{id}", post(runpod_cancel))
        .route("/v2/{ep}/health", get(runpod_health))
        .route("/v2/{ep}/stream/{id}", get(runpod_stream))
        .route("/v2/{ep}/purge-queue", post(runpod_purge))
}

fn runpod_status_str(p: Phase) -> &'static str {
    match p {
        Phase::Queued => "IN_QUEUE",
        Phase::Running => "IN_PROGRESS",
        Phase::Completed => "COMPLETED",
        Phase::Failed => "FAILED",
        Phase::Cancelled => "CANCELLED",
        Phase::Expired => "COMPLETED",
    }
}

async fn runpod_run(S(st): St, Json(req): Json<Value>) -> Response {
    let Some(input) = req.get("input").cloned() else {
        return body(StatusCode::BAD_REQUEST, json!({"error": "input is required"}));
    };
    let id = st.create(input);
    body(StatusCode::OK, json!({"id": format!("{id}-u1"), "status": "IN_QUEUE"}))
}

fn runpod_job(st: &State, id: &str) -> Option<Value> {
    let job = id.trim_end_matches("-u1");
    let v = st.view(job)?;
    if v.phase == Phase::Expired {
        return None;
    }
    let mut out = json!({"id": id, "status": runpod_status_str(v.phase)});
    if v.phase != Phase::Queued {
        out["delayTime"] = json!(v.delay_ms);
        out["workerId"] = json!("mockworker1");
    }
    match v.phase {
        Phase::Completed | Phase::Failed | Phase::Cancelled => out["executionTime"] = json!(v.execution_ms),
        _ => {}
    }
    if v.phase == Phase::Completed {
        out["output"] = st.output(job);
    }
    if v.phase == Phase::Failed {
        out["error"] = json!("handler raised an exception");
    }
    Some(out)
}

async fn runpod_status(S(st): St, Path((_ep, id)): Path<(String, String)>) -> Response {
    if let Some(r) = interfere(&st).await {
        return r;
    }
    if st.malformed(id.trim_end_matches("-u1")) && st.view(id.trim_end_matches("-u1")).is_some_and(|v| v.phase == Phase::Completed) {
        return raw(StatusCode::OK, "{\"id\": \"x\", \"status\": \"COMPLETED\", \"output\": {\"audio_base64\": ");
    }
    runpod_job(&st, &id).map_or_else(not_found, |v| body(StatusCode::OK, v))
}

async fn runpod_cancel(S(st): St, Path((_ep, id)): Path<(String, String)>) -> Response {
    let job = id.trim_end_matches("-u1");
    match st.cancel(job) {
        None => not_found(),
        Some(_) => body(StatusCode::OK, json!({"id": id, "status": "CANCELLED"})),
    }
}

async fn runpod_stream(S(st): St, Path((_ep, id)): Path<(String, String)>) -> Response {
    let job = id.trim_end_matches("-u1");
    let Some(v) = st.view(job) else { return not_found() };
    let items = if v.phase == Phase::Completed { json!([{"output": st.output(job)}]) } else { json!([]) };
    body(StatusCode::OK, json!({"status": runpod_status_str(v.phase), "stream": items}))
}

async fn runpod_health(S(st): St, headers: HeaderMap) -> Response {
    if headers.get(header::AUTHORIZATION).is_none() {
        return body(StatusCode::UNAUTHORIZED, json!({"error": "missing api key"}));
    }
    let n = st.counter.load(Ordering::SeqCst);
    body(
        StatusCode::OK,
        json!({"jobs": {"completed": n, "failed": 0, "inProgress": 0, "inQueue": 0, "retried": 0}, "workers": {"idle": 1, "running": 0}}),
    )
}

async fn runpod_purge() -> Response {
    body(StatusCode::OK, json!({"removed": 0, "status": "completed"}))
}
