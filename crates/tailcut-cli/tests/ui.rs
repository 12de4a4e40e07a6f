//! The gateway's status page `/ui` in a real headless browser (Debian's `chromium`):
//! only an admin key opens it (401 with a Basic challenge without a key, 403 with
//! another key); it loads, shows a request that was just made (its id, winner and
//! receipt evidence) and logs nothing to the browser console (checked against a page
//! that does log, so the check is known to see console messages).
//!
//! Needs `chromium` on `PATH` (`.ci/run` installs it and sets
//! `TAILCUT_REQUIRE_CHROMIUM=1`); without it, and without that variable, the test says so
//! loudly and passes. `TAILCUT_UI_SCREENSHOT=FILE` saves a screenshot of the page.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use tailcut_gateway::tenancy::sha256_hex;
use tailcut_testkit::cli::{serve, Spawned};
use tailcut_testkit::config::{MEMORY_GATEWAY, SIM_HEDGED_JOBS, SIM_PROVIDERS};

fn have_chromium() -> bool {
    if Command::new("chromium").arg("--version").output().is_ok_and(|o| o.status.success()) {
        return true;
    }
    let msg = "`chromium` not found on PATH: the /ui browser test did NOT run (Debian: `apt-get install chromium`; .ci/run installs it)";
    if std::env::var_os("TAILCUT_REQUIRE_CHROMIUM").is_some() {
        panic!("{msg}");
    }
    eprintln!("\n======== SKIPPED ========\n{msg}\n=========================\n");
    false
}

/// Headless Chromium on `url` with `args`: (stdout, stderr), stopped after 90 s.
fn chromium(profile: &Path, url: &str, args: &[&str]) -> (String, String) {
    let dir = tempfile::tempdir_in(profile).unwrap();
    let out = dir.path().join("stdout");
    let err = dir.path().join("stderr");
    let mut child = Spawned(
        Command::new("chromium")
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--enable-logging=stderr", "--v=0"])
            .arg(format!("--user-data-dir={}", dir.path().join("profile").display()))
            .args(args)
            .arg(url)
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("chromium starts"),
    );
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if child.0.try_wait().unwrap().is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "chromium did not finish within 90 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    (std::fs::read_to_string(out).unwrap(), std::fs::read_to_string(err).unwrap())
}

/// The page's console messages in Chromium's log.
fn console_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains(":CONSOLE")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_shows_a_request_just_made_in_a_real_browser() {
    if !have_chromium() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("gw.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"{MEMORY_GATEWAY}keys = [{{ name = "admin", sha256 = "{admin}", admin = true }}, {{ name = "ops", sha256 = "{ops}", budget_usd = 1.0 }}]
{SIM_PROVIDERS}{SIM_HEDGED_JOBS}"#,
            admin = sha256_hex("admin-key"),
            ops = sha256_hex("ops-key"),
        ),
    )
    .unwrap();
    let (_gw, base) = serve(env!("CARGO_BIN_EXE_tailcut"), &cfg, &["--workers", "1"]);

    let http = reqwest::Client::new();
    let r = http.get(format!("{base}/ui")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.headers()["www-authenticate"].to_str().unwrap().starts_with("Basic "), "a browser is asked for the key");
    let r = http.get(format!("{base}/ui")).bearer_auth("ops-key").send().await.unwrap();
    assert_eq!(r.status(), 403, "a key without admin = true");
    let r = http.get(format!("{base}/ui")).bearer_auth("admin-key").send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/html; charset=utf-8");

    // A request just made: hedged (the runpod-profile primary is slow, the instant hedge
    // wins) and its loser cancelled with a receipt.
    let rid = format!("req-ui-{}", std::process::id());
    let body = serde_json::json!({"route": "jobs", "input": {"prompt": "hello"}});
    let submit = http.post(format!("{base}/v1/jobs?wait=60")).bearer_auth("ops-key").header("x-request-id", &rid).json(&body);
    let job: serde_json::Value = submit.send().await.unwrap().json().await.unwrap();
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["winner"], "fastsim", "{job}");

    let url = format!("{}/ui", base.replacen("http://", "http://admin:admin-key@", 1));
    let (dom, log) = chromium(dir.path(), &url, &["--dump-dom"]);
    assert!(dom.contains("<h1>tailcut gateway</h1>"), "the page did not load:\n{dom}\n{log}");
    for want in [rid.as_str(), "fastsim", "confirmed_terminal", "hedge:slowsim-&gt;fastsim@0.2s", "global", "ops", "$1.0000"] {
        assert!(dom.contains(want), "the page lacks {want:?}:\n{dom}");
    }
    assert!(console_lines(&log).is_empty(), "console messages on /ui:\n{}", console_lines(&log).join("\n"));
    if let Some(shot) = std::env::var_os("TAILCUT_UI_SCREENSHOT") {
        let shot = Path::new(&shot).canonicalize().unwrap_or_else(|_| Path::new(&shot).to_path_buf());
        let (_, log) = chromium(dir.path(), &url, &["--window-size=1400,800", &format!("--screenshot={}", shot.display())]);
        assert!(shot.exists(), "no screenshot:\n{log}");
    }

    // The console check sees a page that does log.
    let noisy = dir.path().join("noisy.html");
    std::fs::write(&noisy, "<!doctype html><title>x</title><script>console.error('logged-by-the-page')</script>").unwrap();
    let (_, log) = chromium(dir.path(), &format!("file://{}", noisy.display()), &["--dump-dom"]);
    assert!(console_lines(&log).iter().any(|l| l.contains("logged-by-the-page")), "console messages are not seen:\n{log}");
}
