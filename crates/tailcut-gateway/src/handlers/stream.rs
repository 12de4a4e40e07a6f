//! Streamed replies: hedged on the time to the first *content token*, not on response
//! headers (LLM servers send headers long before any token). The race is the engine's
//! ([`tailcut_core::stream`]): the route's streaming hedger runs the first-token hedge
//! chain over stream providers, so budgets, the live cap, receipts (a loser's stream is
//! closed: `request_channel_closed`) and the trace are the engine's. The client sees
//! exactly the winner's stream — its role chunk, deltas, final usage chunk when asked
//! for, `[DONE]` — never two interleaved. An error after the first token ends the stream
//! with an error event and `[DONE]`.

use crate::error::{ApiError, Upstream};
use crate::hangup::Hangup;
use crate::observe::{log, record_refusal, record_when_settled};
use crate::state::{AppState, OpenAiRoute, Raced};
use axum::body::Body;
use axum::http::HeaderValue;
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use serde_json::json;
use std::sync::Arc;
use tailcut_core::engine::RunScope;
use tailcut_core::stream::{StreamEvent, StreamHandoff};
use tailcut_core::JobRequest;
use tokio::time::Instant;

/// One streaming request as the handler admitted it.
pub(crate) struct StreamRequest<'a> {
    /// The body as the client sent it.
    pub body: Bytes,
    /// Request id.
    pub rid: &'a str,
    /// The in-flight slot, held until the client's stream ends.
    pub permit: tokio::sync::OwnedSemaphorePermit,
    /// When the race stops if no stream has produced a token (the total timeout).
    pub stop_at: Option<Instant>,
    /// The tenant's account, charged for every launch.
    pub ledger: Option<Arc<tailcut_core::ledger::Account>>,
    /// Where the client's going away is watched, if it is (the race then stops).
    pub hangup: Option<&'a Arc<Hangup>>,
}

/// Races the streams and answers with the winner's.
pub(crate) async fn serve(
    st: &Arc<AppState>,
    route: &Arc<OpenAiRoute>,
    raced: &Raced,
    req: StreamRequest<'_>,
) -> Result<Response, ApiError> {
    let StreamRequest { body, rid, permit, stop_at, ledger, hangup } = req;
    let handoff = StreamHandoff::new();
    let request = JobRequest::from_raw(rid, body);
    let scope = RunScope::new().account(ledger).stop_at(stop_at).handoff(handoff.clone());
    let started = Instant::now();
    let mut outcome =
        super::race::race(raced, request, scope, hangup).await.inspect_err(|e| record_refusal(&st.metrics, &route.cfg.name, e))?;
    let ttft = started.elapsed();
    let winner = outcome.winner.take();
    let (attempts, hedged, stopped) = (outcome.attempts, outcome.decisions.hedge_launched, outcome.decisions.stopped_by_caller);
    record_when_settled(&st.sinks, route, outcome.settled, raced.learned.as_ref());
    let events = winner.as_deref().and_then(|w| handoff.take(w));
    let (Some(winner), Some(events)) = (winner, events) else {
        return Err(super::respond::no_winner(hangup, stopped, attempts, &outcome.failures));
    };
    let reason = match (hedged, handoff.last_start_followed_failure()) {
        (false, _) => "none",
        (true, true) => "upstream_error",
        (true, false) => "first_token_timeout",
    };
    if hedged {
        // The settled trace counts hedges by engine reason; name the streaming one.
        st.metrics.inc("tailcut_stream_hedges_total", &[("route", &route.cfg.name), ("reason", reason)]);
    }
    st.metrics.observe("tailcut_ttft_seconds", &[("route", &route.cfg.name)], ttft.as_secs_f64());
    log(
        "stream_winner",
        || json!({"request_id": rid, "route": route.cfg.name, "winner": winner, "attempts": attempts, "ttft_ms": ttft.as_secs_f64() * 1000.0}),
    );
    // The body owns the winner's stream (a client that hangs up drops it, and with it the
    // provider's stream) and the in-flight slot, held until the client's stream ends.
    let body = events.into_events().map(move |event| {
        let _slot = &permit;
        Ok::<_, std::io::Error>(match event {
            StreamEvent::Preamble(b) | StreamEvent::Content(b) => b,
            StreamEvent::Done => Bytes::from_static(b"data: [DONE]\n\n"),
            StreamEvent::Failed { reason } => ApiError::from(Upstream::MidStream { reason }).stream_end(),
        })
    });
    let mut resp = Response::new(Body::from_stream(body));
    let h = resp.headers_mut();
    *h = super::respond::headers(route, rid, &winner, attempts, reason);
    h.insert(axum::http::header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(axum::http::header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(resp)
}
