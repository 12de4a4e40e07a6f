//! `tailcut synth`: synthetic paired rounds from the configured simulator profiles.

use crate::cli::SynthArgs;
use crate::commands::{delayed_bar, load_config, BadInput};
use std::io::{BufWriter, Write};
use std::process::ExitCode;

pub fn run(args: &SynthArgs) -> anyhow::Result<ExitCode> {
    let config = load_config(args.config.as_deref())?;
    let profiles: Vec<_> =
        config.providers.iter().filter_map(|p| p.sim_profile().map(|(profile, _)| (p.name.clone(), profile.clone()))).collect();
    if profiles.is_empty() {
        return Err(BadInput(format!("{}: no simulated providers to draw from", config.source)).into());
    }
    let bar = delayed_bar(args.rounds, "{spinner} writing rounds [{bar:30}] {pos}/{len} ({eta})");
    let mut out: Box<dyn Write> = match &args.out {
        Some(path) => Box::new(BufWriter::with_capacity(
            1 << 20,
            std::fs::File::create(path).map_err(|e| BadInput(format!("--out {}: cannot create: {e}", path.display())))?,
        )),
        None => Box::new(BufWriter::with_capacity(1 << 20, std::io::stdout().lock())),
    };
    tailcut_replay::synth::write_rounds(&mut out, &profiles, args.rounds, args.seed, args.rounds_per_block, &|n| bar.set(n))?;
    out.flush()?;
    bar.finish();
    if let Some(path) = &args.out {
        eprintln!("tailcut: wrote {} rounds to {}", args.rounds, path.display());
    }
    Ok(ExitCode::SUCCESS)
}
