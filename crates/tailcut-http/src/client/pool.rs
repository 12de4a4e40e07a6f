//! Idle keep-alive connections, per thread, per client and server. A connection is
//! registered with the runtime of the thread that opened it, and a per-core server
//! (`serve_per_core`) keeps each exchange on one thread, so no lock and no cross-thread
//! hand-off is ever needed.

use super::wire::Conn;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::time::Instant;

/// Idle connections kept per thread, client and server.
pub(super) const MAX_IDLE: usize = 256;
/// An idle connection older than this is closed instead of reused: under uvicorn's 5 s
/// keep-alive (vLLM's and SGLang's server), the shortest common default among inference
/// servers, so the server's close of an idle connection rarely races a request.
pub(super) const IDLE_TIMEOUT: Duration = Duration::from_secs(4);

/// Names one client's pools; when the last clone of the client is dropped (a config
/// reload replaced it), its id is retired and each thread drops its pools for it the
/// next time that thread opens a new one.
#[derive(Debug)]
pub(super) struct PoolId(pub(super) u64);

static NEXT_POOL: AtomicU64 = AtomicU64::new(1);
static RETIRED: Mutex<Vec<u64>> = Mutex::new(Vec::new());

impl PoolId {
    pub(super) fn fresh() -> PoolId {
        PoolId(NEXT_POOL.fetch_add(1, Ordering::Relaxed))
    }
}

impl Drop for PoolId {
    fn drop(&mut self) {
        if let Ok(mut retired) = RETIRED.lock() {
            retired.push(self.0);
        }
    }
}

struct Idle {
    conn: Conn,
    since: Instant,
}

struct Pool {
    client: u64,
    authority: Box<str>,
    /// Oldest first; reuse takes the newest (warm) one.
    idle: VecDeque<Idle>,
}

thread_local! {
    static POOLS: RefCell<Vec<Pool>> = const { RefCell::new(Vec::new()) };
}

/// Whether an idle connection is still worth a request: the server has neither closed
/// it nor sent anything unasked. Reads the readiness the runtime already has; no
/// system call. A close the runtime has not seen yet fails that one request (as with
/// hyper's pool); it is not sent again.
fn looks_alive(conn: &Conn) -> bool {
    if conn.has_unread() {
        return false;
    }
    let mut cx = Context::from_waker(Waker::noop());
    matches!(conn.stream.poll_read_ready(&mut cx), Poll::Pending)
}

/// A live idle connection to `authority` for `client`, if this thread has one.
pub(super) fn checkout(client: u64, authority: &str) -> Option<Conn> {
    POOLS.with(|pools| {
        let mut pools = pools.borrow_mut();
        let pool = pools.iter_mut().find(|p| p.client == client && &*p.authority == authority)?;
        while let Some(idle) = pool.idle.pop_back() {
            if idle.since.elapsed() > IDLE_TIMEOUT {
                // The newest is stale, so all are.
                pool.idle.clear();
                return None;
            }
            if looks_alive(&idle.conn) {
                return Some(idle.conn);
            }
        }
        None
    })
}

/// Returns a connection whose last reply was read to its end.
pub(super) fn checkin(client: u64, authority: &str, mut conn: Conn) {
    conn.shrink_idle();
    POOLS.with(|pools| {
        let mut pools = pools.borrow_mut();
        let at = match pools.iter().position(|p| p.client == client && &*p.authority == authority) {
            Some(i) => i,
            None => {
                // A new pool on this thread (first use, or after a reload): drop the pools
                // of retired clients here first.
                if let Ok(retired) = RETIRED.lock() {
                    pools.retain(|p| !retired.contains(&p.client));
                }
                pools.push(Pool { client, authority: authority.into(), idle: VecDeque::new() });
                pools.len() - 1
            }
        };
        let pool = &mut pools[at];
        while pool.idle.front().is_some_and(|i| i.since.elapsed() > IDLE_TIMEOUT) {
            pool.idle.pop_front();
        }
        if pool.idle.len() < MAX_IDLE {
            pool.idle.push_back(Idle { conn, since: Instant::now() });
        }
    });
}

/// Pools alive on the current thread (tests).
#[cfg(test)]
pub(super) fn pools_here() -> usize {
    POOLS.with(|p| p.borrow().len())
}

/// Idle connections on the current thread (tests).
#[cfg(test)]
pub(super) fn idle_here() -> usize {
    POOLS.with(|p| p.borrow().iter().map(|p| p.idle.len()).sum())
}
