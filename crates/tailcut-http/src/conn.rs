//! What a client connection may hold, and how many there may be.
//!
//! - **Head timeout**: a request head must be complete within `header_read_timeout` of its
//!   first byte ([`GuardedStream`]), so a client dribbling a byte every few seconds
//!   (slowloris) is cut off.
//! - **Idle timeout**: a connection with no complete request head for `idle_timeout`
//!   (hyper's head timer, which starts when the connection opens or its previous
//!   response is done) is closed.
//! - **Body timeout**: applied where bodies are read (the fast path, and the service's
//!   own body reading on hyper's path), from [`crate::ServerLimits::body_read`].
//! - **Connection cap** ([`Connections`]): below the file-descriptor limit. At the cap,
//!   idle keep-alive connections are shed (closed; busy ones finish their request
//!   first) so that new callers, `/healthz` and `/metrics` among them, still get in; a
//!   small reserve above the cap takes them while the shed connections close, and only
//!   past it is a new connection refused.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What the service and the stream of one connection share.
#[derive(Debug, Default)]
pub struct ConnState {
    /// Requests whose head has been read (the service was called), ever.
    requests: AtomicU64,
    /// Requests whose response head has not been produced yet.
    in_flight: AtomicUsize,
}

impl ConnState {
    /// Called when a request head has been read and the request is being served.
    pub fn request_started(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::Relaxed);
    }

    /// Called when the request's response head is ready.
    pub fn request_answered(&self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
    }

    /// Whether no request is being served on this connection.
    pub fn idle(&self) -> bool {
        self.in_flight.load(Ordering::Relaxed) == 0
    }

    /// Counts a request in ([`ConnState::request_started`]) and returns the guard that
    /// counts it answered when dropped (when its response head is ready, or the request
    /// is dropped).
    pub fn start_request(self: &Arc<Self>) -> Answered {
        self.request_started();
        Answered(self.clone())
    }
}

/// Marks its connection's request answered when dropped.
#[derive(Debug)]
pub struct Answered(Arc<ConnState>);

impl Drop for Answered {
    fn drop(&mut self) {
        self.0.request_answered();
    }
}

/// The body of a protocol-error reply (hyper's status for a head it could not parse),
/// in the service's own error shape; its content type is JSON.
pub type ErrorBody = fn(u16) -> String;

/// A TCP stream that fails its read with `TimedOut` once a request head has taken longer
/// than the head timeout since its first byte. Bytes that arrive while a request is being
/// served (its body) are not a head.
#[derive(Debug)]
pub struct GuardedStream {
    tcp: tokio::net::TcpStream,
    conn: Arc<ConnState>,
    header_read: Duration,
    /// The head deadline, when a head is being read: armed at its first byte.
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    armed: bool,
    /// `conn.requests` when the deadline was armed (a new request since disarms it).
    armed_at: u64,
    /// hyper's own error reply, replaced by one with a JSON body: the bytes still to
    /// write, and from where. Once set, hyper's own bytes are dropped.
    replacement: Option<(bytes::Bytes, usize)>,
    /// Bytes read before hyper took the connection over ([`crate::fast`]), read
    /// first.
    prefix: bytes::Bytes,
    /// The body of a protocol-error reply.
    error_body: ErrorBody,
}

impl GuardedStream {
    /// `tcp`, whose next bytes are `prefix` (already read from it) and then its own.
    pub fn new(
        tcp: tokio::net::TcpStream,
        conn: Arc<ConnState>,
        header_read: Duration,
        prefix: bytes::Bytes,
        error_body: ErrorBody,
    ) -> GuardedStream {
        GuardedStream { tcp, conn, header_read, deadline: None, armed: false, armed_at: 0, replacement: None, prefix, error_body }
    }

    fn arm(&mut self) {
        let at = tokio::time::Instant::now() + self.header_read;
        match &mut self.deadline {
            Some(d) => d.as_mut().reset(at),
            None => self.deadline = Some(Box::pin(tokio::time::sleep_until(at))),
        }
        self.armed = true;
        self.armed_at = self.conn.requests.load(Ordering::Relaxed);
    }

    /// Whether `buf` is hyper answering a head it could not parse: a head is being read
    /// (no request was dispatched since its first byte) and the write is a status line.
    /// Every reply of ours follows a dispatched request.
    fn protocol_error_status(&self, buf: &[u8]) -> Option<u16> {
        if !self.armed || self.conn.requests.load(Ordering::Relaxed) != self.armed_at || !buf.starts_with(b"HTTP/1.") {
            return None;
        }
        let code = std::str::from_utf8(buf.get(9..12)?).ok()?.parse::<u16>().ok()?;
        (400..600).contains(&code).then_some(code)
    }

    fn replace_with_json(&mut self, status: u16) {
        let body = (self.error_body)(status);
        let reason = http::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("Error");
        let mut reply =
            format!("HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n", body.len()).into_bytes();
        // RFC 9110 6.6.1: a 4xx or 5xx from a server with a clock carries a Date.
        crate::date::http_date(&mut reply);
        reply.extend_from_slice(b"connection: close\r\n\r\n");
        reply.extend_from_slice(body.as_bytes());
        self.replacement = Some((bytes::Bytes::from(reply), 0));
    }

    /// Writes what is left of the replacement reply.
    fn poll_replacement(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((reply, at)) = &mut self.replacement {
            if *at >= reply.len() {
                return Poll::Ready(Ok(()));
            }
            let n = std::task::ready!(Pin::new(&mut self.tcp).poll_write(cx, &reply[*at..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *at += n;
        }
        Poll::Ready(Ok(()))
    }

    /// A write of hyper's: passed through, or (for its own error reply) swallowed in
    /// favour of the JSON one.
    fn poll_write_intercepted(&mut self, cx: &mut Context<'_>, first: &[u8], total: usize) -> Option<Poll<io::Result<usize>>> {
        if self.replacement.is_none() {
            let status = self.protocol_error_status(first)?;
            self.replace_with_json(status);
        }
        match self.poll_replacement(cx) {
            Poll::Ready(Err(e)) => Some(Poll::Ready(Err(e))),
            // Written or not yet, hyper's bytes are accounted for; flush finishes ours.
            _ => Some(Poll::Ready(Ok(total))),
        }
    }
}

impl AsyncRead for GuardedStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.armed && this.conn.requests.load(Ordering::Relaxed) != this.armed_at {
            this.armed = false; // the head being timed was read whole
        }
        if !this.prefix.is_empty() {
            let n = this.prefix.len().min(buf.remaining());
            buf.put_slice(&this.prefix.split_to(n));
            if n > 0 && !this.armed && this.conn.idle() {
                this.arm();
            }
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.tcp).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before && !this.armed && this.conn.idle() {
                    this.arm();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => {
                if this.armed {
                    if let Some(d) = &mut this.deadline {
                        if d.as_mut().poll(cx).is_ready() {
                            this.armed = false;
                            return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "request head not complete in time")));
                        }
                    }
                }
                Poll::Pending
            }
            other => other,
        }
    }
}

impl AsyncWrite for GuardedStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Some(done) = this.poll_write_intercepted(cx, buf, buf.len()) {
            return done;
        }
        Pin::new(&mut this.tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let first = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| &b[..]);
        let total = bufs.iter().map(|b| b.len()).sum();
        if let Some(done) = this.poll_write_intercepted(cx, first, total) {
            return done;
        }
        Pin::new(&mut this.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_replacement(cx))?;
        Pin::new(&mut this.tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_replacement(cx))?;
        Pin::new(&mut this.tcp).poll_shutdown(cx)
    }
}

/// The open client connections of the whole gateway (every worker thread), against the
/// cap.
#[derive(Debug)]
pub struct Connections {
    open: AtomicUsize,
    /// Shedding starts here.
    cap: usize,
    /// New connections are refused here.
    ceiling: usize,
    /// Bumped to ask idle connections to close.
    shed: tokio::sync::watch::Sender<u64>,
    /// When shedding was last asked for (ms since `epoch`), to ask at most every 100 ms.
    last_shed_ms: AtomicU64,
    epoch: tokio::time::Instant,
}

/// What the accept loop does with a new connection.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    /// Serve it.
    Serve,
    /// Serve it; idle connections were asked to close to make room.
    ServeAndShed,
    /// Close it at once: over the ceiling.
    Refuse,
}

impl Connections {
    /// A cap of `cap` connections (None: half the file-descriptor limit, which leaves one
    /// descriptor per client connection for its provider connection).
    pub fn new(cap: Option<usize>) -> Connections {
        let cap = cap.unwrap_or_else(|| (fd_limit() / 2).max(64)).max(1);
        let ceiling = cap + (cap / 16).max(8);
        Connections {
            open: AtomicUsize::new(0),
            cap,
            ceiling,
            shed: tokio::sync::watch::channel(0).0,
            last_shed_ms: AtomicU64::new(0),
            epoch: tokio::time::Instant::now(),
        }
    }

    /// The cap.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Counts a new connection in (or refuses it); a `Serve*` answer must be paired with
    /// [`Connections::closed`] when the connection ends.
    pub fn admit(&self) -> Admission {
        let open = self.open.fetch_add(1, Ordering::Relaxed) + 1;
        if open > self.ceiling {
            self.open.fetch_sub(1, Ordering::Relaxed);
            self.ask_to_shed();
            return Admission::Refuse;
        }
        if open > self.cap {
            self.ask_to_shed();
            return Admission::ServeAndShed;
        }
        Admission::Serve
    }

    /// Counts a connection out.
    pub fn closed(&self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }

    /// A receiver that changes when idle connections should close.
    pub fn shed_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.shed.subscribe()
    }

    fn ask_to_shed(&self) {
        let now = self.epoch.elapsed().as_millis() as u64;
        let last = self.last_shed_ms.load(Ordering::Relaxed);
        if (last == 0 || now.saturating_sub(last) >= 100)
            && self.last_shed_ms.compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            self.shed.send_modify(|g| *g += 1);
        }
    }
}

/// This process's soft limit on open files (1024 when it cannot be read).
fn fd_limit() -> usize {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current.map_or(1024, |n| usize::try_from(n).unwrap_or(usize::MAX))
}

/// Raises this process's soft limit on open files to its hard limit (as servers do at
/// start), so the connection cap derived from it is as high as the system allows.
pub fn raise_fd_limit() {
    let mut limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    if limit.current != limit.maximum {
        limit.current = limit.maximum;
        let _ = rustix::process::setrlimit(rustix::process::Resource::Nofile, limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_sheds_then_the_ceiling_refuses() {
        let c = Connections::new(Some(16));
        let mut signal = c.shed_signal();
        for _ in 0..16 {
            assert_eq!(c.admit(), Admission::Serve);
        }
        assert!(!signal.has_changed().unwrap());
        assert_eq!(c.admit(), Admission::ServeAndShed);
        assert!(signal.has_changed().unwrap());
        signal.mark_unchanged();
        for _ in 0..7 {
            assert_eq!(c.admit(), Admission::ServeAndShed);
        }
        assert_eq!(c.open(), 24);
        assert_eq!(c.admit(), Admission::Refuse);
        assert_eq!(c.open(), 24);
        for _ in 0..10 {
            c.closed();
        }
        assert_eq!(c.admit(), Admission::Serve);
    }

    #[test]
    fn the_default_cap_is_half_the_descriptor_limit() {
        let c = Connections::new(None);
        assert_eq!(c.cap(), (fd_limit() / 2).max(64));
    }
}
