//! The gateway as one hyper service, for connections the fast path
//! (`tailcut_http::fast`) handed over (a request other than a whole proxied call came on
//! them), or every connection with `[gateway] fast_path = false`. The OpenAI endpoints (from the one
//! table of paths, [`crate::handlers::ENDPOINTS`]), which every proxied call
//! takes, go straight to their handler with hyper's own body; every other path goes
//! through the axum router, whose layers (route lookup, boxed-service clones, request
//! extensions, the extractors' copy of the headers, the response's length header
//! rebuilt, the boxed body) would cost ~6,000 instructions per proxied call.

use crate::admission::read_body_limited;
use crate::error::{ApiError, BadRequest, Unavailable};
use crate::handlers::{endpoint, router, serve_openai};
use crate::state::AppState;
use axum::response::{IntoResponse, Response};
use axum::Router;
use futures::future::BoxFuture;
use std::convert::Infallible;
use std::sync::Arc;
use tailcut_http::{ConnState, HangUpOnDrop, Hangup, HeadRefusal, Heartbeat, ServerLimits};

/// Dispatches requests: the OpenAI endpoints directly, the rest through the router.
#[derive(Clone)]
pub(crate) struct Gateway {
    state: Arc<AppState>,
    router: Router,
    /// The connection this copy serves (its requests are counted for the head timeout
    /// and for shedding idle connections).
    conn: Arc<ConnState>,
    /// The serving runtime's timer heartbeat, told of every request.
    heartbeat: Arc<Heartbeat>,
    /// The connection's limits (the same the fast path read on it).
    limits: ServerLimits,
    /// The accept loop's drain signal, held by each proxied call's handler task until it
    /// ends: a race whose client hung up (its connection gone) is still stopped, its
    /// attempts cancelled and the request counted, before the drain goes on, as on the
    /// fast path.
    serving: Option<tokio::sync::watch::Receiver<bool>>,
}

impl Gateway {
    pub(crate) fn new(state: Arc<AppState>, heartbeat: Arc<Heartbeat>) -> Gateway {
        let limits = state.server_limits();
        Gateway { router: router(state.clone()), state, conn: Arc::default(), heartbeat, limits, serving: None }
    }

    /// This gateway serving one connection under `limits`; `serving` is the accept loop's
    /// drain signal (the drain waits for every receiver to be dropped).
    pub(crate) fn for_connection(
        &self,
        conn: Arc<ConnState>,
        limits: ServerLimits,
        serving: tokio::sync::watch::Receiver<bool>,
    ) -> Gateway {
        Gateway {
            state: self.state.clone(),
            router: self.router.clone(),
            conn,
            heartbeat: self.heartbeat.clone(),
            limits,
            serving: Some(serving),
        }
    }

    /// The serving runtime's timer heartbeat.
    pub(crate) fn heartbeat(&self) -> &Arc<Heartbeat> {
        &self.heartbeat
    }
}

/// A head over a limit, as the gateway answers it.
fn head_refusal(refusal: HeadRefusal) -> ApiError {
    match refusal {
        HeadRefusal::UriTooLong { limit } => ApiError::UriTooLong(limit),
        HeadRefusal::TooManyFields { .. } | HeadRefusal::FieldsTooLarge { .. } => ApiError::HeadersTooLarge(refusal),
        HeadRefusal::Host => ApiError::BadRequest(BadRequest::Head(refusal)),
    }
}

impl hyper::service::Service<axum::http::Request<hyper::body::Incoming>> for Gateway {
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn call(&self, req: axum::http::Request<hyper::body::Incoming>) -> Self::Future {
        self.heartbeat.beat();
        let answered = self.conn.start_request();
        if let Some(refusal) = self.limits.check_head(&req) {
            return Box::pin(async move {
                drop(answered);
                Ok(head_refusal(refusal).into_response())
            });
        }
        match endpoint(req.method(), req.uri().path()) {
            Some(ep) => {
                let st = self.state.clone();
                let hangup = Arc::new(Hangup::default());
                let watched = hangup.clone();
                let serving = self.serving.clone();
                let limits = self.limits.clone();
                // The handler runs in its own task, so that hyper dropping this future
                // (the client hung up) does not drop the race with it: the race is told
                // to stop instead, and runs on to cancel its attempts with receipts. On the
                // gateway's tracker, so the drain waits for it.
                let handler = self.state.tasks.spawn(async move {
                    let _serving = serving;
                    // The body is read as hyper delivers it: no boxing, no router.
                    let (parts, body) = req.into_parts();
                    match read_body_limited(&limits, &parts.headers, body).await {
                        Ok(bytes) => serve_openai(st, parts.headers, bytes, ep, Some(watched)).await,
                        Err(e) => e.into_response(),
                    }
                });
                // Made here, not in the future: dropped unpolled, it still hangs up.
                let mut hang_up_on_drop = HangUpOnDrop::new(hangup);
                Box::pin(async move {
                    let _answered = answered;
                    let resp = match handler.await {
                        Ok(resp) => resp,
                        Err(e) => match e.try_into_panic() {
                            // A panic stays a panic, as it was when the handler ran here.
                            Ok(panic) => std::panic::resume_unwind(panic),
                            Err(_) => ApiError::from(Unavailable::ShuttingDown).into_response(),
                        },
                    };
                    // Answered: what happens to the reply from here (a stream the client
                    // stops reading) is the reply body's to handle.
                    hang_up_on_drop.disarm();
                    Ok(resp)
                })
            }
            None => {
                let mut router = self.router.clone();
                Box::pin(async move {
                    let _answered = answered;
                    tower_service::Service::call(&mut router, req.map(axum::body::Body::new)).await
                })
            }
        }
    }
}
