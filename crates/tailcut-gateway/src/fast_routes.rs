//! The gateway's routes on `tailcut_http`'s fast path ([`FastService`]): whole POSTs to
//! the OpenAI endpoints (the one table of paths, [`crate::handlers::ENDPOINTS`]) go to
//! their handler with the two header fields it reads; a body that does not arrive in
//! time is the gateway's JSON 408.

use crate::error::ApiError;
use crate::handlers::{endpoint, serve_openai};
use crate::observe::names;
use crate::state::AppState;
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, HeaderName, Method};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tailcut_http::{FastService, Hangup, Refusal};
use tailcut_providers::openai::Endpoint;

/// The gateway as the fast path serves it.
#[derive(Clone)]
pub(crate) struct FastRoutes(pub(crate) Arc<AppState>);

impl FastService for FastRoutes {
    type Route = Endpoint;
    type Body = axum::body::Body;
    #[inline]
    fn kept_field(name: &str) -> Option<HeaderName> {
        if name.eq_ignore_ascii_case("authorization") {
            Some(AUTHORIZATION)
        } else if name.eq_ignore_ascii_case(names::REQUEST_ID.as_str()) {
            Some(names::REQUEST_ID)
        } else {
            None
        }
    }

    #[inline]
    fn route(&self, path: &str) -> Option<Endpoint> {
        endpoint(&Method::POST, path)
    }

    fn call(&self, route: Endpoint, headers: HeaderMap, body: Bytes, hangup: Arc<Hangup>) -> impl Future<Output = Response> + Send {
        serve_openai(self.0.clone(), headers, body, route, Some(hangup))
    }

    fn refuse(&self, refusal: Refusal) -> Response {
        match refusal {
            Refusal::BodyTimeout(limit) => ApiError::BodyTimeout(limit.as_secs()).into_response(),
        }
    }

    fn draining(&self) -> bool {
        self.0.draining.load(Ordering::Relaxed)
    }

    fn shed(&self) {
        self.0.metrics.inc("tailcut_connections_shed_total", &[]);
    }
}
