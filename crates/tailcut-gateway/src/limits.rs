//! Limits on a request head, answered as JSON errors like every other refusal: a URI
//! longer than [`MAX_URI_BYTES`] is a 414, more than [`MAX_HEADERS`] header fields or more
//! than [`MAX_HEADER_BYTES`] of them a 431, and an HTTP/1.1 request without exactly one
//! `Host` field a 400 (RFC 9112 §3.2; HTTP/1.0 needs none). hyper itself stops parsing
//! a head at its default of 100 header fields ([`MAX_HEADERS`] is that same number, so a
//! head hyper accepts is never over our count): such heads, heads past hyper's size
//! limits, and heads that are not HTTP at all get hyper's status with a JSON body
//! (`connection::GuardedStream` rewrites them).
//!
//! hyper's default is kept rather than raised: a configured header limit makes hyper
//! allocate and initialise two arrays of that many entries for every request head
//! (about 3,000 instructions a request at 256, a twentieth of the gateway's own work on
//! a proxied request; callgrind, docs/benchmarks.md), where its default uses arrays on
//! the stack.

use crate::error::ApiError;
use axum::http::header::HOST;
use axum::http::{Request, Version};

/// Longest request target (path and query).
pub const MAX_URI_BYTES: usize = 8 * 1024;
/// Most header fields: hyper's own default limit, which the gateway keeps.
pub const MAX_HEADERS: usize = 100;
/// Most bytes of header names and values together.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;

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
    if req.version() == Version::HTTP_11 {
        let mut hosts = headers.get_all(HOST).iter();
        if hosts.next().is_none() || hosts.next().is_some() {
            return Some(ApiError::BadRequest("an HTTP/1.1 request must have exactly one Host header field".into()));
        }
    }
    None
}
