//! The jobs API: `POST /v1/jobs` starts a race on a jobs route in the background (the
//! job's row in the store follows it: running, then succeeded, failed or cancelled, with
//! its trace), `GET /v1/jobs/{id}` reads it, `DELETE /v1/jobs/{id}` stops it (every live
//! attempt cancelled, with receipts). A job is only ever visible to its own tenant.

use crate::admission::{admit_job, parse_json, RequestBody};
use crate::auth::{authenticate, authorize};
use crate::error::{ApiError, BadRequest, NotFound, Unavailable};
use crate::observe::{log, record_refusal, with_request_id};
use crate::state::AppState;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tailcut_core::engine::RunScope;
use tailcut_core::{JobRequest, JobTag};
use tokio::sync::oneshot;

struct WaitQuery {
    wait: Option<f64>,
}

impl WaitQuery {
    /// `?wait=SECONDS` (other parameters are ignored); a malformed one is a JSON 400.
    fn parse(query: Option<&str>) -> Result<WaitQuery, ApiError> {
        let mut wait = None;
        for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            if k == "wait" {
                let w = v.parse::<f64>().ok().filter(|w| w.is_finite() && (0.0..=3600.0).contains(w));
                wait = Some(w.ok_or_else(|| ApiError::from(BadRequest::Wait))?);
            }
        }
        Ok(WaitQuery { wait })
    }
}

/// `POST /v1/jobs`: starts a job on a jobs route (202 with its id, or its end with `?wait=`).
pub(crate) async fn create(
    State(st): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    RequestBody(body): RequestBody,
) -> Response {
    let rid = st.request_id(&headers);
    let created = match WaitQuery::parse(query.as_deref()) {
        Ok(q) => create_job_inner(&st, q, &headers, body, &rid).await,
        Err(e) => Err(e),
    };
    match created {
        Ok(r) => with_request_id(r, &rid),
        Err(e) => with_request_id(e.into_response(), &rid),
    }
}

async fn create_job_inner(st: &Arc<AppState>, q: WaitQuery, headers: &HeaderMap, body: Bytes, rid: &str) -> Result<Response, ApiError> {
    if st.draining.load(Ordering::Relaxed) {
        return Err(Unavailable::Draining.into());
    }
    let rt = st.rt();
    let tenant = authenticate(&rt, headers)?;
    let v = parse_json(&body)?;
    let route = match v.get("route").and_then(Value::as_str) {
        Some(r) => rt.jobs.get(r).cloned().ok_or_else(|| ApiError::from(NotFound::JobsRoute { route: r.to_string() }))?,
        None if rt.jobs.len() == 1 => rt.jobs.values().next().cloned().ok_or_else(|| ApiError::from(NotFound::NoJobsRoute))?,
        None => return Err(BadRequest::RouteRequired.into()),
    };
    let input = v.get("input").cloned().ok_or_else(|| ApiError::from(BadRequest::Required { field: "input" }))?;
    let webhook = match v.get("webhook") {
        None | Some(Value::Null) => None,
        Some(Value::String(url)) => Some(url.as_str()),
        Some(_) => return Err(BadRequest::WebhookNotString.into()),
    };
    authorize(&tenant, &route.cfg.name)?;
    // Resolved only for a caller the route is open to, and refused without naming what
    // the host resolved to: the check is no oracle of the gateway's DNS.
    let webhook = match webhook {
        Some(url) => Some(
            crate::webhook::check(url, rt.config.gateway.webhook_allow_private)
                .await
                .map_err(|e| ApiError::from(BadRequest::Webhook(e)))?,
        ),
        None => None,
    };
    // A running job holds an in-flight slot and one of its key's job slots until it ends.
    let slot = admit_job(st, &tenant, rt.config.gateway.admission_wait).await?;
    let id = new_job_id().map_err(|e| ApiError::from(Unavailable::Randomness(e)))?;
    st.store.insert(&id, &route.cfg.name, &tenant.name).await.map_err(|e| ApiError::from(Unavailable::JobStore(e)))?;
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    if let Ok(mut r) = st.running.lock() {
        r.insert(id.clone(), stop_tx);
    }
    let (st2, id2, rid2) = (st.clone(), id.clone(), rid.to_string());
    let allow_private = rt.config.gateway.webhook_allow_private;
    // On the gateway's tracker: the drain stops this job and waits for it to record.
    let account = tenant.ledger.clone();
    st.tasks.spawn(async move {
        let request = JobRequest::new(rid2, input);
        let scope = RunScope::new().account(account).job(JobTag::new(id2.as_str())).stop(async move {
            let _ = stop_rx.await;
        });
        let outcome = route.hedger.run_scoped(route.policy.as_ref(), request, scope).await;
        let (state, result, winner, trace, error) = match outcome {
            Err(e) => {
                record_refusal(&st2.metrics, &route.cfg.name, &e);
                ("failed", None, None, None, Some(e.to_string()))
            }
            Ok(o) => {
                let result = o.result.as_ref().and_then(|r| r.payload.as_ref()).map(|p| {
                    serde_json::from_slice(&p.bytes).unwrap_or_else(|_| json!({"bytes": p.bytes.len(), "content_type": p.content_type}))
                });
                let stopped = o.decisions.stopped_by_caller;
                let winner = o.winner.clone();
                let trace = o.settled.wait().await;
                if let Some(t) = &trace {
                    if let Some(l) = &route.learned {
                        l.observe(t);
                    }
                    st2.sinks.record(&route.series, t.clone());
                }
                let state = if winner.is_some() {
                    "succeeded"
                } else if stopped {
                    "cancelled"
                } else {
                    "failed"
                };
                (
                    state,
                    result,
                    winner,
                    trace.and_then(|t| serde_json::to_value(t).ok()),
                    (state == "failed").then(|| "no valid result".to_string()),
                )
            }
        };
        let _ = st2.store.finish(&id2, state, result.as_ref(), winner.as_deref(), trace.as_ref(), error.as_deref()).await;
        if let Ok(mut r) = st2.running.lock() {
            r.remove(&id2);
        }
        // Its losers settled and its row written, the job no longer runs.
        drop(slot);
        if let Some(url) = webhook {
            if let Ok(Some(row)) = st2.store.get(&id2).await {
                if let Err(e) = crate::webhook::deliver(&url, allow_private, &row.to_json()).await {
                    log("webhook_failed", || json!({"job": id2, "error": e.to_string()}));
                }
            }
        }
    });
    match q.wait {
        Some(w) if w > 0.0 => {
            let row = st.wait_for_job(&id, Duration::from_secs_f64(w.min(3600.0))).await;
            let row = row.ok_or_else(|| ApiError::from(NotFound::JobGone { id: id.clone() }))?;
            let code = if row.state == "running" { StatusCode::ACCEPTED } else { StatusCode::OK };
            Ok((code, Json(row.to_json())).into_response())
        }
        _ => Ok((StatusCode::ACCEPTED, Json(json!({"id": id, "state": "running"}))).into_response()),
    }
}

/// `GET /v1/jobs/{id}`: the caller's job; with `?wait=SECONDS`, once it has ended (or as
/// it is after that long). On PostgreSQL any replica answers, whichever runs the job.
pub(crate) async fn get(
    State(st): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let q = WaitQuery::parse(query.as_deref())?;
    let row = owned_job(&st, &headers, &id).await?;
    let row = match q.wait {
        Some(w) if w > 0.0 && row.state == "running" => st
            .wait_for_job(&id, Duration::from_secs_f64(w.min(3600.0)))
            .await
            .ok_or_else(|| ApiError::from(NotFound::Job { id: id.clone() }))?,
        _ => row,
    };
    Ok(Json(row.to_json()).into_response())
}

/// The caller's job `id`: 401 without a valid key, 404 when it is missing or another
/// tenant's (the same answer, so a job's existence is never revealed).
async fn owned_job(st: &AppState, headers: &HeaderMap, id: &str) -> Result<crate::store::JobRow, ApiError> {
    let tenant = authenticate(&st.rt(), headers)?;
    st.store
        .get_owned(id, &tenant.name)
        .await
        .map_err(|e| ApiError::from(Unavailable::JobStore(e)))?
        .ok_or_else(|| ApiError::from(NotFound::Job { id: id.to_string() }))
}

/// Cancels a running job of the caller's (every live attempt stopped, with receipts) and
/// returns it; a finished job is returned as it is, a missing or foreign one is a 404 at
/// once.
pub(crate) async fn delete(State(st): State<Arc<AppState>>, headers: HeaderMap, Path(id): Path<String>) -> Result<Response, ApiError> {
    let row = owned_job(&st, &headers, &id).await?;
    if row.state != "running" {
        return Ok(Json(row.to_json()).into_response());
    }
    let stop = st.running.lock().ok().and_then(|mut r| r.remove(&id));
    match stop {
        Some(tx) => {
            let _ = tx.send(());
        }
        // Another replica runs it: it polls for the request and stops the race.
        None => st.store.request_cancel(&id).await.map_err(|e| ApiError::from(Unavailable::JobStore(e)))?,
    }
    let row = st.wait_for_job(&id, Duration::from_secs(60)).await.ok_or_else(|| ApiError::from(NotFound::Job { id: id.clone() }))?;
    Ok(Json(row.to_json()).into_response())
}

/// A job id: `job-` and 128 random bits in hex, so ids cannot be guessed or enumerated.
fn new_job_id() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    let mut id = String::with_capacity(4 + 32);
    id.push_str("job-");
    for b in bytes {
        id.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        id.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
    }
    Ok(id)
}
