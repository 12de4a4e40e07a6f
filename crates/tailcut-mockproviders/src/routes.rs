//! Each provider's HTTP surface over the shared engine.

use crate::engine::{Flavor, Phase, State};
use axum::body::Body;
use axum::extract::{Path, State as S};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;

type St = S<Arc<State>>;

fn body(status: StatusCode, v: Value) -> Response {
    (status, Json(v)).into_response()
}

fn raw(status: StatusCode, text: &'static str) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], text).into_response()
}

/// Hang, 503 or 429 as the behaviour dictates for status-type calls.
async fn interfere(state: &State) -> Option<Response> {
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

fn not_found() -> Response {
    body(StatusCode::NOT_FOUND, json!({"error": "job not found"}))
}

/// A response whose body breaks at once: the client sees the connection die.
fn broken() -> Response {
    let s = futures::stream::once(async { Err::<bytes::Bytes, std::io::Error>(std::io::Error::other("server vanished")) });
    Response::builder()
        .status(StatusCode::OK)
        .body(Body::from_stream(s))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

async fn gone(S(st): St, req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    if st.vanished.load(Ordering::SeqCst) {
        return broken();
    }
    next.run(req).await
}

/// Sleeps, or returns a broken response if the server vanishes first.
async fn work(st: &State, d: std::time::Duration) -> Option<Response> {
    tokio::select! {
        () = tokio::time::sleep(d) => None,
        () = st.vanishing() => Some(broken()),
    }
}

pub(crate) fn router(state: Arc<State>) -> Router {
    let r = match state.flavor {
        Flavor::RunPod => Router::new()
            .route("/v2/{ep}/run", post(runpod_run))
            .route("/v2/{ep}/status/{id}", get(runpod_status))
            .route("/v2/{ep}/cancel/{id}", post(runpod_cancel))
            .route("/v2/{ep}/health", get(runpod_health))
            .route("/v2/{ep}/stream/{id}", get(runpod_stream))
            .route("/v2/{ep}/purge-queue", post(runpod_purge)),
        Flavor::Replicate => Router::new()
            .route("/v1/predictions", post(replicate_create))
            .route("/v1/models/{o}/{n}/predictions", post(replicate_create_model))
            .route("/v1/deployments/{o}/{n}/predictions", post(replicate_create_model))
            .route("/v1/predictions/{id}", get(replicate_get))
            .route("/v1/predictions/{id}/cancel", post(replicate_cancel))
            .route("/v1/account", get(|| async { Json(json!({"type": "user", "username": "mock"})) })),
        Flavor::Fal => Router::new()
            .route("/{o}/{a}", post(fal_submit))
            .route("/{o}/{a}/requests/{id}/status", get(fal_status))
            .route("/{o}/{a}/requests/{id}", get(fal_result))
            .route("/{o}/{a}/requests/{id}/cancel", put(fal_cancel)),
        Flavor::Baseten => Router::new()
            .route("/environments/{env}/async_predict", post(baseten_submit))
            .route("/async_request/{id}", get(baseten_status).delete(baseten_cancel))
            .route("/environments/{env}/async_queue_status", get(baseten_queue))
            .route("/collector/{id}", get(baseten_collected)),
        Flavor::Modal => Router::new()
            .route("/submit", post(modal_submit))
            .route("/status/{id}", get(modal_status))
            .route("/result/{id}", get(modal_result))
            .route("/cancel/{id}", post(modal_cancel))
            .route("/health", get(|| async { Json(json!({"ok": true})) })),
        Flavor::Cerebrium => Router::new().route("/v4/{p}/{a}/{f}", post(cerebrium_run)),
        Flavor::OpenAi => {
            Router::new().route("/v1/chat/completions", post(openai_chat)).route("/v1/completions", post(openai_completions)).route(
                "/v1/models",
                get(|| async { Json(json!({"object": "list", "data": [{"id": "mock-model", "object": "model", "owned_by": "mock"}]})) }),
            )
        }
        Flavor::Generic => {
            Router::new().route("/jobs", post(generic_submit)).route("/jobs/{id}", get(generic_status).delete(generic_cancel))
        }
    };
    r.layer(axum::middleware::from_fn_with_state(state.clone(), gone)).with_state(state)
}

// === RunPod ===

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

// === Replicate ===

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

// === fal ===

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

// === Baseten ===

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

// === Modal (the example wrapper) ===

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

// === Cerebrium (synchronous) ===

/// Counts a disconnect when dropped before completion.
struct DisconnectGuard {
    state: Arc<State>,
    id: String,
    done: bool,
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

// === OpenAI-compatible ===

fn chat_chunk(id: &str, delta: Value, finish: Option<&str>) -> String {
    let v = json!({"id": id, "object": "chat.completion.chunk", "created": 1_700_000_000, "model": "mock-model",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]});
    format!("data: {v}\n\n")
}

async fn openai_chat(S(st): St, Json(req): Json<Value>) -> Response {
    if req.get("messages").and_then(Value::as_array).is_none() {
        return body(
            StatusCode::BAD_REQUEST,
            json!({"error": {"message": "messages is required", "type": "BadRequestError", "param": null, "code": 400}}),
        );
    }
    if let Some(r) = interfere(&st).await {
        return r;
    }
    let id = st.create(req.clone());
    let b = st.behaviour();
    let stream = req.get("stream").and_then(Value::as_bool).unwrap_or(false);
    if !stream {
        let mut guard = DisconnectGuard { state: st.clone(), id: id.clone(), done: false };
        if let Some(r) = work(&st, b.queue + b.run).await {
            return r;
        }
        guard.done = true;
        if b.malformed {
            return raw(StatusCode::OK, "{\"id\": \"chatcmpl-x\", \"choices\": [");
        }
        let text: Vec<String> = (0..b.tokens).map(|i| format!("tok{i}")).collect();
        return body(
            StatusCode::OK,
            json!({"id": format!("chatcmpl-{id}"), "object": "chat.completion", "created": 1_700_000_000, "model": "mock-model",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text.join(" ")}, "logprobs": null, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": b.tokens, "total_tokens": 5 + b.tokens}}),
        );
    }
    let include_usage = req.pointer("/stream_options/include_usage").and_then(Value::as_bool).unwrap_or(false);
    let st2 = st.clone();
    let s = async_stream(st2, id, b, include_usage);
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(s))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

fn async_stream(
    st: Arc<State>,
    id: String,
    b: crate::engine::Behaviour,
    include_usage: bool,
) -> impl futures::Stream<Item = Result<bytes::Bytes, std::io::Error>> {
    let cid = format!("chatcmpl-{id}");
    let guard = DisconnectGuard { state: st, id, done: false };
    futures::stream::unfold((0usize, guard), move |(step, mut guard)| {
        let cid = cid.clone();
        let b = b.clone();
        async move {
            let n = b.tokens;
            let per_token = if b.run.is_zero() { b.token_interval } else { b.run / n.max(1) as u32 };
            if guard.state.vanished.load(Ordering::SeqCst) {
                return Some((Err(std::io::Error::other("server vanished")), (usize::MAX, guard)));
            }
            if step == usize::MAX {
                return None;
            }
            let out = if step == 0 {
                tokio::time::sleep(b.queue).await;
                chat_chunk(&cid, json!({"role": "assistant", "content": ""}), None)
            } else if step <= n {
                tokio::select! {
                    () = tokio::time::sleep(per_token) => {}
                    () = guard.state.vanishing() => return Some((Err(std::io::Error::other("server vanished")), (usize::MAX, guard))),
                }
                if b.malformed {
                    "data: {\"choices\": [{\"delta\": \n\n".to_string()
                } else {
                    chat_chunk(&cid, json!({"content": format!("tok{} ", step - 1)}), None)
                }
            } else if step == n + 1 {
                chat_chunk(&cid, json!({}), Some("stop"))
            } else if step == n + 2 && include_usage {
                let v = json!({"id": cid, "object": "chat.completion.chunk", "created": 1_700_000_000, "model": "mock-model", "choices": [],
                    "usage": {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": 5 + n}});
                format!("data: {v}\n\n")
            } else if step <= n + 3 {
                guard.done = true;
                "data: [DONE]\n\n".to_string()
            } else {
                return None;
            };
            let next = if step == n + 1 && !include_usage { n + 3 } else { step + 1 };
            Some((Ok(bytes::Bytes::from(out)), (next, guard)))
        }
    })
}

async fn openai_completions(S(st): St, Json(req): Json<Value>) -> Response {
    let id = st.create(req.clone());
    let b = st.behaviour();
    let mut guard = DisconnectGuard { state: st.clone(), id: id.clone(), done: false };
    if let Some(r) = work(&st, b.queue + b.run).await {
        return r;
    }
    guard.done = true;
    body(
        StatusCode::OK,
        json!({"id": format!("cmpl-{id}"), "object": "text_completion", "created": 1_700_000_000, "model": "mock-model",
            "choices": [{"index": 0, "text": "tok0 tok1", "logprobs": null, "finish_reason": "stop"}], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}),
    )
}

// === Generic job API ===

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
