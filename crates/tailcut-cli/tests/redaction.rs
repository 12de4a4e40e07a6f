//! Upstreams that echo the credentials they were sent (in a 401 body, in a 200 reply's
//! error field or stream event, in the output itself) against `tailcut run --json` and
//! `tailcut serve` (whole and streamed completions, jobs): the credential must appear in
//! no stdout, stderr, trace, job store, ledger or HTTP response — and the redaction
//! marker must, so the echo really went through.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;
use tailcut_mockproviders::{Echo, EchoServer};

/// The provider key: long enough to be a credential, with characters that percent-encode.
const CANARY: &str = "tc-CANARY+key/9f8e7d6c5b4a3f2e1d0c";
/// The Modal proxy secret.
const CANARY2: &str = "ms-CANARY-secret-0a1b2c3d4e5f";
const MARK: &str = "[redacted]";

fn tailcut() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tailcut"));
    c.env("TAILCUT_TEST_CANARY", CANARY).env("TAILCUT_TEST_CANARY2", CANARY2);
    c
}

fn leaks(text: &str) -> Vec<&'static str> {
    let mut found = Vec::new();
    for needle in [CANARY, CANARY2, "CANARY"] {
        if text.contains(needle) {
            found.push(needle);
        }
    }
    found
}

fn read_all(path: &std::path::Path) -> String {
    // SQLite files (ledger, job store, their WAL) are grepped as bytes.
    let mut text = String::new();
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        if let Ok(b) = std::fs::read(&p) {
            text.push_str(&String::from_utf8_lossy(&b));
        }
    }
    text
}

struct Upstreams {
    unauthorized: EchoServer,
    in_error: EchoServer,
    in_output: EchoServer,
}

async fn upstreams() -> Upstreams {
    Upstreams {
        unauthorized: EchoServer::start(Echo::Unauthorized).await.unwrap(),
        in_error: EchoServer::start(Echo::InError).await.unwrap(),
        in_output: EchoServer::start(Echo::InOutput).await.unwrap(),
    }
}

/// Every adapter against the upstream that refuses with an echo, the job-queue and
/// OpenAI-compatible ones against the other two as well; one `single` policy each.
fn providers(u: &Upstreams) -> (String, Vec<String>) {
    let (a, e, o) = (u.unauthorized.url(), u.in_error.url(), u.in_output.url());
    let key = "api_key_env = \"TAILCUT_TEST_CANARY\"\nrate_usd_per_s = 0.0\npoll_interval_ms = 5\ncancel_window_ms = 200";
    let mut text = String::new();
    let mut names = Vec::new();
    let mut add = |name: &str, body: String| {
        text.push_str(&format!("[providers.{name}]\n{body}\n[policies.{name}]\nkind = \"single\"\nprovider = \"{name}\"\n"));
        names.push(name.to_string());
    };
    for (tag, url) in [("a", &a), ("e", &e), ("o", &o)] {
        add(&format!("runpod_{tag}"), format!("adapter = \"runpod\"\nbase_url = \"{url}/v2\"\nendpoint_id = \"ep\"\n{key}"));
        add(&format!("openai_{tag}"), format!("adapter = \"openai\"\nbase_url = \"{url}/v1\"\n{key}"));
        add(&format!("openai_stream_{tag}"), format!("adapter = \"openai\"\nbase_url = \"{url}/v1\"\nstream = true\n{key}"));
    }
    add("replicate_a", format!("adapter = \"replicate\"\nbase_url = \"{a}/v1\"\nversion = \"v1\"\n{key}"));
    add("fal_a", format!("adapter = \"fal\"\nbase_url = \"{a}\"\nmodel = \"owner/app\"\n{key}"));
    add("baseten_a", format!("adapter = \"baseten\"\nbase_url = \"{a}\"\n{key}"));
    add("cerebrium_a", format!("adapter = \"cerebrium\"\nurl = \"{a}/v4/p/app/predict\"\n{key}"));
    add(
        "modal_a",
        format!(
            "adapter = \"modal\"\nurl = \"{a}\"\nproxy_key_env = \"TAILCUT_TEST_CANARY\"\nproxy_secret_env = \"TAILCUT_TEST_CANARY2\"\nrate_usd_per_s = 0.0\npoll_interval_ms = 5"
        ),
    );
    add(
        "generic_a",
        format!(
            "adapter = \"http\"\nrate_usd_per_s = 0.0\npoll_interval_ms = 5\n[providers.generic_a.http]\nheaders = {{ Authorization = \"Bearer ${{TAILCUT_TEST_CANARY}}\" }}\nsubmit = {{ url = \"{a}/jobs\" }}\nstatus = {{ url = \"{a}/jobs/{{job_id}}\" }}\ncancel = {{ url = \"{a}/jobs/{{job_id}}\" }}"
        ),
    );
    (text, names)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tailcut_run_never_prints_or_stores_an_echoed_credential() {
    let u = upstreams().await;
    let dir = tempfile::tempdir().unwrap();
    let (providers, names) = providers(&u);
    let ledger = dir.path().join("ledger.sqlite");
    let trace = dir.path().join("trace.jsonl");
    let cfg = dir.path().join("echo.toml");
    std::fs::write(&cfg, format!("[race]\ncap_s = 2\n[budget]\nledger = \"{}\"\n{providers}", ledger.display())).unwrap();
    let mut everything = String::new();
    for name in &names {
        let args = ["run", "--config", cfg.to_str().unwrap(), "--policy", name, "--json", "--trace", trace.to_str().unwrap()];
        let out = tokio::task::spawn_blocking({
            let mut c = tailcut();
            c.args(args);
            move || c.output().unwrap()
        })
        .await
        .unwrap();
        let (so, se) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(so.contains("\"attempts\""), "{name}: no trace record printed: {so} {se}");
        assert!(leaks(&format!("{so}{se}")).is_empty(), "{name} leaked the credential: {so} {se}");
        everything.push_str(&so);
        everything.push_str(&se);
    }
    let files = format!("{}{}", read_all(&trace), read_all(&ledger));
    assert!(!files.is_empty());
    assert!(leaks(&files).is_empty(), "the credential was stored: {:?}", leaks(&files));
    everything.push_str(&files);
    // The echoes reached the records, redacted: every kind of path was exercised.
    for name in ["runpod_a", "runpod_e", "openai_a", "openai_stream_e", "fal_a", "modal_a", "cerebrium_a", "generic_a"] {
        let line = everything.lines().find(|l| l.contains(&format!("\"policy\":\"single:{name}\""))).unwrap_or("");
        // (A 200-character excerpt may cut the marker short.)
        assert!(line.contains(MARK) || line.contains("Bearer [r"), "{name}: the echo did not come through redacted: {line}");
    }
}

struct Gateway(std::process::Child);

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_never_returns_logs_or_stores_an_echoed_credential() {
    let u = upstreams().await;
    let dir = tempfile::tempdir().unwrap();
    let (providers, _) = providers(&u);
    let (ledger, trace, store, log) =
        (dir.path().join("ledger.sqlite"), dir.path().join("trace.jsonl"), dir.path().join("jobs.sqlite"), dir.path().join("gw.log"));
    let mut routes = String::new();
    for tag in ["a", "e", "o"] {
        routes.push_str(&format!(
            "[routes.chat_{tag}]\nkind = \"openai\"\nmodels = [\"m_{tag}\"]\npolicy = \"openai_{tag}\"\n[routes.jobs_{tag}]\nkind = \"jobs\"\npolicy = \"runpod_{tag}\"\n"
        ));
    }
    let cfg = dir.path().join("gw.toml");
    std::fs::write(
        &cfg,
        format!(
            "[race]\ncap_s = 2\n[budget]\nledger = \"{}\"\n[trace]\npath = \"{}\"\n[gateway]\nauth = \"none\"\nstore = \"{}\"\n{providers}{routes}",
            ledger.display(),
            trace.display(),
            store.display()
        ),
    )
    .unwrap();
    let mut child = tailcut()
        .args(["serve", "--config", cfg.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let gw = Gateway(child);
    let base = line.trim().rsplit(' ').next().unwrap().to_string();
    assert!(base.starts_with("http://"), "the gateway did not start: {line:?}");
    let http = reqwest::Client::new();
    let mut responses = String::new();
    let keep = |what: String, resp: reqwest::Response| async move {
        let headers: Vec<String> = resp.headers().iter().map(|(k, v)| format!("{k}: {}", String::from_utf8_lossy(v.as_bytes()))).collect();
        let status = resp.status();
        let body = resp.text().await.unwrap();
        (format!("{what} -> {status} {}\n{body}\n", headers.join("; ")), body)
    };
    for tag in ["a", "e", "o"] {
        for stream in [false, true] {
            let req = serde_json::json!({"model": format!("m_{tag}"), "messages": [{"role": "user", "content": "hi"}], "stream": stream});
            let resp = http.post(format!("{base}/v1/chat/completions")).json(&req).send().await.unwrap();
            responses.push_str(&keep(format!("chat m_{tag} stream={stream}"), resp).await.0);
        }
        let job = serde_json::json!({"route": format!("jobs_{tag}"), "input": {"text": "hi"}});
        let (text, body) = keep(format!("job {tag}"), http.post(format!("{base}/v1/jobs?wait=5")).json(&job).send().await.unwrap()).await;
        responses.push_str(&text);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_ne!(v["state"], "running", "{v}");
        let id = v["id"].as_str().unwrap();
        responses.push_str(&keep(format!("get job {tag}"), http.get(format!("{base}/v1/jobs/{id}")).send().await.unwrap()).await.0);
    }
    // The whole replies of the echoing upstreams, whose output *is* the echo, reached
    // the client redacted; so did the failures' reasons.
    assert!(responses.contains(MARK), "{responses}");
    assert!(leaks(&responses).is_empty(), "an HTTP response leaked the credential:\n{responses}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(gw);
    let stored = format!("{}{}{}", read_all(&trace), read_all(&store), read_all(&ledger));
    assert!(stored.contains(MARK), "the echoes reached the trace and the job store, redacted");
    assert!(leaks(&stored).is_empty(), "the credential was stored");
    let logged = read_all(&log);
    assert!(leaks(&logged).is_empty(), "the credential was logged: {logged}");
}
