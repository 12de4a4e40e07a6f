//! Upstreams that echo the provider key JSON-escaped — `/` as `\/` (PHP's default), every
//! character as `\uXXXX` in lower- or upper-case hex, or a mix — which a tenant's JSON
//! parser decodes back into the key. Against real local servers: the key must reach no
//! tenant (a whole reply, a stream cut into 7-byte chunks, a job's result and error in
//! `POST /v1/jobs?wait=` and `GET /v1/jobs/{id}`), nor the job store or the trace; and the
//! echo must come through redacted, so the paths were really taken.

// Tests spawn their own servers and clients freely: the tracker rule is for the gateway.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

mod common;

use std::sync::Once;
use tailcut_mockproviders::{Echo, EchoServer, Escape};

/// The provider key: `/` and `+` (which escape differently), and long enough to be a credential.
const KEY: &str = "sk-ESC/key+9f8e7d6c5b4a/3f2e1d0c";
const ENV: &str = "TAILCUT_TEST_ESCAPED_KEY";
const MARK: &str = "[redacted]";

/// The key in the environment, set once before any gateway reads it.
fn key_in_env() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| std::env::set_var(ENV, KEY));
}

/// `text` as readers decode it, however deep: every `\/`, `\\` and `\uXXXX` (either
/// case, surrogate pairs) decoded, three times over (a JSON string in a JSON string in
/// a reply).
fn decoded(text: &str) -> String {
    let mut s = text.to_string();
    for _ in 0..3 {
        let b: Vec<char> = s.chars().collect();
        let mut out = String::with_capacity(s.len());
        let mut i = 0;
        while i < b.len() {
            if b[i] == '\\' && i + 1 < b.len() {
                match b[i + 1] {
                    '/' | '\\' | '"' => {
                        out.push(b[i + 1]);
                        i += 2;
                        continue;
                    }
                    'u' if i + 6 <= b.len() => {
                        let hex: String = b[i + 2..i + 6].iter().collect();
                        if let Ok(unit) = u16::from_str_radix(&hex, 16) {
                            let mut units = vec![unit];
                            let mut len = 6;
                            if (0xD800..0xDC00).contains(&unit) && i + 12 <= b.len() && b[i + 6] == '\\' && b[i + 7] == 'u' {
                                let low: String = b[i + 8..i + 12].iter().collect();
                                if let Ok(low) = u16::from_str_radix(&low, 16) {
                                    units.push(low);
                                    len = 12;
                                }
                            }
                            out.push_str(&String::from_utf16_lossy(&units));
                            i += len;
                            continue;
                        }
                    }
                    _ => {}
                }
            }
            out.push(b[i]);
            i += 1;
        }
        s = out;
    }
    s
}

fn leaked(text: &str) -> bool {
    text.contains(KEY) || decoded(text).contains(KEY)
}

/// A SQLite file (with its WAL) or a trace, as text.
fn read_all(path: &std::path::Path) -> String {
    let mut text = String::new();
    for suffix in ["", "-wal", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        if let Ok(b) = std::fs::read(&p) {
            text.push_str(&String::from_utf8_lossy(&b));
        }
    }
    text
}

#[test]
fn the_readers_decoding_finds_every_escaped_spelling() {
    for form in Escape::ALL {
        let spelled = form.json_string(&format!("Bearer {KEY}"));
        assert!(leaked(&spelled), "{form:?}: {spelled}");
        if form != Escape::Plain {
            assert!(!spelled.contains(KEY), "{form:?} escapes the key: {spelled}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_escaped_echo_of_the_provider_key_reaches_no_tenant_store_or_trace() {
    key_in_env();
    let dir = tempfile::tempdir().unwrap();
    let (store, trace) = (dir.path().join("jobs.sqlite"), dir.path().join("trace.jsonl"));
    let mut servers = Vec::new();
    let mut toml = format!(
        "[race]\ncap_s = 2\n[budget]\nledger = \":memory:\"\n[trace]\npath = \"{}\"\n[gateway]\nauth = \"none\"\nstore = \"{}\"\n",
        trace.display(),
        store.display()
    );
    let mut tags = Vec::new();
    for (i, form) in Escape::ALL.into_iter().enumerate() {
        for (m, mode) in [(0, Echo::InOutput), (1, Echo::InError)] {
            let server = EchoServer::start_escaped(mode, form).await.unwrap();
            let (url, tag) = (server.url(), format!("e{i}m{m}"));
            let key = format!("api_key_env = \"{ENV}\"\nrate_usd_per_s = 0.0\npoll_interval_ms = 5\ncancel_window_ms = 200");
            toml.push_str(&format!(
                "[providers.openai_{tag}]\nadapter = \"openai\"\nbase_url = \"{url}/v1\"\n{key}\n\
                 [providers.runpod_{tag}]\nadapter = \"runpod\"\nbase_url = \"{url}/v2\"\nendpoint_id = \"ep\"\n{key}\n\
                 [policies.openai_{tag}]\nkind = \"single\"\nprovider = \"openai_{tag}\"\n\
                 [policies.runpod_{tag}]\nkind = \"single\"\nprovider = \"runpod_{tag}\"\n\
                 [routes.chat_{tag}]\nkind = \"openai\"\nmodels = [\"m_{tag}\"]\npolicy = \"openai_{tag}\"\n\
                 [routes.jobs_{tag}]\nkind = \"jobs\"\npolicy = \"runpod_{tag}\"\n"
            ));
            servers.push(server);
            tags.push((tag, form, mode));
        }
    }
    let base = common::serve_config(&toml).await.trim_end_matches("/v1/chat/completions").to_string();
    let http = reqwest::Client::new();
    // Every leak is collected (and named) before the test fails.
    let mut leaks: Vec<String> = Vec::new();
    for (tag, form, mode) in &tags {
        let what = format!("{form:?} {mode:?}");
        for stream in [false, true] {
            let req = serde_json::json!({"model": format!("m_{tag}"), "messages": [{"role": "user", "content": "hi"}], "stream": stream});
            let body = http.post(format!("{base}/v1/chat/completions")).json(&req).send().await.unwrap().text().await.unwrap();
            if leaked(&body) {
                leaks.push(format!("{what} stream={stream}, the reply|{body}"));
            } else if *mode == Echo::InOutput {
                assert!(body.contains(MARK), "{what} stream={stream}: the echo came through redacted:\n{body}");
            }
        }
        let job = serde_json::json!({"route": format!("jobs_{tag}"), "input": {"text": "hi"}});
        let ended = http.post(format!("{base}/v1/jobs?wait=10")).json(&job).send().await.unwrap().text().await.unwrap();
        if leaked(&ended) {
            leaks.push(format!("{what}, the job's end (?wait=)|{ended}"));
        }
        let v: serde_json::Value = serde_json::from_str(&ended).unwrap();
        assert_ne!(v["state"], "running", "{what}: {v}");
        let row = http.get(format!("{base}/v1/jobs/{}", v["id"].as_str().unwrap())).send().await.unwrap().text().await.unwrap();
        if leaked(&row) {
            leaks.push(format!("{what}, GET /v1/jobs/{{id}}|{row}"));
            continue;
        }
        assert!(row.contains(MARK), "{what}: the job's echo came through redacted:\n{row}");
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let stored = format!("{}{}", read_all(&store), read_all(&trace));
    assert!(stored.contains(MARK) || !leaks.is_empty(), "the echoes reached the store and the trace, redacted");
    if leaked(&stored) {
        leaks.push("the job store or the trace|".into());
    }
    let names: Vec<&str> = leaks.iter().map(|l| l.split('|').next().unwrap_or("")).collect();
    assert!(leaks.is_empty(), "{} leaks: {names:#?}\nfirst: {}", leaks.len(), leaks.first().map_or("", String::as_str));
}
