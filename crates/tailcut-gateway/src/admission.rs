//! Admission: what a request must get through before it is raced. An in-flight slot
//! (briefly queued under a burst, else 503), its body read within the size limit and the
//! body timeout (413, 408), and a JSON object for a body (400). A job holds its slot
//! while it runs, and one of its key's running-job slots (else 429). Who the caller is
//! and what they may use is [`crate::auth`]'s.

use crate::error::{ApiError, BadRequest, TooMany, Unavailable};
use crate::state::AppState;
use crate::tenancy::{RunningJob, Tenant};
use axum::body::Bytes;
use axum::http::HeaderMap;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tailcut_http::ServerLimits;

/// An in-flight slot: at once if one is free, else after waiting up to `wait` (a burst
/// queues briefly instead of failing), else 503.
pub(crate) async fn admit(st: &AppState, wait: Duration) -> Result<tokio::sync::OwnedSemaphorePermit, ApiError> {
    if let Ok(p) = st.in_flight.clone().try_acquire_owned() {
        return Ok(p);
    }
    let full = || {
        st.metrics.inc("tailcut_admission_total", &[("outcome", "rejected")]);
        ApiError::from(Unavailable::InFlight)
    };
    if wait.is_zero() {
        return Err(full());
    }
    let started = tokio::time::Instant::now();
    match tokio::time::timeout(wait, st.in_flight.clone().acquire_owned()).await {
        Ok(Ok(p)) => {
            st.metrics.inc("tailcut_admission_total", &[("outcome", "waited")]);
            st.metrics.observe("tailcut_admission_wait_seconds", &[], started.elapsed().as_secs_f64());
            Ok(p)
        }
        _ => Err(full()),
    }
}

/// What a running job holds until it ends: an in-flight slot (a job counts against
/// `max_in_flight` as a proxied request does, and in `tailcut_in_flight`) and, when its
/// key has a cap, one of the key's running-job slots.
pub(crate) struct JobSlot {
    _in_flight: tokio::sync::OwnedSemaphorePermit,
    _key: Option<RunningJob>,
}

/// Admits a new job of `tenant`: a 429 when the key already has its `max_running_jobs`
/// running, else an in-flight slot as for any request ([`admit`]: 503 past
/// `max_in_flight` and `wait`).
pub(crate) async fn admit_job(st: &AppState, tenant: &Tenant, wait: Duration) -> Result<JobSlot, ApiError> {
    let key = match tenant.max_running_jobs {
        None => None,
        Some(cap) => Some(st.running_per_key.start(&tenant.name, cap).ok_or_else(|| {
            st.metrics.inc("tailcut_admission_total", &[("outcome", "key_jobs_cap")]);
            ApiError::from(TooMany::Jobs { key: tenant.name.clone(), cap })
        })?),
    };
    let permit = admit(st, wait).await?;
    Ok(JobSlot { _in_flight: permit, _key: key })
}

/// The body as a JSON object, or a 400 saying why not.
pub(crate) fn parse_json(body: &Bytes) -> Result<Value, ApiError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| ApiError::from(BadRequest::NotJson(e)))?;
    if !v.is_object() {
        return Err(BadRequest::NotObject.into());
    }
    Ok(v)
}

/// Reads a request body under the current configuration's [`ServerLimits`] (see
/// [`read_body_limited`]).
pub(crate) async fn read_body<B>(st: &AppState, headers: &HeaderMap, body: B) -> Result<Bytes, ApiError>
where
    B: axum::body::HttpBody<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    read_body_limited(&st.server_limits(), headers, body).await
}

/// Reads a request body within `limits`' body size (the current configuration's: a
/// reload applies at once) and body timeout; over the size (declared or streamed), an
/// OpenAI-style 413, past the timeout a 408, and any other read failure a 400, all as
/// JSON bodies. The fast path reads the same limits (`tailcut_http::fast`).
pub(crate) async fn read_body_limited<B>(limits: &ServerLimits, headers: &HeaderMap, body: B) -> Result<Bytes, ApiError>
where
    B: axum::body::HttpBody<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let limit = limits.body_read;
    // A body already here is read without a timer; one that dribbles in must be whole
    // within the body timeout.
    match tokio::time::timeout(limit, read_body_within_limit(limits.max_body(), headers, body)).await {
        Ok(read) => read,
        Err(_) => Err(ApiError::BodyTimeout(limit.as_secs())),
    }
}

async fn read_body_within_limit<B>(max: usize, headers: &HeaderMap, body: B) -> Result<Bytes, ApiError>
where
    B: axum::body::HttpBody<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    use http_body_util::BodyExt;
    let declared = headers.get(axum::http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > max) {
        return Err(ApiError::TooLarge(max));
    }
    // A body that arrives as one frame (most: it came with the head) is kept as it is;
    // only a body in pieces is copied into one buffer.
    let mut body = body;
    let mut whole: Option<Bytes> = None;
    let mut pieces = bytes::BytesMut::new();
    let mut len = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::from(BadRequest::Body { reason: e.to_string() }))?;
        let Ok(data) = frame.into_data() else { continue }; // trailers
        len += data.len();
        if len > max {
            return Err(ApiError::TooLarge(max));
        }
        match whole.take() {
            None if pieces.is_empty() => whole = Some(data),
            first => {
                if let Some(first) = first {
                    pieces.extend_from_slice(&first);
                }
                pieces.extend_from_slice(&data);
            }
        }
        if axum::body::HttpBody::is_end_stream(&body) {
            break;
        }
    }
    Ok(whole.unwrap_or_else(|| pieces.freeze()))
}

/// A request body, read by [`read_body`].
pub(crate) struct RequestBody(pub Bytes);

impl axum::extract::FromRequest<Arc<AppState>> for RequestBody {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, st: &Arc<AppState>) -> Result<Self, ApiError> {
        let (parts, body) = req.into_parts();
        read_body(st, &parts.headers, body).await.map(RequestBody)
    }
}
