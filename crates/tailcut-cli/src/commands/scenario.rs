//! `tailcut scenario list|run`: simulated request streams for what paired cold rounds
//! cannot show.

use crate::cli::ScenarioCommand;
use crate::commands::BadInput;
use std::process::ExitCode;

pub fn run(cmd: &ScenarioCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ScenarioCommand::List => Ok(ExitCode::SUCCESS),
        ScenarioCommand::Run(a) => Err(BadInput(format!("unknown scenario `{}`", a.name)).into()),
    }
}
