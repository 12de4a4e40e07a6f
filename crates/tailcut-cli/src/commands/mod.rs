//! One module per subcommand; `dispatch` routes to them.

mod calibration;
mod config;
mod contend;
mod demo;
mod model;
mod provider_checks;
mod replay;
mod report;
pub(crate) mod run;
mod scenario;
mod serve;
mod sim_provider;
mod state;
mod synth;

use crate::cli::{Cli, Command};
use std::process::ExitCode;

/// Marks an error as bad input (exit 2) rather than a runtime failure (exit 1).
#[derive(Debug)]
pub struct BadInput(pub String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

/// Whether an error should exit with status 2.
pub fn is_bad_input(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.is::<BadInput>()
            || c.is::<tailcut_config::ConfigError>()
            || c.is::<tailcut_replay::ReplayError>()
            || c.is::<tailcut_model::ModelError>()
    })
}

/// Runs the chosen subcommand.
pub fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Demo(args) => demo::run(&args),
        Command::Replay(args) => replay::run(&args),
        Command::Report(args) => report::run(&args),
        Command::Synth(args) => synth::run(&args),
        Command::Run(args) => run::run(&args),
        Command::LoginCheck(args) => provider_checks::login_check(&args),
        Command::Bench(args) => provider_checks::bench(&args),
        Command::CancelAudit(args) => provider_checks::cancel_audit(&args),
        Command::SimProvider(args) => sim_provider::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Contend(cmd) => contend::run(&cmd),
        Command::Config(cmd) => config::run(&cmd),
        Command::Model(cmd) => model::run(&cmd),
        Command::Scenario(cmd) => scenario::run(&cmd),
        Command::State(cmd) => state::run(&cmd),
    }
}

/// Loads `--config` or the built-in configuration.
pub fn load_config(path: Option<&std::path::Path>) -> anyhow::Result<tailcut_config::Config> {
    Ok(match path {
        Some(p) => tailcut_config::Config::load(p)?,
        None => tailcut_config::Config::built_in(),
    })
}

/// Refuses an output flag (`--plot`, `--html`) whose directory does not exist, before
/// any work is done: it would otherwise fail only at the end, after a long replay, with
/// exit 1.
pub fn check_output(flag: &str, path: Option<&std::path::Path>) -> Result<(), BadInput> {
    let Some(path) = path else { return Ok(()) };
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    if path.is_dir() {
        return Err(BadInput(format!("{flag} {}: is a directory, expected a file to write", path.display())));
    }
    if !dir.is_dir() {
        return Err(BadInput(format!("{flag} {}: directory `{}` does not exist", path.display(), dir.display())));
    }
    Ok(())
}

/// Opens a trace file for appending, and says so on stderr when it already holds
/// records: a re-run adds to them, and `tailcut report` reads every record in the file.
pub fn open_trace(path: &std::path::Path) -> anyhow::Result<tailcut_core::trace::TraceWriter> {
    let existing = std::fs::read(path).map(|b| b.iter().filter(|c| **c == b'\n').count()).unwrap_or(0);
    if existing > 0 {
        eprintln!(
            "tailcut: appending to {}, which already holds {existing} record(s) (`tailcut report` reads them all; remove the file to start over)",
            path.display()
        );
    }
    // An output file that cannot be created or appended to is bad input (exit 2), as an
    // unwritable path in a configuration is.
    tailcut_core::trace::TraceWriter::append(path).map_err(|e| BadInput(e.to_string()).into())
}

/// A progress bar on stderr for a command that runs for a while (`run --repeat`, `bench`,
/// `cancel-audit`, `contend run`, `demo`): drawn only when stderr is a terminal (indicatif
/// hides it otherwise) and never when `hidden` (`--json`). Print lines to stdout through
/// [`say`] so they land above the bar instead of through it.
pub fn progress(len: u64, what: &str, hidden: bool) -> indicatif::ProgressBar {
    if hidden {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len}, {elapsed} elapsed, ~{eta} left") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_string());
    bar.enable_steady_tick(std::time::Duration::from_millis(250));
    bar
}

/// Prints `text` to stdout above `bar` (suspending it while the line is written).
pub fn say(bar: &indicatif::ProgressBar, text: &str) {
    bar.suspend(|| println!("{text}"));
}

/// A progress bar on stderr that stays hidden until the work has taken a second.
pub fn delayed_bar(len: u64, template: &str) -> DelayedBar {
    let bar = indicatif::ProgressBar::with_draw_target(Some(len), indicatif::ProgressDrawTarget::hidden());
    if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    // A terminal progress bar: wall time, on the terminal's thread, never under a paused clock.
    #[allow(clippy::disallowed_methods)]
    let started = std::time::Instant::now();
    DelayedBar { bar, started, shown: std::sync::atomic::AtomicBool::new(false) }
}

/// See [`delayed_bar`].
#[derive(Debug)]
pub struct DelayedBar {
    bar: indicatif::ProgressBar,
    started: std::time::Instant,
    shown: std::sync::atomic::AtomicBool,
}

impl DelayedBar {
    /// Sets the position, revealing the bar once a second has passed.
    pub fn set(&self, pos: u64) {
        if !self.shown.load(std::sync::atomic::Ordering::Relaxed) && self.started.elapsed() > std::time::Duration::from_secs(1) {
            self.shown.store(true, std::sync::atomic::Ordering::Relaxed);
            self.bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        }
        self.bar.set_position(pos);
    }

    /// Sets the message.
    pub fn message(&self, m: String) {
        self.bar.set_message(m);
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// Binds a TCP listener with a deep accept backlog (4096, capped by the kernel's
/// `somaxconn`), so a burst of thousands of new connections queues instead of having
/// SYNs dropped and retried seconds later. Tokio's `TcpListener::bind` uses 1024.
pub(crate) async fn listen_deep(addr: &str) -> std::io::Result<tokio::net::TcpListener> {
    let mut last = std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("`{addr}` resolves to no address"));
    for resolved in tokio::net::lookup_host(addr).await? {
        let socket = if resolved.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
        socket.set_reuseaddr(true)?;
        // SO_REUSEPORT lets `serve --workers N` bind one socket per worker thread on this
        // address. It would also let a second tailcut share a port that is already
        // taken, so a plain bind first makes "address in use" an error as usual.
        #[cfg(unix)]
        if resolved.port() != 0 {
            if let Err(e) = std::net::TcpListener::bind(resolved) {
                last = e;
                continue;
            }
        }
        #[cfg(unix)]
        socket.set_reuseport(true)?;
        match socket.bind(resolved).and_then(|()| socket.listen(4096)) {
            Ok(listener) => return Ok(listener),
            Err(e) => last = e,
        }
    }
    Err(last)
}
