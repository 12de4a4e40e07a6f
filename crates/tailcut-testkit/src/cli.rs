//! What tests of the `tailcut` binary share: the processes they start (a `tailcut serve`
//! gateway, a `tailcut sim-provider`), started with stdout piped, returned once they
//! announce themselves on their first line, and killed and reaped when the test drops
//! them, pass or fail; the checked-in trace fixtures; a finished command's output.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// A child process that is killed and reaped when dropped.
#[derive(Debug)]
pub struct Spawned(pub Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `cmd` with its stdout piped and waits for its first line (a server's address).
/// Returns the process and that line, trimmed; the rest of stdout is closed. The caller
/// sets stderr.
///
/// # Panics
/// When the process cannot be started or its stdout cannot be read: a test failure.
pub fn spawn_announcing(cmd: &mut Command) -> (Spawned, String) {
    let mut child = Spawned(cmd.stdout(Stdio::piped()).spawn().expect("the test process starts"));
    let mut line = String::new();
    if let Some(stdout) = child.0.stdout.take() {
        BufReader::new(stdout).read_line(&mut line).expect("the test process's stdout is readable");
    }
    (child, line.trim().to_string())
}

/// `tailcut serve` (the binary `tailcut`) with `config` on a free loopback port, logs
/// off, stderr discarded, plus `extra` arguments; returns once it prints its URL.
///
/// # Panics
/// When the gateway does not start: a test failure naming what it printed.
pub fn serve(tailcut: &str, config: &std::path::Path, extra: &[&str]) -> (Spawned, String) {
    let (child, line) = spawn_announcing(
        Command::new(tailcut)
            .arg("serve")
            .arg("--config")
            .arg(config)
            .args(["--listen", "127.0.0.1:0"])
            .args(extra)
            .env("TAILCUT_LOG", "off")
            .stderr(Stdio::null()),
    );
    let url = line.rsplit(' ').next().unwrap_or_default().to_string();
    assert!(url.starts_with("http://"), "the gateway did not start: {line:?}");
    (child, url)
}

/// The path of `name` among the checked-in trace fixtures (`fixtures/gpuhedge-2026-07`).
pub fn fixture(name: &str) -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/gpuhedge-2026-07").join(name).display().to_string()
}

/// The stdout of a finished command, after asserting it succeeded (its stderr in the
/// message when not).
///
/// # Panics
/// When the command failed or its stdout is not UTF-8: a test failure.
pub fn stdout(o: &std::process::Output) -> String {
    assert!(o.status.success(), "stderr: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).expect("stdout is UTF-8")
}
