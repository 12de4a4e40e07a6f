//! `tailcut model fit|show`: build the online provider model from traces, and print one
//! (`model calibration` is in `calibration.rs`).

use crate::cli::{ModelCommand, ModelFitArgs, ModelShowArgs};
use crate::commands::{load_config, BadInput};
use crate::table::Table;
use serde_json::json;
use std::io::BufRead;
use std::process::ExitCode;
use tailcut_core::policy::learned::observations;
use tailcut_core::trace::{RequestTrace, REQUEST_KIND};
use tailcut_model::model::{gap_label, GAP_EDGES_S};
use tailcut_model::{Model, ModelConfig};
use tailcut_replay::learned::fit_rounds;
use tailcut_replay::rounds::{load, LoadOptions};
use tailcut_replay::traces::{reference_observations, EVIDENCE_KINDS};

pub fn run(cmd: &ModelCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ModelCommand::Fit(a) => fit(a),
        ModelCommand::Show(a) => show(a),
        ModelCommand::Calibration(a) => crate::commands::calibration::run(a),
    }
}

/// Feeds the `tailcut_request` records of `path` to the model, with each provider's idle
/// gap taken from the records' times. Returns how many were read.
fn feed_requests(model: &mut Model, path: &std::path::Path) -> anyhow::Result<u64> {
    let names: Vec<String> = model.providers.iter().map(|p| p.name.clone()).collect();
    let file = std::fs::File::open(path).map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
    let mut last_served: Vec<Option<f64>> = vec![None; names.len()];
    let mut n = 0u64;
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| BadInput(format!("{}:{}: {e}", path.display(), i + 1)))?;
        if !line.contains(REQUEST_KIND) {
            continue;
        }
        let trace: RequestTrace = match serde_json::from_str(&line) {
            Ok(t) => t,
            Err(e) => return Err(BadInput(format!("{}:{}: not a {REQUEST_KIND} record: {e}", path.display(), i + 1)).into()),
        };
        if trace.kind != REQUEST_KIND {
            continue;
        }
        // The record is written when the race ends: t0 = ts − the race's length.
        let end = humantime::parse_rfc3339(&trace.ts)
            .map_err(|e| BadInput(format!("{}:{}: ts `{}`: {e}", path.display(), i + 1, trace.ts)))?
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let length = trace.attempts.iter().filter_map(|a| a.wall_ms.map(|w| a.submit_offset_ms + w)).fold(0.0, f64::max) / 1000.0;
        let t0 = end - length;
        let gaps: Vec<Option<f64>> = (0..names.len())
            .map(|p| {
                let a = trace.attempts.iter().find(|a| a.provider == names[p])?;
                last_served[p].map(|t| (t0 + a.submit_offset_ms / 1000.0 - t).max(0.0))
            })
            .collect();
        model.observe_request(&observations(&trace, &names, &gaps));
        for a in &trace.attempts {
            if let (Some(p), Some(true), Some(w)) = (names.iter().position(|x| *x == a.provider), a.valid, a.wall_ms) {
                last_served[p] = Some(t0 + (a.submit_offset_ms + w) / 1000.0);
            }
        }
        n += 1;
    }
    Ok(n)
}

/// Feeds the reference tool's request records of `path` (`hedged_request`,
/// `state_aware_request`, `single_request`) to the model: winners exactly, losers
/// right-censored where they were cancelled. Returns (records used, records naming a
/// provider the configuration lacks).
fn feed_reference(model: &mut Model, path: &std::path::Path) -> anyhow::Result<(u64, u64)> {
    let names: Vec<String> = model.providers.iter().map(|p| p.name.clone()).collect();
    let file = std::fs::File::open(path).map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
    let (mut used, mut foreign) = (0u64, 0u64);
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| BadInput(format!("{}:{}: {e}", path.display(), i + 1)))?;
        if !EVIDENCE_KINDS.iter().any(|k| line.contains(k)) {
            continue;
        }
        let Ok(rec) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        match reference_observations(&rec, &names).map_err(|e| BadInput(format!("{}:{}: {e}", path.display(), i + 1)))? {
            Some(obs) => {
                model.observe_request(&obs);
                used += 1;
            }
            None if rec.get("kind").and_then(|k| k.as_str()).is_some_and(|k| EVIDENCE_KINDS.contains(&k)) => foreign += 1,
            None => {}
        }
    }
    Ok((used, foreign))
}

/// What to say when `path` taught the model nothing, by what it holds instead.
fn nothing_usable(paths: &[std::path::PathBuf], foreign: u64, names: &[String]) -> String {
    let files = paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
    let kinds: std::collections::BTreeSet<String> = paths
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .flat_map(|text| {
            text.lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?.get("kind")?.as_str().map(str::to_string))
                .collect::<Vec<_>>()
        })
        .collect();
    let mut msg = format!(
        "{files}: nothing to learn from: no paired rounds (`round`, `tailcut_round`), tailcut request records (`tailcut_request`) or the reference tool's request records (`hedged_request`, `state_aware_request`, `single_request`)"
    );
    if foreign > 0 {
        msg.push_str(&format!(
            "; {foreign} request record(s) name providers outside the configuration's {names:?} (pass --config with them)"
        ));
    }
    if !kinds.is_empty() {
        msg.push_str(&format!("; it holds {}", kinds.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")));
    }
    if kinds.contains("forced_cancel") {
        msg.push_str(". Cancel audits (`forced_cancel`) record cancels, not latencies");
    }
    msg.push_str(". Fit from paired rounds (e.g. fixtures/gpuhedge-2026-07/moss_rounds.jsonl, or `tailcut bench` output), live requests (fixtures/gpuhedge-2026-07/live_hedge.jsonl, state_aware.jsonl) or a trace that `tailcut run`/`serve` wrote");
    msg
}

fn fit(a: &ModelFitArgs) -> anyhow::Result<ExitCode> {
    if !(a.half_life.is_finite() && a.half_life >= 1.0) {
        return Err(BadInput("--half-life: expected at least 1 observation".into()).into());
    }
    let config = load_config(a.config.as_deref())?;
    let providers: Vec<(String, f64, f64)> = config.providers.iter().map(|p| (p.name.clone(), p.rate_usd_per_s, p.idle_window_s)).collect();
    if providers.is_empty() {
        return Err(BadInput(format!("{}: no providers configured", config.source)).into());
    }
    let mut model = Model::new(&providers, ModelConfig { half_life: a.half_life, ..ModelConfig::default() });
    let names: Vec<String> = providers.iter().map(|p| p.0.clone()).collect();
    let (mut rounds, mut requests, mut reference, mut foreign) = (0usize, 0u64, 0u64, 0u64);
    for path in &a.traces {
        let loaded =
            load(std::slice::from_ref(path), &names, LoadOptions { skip_bad_lines: false, threads: 1, ..LoadOptions::default() }, &|_| {})?;
        rounds += loaded.rounds.len();
        fit_rounds(&mut model, &loaded.rounds);
        requests += feed_requests(&mut model, path)?;
        let (used, other) = feed_reference(&mut model, path)?;
        reference += used;
        foreign += other;
    }
    if rounds == 0 && requests == 0 && reference == 0 {
        return Err(BadInput(nothing_usable(&a.traces, foreign, &names)).into());
    }
    model.save(&a.out)?;
    let live = if reference > 0 { format!(", {reference} reference request records (losers right-censored)") } else { String::new() };
    eprintln!("tailcut: fitted {} from {rounds} paired rounds, {requests} requests{live}", a.out.display());
    Ok(ExitCode::SUCCESS)
}

fn q(s: &tailcut_model::sketch::DecayedSketch, x: f64) -> Option<f64> {
    s.quantile_reached(x)
}

/// Seconds since the provider last served, by this machine's clock, when the model
/// says when that was (a time ahead of the clock counts as now).
fn idle_now_s(p: &tailcut_model::model::ProviderModel) -> Option<f64> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).ok()?.as_secs_f64();
    p.last_served_unix_s.map(|t| (now - t).max(0.0))
}

fn summary(m: &Model) -> serde_json::Value {
    let providers: Vec<serde_json::Value> = m
        .providers
        .iter()
        .map(|p| {
            json!({
                "provider": p.name,
                "attempts": p.samples(),
                "latency_s": {"p50": q(&p.latency, 0.5), "p90": q(&p.latency, 0.9), "p95": q(&p.latency, 0.95), "p99": q(&p.latency, 0.99), "effective_n": p.latency.effective(), "unseen_tail": p.latency.masses_known().1},
                "warm_latency_s": {"p50": q(&p.latency_warm, 0.5), "p95": q(&p.latency_warm, 0.95), "n": p.latency_warm.samples()},
                "cold_latency_s": {"p50": q(&p.latency_cold, 0.5), "p95": q(&p.latency_cold, 0.95), "n": p.latency_cold.samples()},
                "queue_s": {"p50": q(&p.queue, 0.5), "p90": q(&p.queue, 0.9), "n": p.queue.samples()},
                "p_queued_at_poll": p.has_queue_signal().then(|| p.queued_at_poll.rate(0.0, 0.0)),
                "failure_rate": p.failed.rate(0.0, 0.0),
                "invalid_rate": p.invalid.rate(0.0, 0.0),
                "last_served_unix_s": p.last_served_unix_s,
                "idle_gap_now_s": idle_now_s(p),
                "p_warm_now": idle_now_s(p).and_then(|g| p.p_warm(g)),
                "p_warm_by_gap": (0..=GAP_EDGES_S.len()).map(|k| json!({
                    "gap": gap_label(k),
                    "n": p.warm_by_gap[k].samples(),
                    "p_warm": (p.warm_by_gap[k].samples() > 0).then(|| p.warm_by_gap[k].rate(0.0, 0.0)),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let pairs: Vec<serde_json::Value> = m
        .pairs
        .iter()
        .map(|p| {
            json!({
                "a": m.providers[p.a].name, "b": m.providers[p.b].name, "n": p.samples(),
                "p_a_slow": p.a_slow.rate(0.0, 0.0), "p_b_slow": p.b_slow.rate(0.0, 0.0),
                "p_both_slow": p.both_slow.rate(0.0, 0.0), "lift": p.lift(1.0 - m.config.slow_quantile),
            })
        })
        .collect();
    json!({"format": m.format, "version": m.version, "half_life": m.config.half_life, "slow_quantile": m.config.slow_quantile, "updates": m.updates, "providers": providers, "pairs": pairs})
}

fn opt(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.2}"))
}

fn show(a: &ModelShowArgs) -> anyhow::Result<ExitCode> {
    if let Some(url) = &a.from_gateway {
        return show_live(a, url);
    }
    if !a.model.exists() {
        return Err(BadInput(format!(
            "{path}: no such model file. Fit one from traces: `tailcut model fit TRACE... -o {path}` (paired rounds such as \
             fixtures/gpuhedge-2026-07/moss_rounds.jsonl, live request records, or a trace `tailcut run`/`serve` wrote); or show the live \
             models of a running gateway's learned routes: `tailcut model show --from-gateway http://127.0.0.1:8080` (its GET /admin/models; \
             an admin key via --key or TAILCUT_ADMIN_KEY unless auth = \"none\")",
            path = a.model.display()
        ))
        .into());
    }
    let m = Model::load(&a.model).map_err(|e| BadInput(e.to_string()))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&summary(&m))?);
        return Ok(ExitCode::SUCCESS);
    }
    print_model(&a.model.display().to_string(), &m);
    Ok(ExitCode::SUCCESS)
}

/// `--from-gateway`: the live models of a gateway's learned routes (`GET /admin/models`).
fn show_live(a: &ModelShowArgs, url: &str) -> anyhow::Result<ExitCode> {
    let base = url.trim_end_matches('/');
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        return Err(BadInput(format!("--from-gateway `{url}`: expected an http:// or https:// URL")).into());
    }
    let key = a.key.clone().or_else(|| std::env::var("TAILCUT_ADMIN_KEY").ok()).filter(|k| !k.is_empty());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (status, body) = rt.block_on(async {
        let client = reqwest::Client::builder().timeout(std::time::Duration::from_secs(10)).build()?;
        let mut req = client.get(format!("{base}/admin/models"));
        if let Some(k) = &key {
            req = req.bearer_auth(k);
        }
        let resp = req.send().await?;
        anyhow::Ok((resp.status(), resp.text().await?))
    })?;
    if !status.is_success() {
        let why = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| body.chars().take(200).collect());
        return Err(BadInput(format!("{base}/admin/models: HTTP {status}: {why}")).into());
    }
    let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| anyhow::anyhow!("{base}/admin/models: not JSON: {e}"))?;
    let entries = v["models"].as_array().cloned().unwrap_or_default();
    let mut out = Vec::new();
    for e in &entries {
        let key = e["key"].as_str().unwrap_or("?");
        let m = Model::from_json(&e["model"].to_string()).map_err(|err| anyhow::anyhow!("{base}: model {key}: {err}"))?;
        out.push((key.to_string(), e["policy"].as_str().unwrap_or("?").to_string(), m));
    }
    if a.json {
        let all: Vec<serde_json::Value> = out.iter().map(|(k, p, m)| json!({"key": k, "policy": p, "model": summary(m)})).collect();
        println!("{}", serde_json::to_string_pretty(&json!({"gateway": base, "models": all}))?);
        return Ok(ExitCode::SUCCESS);
    }
    if out.is_empty() {
        println!("{base}: no learned routes (no route uses an adaptive, singler or auto policy)");
    }
    for (i, (k, p, m)) in out.iter().enumerate() {
        if i > 0 {
            println!();
        }
        print_model(&format!("{k} ({p}) at {base}"), m);
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints one model as tables under a title.
fn print_model(title: &str, m: &Model) {
    println!("Provider model {title} (version {}, half-life {} observations, {} updates)", m.version, m.config.half_life, m.updates);
    let mut t = Table::new(&[
        "provider",
        "attempts",
        "p50 s",
        "p90 s",
        "p95 s",
        "p99 s",
        "unseen tail",
        "warm p50",
        "cold p50",
        "queue p50",
        "P(queued@poll)",
        "fail",
        "invalid",
    ]);
    for p in &m.providers {
        t.row(vec![
            p.name.clone(),
            p.samples().to_string(),
            opt(q(&p.latency, 0.5)),
            opt(q(&p.latency, 0.9)),
            opt(q(&p.latency, 0.95)),
            opt(q(&p.latency, 0.99)),
            format!("{:.0}%", p.latency.masses_known().1 * 100.0),
            opt(q(&p.latency_warm, 0.5)),
            opt(q(&p.latency_cold, 0.5)),
            opt(q(&p.queue, 0.5)),
            if p.has_queue_signal() { format!("{:.0}%", p.queued_at_poll.rate(0.0, 0.0) * 100.0) } else { "-".into() },
            format!("{:.1}%", p.failed.rate(0.0, 0.0) * 100.0),
            format!("{:.1}%", p.invalid.rate(0.0, 0.0) * 100.0),
        ]);
    }
    print!("{}", t.render());
    println!(
        "unseen tail = attempts cancelled long past every latency seen (more than {}x the largest): when they would have ended is unknown, and plans count them as never ending",
        tailcut_model::sketch::UNPLACED_BEYOND
    );
    println!(
        "\nP(warm) against idle gap (observations in brackets); idle now = since the provider last served, as the model last saved it"
    );
    let mut cols = vec!["provider".to_string(), "idle now".to_string(), "P(warm) now".to_string()];
    cols.extend((0..=GAP_EDGES_S.len()).map(gap_label));
    let refs: Vec<&str> = cols.iter().map(String::as_str).collect();
    let mut t = Table::new(&refs);
    for p in &m.providers {
        let idle = idle_now_s(p);
        let mut row = vec![
            p.name.clone(),
            idle.map_or("-".into(), |g| format!("{g:.0} s")),
            idle.and_then(|g| p.p_warm(g)).map_or("-".into(), |w| format!("{w:.2}")),
        ];
        row.extend(p.warm_by_gap.iter().map(|r| {
            if r.samples() == 0 {
                "-".into()
            } else {
                format!("{:.2} ({})", r.rate(0.0, 0.0), r.samples())
            }
        }));
        t.row(row);
    }
    print!("{}", t.render());
    println!("\nSlow together (slow = above the provider's p{:.0}); lift = P(both) / (P(a)·P(b))", m.config.slow_quantile * 100.0);
    let mut t = Table::new(&["pair", "n", "P(a slow)", "P(b slow)", "P(both)", "lift"]);
    for p in &m.pairs {
        t.row(vec![
            format!("{}+{}", m.providers[p.a].name, m.providers[p.b].name),
            p.samples().to_string(),
            format!("{:.2}", p.a_slow.rate(0.0, 0.0)),
            format!("{:.2}", p.b_slow.rate(0.0, 0.0)),
            format!("{:.2}", p.both_slow.rate(0.0, 0.0)),
            format!("{:.2}", p.lift(1.0 - m.config.slow_quantile)),
        ]);
    }
    print!("{}", t.render());
}
