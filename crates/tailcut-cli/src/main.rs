//! The `tailcut` binary: parses the command line and hands off to a command module.
//! Exit codes: 0 success, 1 runtime failure, 2 bad input (usage, configuration, data),
//! 141 when standard output (or error) was closed by its reader (`tailcut … | head -1`),
//! the status a shell reports for a Unix tool stopped by SIGPIPE; nothing is printed
//! (the servers, `serve` and `sim-provider`, keep serving instead).
// Unit tests spawn and read the wall clock freely (clippy.toml).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

mod cli;
mod commands;
mod html;
mod logger;
mod output;
mod table;

use clap::Parser;
use std::process::ExitCode;

/// mimalloc: the gateway's request path allocates many small, short-lived buffers, and
/// glibc malloc cost ~20 % of its CPU under load (measured when mimalloc was adopted;
/// docs/benchmarks.md has the gateway's current profiles).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    logger::install();
    // The servers keep serving when nobody reads their output any more.
    if !matches!(cli.command, cli::Command::Serve(_) | cli::Command::SimProvider(_)) {
        output::exit_quietly_when_closed();
    }
    match commands::dispatch(cli) {
        Ok(code) => code,
        Err(e) if output::closed_by_reader(&e) => ExitCode::from(output::CLOSED_EXIT),
        Err(e) => {
            eprintln!("tailcut: {}", output::chain_message(&e));
            if commands::is_bad_input(&e) {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}
