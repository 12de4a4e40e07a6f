//! The `tailcut` binary: parses the command line and hands off to a command module.
//! Exit codes: 0 success, 1 runtime failure, 2 bad input (usage, configuration, data).

mod cli;
mod commands;
mod table;

use clap::Parser;
use std::process::ExitCode;

/// mimalloc: the gateway's request path allocates many small, short-lived buffers, and
/// glibc malloc cost ~20 % of its CPU under load (see docs/gateway-performance.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match commands::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("tailcut: {e:#}");
            if commands::is_bad_input(&e) {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}
