//! Hedged streaming: hedge on the time to the first *content token*, not on response
//! headers (LLM servers send headers long before any token). Upstream 0 starts at once;
//! if it has produced no content token by the route's first-token deadline, or fails
//! before its first token, the next upstream starts (within the live cap). The first
//! upstream to produce a content delta wins; every other stream is closed at once (its
//! receipt: `request_channel_closed`). The client sees exactly the winner's stream —
//! its role chunk, deltas, final usage chunk when asked for, `[DONE]` — never two
//! streams interleaved. An error after the first token ends the stream with an error event.

use crate::error::ApiError;
use crate::runtime::{log, names, record_metrics, AppState, OpenAiRoute, Runtime, Upstream};
use axum::body::Body;
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use futures::StreamExt;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::Arc;
use tailcut_core::receipt::{offset_ms, Receipt};
use tailcut_core::trace::{now_rfc3339, AttemptTrace, Decisions, RequestTrace, Role, REQUEST_KIND, SCHEMA_VERSION};
use tailcut_core::{CancelScope, JobState, MicroUsd};
use tailcut_providers::openai::Route;
use tailcut_providers::plain::ByteStream;
use tokio::sync::mpsc;
use tokio::time::Instant;

enum Ev {
    /// An event before or after the first token, framed as sent (`data: {...}\n\n`).
    Line(bytes::Bytes),
    /// An event carrying the first (or a later) content delta, framed as sent.
    Token(bytes::Bytes),
    /// The upstream finished (`[DONE]`).
    Done,
    /// The upstream failed.
    Failed(String),
}

fn has_content(v: &Value) -> bool {
    tailcut_providers::sse::chunk_text(v).and_then(Value::as_str).is_some_and(|s| !s.is_empty())
}

/// The request body an upstream gets: the client's bytes as sent, unless the upstream
/// names its own model (`parsed` is then the client's body as a document).
fn body_for(up: &Upstream, raw: &bytes::Bytes, parsed: Option<&Value>) -> bytes::Bytes {
    match (&up.model, parsed) {
        (Some(m), Some(parsed)) => {
            let mut body = parsed.clone();
            body["model"] = json!(m);
            serde_json::to_vec(&body).unwrap_or_default().into()
        }
        _ => raw.clone(),
    }
}

/// One event as the client gets it: `data: {data}` and a blank line.
fn framed(data: &str) -> bytes::Bytes {
    let mut b = bytes::BytesMut::with_capacity(data.len() + 8);
    b.extend_from_slice(b"data: ");
    b.extend_from_slice(data.as_bytes());
    b.extend_from_slice(b"\n\n");
    b.freeze()
}

/// Opens the upstream stream: the lean plain-HTTP client for `http://`, reqwest for TLS.
async fn open(up: &Upstream, http: &reqwest::Client, path: &str, body: bytes::Bytes) -> Result<(u16, ByteStream), String> {
    if let Some((authority, base_path)) = tailcut_providers::plain::split_http_base(&up.base) {
        let authorization = up.key.as_ref().and_then(tailcut_providers::plain::bearer);
        let headers = tailcut_providers::plain::json_post_headers(None, authorization.as_ref());
        let (status, stream) = up.plain.post_streaming_parts(authority, &[base_path, "/", path], &headers, body).await?;
        return Ok((status.as_u16(), stream));
    }
    let url = format!("{}/{path}", up.base.trim_end_matches('/'));
    let mut req = http.post(url).header("content-type", "application/json").body(body);
    if let Some(k) = &up.key {
        req = req.bearer_auth(k.expose());
    }
    let resp = req.send().await.map_err(tailcut_providers::client::describe)?;
    let status = resp.status().as_u16();
    // Read through the providers' client, which redacts credentials as it reads.
    Ok((status, tailcut_providers::client::body_stream(resp)))
}

async fn upstream(i: usize, up: Upstream, http: reqwest::Client, body: bytes::Bytes, chat: bool, tx: mpsc::UnboundedSender<(usize, Ev)>) {
    let path = if chat { Route::Chat } else { Route::Completions }.path();
    let mut stream = match open(&up, &http, path, body).await {
        Ok((status, _)) if !(200..300).contains(&status) => {
            let _ = tx.send((i, Ev::Failed(format!("HTTP {status}"))));
            return;
        }
        Ok((_, stream)) => stream,
        Err(e) => {
            let _ = tx.send((i, Ev::Failed(e)));
            return;
        }
    };
    let mut sse = tailcut_providers::sse::SseData::default();
    while let Some(chunk) = stream.next().await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                let _ = tx.send((i, Ev::Failed(format!("stream broke: {e}"))));
                return;
            }
        };
        for data in sse.push(&chunk) {
            if data == "[DONE]" {
                let _ = tx.send((i, Ev::Done));
                return;
            }
            let Ok(v) = serde_json::from_str::<Value>(&data) else {
                let _ = tx.send((i, Ev::Failed("malformed stream event".into())));
                return;
            };
            if v.get("error").is_some() {
                let _ = tx.send((i, Ev::Failed(tailcut_providers::polling::error_text(&format!("upstream error: {}", v["error"])))));
                return;
            }
            let ev = if has_content(&v) { Ev::Token(framed(&data)) } else { Ev::Line(framed(&data)) };
            if tx.send((i, ev)).is_err() {
                return;
            }
        }
    }
    let _ = tx.send((i, Ev::Failed("stream ended without [DONE]".into())));
}

/// An upstream's task, stopped when this is dropped: when the client hangs up (the
/// handler's future or the response body is dropped), every upstream stream is closed at
/// once instead of when its next chunk finds no one listening.
struct UpstreamTask(tokio::task::JoinHandle<()>);

impl Drop for UpstreamTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

struct Attempt {
    /// `None` once handed to the response body (the winner's).
    task: Option<UpstreamTask>,
    started: Instant,
    buffered: Vec<bytes::Bytes>,
    failed: Option<String>,
    projected: MicroUsd,
}

/// One streaming request as the handler admitted it.
pub(crate) struct StreamRequest {
    /// The parsed body, when an upstream names its own model (its body is rewritten).
    pub body: Option<Value>,
    /// The body as the client sent it.
    pub raw: bytes::Bytes,
    /// Request id.
    pub rid: String,
    /// Chat (`/v1/chat/completions`) or text completions.
    pub chat: bool,
    /// The in-flight slot, held until the client's stream ends.
    pub permit: tokio::sync::OwnedSemaphorePermit,
}

pub(crate) async fn hedged_stream(
    st: Arc<AppState>,
    rt: Arc<Runtime>,
    route: Arc<OpenAiRoute>,
    req: StreamRequest,
) -> Result<Response, ApiError> {
    let StreamRequest { body, raw, rid, chat, permit } = req;
    let t0 = Instant::now();
    let (tx, mut rx) = mpsc::unbounded_channel::<(usize, Ev)>();
    let mut attempts: Vec<Attempt> = Vec::new();
    let ups = route.upstreams.clone();
    // Budgets are charged per launch, as in the engine: the same hedger's ledger.
    let budget = if chat { &route.chat.0 } else { &route.completions.0 };
    let mut budget_refusals = 0u32;
    let launch = |i: usize, attempts: &mut Vec<Attempt>| -> Result<(), tailcut_core::ledger::LedgerError> {
        let projected = budget.charge_launch(i, &rid, attempts.is_empty())?;
        let task = Some(UpstreamTask(tokio::spawn(upstream(
            i,
            ups[i].clone(),
            rt.http.clone(),
            body_for(&ups[i], &raw, body.as_ref()),
            chat,
            tx.clone(),
        ))));
        attempts.push(Attempt { task, started: Instant::now(), buffered: Vec::new(), failed: None, projected });
        Ok(())
    };
    use tailcut_core::engine::HedgeGate;
    route.gate.request_started();
    launch(0, &mut attempts).map_err(|e| {
        crate::runtime::record_refusal(&st.metrics, &route.cfg.name, &e);
        ApiError::TooMany(format!("refused: {e}"))
    })?;
    let mut reason = "none";
    let mut denied = 0u32;
    let mut hedge_at = Some(t0 + route.cfg.first_token_hedge);
    let winner: usize;
    let first: bytes::Bytes;
    loop {
        let live = attempts.iter().filter(|a| a.failed.is_none()).count();
        let can_launch = attempts.len() < ups.len() && live < route.max_live;
        if live == 0 && !can_launch {
            for a in &mut attempts {
                drop(a.task.take());
            }
            let why: Vec<String> =
                attempts.iter().enumerate().map(|(i, a)| format!("{}: {}", ups[i].name, a.failed.as_deref().unwrap_or("?"))).collect();
            return Err(ApiError::Upstream(format!("every upstream failed before its first token ({})", why.join("; "))));
        }
        let sleep = async {
            match hedge_at {
                Some(t) if can_launch => tokio::time::sleep_until(t).await,
                _ => futures::future::pending::<()>().await,
            }
        };
        tokio::select! {
            msg = rx.recv() => {
                let Some((i, ev)) = msg else { return Err(ApiError::Upstream("upstream channel closed".into())) };
                match ev {
                    Ev::Line(l) => attempts[i].buffered.push(l),
                    Ev::Token(l) => { winner = i; first = l; break; }
                    Ev::Done => { winner = i; first = bytes::Bytes::new(); break; }
                    Ev::Failed(e) => {
                        attempts[i].failed = Some(e);
                        // A failure before the first token falls through to the next upstream now.
                        if attempts.len() < ups.len() && attempts.iter().filter(|a| a.failed.is_none()).count() < route.max_live {
                            if route.gate.try_extra() {
                                if launch(attempts.len(), &mut attempts).is_ok() {
                                    reason = "upstream_error";
                                } else {
                                    budget_refusals += 1;
                                }
                            } else {
                                denied += 1;
                            }
                        }
                    }
                }
            }
            () = sleep => {
                hedge_at = Some(Instant::now() + route.cfg.first_token_hedge);
                if route.gate.try_extra() {
                    if launch(attempts.len(), &mut attempts).is_ok() {
                        reason = "first_token_timeout";
                    } else {
                        budget_refusals += 1;
                        hedge_at = None;
                    }
                } else {
                    denied += 1;
                    hedge_at = None;
                }
            }
        }
    }
    let ttft = t0.elapsed();
    // Close every other stream now: the client must never see two.
    let mut receipts = Vec::new();
    for (i, a) in attempts.iter_mut().enumerate() {
        if i != winner && a.failed.is_none() {
            drop(a.task.take());
            let mut r = Receipt::unproven(&ups[i].name, None, offset_ms(t0, Instant::now()));
            r.reason = "lost the first-token race".into();
            r.cancel_scope = CancelScope::Request;
            r.state_before_cancel = Some(JobState::Pending);
            r.record_channel_closed(offset_ms(t0, Instant::now()));
            r.note = "stream closed before its first token".into();
            receipts.push(r);
        }
    }
    let trace = RequestTrace {
        kind: REQUEST_KIND.into(),
        schema_version: SCHEMA_VERSION,
        ts: now_rfc3339(),
        request_id: rid.clone(),
        policy: route.stream_policy.clone(),
        decisions: Decisions { hedge_launched: attempts.len() > 1, hedges_denied: denied, budget_refusals, ..Decisions::default() },
        attempts: attempts
            .iter()
            .enumerate()
            .map(|(i, a)| AttemptTrace {
                provider: ups[i].name.clone(),
                role: if i == 0 { Role::Primary } else { Role::Hedge },
                job_id: None,
                submit_offset_ms: offset_ms(t0, a.started),
                submit_returned_ms: offset_ms(t0, a.started),
                polls: Vec::new(),
                outcome: if i == winner { Some(JobState::Running) } else { a.failed.as_ref().map(|_| JobState::Failed) },
                valid: if i == winner { Some(true) } else { a.failed.as_ref().map(|_| false) },
                reasons: a.failed.iter().cloned().collect(),
                wall_ms: (i == winner).then(|| offset_ms(a.started, Instant::now())),
                metrics: serde_json::Map::new(),
                projected_cost_micro_usd: a.projected,
                submit_error: None,
            })
            .collect(),
        winner: Some(ups[winner].name.clone()),
        winner_valid_at_ms: Some(offset_ms(attempts[winner].started, Instant::now())),
        winner_total_ms: Some(offset_ms(t0, Instant::now())),
        receipts,
        projected_cost_micro_usd: attempts.iter().map(|a| a.projected).sum(),
    };
    record_metrics(&st.metrics, &route.series, &trace);
    if trace.decisions.hedge_launched {
        // record_metrics counts hedges by engine reason; name the streaming one.
        st.metrics.inc("tailcut_stream_hedges_total", &[("route", &route.cfg.name), ("reason", reason)]);
    }
    st.metrics.observe("tailcut_ttft_seconds", &[("route", &route.cfg.name)], ttft.as_secs_f64());
    if let Some(w) = &rt.trace {
        let _ = w.write(&trace);
    }
    st.recent.record(&route.cfg.name, trace);
    log(
        "stream_winner",
        || json!({"request_id": rid, "route": route.cfg.name, "winner": ups[winner].name, "attempts": attempts.len(), "ttft_ms": ttft.as_secs_f64() * 1000.0}),
    );

    let mut pending: VecDeque<bytes::Bytes> = attempts[winner].buffered.drain(..).collect();
    let finished = first.is_empty();
    if !finished {
        pending.push_back(first);
    }
    // The body owns the winner's task: a client that hangs up drops the body, and with it
    // the upstream stream.
    let winner_task = attempts[winner].task.take();
    let state = (pending, rx, winner, finished, false);
    let body = futures::stream::unfold(state, |(mut pending, mut rx, winner, mut finished, mut closed)| async move {
        if closed {
            return None;
        }
        if let Some(event) = pending.pop_front() {
            return Some((Ok::<_, std::io::Error>(event), (pending, rx, winner, finished, closed)));
        }
        if finished {
            closed = true;
            return Some((Ok(bytes::Bytes::from_static(b"data: [DONE]\n\n")), (pending, rx, winner, finished, closed)));
        }
        loop {
            match rx.recv().await {
                Some((i, _)) if i != winner => continue,
                Some((_, Ev::Line(event) | Ev::Token(event))) => return Some((Ok(event), (pending, rx, winner, finished, closed))),
                Some((_, Ev::Done)) | None => {
                    finished = true;
                    closed = true;
                    return Some((Ok(bytes::Bytes::from_static(b"data: [DONE]\n\n")), (pending, rx, winner, finished, closed)));
                }
                Some((_, Ev::Failed(e))) => {
                    closed = true;
                    let ev = json!({"error": {"message": format!("upstream failed mid-stream: {e}"), "type": "api_error", "param": null, "code": "upstream_failed"}});
                    return Some((
                        Ok(bytes::Bytes::from(format!("data: {ev}\n\ndata: [DONE]\n\n"))),
                        (pending, rx, winner, finished, closed),
                    ));
                }
            }
        }
    });
    // The in-flight slot is held until the client's stream ends, not just to the first token.
    let body = body.map(move |chunk| {
        let _slot = &permit;
        let _upstream = &winner_task;
        chunk
    });
    let mut resp = Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Body::from_stream(body))
        .map_err(|e| ApiError::Upstream(e.to_string()))?;
    let h = resp.headers_mut();
    for (k, v) in [(names::REQUEST_ID, rid.as_str()), (names::WINNER, ups[winner].name.as_str()), (names::HEDGE_REASON, reason)] {
        if let Ok(v) = HeaderValue::from_str(v) {
            h.insert(k, v);
        }
    }
    h.insert(names::ROUTE, route.route_header.clone());
    h.insert(names::ATTEMPTS, HeaderValue::from(attempts.len() as u64));
    Ok(resp)
}
