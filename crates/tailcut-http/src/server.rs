//! One client connection, from its first byte to its close: served on the fast path
//! ([`crate::fast`]) while its requests are whole POSTs to fast routes, then by hyper
//! (or by hyper from the start when the fast path is off), under one [`ServerLimits`]:
//! hyper's head timeout and idle timeout are the same values the fast path keeps, and a
//! drain or a request to make room closes the connection after the request in progress
//! on either path.

use crate::conn::{ConnState, ErrorBody, GuardedStream};
use crate::fast::{self, Ended, FastService};
use crate::heartbeat::Heartbeat;
use crate::limits::ServerLimits;
use bytes::Bytes;
use hyper::body::Incoming;
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio::sync::watch;

/// The signals one connection obeys.
#[derive(Debug)]
pub struct ConnSignals {
    /// Turns true when the service stops accepting (drain): the connection closes after
    /// the request in progress.
    pub closing: watch::Receiver<bool>,
    /// Bumped when idle connections are asked to make room.
    pub shed: watch::Receiver<u64>,
    /// The serving runtime's timer heartbeat, told of every request.
    pub heartbeat: Arc<Heartbeat>,
}

/// Serves `tcp` until it closes: on the fast path first when `fast_path` is set, then
/// with the hyper service `make_service` builds for the connection (it is given the
/// connection's [`ConnState`], which it must tell of each request,
/// [`ConnState::start_request`]). `error_body` makes the body of hyper's
/// protocol-error replies.
pub async fn serve_connection<F, M, S>(
    mut tcp: TcpStream,
    svc: &F,
    fast_path: bool,
    limits: &ServerLimits,
    mut signals: ConnSignals,
    error_body: ErrorBody,
    make_service: M,
) where
    F: FastService,
    M: FnOnce(Arc<ConnState>) -> S,
    S: hyper::service::HttpService<Incoming>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::ResBody: 'static,
    <S::ResBody as http_body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let read = if fast_path {
        let fast_signals = fast::Signals { closing: &mut signals.closing, shed: &mut signals.shed, heartbeat: &signals.heartbeat };
        match fast::serve(&mut tcp, svc, limits, fast_signals).await {
            Ended::Closed => return,
            Ended::HandOver(read) => read.freeze(),
        }
    } else {
        Bytes::new()
    };
    let ConnSignals { mut closing, mut shed, .. } = signals;
    // A request to make room that came while the fast path was busy was not for this
    // connection (a busy connection finishes and stays); only later ones count.
    shed.mark_unchanged();
    let conn_state = Arc::new(ConnState::default());
    let io = GuardedStream::new(tcp, conn_state.clone(), limits.header_read, read, error_body);
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.idle)
        .serve_connection(hyper_util::rt::TokioIo::new(io), make_service(conn_state.clone()));
    let mut conn = std::pin::pin!(conn);
    let asked_to_make_room = async {
        loop {
            if shed.changed().await.is_err() {
                return futures::future::pending::<()>().await;
            }
            if conn_state.idle() {
                return;
            }
        }
    };
    tokio::select! {
        biased;
        _ = conn.as_mut() => return,
        _ = closing.wait_for(|c| *c) => conn.as_mut().graceful_shutdown(),
        () = asked_to_make_room => {
            svc.shed();
            conn.as_mut().graceful_shutdown();
        }
    }
    let _ = conn.await;
}
