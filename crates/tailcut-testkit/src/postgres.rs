//! A real, throwaway PostgreSQL server for tests: Debian's `postgresql` package
//! (`apt-get install postgresql`; the binaries under `/usr/lib/postgresql/*/bin`, or the
//! directory in `TAILCUT_PG_BIN`), never a mock.
//!
//! [`PgServer::start`] runs `initdb` in a new temporary directory and `postgres` on a free
//! port of 127.0.0.1, with trust authentication for the local `postgres` role. PostgreSQL
//! refuses to run as root, so when the tests run as root (CI, containers) both run as the
//! unprivileged `nobody` user through `setpriv` (util-linux), in a directory owned by that
//! user. The server is stopped by its pid (`SIGTERM`, then `SIGKILL`) and its directory
//! removed when the [`PgServer`] is dropped.
//!
//! Without the binaries [`PgServer::start`] returns `None` and the test says it skipped;
//! with `TAILCUT_REQUIRE_POSTGRES=1` (set by `.ci/run`) a missing server is a failure.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running PostgreSQL server in a temporary directory.
#[derive(Debug)]
pub struct PgServer {
    child: Child,
    dir: PathBuf,
    port: u16,
}

/// The unprivileged user the server runs as when the tests run as root.
const NOBODY: u32 = 65534;

fn bin_dir() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("TAILCUT_PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("postgres").exists() && p.join("initdb").exists())
        .collect();
    found.sort_by_key(|p| p.parent().and_then(|v| v.file_name()).and_then(|v| v.to_str()).and_then(|v| v.parse::<u32>().ok()));
    found.pop()
}

fn is_root() -> bool {
    // Asked once per process: tests start servers from several threads at once, and a
    // probe file shared between them (one name per process) could be removed by one
    // thread before another read it, which read as "not root" and ran initdb as root.
    static ROOT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ROOT.get_or_init(|| {
        // The owner of a file this process creates is its effective user.
        let probe = std::env::temp_dir().join(format!("tailcut-uid-probe-{}-{}", std::process::id(), unique()));
        let uid = std::fs::write(&probe, b"").and_then(|()| std::fs::metadata(&probe)).map(|m| std::os::unix::fs::MetadataExt::uid(&m));
        let _ = std::fs::remove_file(&probe);
        uid.is_ok_and(|u| u == 0)
    })
}

/// `program` as the unprivileged user when this process is root.
fn command(program: &Path, root: bool) -> Command {
    if root {
        let mut c = Command::new("setpriv");
        c.args(["--reuid", &NOBODY.to_string(), "--regid", &NOBODY.to_string(), "--clear-groups", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn free_port() -> Option<u16> {
    TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok().map(|a| a.port())
}

impl PgServer {
    /// Starts a server, or `None` (with a note on stderr) when PostgreSQL is not
    /// installed. Panics when it is installed but does not start, or when it is missing
    /// and `TAILCUT_REQUIRE_POSTGRES=1`.
    pub fn start() -> Option<PgServer> {
        PgServer::start_with(&["-c", "fsync=off", "-c", "synchronous_commit=off"])
    }

    /// Like [`PgServer::start`], with durable commits (fsync on): what the cost
    /// benchmark measures against.
    pub fn start_durable() -> Option<PgServer> {
        PgServer::start_with(&[])
    }

    fn start_with(settings: &[&str]) -> Option<PgServer> {
        let Some(bin) = bin_dir() else {
            if std::env::var("TAILCUT_REQUIRE_POSTGRES").is_ok_and(|v| v == "1") {
                panic!("TAILCUT_REQUIRE_POSTGRES=1 but no PostgreSQL server binaries (apt-get install postgresql, or set TAILCUT_PG_BIN)");
            }
            eprintln!("skipped: no PostgreSQL server binaries under /usr/lib/postgresql/*/bin (apt-get install postgresql)");
            return None;
        };
        let root = is_root();
        let dir = std::env::temp_dir().join(format!("tailcut-pg-{}-{}", std::process::id(), unique()));
        std::fs::create_dir_all(&dir).expect("create the PostgreSQL directory");
        if root {
            std::os::unix::fs::chown(&dir, Some(NOBODY), Some(NOBODY)).expect("give the PostgreSQL directory to nobody");
        }
        let data = dir.join("data");
        let out = command(&bin.join("initdb"), root)
            .args(["-D"])
            .arg(&data)
            .args(["-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C"])
            .stdin(Stdio::null())
            .output()
            .expect("run initdb");
        assert!(out.status.success(), "initdb failed: {}", String::from_utf8_lossy(&out.stderr));
        for _ in 0..5 {
            let port = free_port().expect("a free port");
            let log = std::fs::File::create(dir.join("postgres.log")).expect("the server log");
            if root {
                std::os::unix::fs::chown(dir.join("postgres.log"), Some(NOBODY), Some(NOBODY)).expect("chown the log");
            }
            let child = command(&bin.join("postgres"), root)
                .arg("-D")
                .arg(&data)
                .args(["-p", &port.to_string(), "-h", "127.0.0.1", "-k"])
                .arg(&dir)
                .args(["-c", "max_connections=200"])
                .args(settings)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("start postgres");
            let mut server = PgServer { child, dir: dir.clone(), port };
            if server.wait_ready(Duration::from_secs(30)) {
                return Some(server);
            }
            // Lost the port to someone else, most likely: stop it and try another.
            server.stop();
        }
        let log = std::fs::read_to_string(dir.join("postgres.log")).unwrap_or_default();
        panic!("PostgreSQL did not start: {log}");
    }

    fn wait_ready(&mut self, within: Duration) -> bool {
        let until = Instant::now() + within;
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                let ready = Command::new(bin_dir().map_or_else(|| PathBuf::from("pg_isready"), |b| b.join("pg_isready")))
                    .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "postgres", "-q"])
                    .status();
                if ready.is_ok_and(|s| s.success()) {
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// The connection URL (`postgres://postgres@127.0.0.1:PORT/postgres`).
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// A URL for a new, empty database `name` on this server (created by `psql`), so
    /// tests that share one server do not share state.
    pub fn database(&self, name: &str) -> String {
        let psql = bin_dir().map_or_else(|| PathBuf::from("psql"), |b| b.join("psql"));
        let out = Command::new(psql)
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-v",
                "ON_ERROR_STOP=1",
                "-q",
                "-c",
            ])
            .arg(format!("CREATE DATABASE \"{name}\""))
            .output()
            .expect("run psql");
        assert!(out.status.success(), "CREATE DATABASE {name}: {}", String::from_utf8_lossy(&out.stderr));
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// Runs one SQL statement with `psql` on the `postgres` database and returns its
    /// unaligned, tuples-only output (one row per line, columns split by `|`).
    pub fn query(&self, sql: &str) -> String {
        let psql = bin_dir().map_or_else(|| PathBuf::from("psql"), |b| b.join("psql"));
        let port = self.port.to_string();
        let out = Command::new(psql)
            .args(["-h", "127.0.0.1", "-p", &port, "-U", "postgres", "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-At", "-c", sql])
            .output()
            .expect("run psql");
        assert!(out.status.success(), "{sql}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn stop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
