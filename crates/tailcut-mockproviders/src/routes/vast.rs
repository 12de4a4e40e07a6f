//! Vast.ai serverless: `POST /route/` and the worker it assigns.
//!
//! The route takes `{"endpoint", "cost"}` (and the API key, as `Authorization: Bearer`
//! or `api_key` in the body). Until the endpoint's first worker is ready (`queue` after
//! the first route call: a cold start) it answers `{"endpoint", "status": {worker counts
//! by state}}`; then `{"endpoint", "url", "cost", "reqnum", "signature",
//! "__request_id"}`, where `url` is this server. Any other `POST` path is the worker: it
//! takes `{"auth_data": <the route reply>, "payload": ...}`, refuses a signature the
//! route did not issue (401), runs for `run` and answers the backend's JSON. There is
//! no job id, status or cancel call; a closed worker request is counted as a disconnect.
//! Injected 503/429 and hangs apply to route calls.

use super::shared::*;
use tokio::time::Instant;

pub(super) fn router() -> Router<Arc<State>> {
    Router::new().route("/route/", post(route)).route("/{*path}", post(worker))
}

/// The route's signature over what it assigned (the PyWorker checks the real one with
/// Vast.ai's public key; here the worker recomputes it).
fn signature(endpoint: &str, reqnum: u64, cost: f64, url: &str) -> String {
    // FNV-1a over the signed fields.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in format!("{endpoint}|{reqnum}|{cost}|{url}").bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}{:016x}", h.rotate_left(29) ^ reqnum)
}

async fn route(S(st): St, headers: HeaderMap, Json(v): Json<Value>) -> Response {
    if let Some(r) = interfere(&st).await {
        return r;
    }
    let bearer = headers.get(header::AUTHORIZATION).and_then(|h| h.to_str().ok()).and_then(|h| h.strip_prefix("Bearer "));
    if bearer.or_else(|| v.get("api_key").and_then(Value::as_str)).is_none_or(str::is_empty) {
        return body(StatusCode::UNAUTHORIZED, json!({"error": "missing api_key"}));
    }
    let (Some(endpoint), Some(cost)) = (v.get("endpoint").and_then(Value::as_str), v.get("cost").and_then(Value::as_f64)) else {
        return body(StatusCode::BAD_REQUEST, json!({"error": "`endpoint` (string) and `cost` (number) are required"}));
    };
    let b = st.behaviour();
    let ready_at = {
        let Ok(mut r) = st.ready_at.lock() else { return body(StatusCode::INTERNAL_SERVER_ERROR, json!({"error": "lock"})) };
        *r.get_or_insert_with(|| Instant::now() + b.queue)
    };
    if Instant::now() < ready_at {
        return body(StatusCode::OK, json!({"endpoint": endpoint, "status": {"ready": 0, "loading": 1, "inactive": 0, "creating": 0}}));
    }
    let reqnum = st.counter.fetch_add(1, Ordering::SeqCst) + 1;
    let url = st.base.clone();
    body(
        StatusCode::OK,
        json!({
            "endpoint": endpoint, "url": url, "cost": cost, "reqnum": reqnum,
            "signature": signature(endpoint, reqnum, cost, &url),
            "__request_id": format!("00000000-0000-4000-8000-{reqnum:012x}"),
        }),
    )
}

async fn worker(S(st): St, Json(v): Json<Value>) -> Response {
    let auth = &v["auth_data"];
    let signed = match (auth["endpoint"].as_str(), auth["reqnum"].as_u64(), auth["cost"].as_f64(), auth["url"].as_str()) {
        (Some(e), Some(n), Some(c), Some(u)) => auth["signature"].as_str() == Some(signature(e, n, c, u).as_str()),
        _ => false,
    };
    if !signed {
        return body(StatusCode::UNAUTHORIZED, json!({"error": "invalid auth_data signature"}));
    }
    let Some(payload) = v.get("payload").cloned() else {
        return body(StatusCode::BAD_REQUEST, json!({"error": "`payload` is required"}));
    };
    // The worker is ready: the job only runs.
    let id = st.create(payload);
    if let Ok(mut jobs) = st.jobs.lock() {
        if let Some(j) = jobs.get_mut(&id) {
            j.queue = std::time::Duration::ZERO;
        }
    }
    let mut guard = DisconnectGuard { state: st.clone(), id: id.clone(), done: false };
    let b = st.behaviour();
    if let Some(r) = work(&st, b.run).await {
        return r;
    }
    guard.done = true;
    if b.malformed {
        return raw(StatusCode::OK, "{\"text\": \"x\", \"output\": {");
    }
    if b.fail {
        return body(StatusCode::INTERNAL_SERVER_ERROR, json!({"error": "backend raised"}));
    }
    body(StatusCode::OK, st.output(&id))
}
