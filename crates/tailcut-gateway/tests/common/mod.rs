//! Shared by the gateway's integration tests.

tokio::task_local! {
    /// `[gateway] fast_path` for the gateways a test starts ([`on_path`]); unset: the
    /// configuration's own.
    static FAST_PATH: bool;
}

/// Runs `case` with every gateway it starts through [`parse_config`] on the fast path
/// (`true`) or on hyper's alone (`false`).
// Only http1.rs runs its cases on both paths; the other test binaries share this file.
#[allow(dead_code)]
pub async fn on_path<F: std::future::Future>(fast_path: bool, case: F) -> F::Output {
    FAST_PATH.scope(fast_path, case).await
}

/// Parses `toml`, with `[gateway] fast_path` as [`on_path`] set it.
pub fn parse_config(toml: &str) -> tailcut_config::Config {
    let mut config = tailcut_config::Config::parse(toml, "test").unwrap();
    if let Ok(fast) = FAST_PATH.try_with(|f| *f) {
        config.gateway.fast_path = fast;
    }
    config
}

/// Serves a gateway built from `toml` in this process; returns its chat completions URL.
pub async fn serve_config(toml: &str) -> String {
    let config = parse_config(toml);
    let state = tailcut_gateway::AppState::new(config, None).unwrap();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(tailcut_gateway::serve(l, state, futures::future::pending()));
    format!("http://{addr}/v1/chat/completions")
}
