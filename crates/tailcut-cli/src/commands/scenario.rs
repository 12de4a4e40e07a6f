//! `tailcut scenario list|run|sweep`: simulated request streams for what paired cold
//! rounds cannot show, and random worlds for `auto`.

use crate::cli::{AutoModeArg, ScenarioCommand, ScenarioRunArgs, ScenarioSweepArgs};
use crate::commands::BadInput;
use crate::table::{secs, Table};
use std::process::ExitCode;
use tailcut_core::PolicyKind;
use tailcut_replay::scenario::worlds::AutoMode;
use tailcut_replay::scenario::{describe, fixed_envelope, tail_load_svg, Scenario, ScenarioRow, NAMES};

pub fn run(cmd: &ScenarioCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ScenarioCommand::List => {
            for n in NAMES {
                println!("{n:<12} {}", describe(n));
            }
            Ok(ExitCode::SUCCESS)
        }
        ScenarioCommand::Run(a) => run_one(a),
        ScenarioCommand::Sweep(a) => sweep(a),
    }
}

fn sweep(a: &ScenarioSweepArgs) -> anyhow::Result<ExitCode> {
    use tailcut_replay::scenario::worlds;
    if a.worlds == 0 || a.worlds > 100_000 {
        return Err(BadInput(format!("--worlds {}: expected 1 to 100000", a.worlds)).into());
    }
    if a.requests < 40 || a.requests > 1_000_000 {
        return Err(BadInput(format!("--requests {}: expected 40 to 1000000", a.requests)).into());
    }
    let threads = if a.threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { a.threads };
    let bar = crate::commands::delayed_bar(a.worlds as u64, "{spinner} worlds [{bar:30}] {pos}/{len} ({eta})");
    let mode = auto_mode(a.auto);
    let results = worlds::sweep(a.seed, a.worlds, a.requests, threads, mode, &|done| bar.set(done as u64));
    bar.finish();
    let sum = worlds::summarise(a.seed, a.requests, &results);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "auto": mode, "summary": sum, "worlds": results }))?);
        return Ok(ExitCode::SUCCESS);
    }
    if a.each {
        let mut t = Table::new(&[
            "world",
            "auto p95 s",
            "auto $",
            "auto miss",
            "frozen",
            "frozen p95 s",
            "frozen $",
            "auto ran frozen",
            "best",
            "regret",
            "dominated",
        ]);
        for r in &results {
            t.row(vec![
                r.index.to_string(),
                opt(r.auto.p95_s),
                format!("{:.5}", r.auto.active_usd_per_req),
                format!("{}/{}", r.auto_misses, r.n),
                r.frozen.policy.clone(),
                opt(r.frozen.p95_s),
                format!("{:.5}", r.frozen.active_usd_per_req),
                format!("{:.0}%", r.auto_ran_frozen * 100.0),
                r.best.policy.clone(),
                format!("{:+.4}", r.loss_auto - r.loss_best),
                if r.dominated { "DOMINATED".into() } else { String::new() },
            ]);
        }
        println!("{}", t.render());
    }
    let n = results.first().map_or(0, |r| r.n);
    println!(
        "Scenario sweep: {} random worlds (seed {}), {} requests each; measured on the second half ({n} requests); auto at each world's deadline, miss target 5 %, up to 1 extra attempt per request{}",
        sum.worlds,
        sum.seed,
        sum.requests,
        match mode {
            worlds::AutoMode::Model => "; auto from its model alone",
            worlds::AutoMode::Guarded => "; auto guarded (miss controller and plan records, from what it launched)",
            worlds::AutoMode::Paired => "; auto paired (experts over the fixed plans, each priced on its own run of the stream, controller, records)",
        }
    );
    println!(
        "miss target kept (misses <= 0.05*n + 2*sqrt(0.0475*n)): {}/{} feasible worlds ({} violations); {} worlds where no fixed plan meets 5 % ({} where auto misses beyond noise more than the best fixed plan)",
        sum.feasible - sum.miss_violations,
        sum.feasible,
        sum.miss_violations,
        sum.worlds - sum.feasible,
        sum.infeasible_worse
    );
    println!(
        "undominated by the frozen plan (within 2 % or better on p95 and active cost, > 5 % better on one): {}/{} (the hindsight-best fixed plan: {}/{}; the plan the same rule freezes from a quarter fewer requests: {}/{}; auto ran the frozen plan on a median {:.0} % of the evaluated requests)",
        sum.worlds - sum.dominated,
        sum.worlds,
        sum.worlds - sum.best_dominated,
        sum.worlds,
        sum.worlds - sum.earlier_frozen_dominated,
        sum.worlds,
        sum.auto_ran_frozen.median * 100.0
    );
    let mut t = Table::new(&["auto against", "median", "p90", "worst"]);
    let f = |x: f64| if x.is_finite() { format!("{x:.3}") } else { "-".into() };
    for (label, s) in [
        ("p95 / frozen plan's", sum.p95_vs_frozen),
        ("active cost / frozen plan's", sum.cost_vs_frozen),
        ("p95 / hindsight-best's", sum.p95_vs_best),
        ("active cost / hindsight-best's", sum.cost_vs_best),
        ("miss rate", sum.auto_miss_rate),
        ("regret per request vs hindsight-best", sum.regret_vs_best),
        ("regret per request vs frozen plan", sum.regret_vs_frozen),
    ] {
        t.row(vec![label.into(), f(s.median), f(s.p90), f(s.worst)]);
    }
    println!("{}", t.render());
    println!("loss per request = (miss + min(active $ / cost_ref, 1)) / 2, cost_ref = two attempts on the dearest provider running to the deadline; regret = auto's mean loss minus the plan's");
    Ok(ExitCode::SUCCESS)
}

fn opt(v: Option<f64>) -> String {
    v.map_or("-".into(), secs)
}

fn auto_mode(a: AutoModeArg) -> AutoMode {
    match a {
        AutoModeArg::Model => AutoMode::Model,
        AutoModeArg::Guarded => AutoMode::Guarded,
        AutoModeArg::Paired => AutoMode::Paired,
    }
}

fn shown(rows: &[ScenarioRow], all: bool) -> Vec<&ScenarioRow> {
    if all {
        return rows.iter().collect();
    }
    let fixed: Vec<&ScenarioRow> = rows.iter().filter(|r| !r.tuned && !r.kind.is_learned()).collect();
    let mut best: Vec<&ScenarioRow> = fixed.clone();
    best.sort_by(|a, b| a.p95_s.unwrap_or(f64::INFINITY).total_cmp(&b.p95_s.unwrap_or(f64::INFINITY)));
    let mut cheap = fixed;
    cheap.retain(|r| r.miss_rate <= 0.05);
    cheap.sort_by(|a, b| a.active_usd_per_req.total_cmp(&b.active_usd_per_req));
    // The best single provider comes first: the row every hedging figure is read against
    // ("p99 cut by 84 %" needs the p99 it was cut from).
    let single = best.iter().copied().find(|r| r.kind == PolicyKind::Single);
    let mut out: Vec<&ScenarioRow> = Vec::new();
    for r in single.into_iter().chain(best.into_iter().take(5)).chain(cheap.into_iter().take(3)) {
        if !out.iter().any(|o| o.policy == r.policy) {
            out.push(r);
        }
    }
    out.extend(rows.iter().filter(|r| r.tuned || r.kind.is_learned()));
    out
}

fn run_one(a: &ScenarioRunArgs) -> anyhow::Result<ExitCode> {
    crate::commands::check_output("--plot", a.plot.as_deref())?;
    let sc = Scenario::new(&a.name, a.seed, a.requests)
        .ok_or_else(|| BadInput(format!("unknown scenario `{}` (known: {})", a.name, NAMES.join(", "))))?;
    if a.requests < 20 {
        return Err(BadInput("--requests: expected at least 20".into()).into());
    }
    let result = sc.evaluate_with(auto_mode(a.auto));
    if let Some(path) = &a.plot {
        let curves = sc.tail_vs_load();
        tail_load_svg(
            path,
            &format!("{}: p99 against extra load (seed {}, second half of {} requests)", a.name, a.seed, a.requests),
            &curves,
        )?;
        eprintln!("tailcut: wrote {}", path.display());
        for (name, pts) in curves[1..].iter().filter(|_| a.verbose) {
            let worst = pts.iter().map(|(x, y)| y - fixed_envelope(&curves[0].1, *x)).fold(f64::NEG_INFINITY, f64::max);
            eprintln!("tailcut: {name}: worst p99 minus the fixed-delay envelope at the same or lower load: {worst:+.3} s");
            for (x, y) in pts {
                let env = fixed_envelope(&curves[0].1, *x);
                eprintln!("tailcut:   extra {:.2}%: p99 {y:.3} s, fixed-delay envelope {env:.3} s ({:+.3} s)", x * 100.0, y - env);
            }
        }
    }
    if a.json {
        crate::output::print_json(&result)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "Scenario {} (seed {}, {} requests; rows measured on the second half; miss at {} s; auto {}): {}",
        result.scenario,
        result.seed,
        result.requests,
        result.deadline_s,
        match result.auto {
            AutoMode::Model => "from its model alone",
            AutoMode::Guarded => "guarded",
            AutoMode::Paired => "paired, causal",
        },
        describe(&a.name)
    );
    let mut t = Table::new(&["policy", "p50 s", "p95 s", "p99 s", "miss", "hedge rate", "extra/req", "active $/req", "billed $/req"]);
    for r in shown(&result.rows, a.all) {
        t.row(vec![
            r.policy.clone(),
            opt(r.p50_s),
            opt(r.p95_s),
            opt(r.p99_s),
            format!("{:.1}%", r.miss_rate * 100.0),
            format!("{:.0}%", r.hedge_rate * 100.0),
            format!("{:.3}", r.extra_per_req),
            format!("{:.5}", r.active_usd_per_req),
            format!("{:.5}", r.billed_usd_per_req),
        ]);
    }
    print!("{}", t.render());
    Ok(ExitCode::SUCCESS)
}
