//! `tailcut serve`: the gateway, with SIGHUP reload and SIGTERM drain.

use crate::cli::ServeArgs;
use crate::commands::BadInput;
use std::io::Write;
use std::process::ExitCode;

pub fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let config = tailcut_config::Config::load(&args.config)?;
    if config.routes.is_empty() {
        return Err(BadInput(format!("{}: no [routes.*] configured; the gateway would serve nothing", config.source)).into());
    }
    let listen = args.listen.clone().unwrap_or_else(|| config.gateway.listen.clone());
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let state = tailcut_gateway::AppState::new(config, Some(args.config.clone())).map_err(BadInput)?;
        let listener = super::listen_deep(&listen).await.map_err(|e| BadInput(format!("cannot listen on {listen}: {e}")))?;
        let addr = listener.local_addr()?;
        {
            let mut out = std::io::stdout().lock();
            writeln!(out, "tailcut gateway listening on http://{addr}")?;
            out.flush()?;
        }
        #[cfg(unix)]
        {
            let st = state.clone();
            tokio::spawn(async move {
                let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else { return };
                while hup.recv().await.is_some() {
                    match st.reload() {
                        Ok(()) => eprintln!("{}", serde_json::json!({"event": "reloaded"})),
                        Err(e) => eprintln!("{}", serde_json::json!({"event": "reload_failed", "error": e})),
                    }
                }
            });
        }
        let shutdown = async {
            #[cfg(unix)]
            {
                let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(t) => t,
                    Err(_) => {
                        let _ = tokio::signal::ctrl_c().await;
                        return;
                    }
                };
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            #[cfg(not(unix))]
            {
                let _ = tokio::signal::ctrl_c().await;
            }
        };
        tailcut_gateway::serve(listener, state, shutdown).await?;
        anyhow::Ok(ExitCode::SUCCESS)
    })
}
