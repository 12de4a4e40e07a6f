//! Accepting connections and shutting down: `serve` on the caller's runtime, or
//! `serve_per_core` on one single-threaded runtime per core. Both drain the same way:
//! stop accepting, let in-flight requests finish, then [`drain_in_flight_races`]: stop
//! running jobs, wait (up to `[gateway] drain_timeout_s`) for every task on the
//! gateway's tracker, loser cancels and their receipts included, then save the learned
//! models and return.

use crate::observe::log;
use crate::state::AppState;
use serde_json::json;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tailcut_http::{Admission, ConnSignals, Heartbeat};
use tokio::sync::oneshot;

/// Removes finished jobs past the retention window, once a minute, and saves changed
/// learned models about once a second; both loops end when the drain starts.
fn spawn_cleaner(state: &Arc<AppState>) {
    let st = state.clone();
    let retention = state.rt().config.gateway.job_retention;
    let saver = state.clone();
    // The learned models: saved about once a second when they changed (on a blocking
    // thread: a SQLite write must not hold up this runtime's signals and drain).
    state.tasks.spawn_loop(async move {
        loop {
            tokio::time::sleep(MODEL_SAVE_EVERY).await;
            if saver.draining.load(Ordering::Relaxed) {
                return; // the drain saves once more at its end
            }
            // Checked here first: an idle gateway wakes no blocking thread.
            if saver.models_changed() {
                let st = saver.clone();
                let _ = tokio::task::spawn_blocking(move || st.save_models()).await;
            }
        }
    });
    state.tasks.spawn_loop(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(60)).await;
            let _ = st.store.cleanup(retention).await;
        }
    });
}

/// How often changed learned models are saved.
const MODEL_SAVE_EVERY: Duration = Duration::from_secs(1);

/// Serves `listener` until `stop` resolves, then stops accepting, lets every connection
/// finish the request it is on (hyper's graceful close) and returns once all are closed.
async fn accept_loop(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    stop: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let heartbeat = Arc::new(Heartbeat::default());
    let beating = heartbeat.spawn(&state.tasks.tracker);
    let gateway = crate::dispatch::Gateway::new(state.clone(), heartbeat.clone());
    // Each connection holds a receiver (and so does each proxied call's handler task on
    // hyper's path, until its race settles): `closing` tells them to close, and
    // `closed()` resolves once every one has dropped its receiver.
    let (closing, close_rx) = tokio::sync::watch::channel(false);
    let mut stop = std::pin::pin!(stop);
    loop {
        let tcp = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    if !is_connection_error(&e) {
                        // Out of file descriptors or similar: back off instead of spinning.
                        log("accept_error", || json!({"error": e.to_string()}));
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    continue;
                }
            },
            () = &mut stop => break,
        };
        match state.connections.admit() {
            Admission::Refuse => {
                state.metrics.inc("tailcut_connections_refused_total", &[]);
                drop(tcp);
                continue;
            }
            Admission::ServeAndShed => state.metrics.inc("tailcut_connections_over_cap_total", &[]),
            Admission::Serve => {}
        }
        heartbeat.beat();
        // Replies go out in one write; Nagle's algorithm would only hold them back.
        let _ = tcp.set_nodelay(true);
        state.tasks.spawn(serve_connection(tcp, gateway.clone(), close_rx.clone(), state.clone()));
    }
    drop(listener);
    drop(close_rx);
    let _ = closing.send(true);
    closing.closed().await;
    beating.abort();
    Ok(())
}

/// Errors that concern one connection (it went away before it was accepted), not the
/// listener.
fn is_connection_error(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::ConnectionAborted | std::io::ErrorKind::ConnectionReset)
}

/// One connection: HTTP/1.1 with keep-alive, under the limits and timeouts of the
/// configuration it started under (`tailcut_http::ServerLimits`, read by both paths): on
/// the fast path until a request needs hyper (unless `[gateway] fast_path = false`),
/// then hyper's. When `closing` turns true, or idle connections are asked to make room,
/// the request in progress finishes and the connection closes.
async fn serve_connection(
    tcp: tokio::net::TcpStream,
    gateway: crate::dispatch::Gateway,
    closing: tokio::sync::watch::Receiver<bool>,
    state: Arc<AppState>,
) {
    struct Counted(Arc<AppState>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.connections.closed();
        }
    }
    let _counted = Counted(state.clone());
    let limits = state.server_limits();
    let fast_path = state.rt().config.gateway.fast_path;
    let signals = ConnSignals { closing: closing.clone(), shed: state.connections.shed_signal(), heartbeat: gateway.heartbeat().clone() };
    let fast = crate::fast_routes::FastRoutes(state);
    let conn_limits = limits.clone();
    tailcut_http::serve_connection(tcp, &fast, fast_path, &limits, signals, crate::error::protocol_error_body, move |conn| {
        gateway.for_connection(conn, conn_limits, closing)
    })
    .await;
}

/// Tells every running job's race to stop: each cancels its live attempts (with
/// receipts) and records the job as cancelled. Called when the drain starts (so a
/// `?wait=` request on a job ends and its connection can close) and again at
/// [`drain_in_flight_races`].
fn stop_running_jobs(state: &AppState) {
    let stops: Vec<oneshot::Sender<()>> = state.running.lock().map(|mut r| r.drain().map(|(_, s)| s).collect()).unwrap_or_default();
    for s in stops {
        let _ = s.send(());
    }
}

/// The drain, once no listener accepts and every connection has finished its request.
///
/// **Guarantee:** every race the gateway started has cancelled its losers, got their
/// receipts and written its trace record before this returns, unless `[gateway]
/// drain_timeout_s` passes first (then `drain_timed_out` is logged with the count of
/// tasks still running). It holds by construction: every task the gateway spawns, the
/// engine's settle tasks included, runs on `state.tasks.tracker` (see `tasks`), and this
/// waits for that tracker to empty. Then the budget leases are returned and the learned
/// models saved (their count is returned).
async fn drain_in_flight_races(state: &AppState) -> usize {
    stop_running_jobs(state);
    // Loops (cleaner, saver, replicas) end; the tracker then empties once the last
    // job, handler and settle task ends.
    state.tasks.stop.cancel();
    state.tasks.tracker.close();
    let deadline = state.rt().config.gateway.drain_timeout;
    if tokio::time::timeout(deadline, state.tasks.tracker.wait()).await.is_err() {
        let left = state.tasks.tracker.len();
        log("drain_timed_out", || json!({"after_ms": deadline.as_millis() as u64, "tasks_left": left}));
    }
    crate::replicas::release(state).await;
    state.save_models()
}

/// Serves on the caller's runtime until `shutdown` resolves, then drains.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    spawn_cleaner(&state);
    crate::replicas::cancel_startup_orphans(&state);
    crate::replicas::spawn_replica_loop(&state);
    let st = state.clone();
    accept_loop(listener, state.clone(), async move {
        shutdown.await;
        st.draining.store(true, Ordering::SeqCst);
        log("draining", || json!({}));
        stop_running_jobs(&st);
    })
    .await?;
    let saved = drain_in_flight_races(&state).await;
    log("stopped", || json!({"learned_models_saved": saved}));
    Ok(())
}

/// Another listening socket on `addr` with `SO_REUSEPORT`, so the kernel spreads new
/// connections across the threads (the first socket must have been bound with it too).
#[cfg(unix)]
fn reuseport_listener(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.set_reuseport(true)?;
    socket.bind(addr)?;
    socket.listen(4096)
}

#[cfg(not(unix))]
fn reuseport_listener(_addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "SO_REUSEPORT"))
}

/// Serves on `threads` single-threaded runtimes, one per core, in the manner of nginx's
/// worker processes: each thread accepts on its own `SO_REUSEPORT` socket bound to
/// `listener`'s address, so a connection, the tasks its requests start and the provider
/// connections they use stay on one thread, with no cross-thread wake-ups on the
/// request path. Where a second socket cannot be bound (the first lacks `SO_REUSEPORT`),
/// the threads share the one socket. Call it from a runtime (signals and the job
/// cleaner run there); returns after `shutdown` resolves and everything has drained.
pub async fn serve_per_core(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    threads: usize,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    let first = listener.into_std()?;
    // Phase 1: stop accepting and finish in-flight requests. Phase 2: release the
    // runtimes, which first keep running the tasks that `drain_in_flight_races` waits for.
    let (phase_tx, phase_rx) = tokio::sync::watch::channel(0u8);
    // Each worker drops its sender once its accept loop has returned (no connection
    // left): the drain starts after all have, so no request starts behind its back.
    let (accepting_tx, mut accepting_rx) = tokio::sync::mpsc::channel::<()>(1);
    let mut workers = Vec::new();
    for i in 0..threads.max(1) {
        // A std socket crosses into the worker's runtime; a tokio one is tied to this one.
        let socket: std::net::TcpListener = if i == 0 {
            first.try_clone()?
        } else {
            match reuseport_listener(addr).and_then(|l| l.into_std()) {
                Ok(l) => l,
                Err(_) => first.try_clone()?,
            }
        };
        let (st, mut rx, accepting) = (state.clone(), phase_rx.clone(), accepting_tx.clone());
        let handle = std::thread::Builder::new().name(format!("tailcut-io-{i}")).spawn(move || -> std::io::Result<()> {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            rt.block_on(async move {
                socket.set_nonblocking(true)?;
                let listener = tokio::net::TcpListener::from_std(socket)?;
                let mut stop = rx.clone();
                let served = accept_loop(listener, st, async move {
                    let _ = stop.wait_for(|phase| *phase >= 1).await;
                })
                .await;
                drop(accepting);
                let _ = rx.wait_for(|phase| *phase >= 2).await;
                served
            })
        })?;
        workers.push(handle);
    }
    drop(first);
    drop(accepting_tx);
    spawn_cleaner(&state);
    crate::replicas::cancel_startup_orphans(&state);
    crate::replicas::spawn_replica_loop(&state);
    shutdown.await;
    state.draining.store(true, Ordering::SeqCst);
    log("draining", || json!({}));
    let _ = phase_tx.send(1);
    stop_running_jobs(&state);
    let _ = accepting_rx.recv().await;
    let saved = drain_in_flight_races(&state).await;
    log("learned_models_saved", || json!({"count": saved}));
    let _ = phase_tx.send(2);
    let mut first_error = None;
    for w in workers {
        let joined = tokio::task::spawn_blocking(move || w.join()).await;
        match joined {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => first_error = first_error.or(Some(e)),
            _ => first_error = first_error.or(Some(std::io::Error::other("a gateway worker thread panicked"))),
        }
    }
    log("stopped", || json!({}));
    first_error.map_or(Ok(()), Err)
}
