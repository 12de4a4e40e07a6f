//! Errors as HTTP responses: OpenAI-style JSON bodies, one place.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

/// A request that could not be served.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Malformed or incomplete request.
    #[error("{0}")]
    BadRequest(String),
    /// Missing or unknown API key.
    #[error("{0}")]
    Unauthorized(String),
    /// Key not allowed here.
    #[error("{0}")]
    Forbidden(String),
    /// Unknown model or job.
    #[error("{0}")]
    NotFound(String),
    /// Body too large.
    #[error("request body larger than {0} bytes")]
    TooLarge(usize),
    /// Request target too long.
    #[error("request target longer than {0} bytes")]
    UriTooLong(usize),
    /// Too many or too large header fields.
    #[error("{0}")]
    HeadersTooLarge(String),
    /// The method is not served at this path.
    #[error("method not allowed here")]
    MethodNotAllowed,
    /// The body did not arrive within the body timeout.
    #[error("the request body did not arrive within {0} s")]
    BodyTimeout(u64),
    /// Rate limit or budget.
    #[error("{0}")]
    TooMany(String),
    /// Every upstream failed.
    #[error("{0}")]
    Upstream(String),
    /// Overloaded or draining.
    #[error("{0}")]
    Unavailable(String),
    /// The total timeout passed.
    #[error("the request took longer than the gateway's total timeout")]
    Timeout,
}

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
            ApiError::Upstream(_) => (StatusCode::BAD_GATEWAY, "api_error", "upstream_failed"),
            ApiError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "api_error", "unavailable"),
            ApiError::Timeout => (StatusCode::GATEWAY_TIMEOUT, "api_error", "timeout"),
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.parts().0
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

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, kind, code) = self.parts();
        (status, Json(json!({"error": {"message": self.to_string(), "type": kind, "param": null, "code": code}}))).into_response()
    }
}
