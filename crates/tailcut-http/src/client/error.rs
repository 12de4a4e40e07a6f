//! What can go wrong in an exchange with a plain-HTTP server, typed: the reply head
//! ([`HeadError`]), the body in its framing ([`BodyError`]), and the exchange as its
//! caller sees it ([`ClientError`]). None of them carries the URL or a header.

use crate::cause::cause_chain;
use std::io;
use std::time::Duration;

/// Why a reply head could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HeadError {
    /// A status code outside 100..=999.
    #[error("invalid status {code}")]
    InvalidStatus {
        /// The code as sent.
        code: u16,
    },
    /// A `101 Switching Protocols` reply to a POST.
    #[error("the upstream switched protocols")]
    SwitchedProtocols,
    /// No complete head within `limit` bytes.
    #[error("reply head over {} KiB", .limit / 1024)]
    TooLong {
        /// The longest head accepted, in bytes.
        limit: usize,
    },
    /// Bytes that are not an HTTP/1.x reply head.
    #[error("malformed reply head: {source}")]
    Malformed {
        /// httparse's reason.
        #[source]
        source: httparse::Error,
    },
    /// The server closed the connection partway through the head.
    #[error("connection closed before the reply head ended")]
    ClosedInHead,
    /// The server closed the connection without a byte of reply.
    #[error("connection closed before message completed")]
    ClosedBeforeReply,
    /// Reading failed.
    #[error("{}", cause_chain(.source))]
    Io {
        /// The socket's error.
        #[source]
        source: io::Error,
    },
    /// A `Content-Length` that is not a number.
    #[error("invalid content-length in reply")]
    InvalidContentLength,
    /// Two `Content-Length` fields that disagree.
    #[error("conflicting content-length values in reply")]
    ConflictingContentLength,
}

/// Why a reply body could not be read to its end.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// The connection ended before the `Content-Length` was read.
    #[error("reply ended {left} bytes before its declared length")]
    Short {
        /// Bytes still expected.
        left: u64,
    },
    /// The connection ended inside the chunked framing.
    #[error("reply ended {at}")]
    Ended {
        /// Where: `inside a chunk size`, `inside a chunk`, `after a chunk`, `inside its trailers`.
        at: &'static str,
    },
    /// A chunk-size line longer than the limit.
    #[error("chunk-size line too long")]
    ChunkSizeTooLong,
    /// A chunk-size line that is not one.
    #[error("invalid chunk size")]
    InvalidChunkSize,
    /// A chunk's data not followed by CRLF.
    #[error("chunk data not followed by CRLF")]
    NoCrlfAfterChunk,
    /// A trailer line longer than the limit.
    #[error("trailer line too long")]
    TrailerTooLong,
    /// A whole body over `limit` bytes.
    #[error("reply body over {} MiB", .limit >> 20)]
    TooLarge {
        /// The largest body read, in bytes.
        limit: usize,
    },
    /// Reading failed.
    #[error("{}", cause_chain(.source))]
    Io {
        /// The socket's error.
        #[source]
        source: io::Error,
    },
}

/// A failed exchange, as one line of text that never names the URL.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The URL's scheme is not `http`.
    #[error("error sending request: only http:// upstreams use the plain client")]
    NotHttp,
    /// The URL has no authority.
    #[error("error sending request: the URL has no host")]
    NoHost,
    /// Resolving or connecting failed.
    #[error("error sending request: {}", cause_chain(.source))]
    Connect {
        /// The connect's error.
        #[source]
        source: io::Error,
    },
    /// Connecting took longer than the connect timeout.
    #[error("error sending request: connect timed out")]
    ConnectTimedOut,
    /// Writing the request on a fresh connection failed.
    #[error("error sending request: {}", cause_chain(.source))]
    Unsent {
        /// The write's error.
        #[source]
        source: io::Error,
    },
    /// The request went out; its reply head did not come back whole.
    #[error("error sending request: {source}")]
    Reply {
        /// Why.
        #[source]
        source: HeadError,
    },
    /// A whole reply's body could not be read.
    #[error("error reading response body: {source}")]
    Body {
        /// Why.
        #[source]
        source: BodyError,
    },
    /// A streamed reply's body broke off.
    #[error("error reading a body from connection: {source}")]
    Stream {
        /// Why.
        #[source]
        source: BodyError,
    },
    /// The exchange took longer than the client's timeout.
    #[error("operation timed out after {:.1} s", .after.as_secs_f64())]
    TimedOut {
        /// The timeout.
        after: Duration,
    },
}
