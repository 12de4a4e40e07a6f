//! A running mock server: start on an ephemeral port, inspect, change behaviour, vanish.

use crate::engine::{Behaviour, JobView, State};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tailcut_providers::ProviderKind;

/// A running mock server.
#[derive(Debug)]
pub struct MockServer {
    addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl MockServer {
    /// Starts a server speaking `kind`'s API on 127.0.0.1 with an ephemeral port. The
    /// simulator has no mock server here (`tailcut-simserver` serves it).
    pub async fn start(kind: ProviderKind, behaviour: Behaviour) -> std::io::Result<MockServer> {
        if !ProviderKind::HTTP.contains(&kind) {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("no mock server speaks `{kind}`")));
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            kind,
            base: format!("http://{addr}"),
            behaviour: Mutex::new(behaviour),
            jobs: Mutex::new(HashMap::new()),
            counter: AtomicU64::new(0),
            status_calls: AtomicU32::new(0),
            disconnects: AtomicU32::new(0),
            submits: AtomicU32::new(0),
            vanished: std::sync::atomic::AtomicBool::new(false),
            vanish: tokio::sync::Notify::new(),
            ready_at: Mutex::new(None),
        });
        let app = crate::routes::router(state.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(MockServer { addr, state, task })
    }

    /// Base URL, e.g. `http://127.0.0.1:40123`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Changes the behaviour of jobs submitted from now on.
    pub fn set_behaviour(&self, b: Behaviour) {
        if let Ok(mut cur) = self.state.behaviour.lock() {
            *cur = b;
        }
    }

    /// A job's current view.
    pub fn job(&self, id: &str) -> Option<JobView> {
        self.state.view(id)
    }

    /// Submits seen.
    pub fn submits(&self) -> u32 {
        self.state.submits.load(Ordering::SeqCst)
    }

    /// Client disconnects seen on synchronous/streaming requests.
    pub fn disconnects(&self) -> u32 {
        self.state.disconnects.load(Ordering::SeqCst)
    }

    /// Status-type calls seen.
    pub fn status_calls(&self) -> u32 {
        self.state.status_calls.load(Ordering::SeqCst)
    }

    /// Drops the server: open connections reset, new ones are refused.
    pub fn vanish(&self) {
        self.state.vanished.store(true, Ordering::SeqCst);
        self.state.vanish.notify_waiters();
        self.task.abort();
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
