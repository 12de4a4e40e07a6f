//! One module per subcommand; `dispatch` routes to them.

mod config;
mod demo;

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
    e.chain().any(|c| c.is::<BadInput>() || c.is::<tailcut_config::ConfigError>())
}

/// Runs the chosen subcommand.
pub fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Demo(args) => demo::run(&args),
        Command::Config(cmd) => config::run(&cmd),
    }
}

/// Loads `--config` or the built-in configuration.
pub fn load_config(path: Option<&std::path::Path>) -> anyhow::Result<tailcut_config::Config> {
    Ok(match path {
        Some(p) => tailcut_config::Config::load(p)?,
        None => tailcut_config::Config::built_in(),
    })
}
