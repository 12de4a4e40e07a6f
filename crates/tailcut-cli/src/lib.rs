//! The `tailcut` command as a library: the binary (`main.rs`) and the Python package
//! (`crates/tailcut-python`, whose `tailcut` script is this same code) both enter through
//! [`main_with`]; [`embed`] is what the Python API reads besides (a command's `--json`
//! text, a configured hedger). Flags and their help live under `cli/`, one module per
//! command under `commands/`.
// Unit tests spawn and read the wall clock freely (clippy.toml).
#![cfg_attr(test, allow(clippy::disallowed_methods))]
// The binary's edge: commands print their output (the workspace lint `print_stdout` is for
// the libraries, which log through `tracing`).
#![allow(clippy::print_stdout)]

mod cli;
mod commands;
pub mod embed;
mod html;
mod logger;
mod output;
mod table;

use clap::Parser;
use std::process::ExitCode;

/// [`main_with`]'s exit status as a number (what the Python package's `tailcut` script
/// exits with).
pub fn main_with_status<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let code = main_with(args);
    (0..=u8::MAX).find(|c| ExitCode::from(*c) == code).unwrap_or(1)
}

/// Parses `args` (the program name first) and runs the command, printing its output and
/// any error (`tailcut: ...` on stderr) as the binary does; returns the exit status.
pub fn main_with<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = cli::Cli::parse_from(args);
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
