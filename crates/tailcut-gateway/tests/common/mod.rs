//! Shared by the gateway's integration tests.

/// Serves a gateway built from `toml` in this process; returns its chat completions URL.
pub async fn serve_config(toml: &str) -> String {
    let config = tailcut_config::Config::parse(toml, "test").unwrap();
    let state = tailcut_gateway::AppState::new(config, None).unwrap();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(tailcut_gateway::serve(l, state, futures::future::pending()));
    format!("http://{addr}/v1/chat/completions")
}
