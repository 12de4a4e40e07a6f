//! `tailcut serve`: the gateway, with SIGHUP reload and SIGTERM drain.

use crate::cli::ServeArgs;
use crate::commands::BadInput;
use std::io::Write;
use std::process::ExitCode;

/// Raises the open-file soft limit to the hard limit, as nginx's `worker_rlimit_nofile`
/// does: each hedged request holds a client socket and one per live attempt, so the
/// common soft default of 1024 caps a gateway at a few hundred requests in flight.
/// Returns (before, after).
#[cfg(unix)]
fn raise_open_file_limit() -> Option<(u64, u64)> {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let lim = getrlimit(Resource::Nofile);
    let before = lim.current?;
    match lim.maximum {
        Some(max) if max > before => {
            let raised = rustix::process::Rlimit { current: Some(max), maximum: Some(max) };
            Some((before, if setrlimit(Resource::Nofile, raised).is_ok() { max } else { before }))
        }
        // No hard limit (unlimited) or already at it.
        _ => Some((before, before)),
    }
}

/// How many requests can be in flight within `open_files` descriptors: each admitted
/// request holds its client socket and up to `max_live` upstream sockets, and as many
/// clients again may be connected and waiting for a slot; 256 are kept for the rest
/// (listeners, the store, logs).
fn in_flight_that_fits(open_files: u64, max_live: usize) -> usize {
    let per_request = max_live as u64 + 2;
    (open_files.saturating_sub(256) / per_request).max(1) as usize
}

pub fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let config = tailcut_config::Config::load(&args.config)?;
    if config.routes.is_empty() {
        return Err(BadInput(format!("{}: no [routes.*] configured; the gateway would serve nothing", config.source)).into());
    }
    config.gateway.check_serving(&config.source)?;
    config.check_writable(true)?;
    if let Some(warning) = config.gateway.auth_warning() {
        // Always shown (not a log line that TAILCUT_LOG=off would silence).
        eprintln!("tailcut: {warning}");
    }
    let listen = args.listen.clone().unwrap_or_else(|| config.gateway.listen.clone());
    let mut config = config;
    #[cfg(unix)]
    if let Some((before, after)) = raise_open_file_limit() {
        if after > before {
            tailcut_gateway::log_event("open_file_limit_raised", serde_json::json!({"from": before, "to": after}));
        }
        let fits = in_flight_that_fits(after, config.race.max_live);
        if config.gateway.max_in_flight > fits {
            tailcut_gateway::log_event(
                "max_in_flight_capped",
                serde_json::json!({
                    "configured": config.gateway.max_in_flight, "capped_to": fits, "open_file_limit": after,
                    "why": "each admitted request holds its client socket and up to race.max_live upstream sockets; requests over the cap wait up to admission_wait_ms"
                }),
            );
            config.gateway.max_in_flight = fits;
        }
    }
    let workers = args.workers.map_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()), usize::from);
    // This runtime handles signals, the job cleaner and the drain; requests are served on
    // `workers` per-core runtimes (tailcut_gateway::serve_per_core).
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async move {
        let state = tailcut_gateway::AppState::new(config, Some(args.config.clone())).map_err(|e| BadInput(e.to_string()))?;
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
            // The SIGHUP listener lives as long as the process; it holds no race.
            #[allow(clippy::disallowed_methods)]
            tokio::spawn(async move {
                let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else { return };
                while hup.recv().await.is_some() {
                    match st.reload() {
                        Ok(()) => eprintln!("{}", serde_json::json!({"event": "reloaded"})),
                        Err(e) => eprintln!("{}", serde_json::json!({"event": "reload_failed", "error": e.to_string()})),
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
        tailcut_gateway::serve_per_core(listener, state, shutdown, workers).await?;
        anyhow::Ok(ExitCode::SUCCESS)
    })
}

#[cfg(test)]
mod tests {
    use super::in_flight_that_fits;

    #[test]
    fn in_flight_cap_leaves_sockets_for_upstreams_and_waiting_clients() {
        // 20,000 descriptors, primary + hedge: 4,936 admitted (3 sockets each) plus as many
        // waiting clients stay under the limit.
        let n = in_flight_that_fits(20_000, 2);
        assert_eq!(n, 4_936);
        assert!(n as u64 * 3 + n as u64 + 256 <= 20_000);
        assert_eq!(in_flight_that_fits(100, 2), 1, "never zero");
    }
}
