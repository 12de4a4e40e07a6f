//! Errors as HTTP responses: OpenAI-style JSON bodies, one place. Every error a client
//! sees — a refused or failed request, a race the engine refused, a stream that broke
//! after its first token — is an [`ApiError`] rendered here.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use tailcut_core::RaceError;
use tailcut_http::HeadRefusal;

mod reason;

pub use reason::{BadRequest, Forbidden, NotFound, TooMany, Unauthorized, Unavailable, Upstream};

/// A request that could not be served.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Malformed or incomplete request.
    #[error("{0}")]
    BadRequest(#[from] BadRequest),
    /// Missing or unknown API key.
    #[error("{0}")]
    Unauthorized(#[from] Unauthorized),
    /// Key not allowed here.
    #[error("{0}")]
    Forbidden(#[from] Forbidden),
    /// Unknown model or job.
    #[error("{0}")]
    NotFound(#[from] NotFound),
    /// Body too large.
    #[error("request body larger than {0} bytes")]
    TooLarge(usize),
    /// Request target too long.
    #[error("request target longer than {0} bytes")]
    UriTooLong(usize),
    /// Too many or too large header fields.
    #[error("{0}")]
    HeadersTooLarge(HeadRefusal),
    /// The method is not served at this path.
    #[error("method not allowed here")]
    MethodNotAllowed,
    /// The body did not arrive within the body timeout.
    #[error("the request body did not arrive within {0} s")]
    BodyTimeout(u64),
    /// Rate limit or budget.
    #[error("{0}")]
    TooMany(#[from] TooMany),
    /// Every provider failed (or the winner's stream broke).
    #[error("{0}")]
    ProviderFailed(#[from] Upstream),
    /// Overloaded or draining.
    #[error("{0}")]
    Unavailable(#[from] Unavailable),
    /// The total timeout passed.
    #[error("the request took longer than the gateway's total timeout")]
    Timeout,
    /// The client closed its connection while its request was being raced (nginx's 499:
    /// nobody reads this reply; it names the outcome in metrics and logs).
    #[error("the client closed the connection before the reply")]
    ClientClosed,
}

/// nginx's status for a request whose client closed the connection first.
const CLIENT_CLOSED: StatusCode = match StatusCode::from_u16(499) {
    Ok(s) => s,
    Err(_) => StatusCode::BAD_REQUEST,
};

impl ApiError {
    fn parts(&self) -> (StatusCode, &'static str, &'static str) {
        match self {
            ApiError::BadRequest(_) => (StatusCode::BAD_REQUEST, "invalid_request_error", "bad_request"),
            ApiError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "invalid_request_error", "invalid_api_key"),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, "invalid_request_error", "forbidden"),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "invalid_request_error", "not_found"),
            ApiError::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "invalid_request_error", "request_too_large"),
            ApiError::UriTooLong(_) => (StatusCode::URI_TOO_LONG, "invalid_request_error", "uri_too_long"),
            ApiError::HeadersTooLarge(_) => (StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, "invalid_request_error", "headers_too_large"),
            ApiError::MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, "invalid_request_error", "method_not_allowed"),
            ApiError::BodyTimeout(_) => (StatusCode::REQUEST_TIMEOUT, "invalid_request_error", "body_timeout"),
            ApiError::TooMany(_) => (StatusCode::TOO_MANY_REQUESTS, "rate_limit_error", "rate_limit_exceeded"),
            ApiError::ProviderFailed(_) => (StatusCode::BAD_GATEWAY, "api_error", "upstream_failed"),
            ApiError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "api_error", "unavailable"),
            ApiError::Timeout => (StatusCode::GATEWAY_TIMEOUT, "api_error", "timeout"),
            ApiError::ClientClosed => (CLIENT_CLOSED, "api_error", "client_closed"),
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.parts().0
    }

    /// The OpenAI-style JSON body: `{"error": {"message", "type", "param", "code"}}`.
    fn body(&self) -> Value {
        let (_, kind, code) = self.parts();
        json!({"error": {"message": self.to_string(), "type": kind, "param": null, "code": code}})
    }

    /// The error as the last events of a stream already under way (its status was sent):
    /// the error body as an event, then `[DONE]`.
    pub fn stream_end(&self) -> bytes::Bytes {
        bytes::Bytes::from(format!("data: {}\n\ndata: [DONE]\n\n", self.body()))
    }
}

/// The engine refused to race the request (budget, live cap): 429.
impl From<RaceError> for ApiError {
    fn from(e: RaceError) -> ApiError {
        ApiError::TooMany(TooMany::Refused(e))
    }
}

/// The JSON body of an error with this status, for replies hyper makes itself (a head
/// that is not HTTP, or past hyper's own limits): same shape as every other error.
pub fn protocol_error_body(status: u16) -> String {
    let (message, code) = match status {
        414 => ("request target too long", "uri_too_long"),
        431 => ("request header fields too large", "headers_too_large"),
        505 => ("HTTP version not supported", "http_version_not_supported"),
        _ => ("malformed HTTP request", "bad_request"),
    };
    json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": code}}).to_string()
}

/// Seconds a client is told to wait (`Retry-After`) before retrying a 429 or a 503.
const RETRY_AFTER_S: &str = "1";

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (self.status(), Json(self.body())).into_response();
        if matches!(self, ApiError::TooMany(_) | ApiError::Unavailable(_)) {
            resp.headers_mut().insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from_static(RETRY_AFTER_S));
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailcut_core::ledger::LedgerError;
    use tailcut_core::MicroUsd;

    #[test]
    fn a_stream_that_breaks_ends_with_the_error_body_as_an_event_then_done() {
        let end = ApiError::from(Upstream::MidStream { reason: "cut".into() }).stream_end();
        let want =
            json!({"error": {"message": "upstream failed mid-stream: cut", "type": "api_error", "param": null, "code": "upstream_failed"}});
        assert_eq!(end, bytes::Bytes::from(format!("data: {want}\n\ndata: [DONE]\n\n")));
    }

    /// The texts clients read (and may match on) are the ones the gateway sent when
    /// these errors were bare strings.
    #[test]
    fn each_reason_keeps_the_words_clients_read() {
        let cases: Vec<(ApiError, u16, &str)> = vec![
            (BadRequest::Required { field: "model" }.into(), 400, "`model` is required"),
            (BadRequest::RouteRequired.into(), 400, "`route` is required (several jobs routes are configured)"),
            (BadRequest::Wait.into(), 400, "`wait` must be a number of seconds from 0 to 3600"),
            (BadRequest::WebhookNotString.into(), 400, "`webhook` must be a URL string"),
            (BadRequest::TwoAuthorizations.into(), 400, "more than one Authorization header"),
            (BadRequest::NotObject.into(), 400, "body must be a JSON object"),
            (BadRequest::Body { reason: "reset".into() }.into(), 400, "could not read the request body: reset"),
            (Unauthorized::MissingKey.into(), 401, "missing API key (Authorization: Bearer <key>)"),
            (Unauthorized::Malformed.into(), 401, "malformed Authorization header (expected `Bearer <key>`)"),
            (Unauthorized::InvalidKey.into(), 401, "invalid API key"),
            (Forbidden::Route { route: "r".into() }.into(), 403, "this key may not use route `r`"),
            (Forbidden::NotAdmin { key: "k".into() }.into(), 403, "key `k` is not an admin key (`admin = true` in gateway.keys)"),
            (NotFound::Model { model: "m".into() }.into(), 404, "model `m` is not served here"),
            (NotFound::JobsRoute { route: "r".into() }.into(), 404, "no jobs route `r`"),
            (NotFound::Job { id: "j".into() }.into(), 404, "no job `j`"),
            (NotFound::Path.into(), 404, "no such route"),
            (TooMany::Rate { key: "k".into() }.into(), 429, "rate limit exceeded for key `k`"),
            (TooMany::Jobs { key: "k".into(), cap: 2 }.into(), 429, "key `k` already has 2 jobs running (its max_running_jobs)"),
            (
                Upstream::AllFailed { attempts: 2, why: vec!["a: HTTP 500".into(), "b: timeout".into()] }.into(),
                502,
                "no upstream returned a valid response (2 attempt(s): a: HTTP 500; b: timeout)",
            ),
            (Unavailable::Draining.into(), 503, "the gateway is draining"),
            (Unavailable::ShuttingDown.into(), 503, "the gateway is shutting down"),
            (Unavailable::InFlight.into(), 503, "too many requests in flight"),
        ];
        for (e, status, text) in cases {
            assert_eq!((e.status().as_u16(), e.to_string().as_str()), (status, text));
        }
    }

    #[test]
    fn a_race_the_engine_refuses_is_a_429_naming_why() {
        let e = ApiError::from(RaceError::AtCapacity(2));
        assert_eq!(e.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(e.to_string(), "refused: live-attempt cap of 2 reached");
        let over = LedgerError::BudgetExceeded { limit_name: "hard_stop", limit: MicroUsd(1), spent: MicroUsd(1), requested: MicroUsd(1) };
        let budget = ApiError::from(RaceError::Budget(over));
        assert_eq!(budget.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(budget.to_string().starts_with("refused: budget exceeded"), "{budget}");
    }
}
