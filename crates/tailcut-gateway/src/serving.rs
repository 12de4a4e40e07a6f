//! Accepting connections and shutting down: `serve` on the caller's runtime, or
//! `serve_per_core` on one single-threaded runtime per core. Both drain the same way:
//! stop accepting, let in-flight requests finish, cancel running jobs (recording their
//! receipts), then return.

use crate::runtime::{log, wait_for, AppState};
use serde_json::json;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// Removes finished jobs past the retention window, once a minute.
fn spawn_cleaner(state: &Arc<AppState>) -> tokio::task::JoinHandle<()> {
    let st = state.clone();
    let retention = state.rt().config.gateway.job_retention;
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(60)).await;
            let _ = st.store.cleanup(retention);
        }
    })
}

/// Keeps tokio's timer driver from waking itself for every request timer. The driver
/// writes to its eventfd (one system call, and one more `epoll_wait` return) whenever a
/// new timer is due before the wake-up it planned when it last parked, and on a busy
/// thread that is most of the three timers a request sets (the total timeout, the
/// hedge delay, the upstream client's timeout): 0.9 wake-ups per request at full load
/// (`perf stat`), against nginx's none. A timer re-armed every `HEARTBEAT` keeps the
/// planned wake-up at most that far away, so timers longer than it register without a
/// system call. It costs ten wake-ups a second on an idle thread.
const HEARTBEAT: Duration = Duration::from_millis(100);

fn spawn_heartbeat() -> tokio::task::JoinHandle<()> {
    tokio::spawn(async {
        let mut tick = tokio::time::interval(HEARTBEAT);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
        }
    })
}

/// Serves `listener` with `app` until `stop` resolves, then lets in-flight requests finish.
async fn accept_loop(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    stop: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // Replies go out in one write; Nagle's algorithm would only hold them back.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let heartbeat = spawn_heartbeat();
    let served = axum::serve(listener, crate::dispatch::Gateway::new(state)).with_graceful_shutdown(stop).await;
    heartbeat.abort();
    served
}

/// Cancels running jobs and waits (up to 30 s each) for their receipts.
async fn drain_jobs(state: &AppState) {
    let ids: Vec<String> = state.running.lock().map(|r| r.keys().cloned().collect()).unwrap_or_default();
    let stops: Vec<oneshot::Sender<()>> = state.running.lock().map(|mut r| r.drain().map(|(_, s)| s).collect()).unwrap_or_default();
    for s in stops {
        let _ = s.send(());
    }
    for id in ids {
        let _ = wait_for(state, &id, Duration::from_secs(30)).await;
    }
}

/// Serves on the caller's runtime until `shutdown` resolves, then drains.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let cleaner = spawn_cleaner(&state);
    let st = state.clone();
    accept_loop(listener, state.clone(), async move {
        shutdown.await;
        st.draining.store(true, Ordering::SeqCst);
        log("draining", || json!({}));
    })
    .await?;
    cleaner.abort();
    drain_jobs(&state).await;
    log("stopped", || json!({}));
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
/// `listener`'s address, so a connection, the tasks its requests start and the upstream
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
    // runtimes, which first keep running the job tasks that `drain_jobs` cancels.
    let (phase_tx, phase_rx) = tokio::sync::watch::channel(0u8);
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
        let (st, mut rx) = (state.clone(), phase_rx.clone());
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
                let _ = rx.wait_for(|phase| *phase >= 2).await;
                served
            })
        })?;
        workers.push(handle);
    }
    drop(first);
    let cleaner = spawn_cleaner(&state);
    shutdown.await;
    state.draining.store(true, Ordering::SeqCst);
    log("draining", || json!({}));
    let _ = phase_tx.send(1);
    cleaner.abort();
    drain_jobs(&state).await;
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
