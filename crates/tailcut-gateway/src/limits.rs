//! Limits on a request head, answered as JSON errors like every other refusal: a URI
//! longer than [`MAX_URI_BYTES`] is a 414, more than [`MAX_HEADERS`] header fields or more
//! than [`MAX_HEADER_BYTES`] of them a 431. hyper is configured with room above these
//! limits (see [`HYPER_MAX_HEADERS`]), so it hands such heads to us instead of answering
//! with its own empty-bodied errors; heads past even hyper's limits, and heads that are
//! not HTTP at all, get hyper's status with a JSON body
//! ([`crate::connection::GuardedStream`] rewrites them).

use crate::error::ApiError;
use axum::http::Request;

/// Longest request target (path and query).
pub const MAX_URI_BYTES: usize = 8 * 1024;
/// Most header fields.
pub const MAX_HEADERS: usize = 100;
/// Most bytes of header names and values together.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;
/// The header-field count hyper parses before it gives up on a head itself.
pub const HYPER_MAX_HEADERS: usize = 256;

/// The refusal for a head over a limit, if it is.
pub(crate) fn check_head<B>(req: &Request<B>) -> Option<ApiError> {
    let uri_len = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if uri_len > MAX_URI_BYTES {
        return Some(ApiError::UriTooLong(MAX_URI_BYTES));
    }
    let headers = req.headers();
    if headers.len() > MAX_HEADERS {
        return Some(ApiError::HeadersTooLarge(format!("more than {MAX_HEADERS} header fields")));
    }
    let bytes: usize = headers.iter().map(|(k, v)| k.as_str().len() + v.len()).sum();
    if bytes > MAX_HEADER_BYTES {
        return Some(ApiError::HeadersTooLarge(format!("header fields larger than {MAX_HEADER_BYTES} bytes")));
    }
    None
}
