//! The OpenAI-compatible endpoints: a request is authenticated, admitted, routed by its
//! model to a route and raced by the route's hedger; a whole reply is the winner's body
//! with the route's headers, a stream is [`super::stream`]'s. Plus `/v1/models`.

use super::race::race;
use super::respond;
use super::stream;
use crate::admission::admit;
use crate::auth::{authenticate, authorize, may_use};
use crate::error::{ApiError, BadRequest, NotFound, Unavailable};
use crate::hangup::Hangup;
use crate::observe::{hedge_reason, log, record_refusal, record_when_settled, with_request_id};
use crate::probe::Field;
use crate::state::{AppState, OpenAiRoute};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tailcut_core::engine::{Outcome, RunScope};
use tailcut_core::JobRequest;
use tailcut_providers::openai::Endpoint;

/// Serves one OpenAI-style request, with its metrics, log line and headers. `hangup`,
/// where the connection is watched while the request is raced (`tailcut_http::fast`),
/// stops the race when the client goes away.
pub(crate) async fn serve(st: Arc<AppState>, headers: HeaderMap, body: Bytes, ep: Endpoint, hangup: Option<Arc<Hangup>>) -> Response {
    let rid = st.request_id(&headers);
    let started = tokio::time::Instant::now();
    let cx = RequestContext { rid: &rid, started, hangup };
    // The route, once the request has one: a refusal after routing (a budget's 429, a
    // 502, a client's 499, a 504) is counted under it; `-` is for refusals before.
    let mut routed: Option<Arc<OpenAiRoute>> = None;
    let result = serve_inner(&st, &headers, body, ep, &cx, &mut routed).await;
    let route = routed.as_ref().map_or("-", |r| r.cfg.name.as_str());
    let status = match &result {
        Ok(r) => r.status(),
        Err(e) => e.status(),
    };
    match &routed {
        Some(r) if result.is_ok() && status == StatusCode::OK => st.metrics.add_series(&r.series.ok, 1.0),
        _ => st.metrics.inc("tailcut_requests_total", &[("route", route), ("status", status.as_str())]),
    }
    log(
        "request",
        || json!({"request_id": rid, "route": route, "status": status.as_u16(), "ms": started.elapsed().as_secs_f64() * 1000.0}),
    );
    match result {
        Ok(r) => r,
        Err(e) => with_request_id(e.into_response(), &rid),
    }
}

/// What a request carries through its handling besides its headers and body.
pub(crate) struct RequestContext<'a> {
    /// The request id.
    pub rid: &'a str,
    /// When the request was read.
    pub started: tokio::time::Instant,
    /// Where the client's going away is watched, if it is.
    pub hangup: Option<Arc<Hangup>>,
}

/// Serves one OpenAI-style request; the route it selects is put in `routed` as soon as
/// it is known.
async fn serve_inner(
    st: &Arc<AppState>,
    headers: &HeaderMap,
    body: Bytes,
    ep: Endpoint,
    cx: &RequestContext<'_>,
    routed: &mut Option<Arc<OpenAiRoute>>,
) -> Result<Response, ApiError> {
    let (rid, started) = (cx.rid, cx.started);
    if st.draining.load(Ordering::Relaxed) {
        return Err(Unavailable::Draining.into());
    }
    let rt = st.rt();
    // Who is calling comes first: an unauthenticated caller takes no slot and learns
    // nothing about the models served.
    let tenant = authenticate(&rt, headers)?;
    let permit = admit(st, rt.config.gateway.admission_wait).await?;
    let fields = crate::probe::probe(&body)?;
    let Field::Str(model) = &fields.model else { return Err(BadRequest::Required { field: "model" }.into()) };
    let route = rt
        .models
        .get(model.as_ref())
        .filter(|r| may_use(&tenant, &r.cfg.name))
        .cloned()
        .ok_or_else(|| ApiError::from(NotFound::Model { model: model.to_string() }))?;
    *routed = Some(route.clone());
    authorize(&tenant, &route.cfg.name)?;
    match ep {
        Endpoint::Chat if fields.messages != Field::Array => return Err(BadRequest::Required { field: "messages" }.into()),
        Endpoint::Completions if fields.prompt == Field::Absent => return Err(BadRequest::Required { field: "prompt" }.into()),
        Endpoint::Embeddings if fields.input == Field::Absent => return Err(BadRequest::Required { field: "input" }.into()),
        _ => {}
    }
    let streamed = fields.stream == Field::Bool(true) && ep != Endpoint::Embeddings;
    drop(fields);
    // The total timeout stops the race itself (its live attempts are cancelled with
    // receipts), on the same timer as the policy's own waits.
    let stop_at = started.checked_add(rt.config.gateway.total_timeout);
    let ledger = tenant.ledger.clone();
    if streamed {
        let req = stream::StreamRequest { body, rid, permit, stop_at, ledger, hangup: cx.hangup.as_ref() };
        return stream::serve(st, &route, route.raced(ep, true), req).await;
    }
    let raced = route.raced(ep, false);
    // The body is forwarded as sent unless a provider must rewrite it.
    let _slot = permit; // held until the response is built
    let request = JobRequest::from_raw(rid, body);
    let scope = RunScope::new().account(ledger).stop_at(stop_at);
    let mut outcome: Outcome =
        race(raced, request, scope, cx.hangup.as_ref()).await.inspect_err(|e| record_refusal(&st.metrics, &route.cfg.name, e))?;
    // Out of time: the race was stopped at the deadline (the provider clients' own
    // timeout, a second later, never ends an attempt first).
    let timed_out = outcome.winner.is_none() && outcome.decisions.stopped_by_caller;
    st.metrics.observe_series(&route.series.seconds, started.elapsed().as_secs_f64());
    let (winner, attempts, reason) = (outcome.winner.take(), outcome.attempts, hedge_reason(&outcome.decisions));
    let payload = outcome.result.as_ref().and_then(|r| r.payload.as_ref()).map(|p| p.bytes.clone());
    record_when_settled(&st.sinks, &route, outcome.settled, raced.learned.as_ref());
    let (Some(bytes), Some(winner)) = (payload, winner) else {
        return Err(respond::no_winner(cx.hangup.as_ref(), timed_out, attempts, &outcome.failures));
    };
    let mut resp = Response::new(axum::body::Body::from(bytes));
    *resp.headers_mut() = respond::headers(&route, rid, &winner, attempts, reason);
    Ok(resp)
}

/// `GET /v1/models`: the models the caller may use.
pub(crate) async fn models(State(st): State<Arc<AppState>>, headers: HeaderMap) -> Result<Response, ApiError> {
    let rt = st.rt();
    let tenant = authenticate(&rt, &headers)?;
    let mut data: Vec<Value> = rt
        .models
        .iter()
        .filter(|(_, r)| may_use(&tenant, &r.cfg.name))
        .map(|(m, _)| json!({"id": m, "object": "model", "owned_by": "tailcut"}))
        .collect();
    data.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    Ok(Json(json!({"object": "list", "data": data})).into_response())
}
