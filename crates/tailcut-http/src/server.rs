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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fast::Refusal;
    use crate::hangup::Hangup;
    use http::{HeaderMap, HeaderName, Response};
    use http_body_util::Full;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Answers its one route with `fast`.
    struct Fast;

    impl FastService for Fast {
        type Route = ();
        type Body = Full<Bytes>;

        fn kept_field(_: &str) -> Option<HeaderName> {
            None
        }

        fn route(&self, path: &str) -> Option<()> {
            (path == "/x").then_some(())
        }

        async fn call(&self, _: (), _: HeaderMap, _: Bytes, _: Arc<Hangup>) -> Response<Full<Bytes>> {
            Response::new(Full::new(Bytes::from_static(b"fast")))
        }

        fn refuse(&self, _: Refusal) -> Response<Full<Bytes>> {
            Response::new(Full::default())
        }

        fn draining(&self) -> bool {
            false
        }

        fn shed(&self) {}
    }

    /// The reply body to one POST to the fast route, served with `fast_path`.
    async fn answered_by(fast_path: bool) -> String {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (tcp, _) = l.accept().await.unwrap();
        let (_closing_tx, closing) = watch::channel(false);
        let (_shed_tx, shed) = watch::channel(0u64);
        let signals = ConnSignals { closing, shed, heartbeat: Arc::default() };
        let t = Duration::from_secs(5);
        let limits = ServerLimits::new(t, t, t, Arc::new(AtomicUsize::new(1024)));
        let server = async move {
            serve_connection(
                tcp,
                &Fast,
                fast_path,
                &limits,
                signals,
                |_| String::new(),
                |conn: Arc<ConnState>| {
                    hyper::service::service_fn(move |_req| {
                        let answered = conn.start_request();
                        async move {
                            drop(answered);
                            Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from_static(b"hyper"))))
                        }
                    })
                },
            )
            .await
        };
        let client = async move {
            client.write_all(b"POST /x HTTP/1.1\r\nhost: a\r\nconnection: close\r\ncontent-length: 2\r\n\r\n{}").await.unwrap();
            let mut reply = String::new();
            client.read_to_string(&mut reply).await.unwrap();
            reply
        };
        let ((), reply) = tokio::join!(server, client);
        reply.rsplit("\r\n\r\n").next().unwrap_or_default().to_string()
    }

    #[tokio::test]
    async fn the_switch_chooses_the_path_that_answers() {
        assert_eq!(answered_by(true).await, "fast");
        assert_eq!(answered_by(false).await, "hyper");
    }
}
