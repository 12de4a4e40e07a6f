//! What the benchmarks share about the processes they start: each is recorded by pid and
//! stopped when the bench ends (also on panic) — SIGTERM first, since an nginx master
//! killed outright leaves its workers running — and nothing else is ever stopped.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Child processes, stopped when the bench ends.
#[derive(Default)]
pub(crate) struct Procs(pub(crate) Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &self.0 {
            let _ = Command::new("kill").args(["-TERM", &c.id().to_string()]).status();
        }
        let until = Instant::now() + Duration::from_secs(10);
        for c in &mut self.0 {
            while Instant::now() < until && matches!(c.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Procs {
    /// Starts `tailcut sim-provider --profile instant` on `port` and waits until it listens.
    pub(crate) fn start_instant_upstream(&mut self, bin: &str, port: u16) {
        self.0.push(
            Command::new(bin)
                .args(["sim-provider", "--profile", "instant", "--port", &port.to_string(), "--max-workers", "1000000"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("sim-provider starts"),
        );
        wait_for_port(port);
    }

    /// Starts `bin serve --config cfg` (logs off) on a free port and waits until it
    /// listens: its base URL and pid.
    pub(crate) fn start_gateway(&mut self, bin: &str, cfg: &Path) -> (String, u32) {
        let port = free_port();
        let gw = Command::new(bin)
            .args(["serve", "--config"])
            .arg(cfg)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env("TAILCUT_LOG", "off")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("tailcut serve starts");
        let pid = gw.id();
        self.0.push(gw);
        wait_for_port(port);
        (format!("http://127.0.0.1:{port}"), pid)
    }
}

/// A free loopback port.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// Waits (at most 30 s) until something listens on `port`.
pub(crate) fn wait_for_port(port: u16) {
    let until = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < until, "nothing listens on port {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
