//! `tailcut config show|check|import-gpuhedge` (the importer itself is `tailcut_config::import`).

use crate::cli::ConfigCommand;
use crate::commands::BadInput;
use std::process::ExitCode;

pub fn run(cmd: &ConfigCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ConfigCommand::Show => {
            print!("{}", tailcut_config::BUILT_IN);
        }
        ConfigCommand::Check { file } => {
            let c = tailcut_config::Config::load(file)?;
            // What `serve` and the live commands check at start, so a file that passes
            // here starts.
            let serves = !c.routes.is_empty();
            if serves {
                c.gateway.check_serving(&c.source)?;
            }
            c.check_writable(serves)?;
            println!(
                "{}: ok — {} provider(s) [{}], {} polic{} [{}]",
                file.display(),
                c.providers.len(),
                c.providers.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", "),
                c.policies.len(),
                if c.policies.len() == 1 { "y" } else { "ies" },
                c.policies.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ")
            );
            if let Some(w) = c.gateway.auth_warning().filter(|_| serves) {
                eprintln!("{w}");
            }
        }
        ConfigCommand::ImportGpuhedge { file } => {
            let bad = |e: &dyn std::fmt::Display| BadInput(format!("{}: {e}", file.display()));
            // Bounded before it is read: a GPUHedge config is a few KB.
            let len = std::fs::metadata(file).map_err(|e| bad(&e))?.len();
            if len > tailcut_config::import::MAX_BYTES as u64 {
                let max = tailcut_config::import::MAX_BYTES;
                return Err(bad(&format!("{len} bytes: expected at most {max} (256 KiB) for a GPUHedge config")).into());
            }
            let text = std::fs::read_to_string(file).map_err(|e| bad(&e))?;
            let toml = tailcut_config::import::import_gpuhedge(&text).map_err(|e| bad(&e))?;
            // What we emit must itself be valid.
            tailcut_config::Config::parse(&toml, "<imported>").map_err(|e| BadInput(format!("imported config does not validate: {e}")))?;
            print!("{toml}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
