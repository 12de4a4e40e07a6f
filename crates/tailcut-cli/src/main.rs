//! The `tailcut` binary: the allocator, then the command line handed to the library
//! (`lib.rs`), which parses it and runs the command. Exit codes: 0 success, 1 runtime
//! failure, 2 bad input (usage, configuration, data), 141 when standard output (or error)
//! was closed by its reader (`tailcut … | head -1`), the status a shell reports for a
//! Unix tool stopped by SIGPIPE; nothing is printed (the servers, `serve` and
//! `sim-provider`, keep serving instead).

use std::process::ExitCode;

/// mimalloc: the gateway's request path allocates many small, short-lived buffers, and
/// glibc malloc cost ~20 % of its CPU under load (measured when mimalloc was adopted;
/// docs/benchmarks.md has the gateway's current profiles).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    tailcut_cli::main_with(std::env::args_os())
}
