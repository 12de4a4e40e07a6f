//! What the ledger's kill -9 tests share: a child test process that writes charges and
//! reports what committed, killed with SIGKILL mid-write, and the file's integrity check.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs this test binary's test `child_test` as a child process (its ledger path in the
/// environment variable `env`), reads the `committed N` lines it prints, and kills it
/// with SIGKILL once a report reaches `kill_at`. Returns the largest total the child was
/// told had committed.
pub fn committed_before_kill(child_test: &str, env: &str, path: &Path, kill_at: i64) -> i64 {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", child_test, "--nocapture", "--test-threads", "1"])
        .env(env, path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut committed = 0i64;
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if let Some(v) = line.strip_prefix("committed ") {
            committed = committed.max(v.trim().parse().unwrap());
            if committed >= kill_at {
                child.kill().unwrap(); // SIGKILL, writes in flight
                break;
            }
        }
    }
    let _ = child.wait();
    committed
}

/// SQLite's own `PRAGMA integrity_check` of the file: `"ok"` when intact.
pub fn integrity(path: &Path) -> String {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap()
}
