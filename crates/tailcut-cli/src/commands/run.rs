//! `tailcut run`: jobs on configured providers under a policy (`login-check`, `bench` and
//! `cancel-audit` are in `provider_checks.rs`). Nothing is submitted to a paid provider (any HTTP provider not on
//! loopback) without `--go`; simulated
//! providers and local servers need none.

use crate::cli::RunArgs;
use crate::commands::{load_config, BadInput};
use crate::table::secs;
use anyhow::Context;
use serde_json::{json, Value};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tailcut_config::{spec_providers, Config};
use tailcut_core::engine::Hedger;
use tailcut_core::ledger::{BudgetGate, MemoryLedger};
use tailcut_core::policy::learned::LearnedPolicy;
use tailcut_core::policy::Policy;
use tailcut_core::trace::now_rfc3339;
use tailcut_core::validate::ValidatorRegistry;
use tailcut_core::JobRequest;
use tailcut_state::ledger::SqliteLedger;
use tokio::time::Instant;

/// Refuses when any of `names` is paid and `go` is false.
pub(crate) fn guard_spend(config: &Config, names: &[String], go: bool) -> anyhow::Result<()> {
    let paid: Vec<&str> = names.iter().filter(|n| config.provider(n).is_some_and(|p| p.is_paid())).map(String::as_str).collect();
    if !paid.is_empty() && !go {
        return Err(BadInput(format!(
            "refusing to submit to paid provider(s) {} without --go (simulated and loopback providers need none)",
            paid.join(", ")
        ))
        .into());
    }
    Ok(())
}

pub(crate) fn ledger(config: &Config) -> anyhow::Result<Arc<dyn BudgetGate>> {
    // An unwritable ledger path is bad input naming its key (exit 2).
    config.check_ledger_writable()?;
    Ok(match &config.budget.ledger {
        None => Arc::new(MemoryLedger::new(config.budget.limits)),
        Some(path) => {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
            }
            Arc::new(SqliteLedger::open(path, config.budget.limits)?)
        }
    })
}

pub(super) fn parse_input(text: &str) -> anyhow::Result<Value> {
    serde_json::from_str(text).map_err(|e| BadInput(format!("--input is not valid JSON: {e}")).into())
}

pub(super) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

pub fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let config = load_config(args.config.as_deref())?;
    let spec = config.policy(&args.policy).cloned().ok_or_else(|| {
        BadInput(format!(
            "{}: no policy `{}` (known: {})",
            config.source,
            args.policy,
            config.policies.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ")
        ))
    })?;
    guard_spend(&config, &spec_providers(&spec), args.go)?;
    let input = parse_input(&args.input)?;
    let rt = runtime()?;
    rt.block_on(async {
        let entries = config.live_entries()?;
        let validator = ValidatorRegistry::default().build(&config.validator)?;
        let trace_path = args.trace.clone().or_else(|| config.trace_path.clone());
        let trace = match &trace_path {
            Some(p) => Some(Arc::new(crate::commands::open_trace(p)?)),
            None => None,
        };
        let hedger = Hedger::new(entries, validator, ledger(&config)?, config.race, trace);
        let (policy, learned) = build_policy(&config, &spec, &hedger, args.model.as_deref())?;
        if args.concurrency > 1 {
            let code = load(&hedger, policy, learned.clone(), &input, args).await?;
            save_model(learned.as_deref(), args.model.as_deref())?;
            return Ok(code);
        }
        let mut latencies = Vec::new();
        let mut leaked = 0usize;
        let mut without_result = 0usize;
        let bar = crate::commands::progress(args.repeat as u64, &format!("{} requests", policy.label()), args.json || args.repeat < 2);
        for i in 0..args.repeat {
            if i > 0 && !args.wait.is_zero() {
                tokio::time::sleep(args.wait).await;
            }
            let request = JobRequest::new(format!("run-{}-{i}", now_rfc3339()), input.clone());
            let t0 = Instant::now();
            let outcome = match hedger.run(policy.as_ref(), request).await {
                Ok(o) => o,
                Err(e) => return Err(anyhow::Error::new(e).context(format!("request {i} refused"))),
            };
            let latency = outcome.latency.map_or(f64::INFINITY, |d| d.as_secs_f64());
            latencies.push(latency);
            let record = outcome.settled.wait().await.context("loser cleanup failed")?;
            if let Some(l) = &learned {
                l.observe_trace(&record, t0);
            }
            leaked += record.receipts.iter().filter(|r| r.leaked).count();
            if record.winner.is_none() {
                without_result += 1;
                report_failed_attempts(&record);
            }
            bar.inc(1);
            if args.json {
                println!("{}", serde_json::to_string(&record)?);
                continue;
            }
            // "projected" is what the budget reserved before each submit; when no submit
            // got through, say so rather than print a cost as if work had been done.
            let submitted = record.attempts.iter().filter(|a| a.submit_error.is_none()).count();
            let cost = if !record.attempts.is_empty() && submitted == 0 {
                format!("nothing submitted (every submit failed; {} was reserved against the budget)", record.projected_cost_micro_usd)
            } else if record.winner.is_none() {
                format!("no result; {} reserved against the budget before the submits", record.projected_cost_micro_usd)
            } else {
                format!("projected {}", record.projected_cost_micro_usd)
            };
            let mut text = format!(
                "{} {}: winner {} in {} s ({} attempt(s){}), {}",
                record.request_id,
                record.policy,
                record.winner.as_deref().unwrap_or("none"),
                secs(latency),
                record.attempts.len(),
                if record.decisions.cutover_fired {
                    ", cutover"
                } else if record.decisions.safety_hedge_fired {
                    ", safety hedge"
                } else if record.decisions.hedge_launched {
                    ", hedged"
                } else {
                    ""
                },
                cost
            );
            if let Some(c) = &record.decisions.learned {
                text.push_str(&format!("\n  learned: {} ({})", c.plan, c.reason));
                for b in &c.model {
                    text.push_str(&format!(
                        "\n    {}: {} samples, p50 {} s, p95 {} s, p99 {} s{}",
                        b.provider,
                        b.samples,
                        b.p50_s.map_or("-".into(), secs),
                        b.p95_s.map_or("-".into(), secs),
                        b.p99_s.map_or("-".into(), secs),
                        b.p_warm.map_or(String::new(), |w| format!(", P(warm) {w:.2}"))
                    ));
                }
            }
            for r in &record.receipts {
                text.push_str(&format!(
                    "\n  receipt {} {}: {} scope {:?}, leaked {}, ack {} ms, terminal {} ms{}",
                    r.provider,
                    r.job_id.as_deref().unwrap_or("-"),
                    r.evidence.wire(),
                    r.cancel_scope,
                    r.leaked,
                    r.ack_latency_ms().map_or("-".into(), |x| format!("{x:.0}")),
                    r.terminal_latency_ms().map_or("-".into(), |x| format!("{x:.0}")),
                    if r.note.is_empty() { String::new() } else { format!(" — {}", r.note) }
                ));
            }
            crate::commands::say(&bar, &text);
        }
        bar.finish_and_clear();
        if args.repeat > 1 && !args.json {
            let mut sorted = latencies.clone();
            tailcut_stats::sort_latencies(&mut sorted);
            println!(
                "\n{} requests: p50 {} s, p95 {} s, max {} s, {} without a valid result, {} leaked receipt(s){}",
                latencies.len(),
                secs(tailcut_stats::quantile_nearest(&sorted, 0.5)),
                secs(tailcut_stats::quantile_nearest(&sorted, 0.95)),
                secs(tailcut_stats::max_finite(&sorted)),
                sorted.iter().filter(|x| x.is_infinite()).count(),
                leaked,
                trace_path.map_or(String::new(), |p| format!("; trace appended to {}", p.display()))
            );
        }
        save_model(learned.as_deref(), args.model.as_deref())?;
        // Nothing useful came back: a failure of the command, so that a script does not
        // read "winner none" as success. With `--repeat`, partial failures are measured
        // data (the summary counts them, stderr names their causes).
        anyhow::Ok(if args.repeat > 0 && without_result == args.repeat { ExitCode::from(1) } else { ExitCode::SUCCESS })
    })
}

/// The policy to run, and the learned policy behind it when it learns.
pub(crate) type Built = (Arc<dyn Policy>, Option<Arc<LearnedPolicy>>);

/// The policy to run; for a learned one also the policy itself, to feed it each settled
/// request. A learned policy starts from `model` when that file exists.
pub(crate) fn build_policy(
    config: &Config,
    spec: &tailcut_config::PolicySpec,
    hedger: &Hedger,
    model: Option<&std::path::Path>,
) -> anyhow::Result<Built> {
    let Some(l) = spec.learned() else { return Ok((spec.build(hedger.providers())?, None)) };
    let start = match model.filter(|p| p.exists()) {
        Some(p) => {
            let m = tailcut_model::Model::load(p).map_err(|e| BadInput(e.to_string()))?;
            let names: Vec<&str> = m.providers.iter().map(|p| p.name.as_str()).collect();
            if names != l.providers.iter().map(String::as_str).collect::<Vec<_>>() {
                return Err(BadInput(format!(
                    "{}: the model covers providers {names:?}, the policy {:?} (fit one over the policy's providers)",
                    p.display(),
                    l.providers
                ))
                .into());
            }
            Some(m)
        }
        None => None,
    };
    let p = Arc::new(l.build(hedger.providers(), config.race.max_live, start)?);
    Ok((p.clone(), Some(p)))
}

/// Saves a learned policy's model to `path` (when both are given).
fn save_model(learned: Option<&LearnedPolicy>, path: Option<&std::path::Path>) -> anyhow::Result<()> {
    if let (Some(l), Some(p)) = (learned, path) {
        if let Some(m) = l.model() {
            m.save(p)?;
            eprintln!("tailcut: saved the learned model ({} updates) to {}", m.updates, p.display());
        }
    }
    Ok(())
}

/// Why each attempt of a request without a valid result failed, on stderr (stdout keeps
/// its format, JSON included).
fn report_failed_attempts(record: &tailcut_core::trace::RequestTrace) {
    for line in failed_attempts(record) {
        eprintln!("tailcut: {line}");
    }
}

/// The lines saying why each attempt of a request without a valid result failed (what
/// `tailcut run` prints after `tailcut: `, and the Python API's `ProviderError` message).
pub(crate) fn failed_attempts(record: &tailcut_core::trace::RequestTrace) -> Vec<String> {
    if record.attempts.is_empty() {
        return vec![format!("{}: no valid result: no attempt was sent", record.request_id)];
    }
    let mut lines = vec![format!("{}: no valid result from {} attempt(s):", record.request_id, record.attempts.len())];
    for a in &record.attempts {
        let cause = if !a.reasons.is_empty() {
            a.reasons.join("; ")
        } else if let Some(e) = &a.submit_error {
            format!("submit failed: {e}")
        } else {
            match a.outcome {
                Some(state) => format!("ended {}", state.wire()),
                None => "no result before the race ended".to_string(),
            }
        };
        lines.push(format!("  {} ({}): {cause}", a.provider, format!("{:?}", a.role).to_lowercase()));
    }
    lines
}

/// Open sockets of this process (Linux), for load reports.
fn open_sockets() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy().starts_with("socket:")))
                .count()
        })
        .unwrap_or(0)
}

async fn load(
    hedger: &Hedger,
    policy: Arc<dyn Policy>,
    learned: Option<Arc<LearnedPolicy>>,
    input: &Value,
    args: &RunArgs,
) -> anyhow::Result<ExitCode> {
    let sem = Arc::new(tokio::sync::Semaphore::new(args.concurrency));
    let peak = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (peak.clone(), done.clone());
        // `tailcut run` is not a server: this sampler and the jobs below are joined before
        // the command returns (the gateway's tracker is for `tailcut serve`).
        #[allow(clippy::disallowed_methods)]
        tokio::spawn(async move {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak.fetch_max(open_sockets(), std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let t0 = Instant::now();
    let mut tasks = Vec::with_capacity(args.repeat);
    for i in 0..args.repeat {
        let permit = sem.clone().acquire_owned().await?;
        let (hedger, policy, input, learned) = (hedger.clone(), policy.clone(), input.clone(), learned.clone());
        // Joined below, before the command returns.
        #[allow(clippy::disallowed_methods)]
        tasks.push(tokio::spawn(async move {
            let _permit = permit;
            let started = Instant::now();
            let out = hedger.run(policy.as_ref(), JobRequest::new(format!("load-{i}"), input)).await?;
            let latency = out.latency.map_or(f64::INFINITY, |d| d.as_secs_f64());
            let record = out.settled.wait().await;
            if let (Some(l), Some(r)) = (&learned, &record) {
                l.observe_trace(r, started);
            }
            anyhow::Ok((latency, record))
        }));
    }
    let (mut latencies, mut errors, mut receipts, mut leaked, mut losers_without_receipt) = (Vec::new(), 0usize, 0usize, 0usize, 0usize);
    let bar = crate::commands::progress(args.repeat as u64, "requests answered", args.json);
    for t in tasks {
        let joined = t.await;
        bar.inc(1);
        match joined {
            Ok(Ok((lat, Some(record)))) => {
                latencies.push(lat);
                receipts += record.receipts.len();
                leaked += record.receipts.iter().filter(|r| r.leaked).count();
                let with: Vec<&str> = record.receipts.iter().filter_map(|r| r.job_id.as_deref()).collect();
                losers_without_receipt += record
                    .attempts
                    .iter()
                    .filter(|a| a.outcome.is_none() && a.submit_error.is_none() && !a.job_id.as_deref().is_some_and(|j| with.contains(&j)))
                    .count();
            }
            _ => errors += 1,
        }
    }
    bar.finish_and_clear();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = sampler.await;
    let elapsed = t0.elapsed().as_secs_f64();
    tailcut_stats::sort_latencies(&mut latencies);
    let summary = json!({
        "requests": args.repeat, "concurrency": args.concurrency, "elapsed_s": elapsed, "errors": errors,
        "no_valid_result": latencies.iter().filter(|x| x.is_infinite()).count(),
        "p50_s": tailcut_stats::quantile_nearest(&latencies, 0.5), "p95_s": tailcut_stats::quantile_nearest(&latencies, 0.95),
        "receipts": receipts, "leaked": leaked, "losers_without_receipt": losers_without_receipt,
        "peak_open_sockets": peak.load(std::sync::atomic::Ordering::Relaxed),
    });
    if args.json {
        println!("{summary}");
    } else {
        println!(
            "{} requests, {} in flight: {:.2} s, {} errors, p50 {} s, p95 {} s, {} receipts ({} leaked, {} losers without a receipt), peak open sockets {}",
            args.repeat,
            args.concurrency,
            elapsed,
            errors,
            secs(summary["p50_s"].as_f64().unwrap_or(f64::INFINITY)),
            secs(summary["p95_s"].as_f64().unwrap_or(f64::INFINITY)),
            receipts,
            leaked,
            losers_without_receipt,
            summary["peak_open_sockets"]
        );
    }
    let none_valid = args.repeat > 0 && latencies.iter().filter(|x| x.is_infinite()).count() == args.repeat;
    Ok(if errors == 0 && !none_valid { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
