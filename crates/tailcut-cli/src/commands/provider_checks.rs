//! The commands that probe configured providers one at a time: `login-check` (a
//! read-only credential call per provider), `bench` (the same job on every provider, side
//! by side) and `cancel-audit` (submit, cancel, and record the evidence). Nothing is
//! submitted to a paid provider without `--go`.

use super::run::{guard_spend, ledger, parse_input, runtime};
use crate::cli::{BenchArgs, CancelAuditArgs, LoginCheckArgs};
use crate::commands::{load_config, BadInput};
use crate::table::Table;
use serde_json::{json, Value};
use std::process::ExitCode;
use std::time::Duration;
use tailcut_config::ApiConfig;
use tailcut_core::trace::{now_rfc3339, TraceWriter};
use tailcut_core::validate::{judge, Validator, ValidatorRegistry};
use tailcut_core::{CancelContext, JobRequest, JobState, Provider};
use tokio::time::Instant;
pub fn login_check(args: &LoginCheckArgs) -> anyhow::Result<ExitCode> {
    let config = load_config(args.config.as_deref())?;
    let rt = runtime()?;
    let rows = rt.block_on(async {
        let mut rows = Vec::new();
        for p in &config.providers {
            let (credential, result) = match &p.api {
                ApiConfig::Sim { .. } => ("-".to_string(), Ok("simulated: no credentials needed".to_string())),
                ApiConfig::Http(h) => {
                    let cred = h
                        .key_env()
                        .map_or("-".to_string(), |v| format!("{v} ({})", if std::env::var_os(v).is_some() { "set" } else { "not set" }));
                    (cred, h.check_credentials(&p.name).await)
                }
            };
            rows.push((p.name.clone(), p.kind().name().to_string(), credential, result));
        }
        rows
    });
    let ok = rows.iter().all(|r| r.3.is_ok());
    if args.json {
        let v: Vec<Value> = rows
            .iter()
            .map(|(n, a, c, r)| json!({"provider": n, "adapter": a, "credential": c, "ok": r.is_ok(), "detail": r.as_ref().map_or_else(|e| e.to_string(), |d| d.clone())}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let mut t = Table::new(&["provider", "adapter", "credential", "check", "detail"]);
        for (n, a, c, r) in &rows {
            t.row(vec![
                n.clone(),
                a.clone(),
                c.clone(),
                if r.is_ok() { "ok".into() } else { "FAILED".into() },
                r.as_ref().map_or_else(|e| e.to_string(), |d| d.clone()),
            ]);
        }
        print!("{}", t.render());
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

async fn one_arm(entry: &Provider, validator: &dyn Validator, request: &JobRequest, cap: Duration) -> (Value, Option<f64>) {
    let t0 = Instant::now();
    match entry.api.submit(request).await {
        Err(e) => (
            json!({"state": "SUBMIT_FAILED", "wall_s": 0.0, "valid": false, "validation_reasons": [e.to_string()], "metrics": {}, "error": e.to_string()}),
            None,
        ),
        Ok(job) => {
            let r = job.result(t0 + cap).await;
            let wall = (t0.elapsed().as_secs_f64() * 100.0).round() / 100.0;
            let v = judge(validator, &r);
            if r.state != JobState::Completed && !r.state.is_terminal() {
                let _ =
                    job.cancel(CancelContext { reason: "bench cap".into(), epoch: t0, sent_at: Instant::now(), state_before: None }).await;
            }
            let arm = json!({"state": r.state.wire(), "wall_s": wall, "valid": v.valid, "validation_reasons": v.reasons, "metrics": r.metrics, "error": r.error});
            (arm, v.valid.then_some(wall))
        }
    }
}

pub fn bench(args: &BenchArgs) -> anyhow::Result<ExitCode> {
    let config = load_config(args.config.as_deref())?;
    let names: Vec<String> = config.providers.iter().map(|p| p.name.clone()).collect();
    guard_spend(&config, &names, args.go)?;
    let input = parse_input(&args.input)?;
    let rt = runtime()?;
    rt.block_on(async {
        let entries = config.live_entries()?;
        let validator = ValidatorRegistry::default().build(&config.validator)?;
        let ledger = ledger(&config)?;
        let writer = TraceWriter::append(&args.out).map_err(|e| BadInput(format!("--out: {e}")))?;
        let bar = crate::commands::progress(args.rounds, "paired rounds", false);
        for round in 1..=args.rounds {
            let started = now_rfc3339();
            let request = JobRequest::new(format!("bench-{round}"), input.clone());
            for e in &entries {
                ledger.charge(&e.projected_charge(&request.request_id, true))?;
            }
            let arms = futures::future::join_all(entries.iter().map(|e| one_arm(e, validator.as_ref(), &request, config.race.cap))).await;
            let mut providers = serde_json::Map::new();
            let mut winner: Option<(String, f64)> = None;
            for (e, (mut arm, valid_wall)) in entries.iter().zip(arms) {
                if args.warm && valid_wall.is_some() {
                    let (warm, w) = one_arm(e, validator.as_ref(), &request, config.race.cap).await;
                    arm["warm_wall_s"] = json!(w.or(warm["wall_s"].as_f64()));
                }
                if let Some(w) = valid_wall {
                    if winner.as_ref().is_none_or(|(_, b)| w < *b) {
                        winner = Some((e.name.clone(), w));
                    }
                }
                providers.insert(e.name.clone(), arm);
            }
            let record = json!({
                "kind": "round", "stage": "bench", "round_id": round, "block": (round - 1) / args.rounds_per_block.max(1) + 1,
                "winner": winner.as_ref().map(|w| w.0.clone()), "winner_wall_s": winner.as_ref().map(|w| w.1),
                "providers": providers, "started": started, "ts": now_rfc3339()
            });
            writer.write(&record)?;
            bar.inc(1);
            let line = entries
                .iter()
                .map(|e| {
                    format!("{} {}", e.name, record["providers"][&e.name]["wall_s"].as_f64().map_or("-".into(), |w| format!("{w:.2}s")))
                })
                .collect::<Vec<_>>()
                .join(", ");
            crate::commands::say(&bar, &format!("round {round}: {line}"));
            if round < args.rounds {
                tokio::time::sleep(args.wait).await;
            }
        }
        bar.finish_and_clear();
        println!("wrote {} round(s) to {}; replay them with: tailcut replay {}", args.rounds, args.out.display(), args.out.display());
        anyhow::Ok(ExitCode::SUCCESS)
    })
}

pub fn cancel_audit(args: &CancelAuditArgs) -> anyhow::Result<ExitCode> {
    let config = load_config(args.config.as_deref())?;
    let names: Vec<String> =
        if args.providers.is_empty() { config.providers.iter().map(|p| p.name.clone()).collect() } else { args.providers.clone() };
    for n in &names {
        if config.provider(n).is_none() {
            return Err(BadInput(format!("--providers: no provider `{n}` in {}", config.source)).into());
        }
    }
    guard_spend(&config, &names, args.go)?;
    let rt = runtime()?;
    rt.block_on(async {
        let entries: Vec<Provider> = config.live_entries()?.into_iter().filter(|e| names.contains(&e.name)).collect();
        let ledger = ledger(&config)?;
        let writer = TraceWriter::append(&args.out).map_err(|e| BadInput(format!("--out: {e}")))?;
        let mut matrix: std::collections::BTreeMap<(String, String), [u32; 4]> = Default::default();
        let mut first = true;
        let total = entries.len() as u64 * 2 * u64::from(args.repeats);
        let bar = crate::commands::progress(total, "forced cancels", false);
        for e in &entries {
            for phase in ["early", "late"] {
                for attempt in 1..=args.repeats {
                    if !first {
                        tokio::time::sleep(args.wait).await;
                    }
                    first = false;
                    let request = JobRequest::new(format!("audit-{}-{phase}-{attempt}", e.name), json!({"text": "cancel audit"}));
                    ledger.charge(&e.projected_charge(&request.request_id, true))?;
                    let t0 = Instant::now();
                    let job = match e.api.submit(&request).await {
                        Ok(j) => j,
                        Err(err) => {
                            eprintln!("tailcut: {} submit failed: {err}", e.name);
                            continue;
                        }
                    };
                    if phase == "early" {
                        tokio::time::sleep(args.early).await;
                    } else {
                        let until = t0 + args.late;
                        while Instant::now() < until {
                            if job.status().await.ok() == Some(JobState::Running) {
                                tokio::time::sleep(Duration::from_millis(1500).min(args.late / 10)).await;
                                break;
                            }
                            tokio::time::sleep(Duration::from_millis(500).min(args.late / 20)).await;
                        }
                    }
                    let state = job.status().await;
                    let sent = Instant::now();
                    let receipt = match job
                        .cancel(CancelContext {
                            reason: format!("cancel audit ({phase})"),
                            epoch: t0,
                            sent_at: sent,
                            state_before: state.as_ref().ok().copied(),
                        })
                        .await
                    {
                        Ok(r) => r,
                        Err(err) => tailcut_core::Receipt::cancel_failed(
                            &e.name,
                            job.job_id(),
                            sent.duration_since(t0).as_secs_f64() * 1000.0,
                            &err.to_string(),
                        ),
                    };
                    let cell = matrix.entry((e.name.clone(), phase.to_string())).or_default();
                    cell[0] += 1;
                    cell[1] += u32::from(receipt.terminal_status.is_some() && !receipt.leaked);
                    cell[2] += u32::from(receipt.leaked);
                    cell[3] += u32::from(receipt.was_running);
                    writer.write(&json!({
                        "kind": "forced_cancel", "provider": e.name, "phase": phase, "attempt": attempt,
                        "cancel_at_s": sent.duration_since(t0).as_secs_f64(),
                        "state_before_cancel": state.map_or_else(|err| format!("status_error:{err}"), |s| s.wire().to_string()),
                        "receipt": receipt, "ts": now_rfc3339()
                    }))?;
                    bar.inc(1);
                    let note = if receipt.note.is_empty() { String::new() } else { format!(" ({})", receipt.note) };
                    let line = format!("{} {phase} #{attempt}: {} leaked={}{note}", e.name, receipt.evidence.wire(), receipt.leaked);
                    crate::commands::say(&bar, &line);
                }
            }
        }
        bar.finish_and_clear();
        let summary: serde_json::Map<String, Value> = matrix
            .iter()
            .map(|((p, ph), c)| (format!("{p}/{ph}"), json!({"attempts": c[0], "terminal": c[1], "leaked": c[2], "was_running": c[3]})))
            .collect();
        writer.write(&json!({"kind": "cancel_audit_summary", "matrix": summary, "ts": now_rfc3339()}))?;
        println!("wrote {}; summarise with: tailcut report {}", args.out.display(), args.out.display());
        anyhow::Ok(ExitCode::SUCCESS)
    })
}
