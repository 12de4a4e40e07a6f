//! `tailcut config show|check`.

use crate::cli::ConfigCommand;
use std::process::ExitCode;

pub fn run(cmd: &ConfigCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ConfigCommand::Show => {
            print!("{}", tailcut_config::BUILT_IN);
        }
        ConfigCommand::Check { file } => {
            let c = tailcut_config::Config::load(file)?;
            println!(
                "{}: ok — {} provider(s) [{}], {} polic{} [{}]",
                file.display(),
                c.providers.len(),
                c.providers.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", "),
                c.policies.len(),
                if c.policies.len() == 1 { "y" } else { "ies" },
                c.policies.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
