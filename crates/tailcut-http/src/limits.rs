//! [`ServerLimits`]: the limits and timeouts of one connection, read by both server
//! paths (the fast path, [`crate::fast`], and hyper's, [`crate::server`] and the
//! service's own body reading), so that neither keeps a copy of its own.
//!
//! Head limits are answered as refusals ([`HeadRefusal`]): a URI longer than
//! `max_uri_bytes` is a 414, more than `max_headers` header fields or more than
//! `max_header_bytes` of them a 431, and an HTTP/1.1 request without exactly one `Host`
//! field a 400 (RFC 9112 §3.2; HTTP/1.0 needs none). hyper itself stops parsing a head
//! at its default of 100 header fields ([`MAX_HEADERS`] is that same number, so a head
//! hyper accepts is never over our count): such heads, heads past hyper's size limits,
//! and heads that are not HTTP at all get hyper's status with the service's error body
//! ([`crate::GuardedStream`] rewrites them).
//!
//! hyper's default is kept rather than raised: a configured header limit makes hyper
//! allocate and initialise two arrays of that many entries for every request head
//! (about 3,000 instructions a request at 256, a twentieth of the gateway's own work on
//! a proxied request; callgrind, docs/benchmarks.md), where its default uses arrays on
//! the stack.

use http::header::HOST;
use http::{Request, Version};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Longest request target (path and query).
pub const MAX_URI_BYTES: usize = 8 * 1024;
/// Most header fields: hyper's own default limit, which the gateway keeps.
pub const MAX_HEADERS: usize = 100;
/// Most bytes of header names and values together.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;

/// What one connection may take, on either path.
#[derive(Debug, Clone)]
pub struct ServerLimits {
    /// From a request head's first byte to its last (hyper's path; the fast path hands
    /// a head still arriving to hyper).
    pub header_read: Duration,
    /// From a connection opening or going idle to the next complete request head.
    pub idle: Duration,
    /// From a body's first byte to its last: a 408 past it.
    pub body_read: Duration,
    /// The largest request body (a 413 past it), shared with its owner so that a
    /// configuration reload applies to connections already open.
    pub max_body: Arc<AtomicUsize>,
    /// Longest request target (path and query).
    pub max_uri_bytes: usize,
    /// Most header fields.
    pub max_headers: usize,
    /// Most bytes of header names and values together.
    pub max_header_bytes: usize,
}

impl ServerLimits {
    /// The given timeouts and body limit, with the head limits above.
    pub fn new(header_read: Duration, idle: Duration, body_read: Duration, max_body: Arc<AtomicUsize>) -> ServerLimits {
        ServerLimits {
            header_read,
            idle,
            body_read,
            max_body,
            max_uri_bytes: MAX_URI_BYTES,
            max_headers: MAX_HEADERS,
            max_header_bytes: MAX_HEADER_BYTES,
        }
    }

    /// The largest request body now.
    #[inline]
    pub fn max_body(&self) -> usize {
        self.max_body.load(Ordering::Relaxed)
    }

    /// The refusal for a head over a limit, if it is.
    pub fn check_head<B>(&self, req: &Request<B>) -> Option<HeadRefusal> {
        let uri_len = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
        if uri_len > self.max_uri_bytes {
            return Some(HeadRefusal::UriTooLong { limit: self.max_uri_bytes });
        }
        let headers = req.headers();
        if headers.len() > self.max_headers {
            return Some(HeadRefusal::TooManyFields { limit: self.max_headers });
        }
        let bytes: usize = headers.iter().map(|(k, v)| k.as_str().len() + v.len()).sum();
        if bytes > self.max_header_bytes {
            return Some(HeadRefusal::FieldsTooLarge { limit: self.max_header_bytes });
        }
        if req.version() == Version::HTTP_11 {
            let mut hosts = headers.get_all(HOST).iter();
            if hosts.next().is_none() || hosts.next().is_some() {
                return Some(HeadRefusal::Host);
            }
        }
        None
    }
}

/// A request head over a limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadRefusal {
    /// The request target is longer than `limit` bytes (a 414).
    #[error("request target longer than {limit} bytes")]
    UriTooLong {
        /// The limit.
        limit: usize,
    },
    /// More than `limit` header fields (a 431).
    #[error("more than {limit} header fields")]
    TooManyFields {
        /// The limit.
        limit: usize,
    },
    /// Header fields larger than `limit` bytes together (a 431).
    #[error("header fields larger than {limit} bytes")]
    FieldsTooLarge {
        /// The limit.
        limit: usize,
    },
    /// An HTTP/1.1 request without exactly one `Host` field (a 400).
    #[error("an HTTP/1.1 request must have exactly one Host header field")]
    Host,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ServerLimits {
        ServerLimits::new(Duration::from_secs(1), Duration::from_secs(1), Duration::from_secs(1), Arc::new(AtomicUsize::new(10)))
    }

    #[test]
    fn heads_over_each_limit_are_refused() {
        let ok = Request::post("/v1/x").header("host", "x").body(()).unwrap();
        assert_eq!(limits().check_head(&ok), None);
        let long = Request::post(format!("/{}", "a".repeat(MAX_URI_BYTES))).header("host", "x").body(()).unwrap();
        assert_eq!(limits().check_head(&long), Some(HeadRefusal::UriTooLong { limit: MAX_URI_BYTES }));
        let mut many = Request::post("/").header("host", "x");
        for i in 0..MAX_HEADERS {
            many = many.header(format!("x-{i}"), "1");
        }
        assert_eq!(limits().check_head(&many.body(()).unwrap()), Some(HeadRefusal::TooManyFields { limit: MAX_HEADERS }));
        let big = Request::post("/").header("host", "x").header("x-big", "a".repeat(MAX_HEADER_BYTES)).body(()).unwrap();
        assert_eq!(limits().check_head(&big), Some(HeadRefusal::FieldsTooLarge { limit: MAX_HEADER_BYTES }));
        let hostless = Request::post("/").body(()).unwrap();
        assert_eq!(limits().check_head(&hostless), Some(HeadRefusal::Host));
        let http10 = Request::post("/").version(Version::HTTP_10).body(()).unwrap();
        assert_eq!(limits().check_head(&http10), None);
    }
}
