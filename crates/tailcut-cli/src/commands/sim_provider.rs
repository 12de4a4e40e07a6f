//! `tailcut sim-provider`: a simulated serverless GPU provider over HTTP.

use crate::cli::SimProviderArgs;
use crate::commands::BadInput;
use std::io::Write;
use std::process::ExitCode;
use tailcut_sim::SimProfile;

pub fn run(args: &SimProviderArgs) -> anyhow::Result<ExitCode> {
    let mut profile = SimProfile::named(&args.profile).map_err(|e| BadInput(format!("--profile: {e}")))?;
    if let Some(p) = args.leak_p {
        profile.leak_p = p;
    }
    if let Some(w) = args.max_workers {
        if !(1..=tailcut_sim::MAX_WORKERS).contains(&w) {
            return Err(BadInput(format!("--max-workers {w}: expected a number of workers from 1 to {}", tailcut_sim::MAX_WORKERS)).into());
        }
        profile.max_workers = w;
    }
    profile.validate().map_err(|e| BadInput(format!("--profile {}: {e}", args.profile)))?;
    // Bounded so that a profile's longest duration (one week) stays a valid duration.
    if !(args.time_scale > 0.0 && args.time_scale <= 1000.0) {
        return Err(BadInput("--time-scale must be a number greater than 0 and at most 1000".into()).into());
    }
    let settings = tailcut_simserver::Settings {
        name: args.name.clone().unwrap_or_else(|| args.profile.clone()),
        profile,
        time_scale: args.time_scale,
        seed: args.seed,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let listener = {
            let host = if args.bind.contains(':') { format!("[{}]", args.bind) } else { args.bind.clone() };
            let listen = format!("{host}:{}", args.port);
            super::listen_deep(&listen).await.map_err(|e| BadInput(format!("cannot listen on {listen}: {e}")))?
        };
        let addr = listener.local_addr()?;
        // The banner is best-effort: a reader that took the address and went away
        // (`… | head -1`, a test harness) must not stop the server.
        let banner = format!(
            "sim-provider `{}` ({} profile, time scale {}) listening on http://{addr}\n  RunPod queue API: http://{addr}/v2/<endpoint>/run | status/<id> | cancel/<id> | health\n  OpenAI API:       http://{addr}/v1/chat/completions | /v1/models;  metrics: http://{addr}/metrics\n",
            settings.name, args.profile, args.time_scale
        );
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(banner.as_bytes()).and_then(|()| out.flush());
        drop(out);
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        tailcut_simserver::serve(listener, settings, shutdown).await?;
        anyhow::Ok(ExitCode::SUCCESS)
    })
}
