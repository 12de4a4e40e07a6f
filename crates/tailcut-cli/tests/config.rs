//! `tailcut config check`, `demo` and `serve` on bad configurations, through the real
//! binary: every out-of-range number, unsafe gateway setting and unwritable output path
//! exits 2 naming the file and key (never a panic, exit 101, or a silent start), and a
//! gateway with authentication off says so at start.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;
use tailcut_mockproviders::{Behaviour, Flavor, MockServer};
use tailcut_testkit::config::{openai_provider, single_chat_route};

fn tailcut(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tailcut")).args(args).env("TAILCUT_LOG", "off").output().unwrap()
}

/// An in-memory `[budget]` and one chat route to an OpenAI-compatible provider, `up`.
fn routes() -> String {
    format!("\n[budget]\nledger = \":memory:\"\n{}{}", openai_provider("up", "http://127.0.0.1:9/v1"), single_chat_route("p", "up"))
}

fn write(dir: &tempfile::TempDir, text: &str) -> String {
    let path = dir.path().join("tailcut.toml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

fn assert_exit_2(out: &std::process::Output, file: &str, key: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(err.contains(&format!("{file}: key `{key}`")), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn huge_simulator_durations_are_refused_by_check_and_demo() {
    // `config check` passed this and `demo` panicked in every attempt (exit 101).
    let dir = tempfile::tempdir().unwrap();
    let f = write(&dir, "[budget]\nledger = \":memory:\"\n[providers.runpod]\nadapter = \"sim\"\nsim = { profile = \"runpod\", cold_slow_queue_s = [1e308, 1e308] }\n");
    assert_exit_2(&tailcut(&["config", "check", &f]), &f, "providers.runpod.sim.cold_slow_queue_s");
    assert_exit_2(&tailcut(&["demo", "--config", &f, "--requests", "5"]), &f, "providers.runpod.sim.cold_slow_queue_s");
    for (text, key) in [
        ("[race]\ncap_s = 1e308\n", "race.cap_s"),
        ("[gateway]\ntotal_timeout_s = 1e308\n", "gateway.total_timeout_s"),
        ("[gateway]\njob_retention_s = 1e308\n", "gateway.job_retention_s"),
        ("[providers.runpod]\nadapter = \"sim\"\nexpected_run_s = 1e308\n", "providers.runpod.expected_run_s"),
        ("[providers.runpod]\nadapter = \"sim\"\nidle_window_s = 1e308\n", "providers.runpod.idle_window_s"),
    ] {
        let f = write(&dir, text);
        assert_exit_2(&tailcut(&["config", "check", &f]), &f, key);
        assert_exit_2(&tailcut(&["demo", "--config", &f, "--requests", "5"]), &f, key);
    }
}

#[test]
fn serving_with_no_keys_needs_an_explicit_auth_none() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(&dir, &format!("[gateway]\nstore = \":memory:\"\n{}", routes()));
    for args in [vec!["config", "check", &f], vec!["serve", "--config", &f, "--listen", "127.0.0.1:0"]] {
        let out = tailcut(&args);
        assert_exit_2(&out, &f, "gateway.keys");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("auth = \"none\""), "says how to serve without keys: {err}");
    }
}

#[test]
fn serve_with_auth_none_warns_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(&dir, &format!("[gateway]\nauth = \"none\"\nstore = \":memory:\"\n{}", routes()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_tailcut"))
        .args(["serve", "--config", &f, "--listen", "127.0.0.1:0"])
        .env("TAILCUT_LOG", "off")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert!(line.contains("listening on http://"), "{line:?}");
    // Stop the gateway this test started (by its handle), then read what it printed.
    child.kill().unwrap();
    child.wait().unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(err.contains("auth = \"none\"") && err.contains("every route is unauthenticated"), "{err}");
    // `config check` passes it, and warns too.
    let out = tailcut(&["config", "check", &f]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("every route is unauthenticated"));
}

#[test]
fn unwritable_ledger_and_store_fail_check_and_serve() {
    let dir = tempfile::tempdir().unwrap();
    // /proc refuses new files even to root.
    let bad_ledger = routes().replace("ledger = \":memory:\"", "ledger = \"/proc/tailcut-test/ledger.sqlite\"");
    let f = write(&dir, &format!("[gateway]\nauth = \"none\"\nstore = \":memory:\"\n{bad_ledger}"));
    assert_exit_2(&tailcut(&["config", "check", &f]), &f, "budget.ledger");
    assert_exit_2(&tailcut(&["serve", "--config", &f, "--listen", "127.0.0.1:0"]), &f, "budget.ledger");
    // `tailcut run` opens the ledger too.
    let f = write(
        &dir,
        "[budget]\nledger = \"/proc/tailcut-test/ledger.sqlite\"\n[providers.runpod]\nadapter = \"sim\"\n[policies.p]\nkind = \"single\"\nprovider = \"runpod\"\n",
    );
    assert_exit_2(&tailcut(&["run", "--config", &f, "--policy", "p"]), &f, "budget.ledger");
    let f = write(&dir, &format!("[gateway]\nauth = \"none\"\nstore = \"/proc/tailcut-test/gateway.sqlite\"\n{}", routes()));
    assert_exit_2(&tailcut(&["config", "check", &f]), &f, "gateway.store");
    assert_exit_2(&tailcut(&["serve", "--config", &f, "--listen", "127.0.0.1:0"]), &f, "gateway.store");
}

#[test]
fn gateway_footguns_are_refused_by_check() {
    let dir = tempfile::tempdir().unwrap();
    let sha = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    for (gateway, key) in [
        (format!("keys = [{{ name = \"a\", sha256 = \"{sha}\", rate_per_s = nan }}]"), "gateway.keys[0].rate_per_s"),
        (format!("keys = [{{ name = \"a\", sha256 = \"{sha}\", rate_per_s = 0 }}]"), "gateway.keys[0].rate_per_s"),
        (format!("keys = [{{ name = \"a\", sha256 = \"{sha}\", budget_usd = -1 }}]"), "gateway.keys[0].budget_usd"),
        (format!("keys = [{{ name = \"a\", sha256 = \"{sha}\" }}, {{ name = \"b\", sha256 = \"{sha}\" }}]"), "gateway.keys[1].sha256"),
        (format!("keys = [{{ name = \"a\", sha256 = \"{sha}\", routes = [\"nope\"] }}]"), "gateway.keys[0].routes"),
    ] {
        let f = write(&dir, &format!("[gateway]\nstore = \":memory:\"\n{gateway}\n{}", routes()));
        assert_exit_2(&tailcut(&["config", "check", &f]), &f, key);
    }
}

#[test]
fn the_example_configs_the_readme_points_at_pass_check() {
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    for name in ["sim-walkthrough.toml", "serve-sim.toml", "python-sims.toml", "lambda.toml"] {
        let path = format!("{examples}/{name}");
        let out = tailcut(&["config", "check", &path]);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).contains(": ok"), "{name}");
    }
}

/// `tailcut config import-gpuhedge` on `yaml`: its TOML, parsed, after asserting exit 0.
fn imported(yaml: &str) -> (toml::Table, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gpuhedge.yaml");
    std::fs::write(&path, yaml).unwrap();
    let out = tailcut(&["config", "import-gpuhedge", path.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    (toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}")), text)
}

fn keys(t: &toml::Table) -> Vec<&str> {
    t.keys().map(String::as_str).collect()
}

/// Issue 27 item 5: a provider name is written as a TOML key, quoted where it is not a
/// bare key, so no name can close its table and open one of its own (this one, from the
/// issue, opened the gateway to the world with exit 0). The name survives as the
/// provider's name, and as a policy's.
#[test]
fn import_gpuhedge_writes_every_name_as_one_key() {
    let evil = "a]\nadapter = \"sim\"\nsim = { profile = \"runpod\" }\nrate_usd_per_s = 0.1\n[gateway]\nauth = \"none\"\nlisten = \"0.0.0.0:8080\"\n[providers.x";
    let quoted = serde_json::to_string(evil).unwrap();
    let (doc, text) = imported(&format!("providers:\n  {quoted}: {{ billed_rate_per_s: 0.0003, adapter: sim }}\n"));
    assert_eq!(keys(&doc), ["race", "validator", "providers"], "{text}");
    assert_eq!(keys(doc["providers"].as_table().unwrap()), [evil], "{text}");

    let (doc, text) = imported(&format!(
        "providers:\n  {quoted}: {{ billed_rate_per_s: 0.0003, adapter: sim }}\n  ok: {{ billed_rate_per_s: 0.0007, adapter: sim }}\n\
         policy: {{ primary: ok, hedge_choose_one_of: [{quoted}] }}\n"
    ));
    assert_eq!(keys(&doc), ["race", "validator", "providers", "policies"], "{text}");
    assert_eq!(keys(doc["providers"].as_table().unwrap()), [evil, "ok"], "{text}");
    let hedge = format!("hedge-{evil}");
    assert_eq!(keys(doc["policies"].as_table().unwrap()), [hedge.as_str(), "single"], "{text}");
    assert_eq!(doc["policies"][&hedge]["hedge"].as_str(), Some(evil));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lambda_example_checks_and_runs_through_the_openai_module() {
    // Lambda's inference API is OpenAI-compatible, with no documented difference besides
    // its base URL: the example passes `config check` as written, and, pointed at local
    // OpenAI-compatible mocks, its hedge runs with a receipt for the loser.
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/lambda.toml");
    let out = tailcut(&["config", "check", example]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(example).unwrap();
    assert!(text.contains("base_url = \"https://api.lambda.ai/v1\"") && text.contains("api_key_env = \"LAMBDA_API_KEY\""));

    let slow = Behaviour::timed(Duration::from_secs(20), Duration::from_secs(1));
    let (lambda, vllm) =
        (MockServer::start(Flavor::OpenAi, slow).await.unwrap(), MockServer::start(Flavor::OpenAi, Behaviour::default()).await.unwrap());
    let dir = tempfile::tempdir().unwrap();
    let local = text
        .replace("https://api.lambda.ai/v1", &format!("{}/v1", lambda.url()))
        .replace("http://127.0.0.1:8000/v1", &format!("{}/v1", vllm.url()))
        .replace("delay_ms = 4000", "delay_ms = 200")
        .replace("ledger = \"tailcut-ledger.sqlite\"", "ledger = \":memory:\"");
    let f = write(&dir, &local);
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_tailcut"))
            .args([
                "run",
                "--config",
                &f,
                "--policy",
                "chat",
                "--json",
                "--input",
                r#"{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}"#,
            ])
            .env("LAMBDA_API_KEY", "test-lambda-key")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!stdout.contains("test-lambda-key"));
    let record: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(record["winner"], "vllm", "{record}");
    let receipts = record["receipts"].as_array().unwrap();
    assert_eq!(receipts.len(), 1);
    assert_eq!((receipts[0]["provider"].as_str(), receipts[0]["evidence"].as_str()), (Some("lambda"), Some("request_channel_closed")));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(lambda.disconnects(), 1, "the losing request to Lambda was closed");
}
