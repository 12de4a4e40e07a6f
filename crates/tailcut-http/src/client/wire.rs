//! HTTP/1.1 on one connection: encoding a request, reading the reply head, and reading
//! the body in its framing (`Content-Length`, `chunked`, or until the server closes).
//! Parsing is httparse's (hyper's parser); this module only frames.

use super::error::{BodyError, HeadError};
use bytes::{Bytes, BytesMut};
use http::{HeaderName, HeaderValue, StatusCode};
use std::io;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// The longest reply head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// The longest chunk-size or trailer line accepted.
const MAX_LINE: usize = 4 * 1024;
/// Free space kept in the read buffer before each read.
const READ_SPACE: usize = 8 * 1024;

/// A failed exchange, split by whether the request may be sent again elsewhere.
#[derive(Debug)]
pub(super) enum WireError {
    /// Writing the request failed: the server cannot have acted on it, so it may be sent
    /// again on a fresh connection (a pooled one the server had closed while idle).
    Unsent(io::Error),
    /// Anything else, including a connection that ended after the request went out with
    /// no reply: the server may have acted on it, so it is never sent again (a duplicate
    /// would be an uncharged submission).
    Failed(HeadError),
}

/// How the body after a head is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// Exactly this many bytes remain.
    Length(u64),
    /// Chunked transfer coding, at this point of the chunk grammar.
    Chunked(Chunk),
    /// Everything until the server closes.
    ToClose,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Expecting a chunk-size line.
    Size,
    /// Inside a chunk's data, with this many bytes left.
    Data(u64),
    /// Expecting the CRLF after a chunk's data.
    DataEnd,
    /// After the last chunk: trailer lines up to an empty line.
    Trailers,
}

/// One kept-alive connection and the bytes read from it but not yet used.
#[derive(Debug)]
pub(super) struct Conn {
    pub(super) stream: TcpStream,
    buf: BytesMut,
    /// Bytes read since the connection last went idle.
    read_lately: usize,
}

/// A reply's status and how to read its body.
#[derive(Debug)]
pub(super) struct Head {
    pub(super) status: StatusCode,
    framing: Option<Framing>,
    keep_alive: bool,
}

/// Appends a POST's head (request line and headers, `content-length` last) to `out`; the
/// path is given in pieces, written one after the other.
pub(super) fn encode_post(out: &mut Vec<u8>, path: &[&str], authority: &str, headers: &[(HeaderName, HeaderValue)], body_len: usize) {
    out.extend_from_slice(b"POST ");
    for piece in path {
        out.extend_from_slice(piece.as_bytes());
    }
    out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    out.extend_from_slice(authority.as_bytes());
    out.extend_from_slice(concat!("\r\nuser-agent: tailcut/", env!("CARGO_PKG_VERSION"), "\r\n").as_bytes());
    for (name, value) in headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"content-length: ");
    out.extend_from_slice(body_len.to_string().as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
}

fn header_has_token(value: &[u8], token: &str) -> bool {
    value.split(|&b| b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

impl Conn {
    pub(super) fn new(stream: TcpStream) -> Conn {
        Conn { stream, buf: BytesMut::new(), read_lately: 0 }
    }

    /// Readies a connection for the idle pool: after a large reply the read buffer (whose
    /// allocation the reply's bytes share) is let go, so an idle connection never pins
    /// its last reply's memory; after a small one it is kept for the next read.
    pub(super) fn shrink_idle(&mut self) {
        if self.read_lately > 4 * READ_SPACE {
            self.buf = BytesMut::new();
        }
        self.read_lately = 0;
    }

    /// Whether bytes are waiting that no request asked for (a connection back from the
    /// pool must have none).
    pub(super) fn has_unread(&self) -> bool {
        !self.buf.is_empty()
    }

    /// Reads more bytes into the buffer; `Ok(0)` at end of stream.
    async fn fill(&mut self) -> io::Result<usize> {
        if self.buf.capacity() - self.buf.len() < READ_SPACE / 2 {
            self.buf.reserve(READ_SPACE);
        }
        // `read_buf` (not `try_read`) so that tokio clears the socket's readiness after
        // a short read: an idle connection then shows readable again only when the
        // server sends or closes, which is how the pool spots dead ones for free.
        let n = self.stream.read_buf(&mut self.buf).await?;
        self.read_lately += n;
        Ok(n)
    }

    /// Reads the reply head, skipping interim (1xx) replies.
    pub(super) async fn read_head(&mut self) -> Result<Head, WireError> {
        let mut received_any = false;
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut reply = httparse::Response::new(&mut headers);
            match reply.parse(&self.buf) {
                Ok(httparse::Status::Complete(len)) => {
                    let code = reply.code.unwrap_or(0);
                    let status = StatusCode::from_u16(code).map_err(|_| WireError::Failed(HeadError::InvalidStatus { code }))?;
                    if status.is_informational() {
                        if code == 101 {
                            return Err(WireError::Failed(HeadError::SwitchedProtocols));
                        }
                        let _ = self.buf.split_to(len);
                        received_any = true;
                        continue;
                    }
                    let head = head_of(status, reply.version.unwrap_or(1), reply.headers)?;
                    let _ = self.buf.split_to(len);
                    return Ok(head);
                }
                Ok(httparse::Status::Partial) if self.buf.len() > MAX_HEAD => {
                    return Err(WireError::Failed(HeadError::TooLong { limit: MAX_HEAD }));
                }
                Ok(httparse::Status::Partial) => {}
                Err(source) => return Err(WireError::Failed(HeadError::Malformed { source })),
            }
            received_any |= !self.buf.is_empty();
            match self.fill().await {
                Ok(0) if received_any => return Err(WireError::Failed(HeadError::ClosedInHead)),
                Ok(0) => return Err(WireError::Failed(HeadError::ClosedBeforeReply)),
                Ok(_) => {}
                Err(source) => return Err(WireError::Failed(HeadError::Io { source })),
            }
        }
    }

    /// The next piece of the body, `None` at its end.
    pub(super) async fn next_data(&mut self, head: &mut Head) -> Result<Option<Bytes>, BodyError> {
        loop {
            let Some(framing) = head.framing else { return Ok(None) };
            match framing {
                Framing::Length(0) => {
                    head.framing = None;
                    return Ok(None);
                }
                Framing::Length(left) => {
                    if let Some(data) = self.take(left) {
                        head.framing = Some(Framing::Length(left - data.len() as u64));
                        return Ok(Some(data));
                    }
                    self.fill_or(BodyError::Short { left }).await?;
                }
                Framing::ToClose => {
                    if let Some(data) = self.take(u64::MAX) {
                        return Ok(Some(data));
                    }
                    if self.fill().await.map_err(|source| BodyError::Io { source })? == 0 {
                        head.framing = None;
                        head.keep_alive = false;
                        return Ok(None);
                    }
                }
                Framing::Chunked(Chunk::Size) => match httparse::parse_chunk_size(&self.buf) {
                    Ok(httparse::Status::Complete((len, 0))) => {
                        let _ = self.buf.split_to(len);
                        head.framing = Some(Framing::Chunked(Chunk::Trailers));
                    }
                    Ok(httparse::Status::Complete((len, size))) => {
                        let _ = self.buf.split_to(len);
                        head.framing = Some(Framing::Chunked(Chunk::Data(size)));
                    }
                    Ok(httparse::Status::Partial) if self.buf.len() > MAX_LINE => return Err(BodyError::ChunkSizeTooLong),
                    Ok(httparse::Status::Partial) => self.fill_or(BodyError::Ended { at: "inside a chunk size" }).await?,
                    Err(_) => return Err(BodyError::InvalidChunkSize),
                },
                Framing::Chunked(Chunk::Data(left)) => {
                    if let Some(data) = self.take(left) {
                        let left = left - data.len() as u64;
                        head.framing = Some(Framing::Chunked(if left == 0 { Chunk::DataEnd } else { Chunk::Data(left) }));
                        return Ok(Some(data));
                    }
                    self.fill_or(BodyError::Ended { at: "inside a chunk" }).await?;
                }
                Framing::Chunked(Chunk::DataEnd) => {
                    if self.buf.len() >= 2 {
                        if &self.buf[..2] != b"\r\n" {
                            return Err(BodyError::NoCrlfAfterChunk);
                        }
                        let _ = self.buf.split_to(2);
                        head.framing = Some(Framing::Chunked(Chunk::Size));
                    } else {
                        self.fill_or(BodyError::Ended { at: "after a chunk" }).await?;
                    }
                }
                Framing::Chunked(Chunk::Trailers) => match self.buf.windows(2).position(|w| w == b"\r\n") {
                    Some(0) => {
                        let _ = self.buf.split_to(2);
                        head.framing = None;
                        return Ok(None);
                    }
                    Some(end) => {
                        let _ = self.buf.split_to(end + 2);
                    }
                    None if self.buf.len() > MAX_LINE => return Err(BodyError::TrailerTooLong),
                    None => self.fill_or(BodyError::Ended { at: "inside its trailers" }).await?,
                },
            }
        }
    }

    /// The whole body (up to `limit` bytes); the common single-read case is not copied.
    pub(super) async fn read_body(&mut self, head: &mut Head, limit: usize) -> Result<Bytes, BodyError> {
        let Some(first) = self.next_data(head).await? else { return Ok(Bytes::new()) };
        let Some(second) = self.next_data(head).await? else { return Ok(first) };
        let mut all = BytesMut::with_capacity(first.len() + second.len());
        all.extend_from_slice(&first);
        all.extend_from_slice(&second);
        while let Some(more) = self.next_data(head).await? {
            if all.len() + more.len() > limit {
                return Err(BodyError::TooLarge { limit });
            }
            all.extend_from_slice(&more);
        }
        if all.len() > limit {
            return Err(BodyError::TooLarge { limit });
        }
        Ok(all.freeze())
    }

    /// Up to `max` buffered bytes, if any are buffered.
    fn take(&mut self, max: u64) -> Option<Bytes> {
        if self.buf.is_empty() {
            return None;
        }
        let n = usize::try_from(max).unwrap_or(usize::MAX).min(self.buf.len());
        Some(self.buf.split_to(n).freeze())
    }

    async fn fill_or(&mut self, at_eof: BodyError) -> Result<(), BodyError> {
        match self.fill().await {
            Ok(0) => Err(at_eof),
            Ok(_) => Ok(()),
            Err(source) => Err(BodyError::Io { source }),
        }
    }
}

impl Head {
    /// Whether the body has been read to its end and the connection may carry another
    /// request.
    pub(super) fn reusable(&self) -> bool {
        self.framing.is_none() && self.keep_alive
    }
}

/// The framing and persistence of a reply, from its status, version and headers.
fn head_of(status: StatusCode, minor_version: u8, headers: &[httparse::Header<'_>]) -> Result<Head, WireError> {
    let mut keep_alive = minor_version >= 1;
    let mut chunked = false;
    let mut other_coding = false;
    let mut length: Option<u64> = None;
    for h in headers {
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = h.value.rsplit(|&b| b == b',').next().is_some_and(|t| t.trim_ascii().eq_ignore_ascii_case(b"chunked"));
            // A final coding other than chunked is delimited by the close (RFC 9112 §6.3).
            other_coding = !chunked;
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or(WireError::Failed(HeadError::InvalidContentLength))?;
            if length.is_some_and(|m| m != n) {
                return Err(WireError::Failed(HeadError::ConflictingContentLength));
            }
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("connection") {
            if header_has_token(h.value, "close") {
                keep_alive = false;
            } else if header_has_token(h.value, "keep-alive") {
                keep_alive = true;
            }
        }
    }
    let framing = if status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED {
        None
    } else if other_coding {
        keep_alive = false;
        Some(Framing::ToClose)
    } else if chunked {
        if length.is_some() {
            // Both framings (RFC 9112 §6.3): chunked wins, and the connection is not reused.
            keep_alive = false;
        }
        Some(Framing::Chunked(Chunk::Size))
    } else if let Some(n) = length {
        Some(Framing::Length(n))
    } else {
        keep_alive = false;
        Some(Framing::ToClose)
    };
    Ok(Head { status, framing, keep_alive })
}
