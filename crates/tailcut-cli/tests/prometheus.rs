//! The shipped Prometheus rules and Grafana dashboard against a real Prometheus: a
//! `tailcut serve` under a short bounded load (hedges, a denied hedge, streams, a budget
//! refusal, a cancelled job) is scraped by Debian's `prometheus`, then every dashboard
//! query, every variable and every rule expression must return data carrying the labels
//! its legend or annotations name, so a metric or label renamed in the code without the
//! dashboard and rules fails here. `promtool check rules`, `promtool check config` and the
//! alert unit tests (`promtool test rules`) run too.
//!
//! Needs `prometheus` and `promtool` on `PATH` (`apt-get install prometheus`; `.ci/run`
//! installs them and sets `TAILCUT_REQUIRE_PROMETHEUS=1`, so CI never skips). Without
//! them, and without that variable, the test says so loudly and passes.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tailcut_gateway::tenancy::sha256_hex;
use tailcut_mockproviders::{Behaviour, Flavor, MockServer};
use tailcut_testkit::cli::{serve, Spawned};
use tailcut_testkit::config::{hedged_chat_route, MEMORY_GATEWAY, SIM_PROVIDERS};

fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(p)
}

fn yaml(p: &Path) -> serde_yaml::Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Whether `prometheus` and `promtool` run; without them the test is skipped unless
/// `TAILCUT_REQUIRE_PROMETHEUS` is set (CI), when it fails.
fn have_prometheus() -> bool {
    let runs = |bin: &str| Command::new(bin).arg("--version").output().is_ok_and(|o| o.status.success());
    if runs("prometheus") && runs("promtool") {
        return true;
    }
    let msg = "`prometheus`/`promtool` not found on PATH: the dashboard and alert-rule checks \
               against a real Prometheus did NOT run (Debian: `apt-get install prometheus`; \
               .ci/run installs it)";
    if std::env::var_os("TAILCUT_REQUIRE_PROMETHEUS").is_some() {
        panic!("{msg}");
    }
    eprintln!("\n======== SKIPPED ========\n{msg}\n=========================\n");
    false
}

fn promtool(args: &[&str], cwd: &Path) -> String {
    let out = Command::new("promtool").args(args).current_dir(cwd).output().expect("promtool runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

/// `tailcut serve` on a free port with one worker; returns once it prints its URL.
fn start_gateway(config: &Path) -> (Spawned, String) {
    serve(env!("CARGO_BIN_EXE_tailcut"), config, &["--workers", "1"])
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The shipped `prometheus.yml`, scraping `target` every second with the shipped rules.
fn scrape_config(target: &str) -> String {
    let mut c = yaml(&repo("deploy/prometheus/prometheus.yml"));
    c["global"]["scrape_interval"] = "1s".into();
    c["global"]["evaluation_interval"] = "1s".into();
    let rules = c["rule_files"].as_sequence().expect("rule_files").clone();
    let rules: Vec<serde_yaml::Value> = rules
        .iter()
        .map(|r| repo("deploy/prometheus").join(r.as_str().unwrap()).canonicalize().unwrap().display().to_string().into())
        .collect();
    c["rule_files"] = rules.into();
    assert_eq!(c["scrape_configs"][0]["job_name"].as_str(), Some("tailcut"));
    assert_eq!(c["scrape_configs"][0]["metrics_path"].as_str(), Some("/metrics"));
    c["scrape_configs"][0]["static_configs"][0]["targets"] = vec![serde_yaml::Value::from(target)].into();
    serde_yaml::to_string(&c).unwrap()
}

/// A query to run and the labels every series of its answer must carry.
struct Check {
    what: String,
    expr: String,
    labels: BTreeSet<String>,
}

/// `{{label}}`s of a legend or `$labels.x` of an annotation.
fn named_labels(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (open, close) in [("{{", "}}"), ("$labels.", " ")] {
        let mut rest = text;
        while let Some(i) = rest.find(open) {
            rest = &rest[i + open.len()..];
            let end = rest.find(close).unwrap_or(rest.len());
            let name = rest[..end].trim().trim_start_matches("$labels.").trim();
            if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                out.insert(name.to_string());
            }
            rest = &rest[end..];
        }
    }
    out
}

/// A dashboard expression with Grafana's variables filled in as "All" would.
fn grafana_expr(expr: &str) -> String {
    expr.replace("$route", ".*")
        .replace("$provider", ".*")
        .replace("$__rate_interval", "1m")
        .replace("$__range", "10m")
        .replace("$__interval", "15s")
}

/// An alert expression with each comparison made `bool`, so it answers with the series
/// it watches whether or not they are past the threshold (the alert's signal).
fn alert_signal(expr: &str) -> String {
    let mut out = String::new();
    let tokens: Vec<&str> = expr.split_whitespace().collect();
    for t in &tokens {
        out.push_str(t);
        out.push(' ');
        if matches!(*t, ">" | ">=" | "<" | "<=" | "==" | "!=") {
            out.push_str("bool ");
        }
    }
    out
}

fn dashboard_checks() -> (Vec<Check>, usize, usize) {
    let text = std::fs::read_to_string(repo("deploy/grafana/tailcut.json")).unwrap();
    let d: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut checks = Vec::new();
    let mut panels = 0;
    for p in d["panels"].as_array().expect("panels") {
        let Some(targets) = p["targets"].as_array() else { continue };
        panels += 1;
        for t in targets {
            let expr = t["expr"].as_str().expect("a Prometheus target has `expr`");
            let legend = t["legendFormat"].as_str().unwrap_or("");
            checks.push(Check {
                what: format!("panel {:?} {}", p["title"].as_str().unwrap_or("?"), t["refId"].as_str().unwrap_or("?")),
                expr: grafana_expr(expr),
                labels: named_labels(legend),
            });
        }
    }
    let mut variables = 0;
    for v in d["templating"]["list"].as_array().expect("templating") {
        if v["type"] != "query" {
            continue;
        }
        variables += 1;
        let q = v["query"]["query"].as_str().or(v["query"].as_str()).expect("a variable query");
        let inner = q.strip_prefix("label_values(").and_then(|s| s.strip_suffix(')')).expect("label_values(metric, label)");
        let (metric, label) = inner.rsplit_once(',').expect("label_values(metric, label)");
        checks.push(Check {
            what: format!("variable {}", v["name"]),
            expr: grafana_expr(&format!("count by ({label}) ({metric})", label = label.trim(), metric = metric.trim())),
            labels: [label.trim().to_string()].into(),
        });
    }
    (checks, panels, variables)
}

fn rule_checks() -> (Vec<Check>, usize, usize) {
    let mut checks = Vec::new();
    let (mut recording, mut alerts) = (0, 0);
    for file in ["recording.rules.yml", "alerts.rules.yml"] {
        let doc = yaml(&repo("deploy/prometheus").join(file));
        for g in doc["groups"].as_sequence().expect("groups") {
            for r in g["rules"].as_sequence().expect("rules") {
                let expr = r["expr"].as_str().expect("expr");
                if let Some(name) = r["record"].as_str() {
                    recording += 1;
                    checks.push(Check { what: format!("record {name}"), expr: expr.to_string(), labels: BTreeSet::new() });
                } else {
                    alerts += 1;
                    let name = r["alert"].as_str().expect("alert or record");
                    let mut labels = BTreeSet::new();
                    if let Some(a) = r["annotations"].as_mapping() {
                        for v in a.values() {
                            labels.extend(named_labels(v.as_str().unwrap_or("")));
                        }
                    }
                    checks.push(Check { what: format!("alert {name}"), expr: alert_signal(expr), labels });
                }
            }
        }
    }
    (checks, recording, alerts)
}

/// Runs `check` against Prometheus: `Ok(series)` or why it failed.
async fn run(http: &reqwest::Client, prom: &str, check: &Check) -> Result<Vec<serde_json::Value>, String> {
    let r = http.get(format!("{prom}/api/v1/query")).query(&[("query", &check.expr)]).send().await.map_err(|e| e.to_string())?;
    let v: serde_json::Value = r.json().await.map_err(|e| e.to_string())?;
    if v["status"] != "success" {
        return Err(format!("query failed: {v}"));
    }
    let result = v["data"]["result"].as_array().cloned().unwrap_or_default();
    if result.is_empty() {
        return Err("no data".into());
    }
    for s in &result {
        for l in &check.labels {
            if s["metric"].get(l).is_none() {
                return Err(format!("series {} lacks label `{l}`", s["metric"]));
            }
        }
    }
    Ok(result)
}

fn show(series: &[serde_json::Value]) -> String {
    series
        .iter()
        .take(4)
        .map(|s| {
            let labels: Vec<String> = s["metric"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .filter(|(k, _)| *k != "job" && *k != "instance")
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("?")))
                        .collect()
                })
                .unwrap_or_default();
            format!("{{{}}} {}", labels.join(","), s["value"][1].as_str().unwrap_or("?"))
        })
        .collect::<Vec<_>>()
        .join("  ")
        + if series.len() > 4 { "  ..." } else { "" }
}

fn config(dir: &Path, slow: &str, fast: &str) -> PathBuf {
    let cfg = dir.join("gw.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"{MEMORY_GATEWAY}hedge_budget_percent = 20
hedge_budget_burst = 1
keys = [{{ name = "ops", sha256 = "{ops}" }}, {{ name = "tiny", sha256 = "{tiny}", budget_usd = 0.005 }}]
[providers.slow]
adapter = "openai"
base_url = "{slow}/v1"
rate_usd_per_s = 0.001
expected_run_s = 10
[providers.fast]
adapter = "openai"
base_url = "{fast}/v1"
rate_usd_per_s = 0.002
expected_run_s = 10
{SIM_PROVIDERS}{chat}[policies.slowjob]
kind = "single"
provider = "slowsim"
[routes.jobs]
kind = "jobs"
policy = "slowjob"
"#,
            ops = sha256_hex("ops-key"),
            tiny = sha256_hex("tiny-key"),
            chat = hedged_chat_route("chat", "slow", "fast", 150, ""),
        ),
    )
    .unwrap();
    cfg
}

/// Hedged whole replies (some hedges denied by the cap), hedged streams, a budget
/// refusal, a cancelled job and a 404.
async fn load(http: &reqwest::Client, base: &str) {
    let chat = format!("{base}/v1/chat/completions");
    let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    let mut stream_body = body.clone();
    stream_body["stream"] = true.into();
    for i in 0..8 {
        let b = if i % 2 == 0 { &body } else { &stream_body };
        let r = http.post(&chat).bearer_auth("ops-key").json(b).send().await.unwrap();
        assert_eq!(r.status(), 200, "request {i}");
        r.bytes().await.unwrap();
    }
    let r = http.post(&chat).bearer_auth("tiny-key").json(&body).send().await.unwrap();
    assert_eq!(r.status(), 429, "the tiny key's budget refuses: {}", r.text().await.unwrap());
    let r = http.post(&chat).bearer_auth("ops-key").json(&serde_json::json!({"model": "nope", "messages": []})).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let submit =
        http.post(format!("{base}/v1/jobs")).bearer_auth("ops-key").json(&serde_json::json!({"route": "jobs", "input": {"prompt": "x"}}));
    let job: serde_json::Value = submit.send().await.unwrap().json().await.unwrap();
    let id = job["id"].as_str().expect("a job id");
    let done: serde_json::Value =
        http.delete(format!("{base}/v1/jobs/{id}")).bearer_auth("ops-key").send().await.unwrap().json().await.unwrap();
    assert_eq!(done["state"], "cancelled", "{done}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_queries_and_rules_return_data_from_a_real_prometheus() {
    if !have_prometheus() {
        return;
    }
    let rules_dir = repo("deploy/prometheus");
    let checked = promtool(&["check", "rules", "recording.rules.yml", "alerts.rules.yml"], &rules_dir);
    let tested = promtool(&["test", "rules", "tests/alerts.test.yml"], &rules_dir);
    let cases = yaml(&rules_dir.join("tests/alerts.test.yml"));
    let (mut alert_cases, mut firing) = (0, BTreeSet::new());
    for t in cases["tests"].as_sequence().expect("tests") {
        for a in t["alert_rule_test"].as_sequence().expect("alert_rule_test") {
            alert_cases += 1;
            if a["exp_alerts"].as_sequence().is_some_and(|e| !e.is_empty()) {
                firing.insert(a["alertname"].as_str().unwrap_or_default().to_string());
            }
        }
    }

    let slow = MockServer::start(Flavor::OpenAi, Behaviour::timed(Duration::from_millis(600), Duration::from_millis(100))).await.unwrap();
    let fast = MockServer::start(Flavor::OpenAi, Behaviour::timed(Duration::from_millis(20), Duration::from_millis(30))).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (_gw, base) = start_gateway(&config(dir.path(), &slow.url(), &fast.url()));
    let http = reqwest::Client::new();

    let prom_cfg = dir.path().join("prometheus.yml");
    std::fs::write(&prom_cfg, scrape_config(base.trim_start_matches("http://"))).unwrap();
    promtool(&["check", "config", prom_cfg.to_str().unwrap()], dir.path());
    let port = free_port();
    let _prom = Spawned(
        Command::new("prometheus")
            .arg(format!("--config.file={}", prom_cfg.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("tsdb").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus starts"),
    );
    let prom = format!("http://127.0.0.1:{port}");
    // The load runs once Prometheus has scraped the idle gateway, so the rates see it.
    let up = Check { what: "up".into(), expr: r#"up{job="tailcut"} == 1"#.into(), labels: BTreeSet::new() };
    let deadline = Instant::now() + Duration::from_secs(60);
    while run(&http, &prom, &up).await.is_err() {
        assert!(Instant::now() < deadline, "Prometheus never scraped the gateway");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    load(&http, &base).await;

    let (dash, panels, variables) = dashboard_checks();
    let (rules, recording, alerts) = rule_checks();
    let all: Vec<&Check> = dash.iter().chain(&rules).collect();
    let alert_names: BTreeSet<String> = rules.iter().filter_map(|c| c.what.strip_prefix("alert ")).map(str::to_string).collect();
    assert_eq!(firing, alert_names, "every alert fires in at least one unit test");
    // Scrapes every second and rules evaluated every second: wait until every query has
    // data (rates need two scrapes, the rules an evaluation after them), at most 90 s.
    let deadline = Instant::now() + Duration::from_secs(90);
    let failures = loop {
        let mut failures = Vec::new();
        for c in &all {
            if let Err(e) = run(&http, &prom, c).await {
                failures.push(format!("{}: {e}\n    {}", c.what, c.expr.trim()));
            }
        }
        if failures.is_empty() || Instant::now() > deadline {
            break failures;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    assert!(failures.is_empty(), "{} of {} queries failed:\n{}", failures.len(), all.len(), failures.join("\n"));
    // The load shows: requests, hedges, receipts, a budget refusal and both quantiles
    // have real (finite, non-zero) values, not only zero-initialised series.
    let mut live = BTreeSet::new();
    for c in &dash {
        let series = run(&http, &prom, c).await.unwrap();
        let nonzero =
            series.iter().any(|s| s["value"][1].as_str().and_then(|v| v.parse::<f64>().ok()).is_some_and(|v| v.is_finite() && v != 0.0));
        if nonzero {
            live.insert(c.what.clone());
        }
        println!("{:<58} {}", c.what, show(&series));
    }
    for want in [
        "panel \"Requests by route and status\" A",
        "panel \"Winners by provider\" A",
        "panel \"Hedges by reason\" A",
        "panel \"Receipts by evidence\" A",
        "panel \"Refusals\" A",
        "panel \"Refusals\" B",
        "panel \"Spend against budgets\" A",
        "panel \"Request latency quantiles\" C",
        "panel \"Time to first token quantiles\" C",
    ] {
        assert!(live.contains(want), "{want} has no non-zero value after the load");
    }
    println!(
        "prometheus check: {} dashboard queries in {panels} panels and {variables} variables, {recording} recording rules and \
         {alerts} alert expressions returned data with their labels; promtool check rules: {}; promtool test rules: {} \
         alert cases over {} alerts: {}; {} of the dashboard's queries non-zero after the load",
        dash.len() - variables,
        checked.matches("SUCCESS").count().to_string() + " files ok",
        alert_cases,
        firing.len(),
        if tested.contains("SUCCESS") { "SUCCESS" } else { "?" },
        live.len()
    );
}
