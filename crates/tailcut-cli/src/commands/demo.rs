//! `tailcut demo`: every configured policy raced over simulated providers on tokio's
//! paused clock (simulated minutes take microseconds), one table out.
//!
//! Each policy sees the same provider draws (fresh simulators with the same seeds), so
//! rows differ only by policy. Costs come from the simulators' own meters: *active* is
//! execution seconds × rate, *billed* is per-second worker sessions plus idle windows.
//! A learned policy (`adaptive`, `singler`, `auto`) learns as it would live: each
//! request's settled trace is fed to its model before later requests decide.

use crate::cli::{Arrivals, DemoArgs};
use crate::commands::{load_config, BadInput};
use crate::table::{miss_ci, secs, Table};
use anyhow::Context;
use indicatif::ProgressBar;
use serde::Serialize;
use std::process::ExitCode;
use std::sync::Arc;
use tailcut_config::{Config, PolicySpec};
use tailcut_core::engine::Hedger;
use tailcut_core::ledger::{BudgetLimits, MemoryLedger};
use tailcut_core::trace::TraceWriter;
use tailcut_core::validate::ValidatorRegistry;
use tailcut_core::{JobRequest, MicroUsd, Provider};
use tailcut_sim::SimProvider;
use tailcut_stats::{max_finite, quantile_nearest, sort_latencies, wilson, SplitMix64};
use tokio::time::{sleep_until, Duration, Instant};

/// One policy's row.
#[derive(Debug, Serialize)]
struct Row {
    policy: String,
    #[serde(skip)]
    kind: tailcut_core::PolicyKind,
    n: usize,
    p50_s: Option<f64>,
    p95_s: Option<f64>,
    /// Only when n ≥ 100.
    p99_s: Option<f64>,
    max_s: Option<f64>,
    miss_60s: u64,
    miss_60s_ci95: [f64; 2],
    deadline_s: f64,
    misses: u64,
    misses_ci95: [f64; 2],
    hedge_rate: f64,
    attempts_per_req: f64,
    active_usd_per_req: f64,
    billed_usd_per_req: f64,
    receipts: u64,
    leaked: u64,
    no_result: u64,
}

struct RequestOutcome {
    latency_s: f64,
    hedged: bool,
    attempts: usize,
    receipts: u64,
    leaked: u64,
}

fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// Simulated arrival offsets (seconds) for `n` requests.
fn arrivals(args: &DemoArgs) -> Vec<Duration> {
    let mean = args.interarrival.as_secs_f64();
    let mut rng = SplitMix64::new(args.seed ^ 0x5EED);
    let mut t = 0.0;
    (0..args.requests)
        .map(|i| {
            if i > 0 {
                t += match args.arrivals {
                    Arrivals::Fixed => mean,
                    Arrivals::Poisson => {
                        let u = ((rng.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
                        -mean * u.ln()
                    }
                };
            }
            Duration::from_secs_f64(t)
        })
        .collect()
}

/// The policies to race: the config's, plus a single-provider baseline for every
/// provider that has none, baselines first.
fn policies(config: &Config) -> Vec<PolicySpec> {
    let mut singles: Vec<PolicySpec> =
        config.policies.iter().map(|(_, p)| p.clone()).filter(|p| matches!(p, PolicySpec::Single { .. })).collect();
    for p in &config.providers {
        let spec = PolicySpec::Single { provider: p.name.clone() };
        if !singles.contains(&spec) {
            singles.push(spec);
        }
    }
    singles.extend(config.policies.iter().map(|(_, p)| p.clone()).filter(|p| !matches!(p, PolicySpec::Single { .. })));
    singles
}

fn build_sims(config: &Config, args: &DemoArgs) -> anyhow::Result<(Vec<Provider>, Vec<SimProvider>)> {
    let mut entries = Vec::new();
    let mut sims = Vec::new();
    for p in &config.providers {
        let Some((profile, seed)) = p.sim_profile() else {
            return Err(BadInput(format!(
                "{}: the demo runs on simulated providers only; provider `{}` uses an HTTP adapter",
                config.source, p.name
            ))
            .into());
        };
        let mut profile = profile.clone();
        if let Some(leak) = args.leak_p {
            if !(0.0..=1.0).contains(&leak) {
                return Err(BadInput(format!("--leak-p {leak}: expected a probability between 0 and 1")).into());
            }
            profile.leak_p = leak;
        }
        let sim = SimProvider::new(&p.name, profile, seed ^ args.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        entries.push(Provider { name: p.name.clone(), api: Arc::new(sim.clone()), pricing: p.pricing });
        sims.push(sim);
    }
    Ok((entries, sims))
}

fn race_policy(
    config: &Config,
    args: &DemoArgs,
    spec: &PolicySpec,
    trace: Option<Arc<TraceWriter>>,
    bar: &ProgressBar,
) -> anyhow::Result<Row> {
    let (entries, sims) = build_sims(config, args)?;
    let validator = ValidatorRegistry::default().build(&config.validator)?;
    let hedger = Hedger::new(entries, validator, Arc::new(MemoryLedger::new(BudgetLimits::UNLIMITED)), config.race, trace);
    let (policy, learned): (Arc<dyn tailcut_core::policy::Policy>, _) = match spec.learned() {
        Some(l) => {
            let p = Arc::new(l.build(hedger.providers(), config.race.max_live, None)?);
            (p.clone(), Some(p))
        }
        None => (spec.build(hedger.providers())?, None),
    };
    let label = policy.label().to_string();
    let kind = policy.kind();
    bar.set_message(label.clone());
    let offsets = arrivals(args);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build()?;
    let outcomes: Vec<RequestOutcome> = runtime.block_on(async {
        let t0 = Instant::now();
        let mut tasks = Vec::with_capacity(offsets.len());
        for (i, offset) in offsets.iter().enumerate() {
            sleep_until(t0 + *offset).await;
            let (hedger, policy, learned) = (hedger.clone(), policy.clone(), learned.clone());
            let request = JobRequest::new(format!("demo-{i}"), serde_json::json!({"text": "hello", "n": i}));
            // Joined below, before the demo returns.
            #[allow(clippy::disallowed_methods)]
            tasks.push(tokio::spawn(async move {
                let started = Instant::now();
                let outcome = hedger.run(policy.as_ref(), request).await?;
                let latency_s = outcome.latency.map_or(f64::INFINITY, |d| d.as_secs_f64());
                let (hedged, attempts) = (outcome.decisions.hedged(), outcome.attempts);
                let trace = outcome.settled.wait().await;
                if let (Some(l), Some(t)) = (&learned, &trace) {
                    l.observe_trace(t, started);
                }
                let receipts = trace.as_ref().map_or(0, |t| t.receipts.len() as u64);
                let leaked = trace.as_ref().map_or(0, |t| t.receipts.iter().filter(|r| r.leaked).count() as u64);
                anyhow::Ok(RequestOutcome { latency_s, hedged, attempts, receipts, leaked })
            }));
        }
        let mut out = Vec::with_capacity(tasks.len());
        for t in tasks {
            out.push(t.await.context("request task failed")??);
            bar.inc(1);
        }
        // Let every simulated worker reach its idle timeout so billing is complete.
        tokio::time::sleep(Duration::from_secs(3600)).await;
        anyhow::Ok(out)
    })?;

    let n = outcomes.len();
    let mut lat: Vec<f64> = outcomes.iter().map(|o| o.latency_s).collect();
    sort_latencies(&mut lat);
    let miss = |d: f64| lat.iter().filter(|&&l| l > d).count() as u64;
    let (active, billed) = sims.iter().fold((MicroUsd::ZERO, MicroUsd::ZERO), |(a, b), s| {
        let bill = s.billing();
        (a + bill.active, b + bill.billed)
    });
    let per_req = |m: MicroUsd| if n == 0 { 0.0 } else { m.as_usd() / n as f64 };
    let (m60, md) = (miss(60.0), miss(args.deadline));
    let ci60 = wilson(m60, n as u64);
    let cid = wilson(md, n as u64);
    Ok(Row {
        policy: label,
        kind,
        n,
        p50_s: finite(quantile_nearest(&lat, 0.5)),
        p95_s: finite(quantile_nearest(&lat, 0.95)),
        p99_s: if n >= 100 { finite(quantile_nearest(&lat, 0.99)) } else { None },
        max_s: finite(max_finite(&lat)),
        miss_60s: m60,
        miss_60s_ci95: [ci60.0, ci60.1],
        deadline_s: args.deadline,
        misses: md,
        misses_ci95: [cid.0, cid.1],
        hedge_rate: if n == 0 { 0.0 } else { outcomes.iter().filter(|o| o.hedged).count() as f64 / n as f64 },
        attempts_per_req: if n == 0 { 0.0 } else { outcomes.iter().map(|o| o.attempts).sum::<usize>() as f64 / n as f64 },
        active_usd_per_req: per_req(active),
        billed_usd_per_req: per_req(billed),
        receipts: outcomes.iter().map(|o| o.receipts).sum(),
        leaked: outcomes.iter().map(|o| o.leaked).sum(),
        no_result: lat.iter().filter(|l| l.is_infinite()).count() as u64,
    })
}

fn opt(v: Option<f64>) -> String {
    v.map_or("-".into(), secs)
}

fn meaning(rows: &[Row]) -> Option<String> {
    let base = rows.iter().find(|r| r.kind == tailcut_core::PolicyKind::Single)?;
    let best = rows
        .iter()
        .filter(|r| !matches!(r.kind, tailcut_core::PolicyKind::Single | tailcut_core::PolicyKind::Race) && r.p95_s.is_some())
        .min_by(|a, b| (a.misses, a.billed_usd_per_req.to_bits()).cmp(&(b.misses, b.billed_usd_per_req.to_bits())))?;
    let (bp95, hp95) = (base.p95_s?, best.p95_s?);
    Some(format!(
        "{} cuts p95 from {:.1} s to {:.1} s ({:+.0}%) and misses over {:.0} s from {}/{} to {}/{} versus {}, launching a second provider on {:.0}% of requests, at {:+.0}% billed cost per request. Times are simulated seconds.",
        best.policy,
        bp95,
        hp95,
        (hp95 / bp95 - 1.0) * 100.0,
        best.deadline_s,
        base.misses,
        base.n,
        best.misses,
        best.n,
        base.policy,
        best.hedge_rate * 100.0,
        (best.billed_usd_per_req / base.billed_usd_per_req - 1.0) * 100.0
    ))
}

pub fn run(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    let config = load_config(args.config.as_deref())?;
    if config.providers.is_empty() {
        return Err(BadInput(format!("{}: no providers configured", config.source)).into());
    }
    let trace = match &args.trace {
        Some(p) => Some(Arc::new(crate::commands::open_trace(p)?)),
        None => None,
    };
    let specs = policies(&config);
    let bar = crate::commands::progress((specs.len() * args.requests) as u64, "racing", args.json);
    let mut rows = Vec::new();
    for spec in &specs {
        rows.push(race_policy(&config, args, spec, trace.clone(), &bar)?);
    }
    bar.finish_and_clear();

    if args.json {
        crate::output::print_json(&rows)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "tailcut demo — {} requests per policy over simulated providers ({}), {} arrivals every {}, seed {}",
        args.requests,
        config.providers.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", "),
        match args.arrivals {
            Arrivals::Fixed => "fixed",
            Arrivals::Poisson => "Poisson",
        },
        humantime::format_duration(args.interarrival),
        args.seed
    );
    println!();
    let miss_title = format!("miss>{}s (95% CI)", args.deadline);
    let mut t = Table::new(&[
        "policy",
        "n",
        "p50 s",
        "p95 s",
        "p99 s",
        "max s",
        &miss_title,
        "hedge rate",
        "active $/req",
        "billed $/req",
        "leaked",
    ]);
    for r in &rows {
        t.row(vec![
            r.policy.clone(),
            r.n.to_string(),
            opt(r.p50_s),
            opt(r.p95_s),
            opt(r.p99_s),
            opt(r.max_s),
            miss_ci(r.misses, r.n as u64),
            format!("{:.0}%", r.hedge_rate * 100.0),
            format!("{:.4}", r.active_usd_per_req),
            format!("{:.4}", r.billed_usd_per_req),
            format!("{}/{}", r.leaked, r.receipts),
        ]);
    }
    print!("{}", t.render());
    println!();
    if let Some(m) = meaning(&rows) {
        println!("{m}");
    }
    println!("Active = execution seconds × rate; billed = per-second worker sessions plus idle windows (queued cancels free). Leaked = receipts without proof the loser stopped / all receipts. `-` = no valid result at that quantile (failed and invalid results count as +∞).");
    Ok(ExitCode::SUCCESS)
}
