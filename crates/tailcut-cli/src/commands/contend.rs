//! `tailcut contend ...`: contention runs, single agents, reports, comparisons,
//! Kubernetes manifests and placement plans.

use crate::cli::{
    ContendAgentArgs, ContendCommand, ContendCompareArgs, ContendK8sArgs, ContendMatrixArgs, ContendPlanArgs, ContendReportArgs,
    ContendRunArgs, ContendVerifyArgs, HttpAgentArgs,
};
use crate::commands::BadInput;
use anyhow::Context;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use tailcut_contend::agent::{unix_ms, AgentError, AgentKind, AgentSpec, Samples, Window};
use tailcut_contend::plan::{plan_k8s, AgentsFile, GpuPool, GroupMode, Plan, Planner};
use tailcut_contend::protocol::{self, Mode, RunSettings};
use tailcut_contend::report::{compare, RunReport};
use tailcut_contend::stats::VerdictThresholds;
use tailcut_contend::workload;

pub fn run(cmd: &ContendCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ContendCommand::Run(a) => run_cmd(a),
        ContendCommand::Agent(a) => agent(a),
        ContendCommand::Report(a) => report(a),
        ContendCommand::Compare(a) => compare_cmd(a),
        ContendCommand::K8s(a) => k8s(a),
        ContendCommand::Plan(a) => plan(a),
        ContendCommand::Matrix(a) => matrix(a),
        ContendCommand::Verify(a) => verify(a),
    }
}

/// Parses `kind`, `kind:size` or `kind:size x batch`.
fn parse_agent(text: &str) -> Result<AgentSpec, BadInput> {
    AgentSpec::parse(text).map_err(|e| BadInput(format!("--{}", e.to_string().trim_start_matches("invalid agent settings: "))))
}

/// A coordinator failure: bad settings and missing CUDA exit 2, the rest 1.
fn protocol_error(e: protocol::ProtocolError) -> anyhow::Error {
    match e {
        protocol::ProtocolError::Invalid(m) => anyhow::Error::new(BadInput(m.to_string())),
        protocol::ProtocolError::Agent { ref message, .. } if message.contains("no CUDA device") || message.contains("--features cuda") => {
            anyhow::Error::new(BadInput(e.to_string()))
        }
        other => anyhow::Error::new(other),
    }
}

fn mode(text: &str) -> Result<Mode, BadInput> {
    Mode::parse(text)
        .ok_or_else(|| BadInput(format!("--mode `{text}`: expected same-core, separate-cores, solo, time-slicing, mps, mig or dedicated")))
}

fn agent_error(e: AgentError) -> anyhow::Error {
    match e {
        AgentError::Cuda { .. } => anyhow::Error::new(e),
        other => BadInput(other.to_string()).into(),
    }
}

fn run_cmd(a: &ContendRunArgs) -> anyhow::Result<ExitCode> {
    let mut agents = a.agents.iter().map(|t| parse_agent(t)).collect::<Result<Vec<_>, _>>()?;
    for spec in agents.iter_mut().filter(|s| s.kind == AgentKind::Http) {
        set_http(spec, &a.http);
    }
    set_think(&mut agents, a.think_ms);
    if let Some(bad) = a.expect_share.iter().find(|s| **s > 1.0) {
        return Err(BadInput(format!("--expect-share {bad}: a share of the device is between 0 and 1")).into());
    }
    if a.expect_share.len() > 1 && a.expect_share.len() != agents.len() {
        return Err(BadInput(format!(
            "--expect-share: give one share for every agent or one per agent ({} agents, {} shares)",
            agents.len(),
            a.expect_share.len()
        ))
        .into());
    }
    if !a.expect_share.is_empty() && a.mode == "solo" {
        return Err(BadInput("--expect-share compares the shared arm with the solo arm: use a sharing --mode".into()).into());
    }
    let settings = RunSettings {
        agents,
        mode: mode(&a.mode)?,
        trials: a.trials,
        warmup: a.warmup,
        duration: a.duration,
        iterations: a.iterations,
        bootstrap_rounds: a.bootstrap,
        thresholds: VerdictThresholds { median_tolerance: a.median_tolerance, tail_factor: a.tail_factor },
        devices: a.devices.clone(),
        program: std::env::current_exe().context("cannot find the tailcut executable to start agents")?,
        seed: a.seed,
    };
    let quiet = a.json;
    // One step per agent run: each agent solo, then all of them together, per trial.
    let runs = u64::from(settings.trials) * (settings.agents.len() as u64 + u64::from(settings.mode != Mode::Solo));
    let bar = crate::commands::progress(runs, "contention runs", quiet);
    let mut report = protocol::run(&settings, &step_reporter(&bar, quiet)).map_err(protocol_error)?;
    bar.finish_and_clear();
    if !a.expect_share.is_empty() {
        report.check_shares(&a.expect_share, a.share_tolerance);
    }
    if let Some(path) = &a.plot {
        tailcut_contend::plot::contention_svg(path, &report)?;
        eprintln!("tailcut: wrote {}", path.display());
    }
    if !a.include_samples {
        report.samples.clear();
    }
    emit(a.json, None, &report, || report.render())?;
    if !report.shares_ok() {
        let off: Vec<&str> = report.shares.iter().filter(|s| !s.ok).map(|s| s.agent.as_str()).collect();
        eprintln!("tailcut: measured share differs from the configured share for {}: the share is not enforced", off.join(", "));
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn set_http(spec: &mut AgentSpec, http: &HttpAgentArgs) {
    spec.url.clone_from(&http.url);
    spec.model.clone_from(&http.model);
    spec.rate_per_s = http.rate;
}

/// What a long run reports after each step: the step on `bar`, or, without a bar (not a
/// terminal), a line on standard error unless `quiet` (JSON output).
fn step_reporter(bar: &indicatif::ProgressBar, quiet: bool) -> impl Fn(&str) + '_ {
    move |line| {
        if bar.is_hidden() {
            if !quiet {
                eprintln!("  {line}");
            }
        } else {
            bar.set_message(line.to_string());
            bar.inc(1);
        }
    }
}

/// Writes `result` to `json_out` (`--json-out`) when given, then prints it as JSON
/// (`--json`) or as `text()`.
fn emit<T: serde::Serialize>(json: bool, json_out: Option<&Path>, result: &T, text: impl FnOnce() -> String) -> anyhow::Result<()> {
    if let Some(path) = json_out {
        std::fs::write(path, serde_json::to_string_pretty(result)?).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if json {
        println!("{}", serde_json::to_string_pretty(result)?);
    } else {
        print!("{}", text());
    }
    Ok(())
}

fn set_think(agents: &mut [AgentSpec], think_ms: u64) {
    for spec in agents.iter_mut().filter(|s| s.kind == AgentKind::AgentLoop) {
        spec.think_ms = think_ms;
    }
}

fn agent(a: &ContendAgentArgs) -> anyhow::Result<ExitCode> {
    let kind = AgentKind::parse(&a.kind).ok_or_else(|| BadInput(format!("--kind `{}`: unknown agent kind", a.kind)))?;
    let mut spec = AgentSpec::new(kind);
    if let Some(size) = a.size {
        spec.size = size;
    }
    if let Some(b) = a.batch {
        spec.batch = b;
    }
    spec.device.clone_from(&a.device);
    set_http(&mut spec, &a.http);
    if let Some(t) = a.think_ms {
        spec.think_ms = t;
    }
    let window = Window {
        start_at_unix_ms: a.start_at_ms.unwrap_or_else(unix_ms),
        warmup: Duration::from_millis(a.warmup_ms),
        duration: Duration::from_millis(a.duration_ms),
        max_iterations: a.iterations,
    };
    let mut samples = workload::run(&spec, &window, a.cpu).map_err(agent_error)?;
    samples.name = Some(a.name.clone().unwrap_or_else(|| kind.name().to_string()));
    samples.arm.clone_from(&a.arm);
    samples.trial = a.trial;
    let text = serde_json::to_string(&samples)?;
    match &a.out {
        Some(path) => std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?,
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())?;
            out.flush()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn sample_files(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("cannot read {}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "json"))
                .collect();
            entries.sort();
            out.extend(entries);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

fn report(a: &ContendReportArgs) -> anyhow::Result<ExitCode> {
    let mut samples: Vec<Samples> = Vec::new();
    for f in sample_files(&a.paths)? {
        let text = read_input(&f)?;
        let s: Samples = serde_json::from_str(&text).map_err(|e| BadInput(format!("{}: not a sample file: {e}", f.display())))?;
        if s.name.is_none() || s.arm.is_none() {
            return Err(BadInput(format!("{}: sample file without --name/--arm", f.display())).into());
        }
        samples.push(s);
    }
    let mut names: Vec<String> = Vec::new();
    for s in &samples {
        if let Some(n) = &s.name {
            if !names.contains(n) {
                names.push(n.clone());
            }
        }
    }
    let mut r = protocol::assemble(&samples, &names, &[], a.bootstrap, 1, &VerdictThresholds::default());
    r.mode = "from sample files".into();
    r.trials = samples.iter().filter_map(|s| s.trial).max().unwrap_or(1);
    r.timer_overhead_ns = workload::timer_overhead_ns();
    r.finish_timer_check();
    if let Some(path) = &a.plot {
        tailcut_contend::plot::contention_svg(path, &r)?;
    }
    r.samples.clear();
    emit(a.json, None, &r, || r.render())?;
    Ok(ExitCode::SUCCESS)
}

fn read_report(path: &Path) -> anyhow::Result<RunReport> {
    let text = read_input(path)?;
    serde_json::from_str(&text).map_err(|e| BadInput(format!("{}: not a `contend run --json` result: {e}", path.display())).into())
}

fn compare_cmd(a: &ContendCompareArgs) -> anyhow::Result<ExitCode> {
    let (ra, rb) = (read_report(&a.a)?, read_report(&a.b)?);
    let label = |p: &Path| p.file_stem().map_or("?".into(), |s| s.to_string_lossy().to_string());
    print!("{}", compare(&ra, &rb, &label(&a.a), &label(&a.b)));
    Ok(ExitCode::SUCCESS)
}

fn k8s(a: &ContendK8sArgs) -> anyhow::Result<ExitCode> {
    let mut agents = a.agents.iter().map(|t| parse_agent(t)).collect::<Result<Vec<_>, _>>()?;
    for s in agents.iter_mut().filter(|s| s.kind == AgentKind::Http) {
        s.url.clone_from(&a.url);
    }
    let settings = tailcut_contend::k8s::K8sSettings {
        mode: mode(&a.mode)?,
        replicas: a.replicas,
        agents,
        gpu: a.gpu.clone(),
        mig_layout: a.mig_layout.clone(),
        namespace: a.namespace.clone(),
        plugin_namespace: a.plugin_namespace.clone(),
        image: a.image.clone(),
        warmup: a.warmup,
        duration: a.duration,
        node: a.node.clone(),
    };
    let yaml = tailcut_contend::k8s::generate(&settings).map_err(|e| BadInput(e.to_string()))?;
    match &a.out {
        Some(p) => {
            std::fs::write(p, yaml).with_context(|| format!("cannot write {}", p.display()))?;
            eprintln!("tailcut: wrote {}", p.display());
        }
        None => print!("{yaml}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// An input file's text; a file that cannot be read is bad input (exit 2), named.
fn read_input(path: impl AsRef<Path>) -> Result<String, BadInput> {
    let path = path.as_ref();
    std::fs::read_to_string(path).map_err(|e| BadInput(format!("{}: cannot read: {e}", path.display())))
}

fn read_toml<T: serde::de::DeserializeOwned>(path: &Path) -> anyhow::Result<T> {
    let text = read_input(path)?;
    toml::from_str(&text).map_err(|e| BadInput(format!("{}: {}", path.display(), tailcut_config::plain_message(&e.to_string()))).into())
}

/// The `--gpus` file's counts in range, the failing one named by file and key: a pool
/// of at most 100,000 GPUs, and at most 48 agents per shared GPU (MPS's client limit on
/// Volta and later; time-slicing past it only adds tail).
fn check_gpus(path: &Path, pool: &GpuPool) -> Result<(), BadInput> {
    for (key, v, lo, hi) in [("count", pool.count, 1, 100_000), ("max_share", pool.max_share, 1, 48)] {
        if !(lo..=hi).contains(&v) {
            return Err(BadInput(format!("{}: key `{key}`: expected an integer from {lo} to {hi}, got {v}", path.display())));
        }
    }
    Ok(())
}

/// Every number of an `--agents` file in range, the failing one named by file and key
/// (`agents[i].memory_gb`): a NaN, a negative or a 1e308 is a typo, not a requirement.
fn check_agents(path: &Path, file: &AgentsFile) -> Result<(), BadInput> {
    const HOUR_MS: f64 = 3.6e6;
    for (i, ag) in file.agents.iter().enumerate() {
        let mut checks = vec![
            ("memory_gb", ag.memory_gb, 0.0, 10_000.0, "GB"),
            ("p99_objective_ms", ag.p99_objective_ms, 0.0, HOUR_MS, "ms (0: objective_x_solo × solo p99)"),
            ("solo_p99_ms", ag.solo_p99_ms, 0.0, HOUR_MS, "ms (0: from a --table)"),
            ("mig_scaling", ag.mig_scaling, 0.0, 10.0, "(an exponent)"),
        ];
        if let Some(x) = ag.objective_x_solo {
            checks.push(("objective_x_solo", x, 0.0, 1e4, "(a multiple of the solo p99)"));
        }
        for (key, v, lo, hi, unit) in checks {
            if !(v.is_finite() && v >= lo && v <= hi) {
                let got = if v.abs() >= 1e9 { format!("{v:e}") } else { v.to_string() };
                return Err(BadInput(format!(
                    "{}: key `agents[{i}].{key}` (agent `{}`): expected a number from {lo} to {hi} {unit}, got {got}",
                    path.display(),
                    ag.name
                )));
            }
        }
    }
    Ok(())
}

fn plan(a: &ContendPlanArgs) -> anyhow::Result<ExitCode> {
    let mut agents: AgentsFile = read_toml(&a.agents)?;
    check_agents(&a.agents, &agents)?;
    let gpus: GpuPool = read_toml(&a.gpus)?;
    check_gpus(&a.gpus, &gpus)?;
    for t in &a.table {
        let table: AgentsFile = read_toml(t)?;
        if !table.agents.is_empty() {
            return Err(BadInput(format!("{}: a --table holds interference factors, not [[agents]]", t.display())).into());
        }
        agents.apply_table(&table);
    }
    for m in &a.measured {
        let r = read_report(m)?;
        let mode = match r.mode.as_str() {
            "time-slicing" => GroupMode::TimeSlicing,
            "mps" => GroupMode::Mps,
            other => return Err(BadInput(format!("{}: measured mode `{other}` is not time-slicing or mps", m.display())).into()),
        };
        let table = agents.interference.modes.entry(mode.name().to_string()).or_default();
        for victim in &r.agents {
            let Some(f) = victim.degradation.as_ref().map(|d| d.p99.unwrap_or(d.p95)) else { continue };
            let vk = victim.spec.as_ref().map_or(victim.agent.clone(), |s| s.kind.name().to_string());
            for aggressor in r.agents.iter().filter(|x| x.agent != victim.agent) {
                let ak = aggressor.spec.as_ref().map_or(aggressor.agent.clone(), |s| s.kind.name().to_string());
                table.insert(format!("{vk}<-{ak}"), f);
            }
        }
    }
    let mut planner = Planner::new(agents, gpus).and_then(|p| p.with_confidence(a.confidence)).map_err(|e| BadInput(e.to_string()))?;
    let plan = planner.plan().map_err(|e| BadInput(e.to_string()))?;
    if let Some(path) = &a.k8s {
        std::fs::write(path, plan_k8s(&plan).map_err(|e| BadInput(e.to_string()))?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("tailcut: wrote {}", path.display());
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&plan)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "Plan: {} GPU(s) of {} ({}; memory lower bound {}{}), at {:.0}% confidence",
        plan.gpus_used,
        plan.model,
        plan.method,
        plan.lower_bound,
        if plan.optimal { ", optimal" } else { "" },
        plan.confidence * 100.0
    );
    for g in &plan.gpus {
        println!("\nGPU {} — {}", g.gpu, g.mode.name());
        for s in &g.seats {
            println!(
                "  {:<20} {:<10} p99 {:>8.2} ms{} bound {:>8.2} ms ≤ {:>8.2} ms  margin {:>7}  P(met) {:>4}  {:>6.1} GB",
                s.agent,
                s.profile.clone().unwrap_or_default(),
                s.predicted_p99_ms,
                s.expected_error.map_or("      ".to_string(), |e| format!(" ±{:>3.0}%", e * 100.0)),
                s.bound_p99_ms.unwrap_or(s.predicted_p99_ms),
                s.objective_ms,
                s.margin.map_or("-".to_string(), |m| format!("{:+.1}%", m * 100.0)),
                s.p_objective.map_or("-".to_string(), |p| format!("{:.0}%", p * 100.0)),
                s.memory_gb
            );
        }
    }
    println!("\nWhy");
    for e in &plan.explanations {
        println!("  {e}");
    }
    if !plan.noise.is_empty() {
        println!("\nNoise: the table's error bars are wide");
        for n in &plan.noise {
            println!("  {n}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Unique names for matrix agents: the text given to `--agent`, then `#2`, `#3` for
/// copies (the interference class is the part before `#`).
fn matrix_names(texts: &[String]) -> Vec<String> {
    let mut seen: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    texts
        .iter()
        .map(|t| {
            let n = seen.entry(t.trim()).or_insert(0);
            *n += 1;
            if *n == 1 {
                t.trim().to_string()
            } else {
                format!("{}#{n}", t.trim())
            }
        })
        .collect()
}

fn matrix(a: &ContendMatrixArgs) -> anyhow::Result<ExitCode> {
    if let Some(from) = &a.from {
        let text = read_input(from)?;
        let report: tailcut_contend::matrix::MatrixReport =
            serde_json::from_str(&text).map_err(|e| BadInput(format!("{}: not a `contend matrix --json` result: {e}", from.display())))?;
        let command = format!("tailcut contend matrix (read from {})", from.display());
        return write_matrix(a, &report, &command);
    }
    let mut agents = a.agents.iter().map(|t| parse_agent(t)).collect::<Result<Vec<_>, _>>()?;
    if let Some(h) = agents.iter().find(|s| s.kind == AgentKind::Http) {
        return Err(BadInput(format!("--agent {}: the matrix measures agents that share this machine's processor", h.kind.name())).into());
    }
    set_think(&mut agents, a.window.think_ms);
    // Check the outputs before a run that takes minutes, not after.
    for path in [&a.table, &a.heatmap, &a.output.json_out].into_iter().flatten() {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if !dir.is_dir() {
            return Err(BadInput(format!("{}: directory {} does not exist", path.display(), dir.display())).into());
        }
    }
    let names = matrix_names(&a.agents);
    let n = agents.len();
    let settings = tailcut_contend::matrix::MatrixSettings {
        run: RunSettings {
            agents,
            mode: mode(&a.mode)?,
            trials: a.trials,
            warmup: a.window.warmup,
            duration: a.window.duration,
            iterations: None,
            bootstrap_rounds: a.bootstrap,
            thresholds: VerdictThresholds::default(),
            devices: a.devices.clone(),
            program: std::env::current_exe().context("cannot find the tailcut executable to start agents")?,
            seed: a.seed,
        },
        names,
        triples: a.triples,
    };
    if a.trials == 0 {
        return Err(BadInput("--trials must be at least 1".into()).into());
    }
    let runs = tailcut_contend::matrix::runs_per_trial(n, a.triples) as u64;
    let bar = crate::commands::progress(u64::from(a.trials) * runs, "interference matrix", a.output.json);
    let report = tailcut_contend::matrix::run(&settings, &step_reporter(&bar, a.output.json)).map_err(protocol_error)?;
    bar.finish_and_clear();
    let command = format!(
        "tailcut contend matrix {} --mode {}{} --trials {} --duration {}",
        a.agents.iter().map(|x| format!("--agent {x}")).collect::<Vec<_>>().join(" "),
        a.mode,
        if a.triples { " --triples" } else { "" },
        a.trials,
        humantime::format_duration(a.window.duration)
    );
    write_matrix(a, &report, &command)
}

fn write_matrix(a: &ContendMatrixArgs, report: &tailcut_contend::matrix::MatrixReport, command: &str) -> anyhow::Result<ExitCode> {
    if let Some(path) = &a.table {
        std::fs::write(path, report.table_toml(command)?).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("tailcut: wrote {}", path.display());
    }
    if let Some(path) = &a.heatmap {
        tailcut_contend::plot::matrix_heatmap(path, report)?;
        eprintln!("tailcut: wrote {}", path.display());
    }
    emit(a.output.json, a.output.json_out.as_deref(), report, || report.render())?;
    Ok(ExitCode::SUCCESS)
}

fn verify(a: &ContendVerifyArgs) -> anyhow::Result<ExitCode> {
    let text = read_input(&a.plan)?;
    let plan: Plan =
        serde_json::from_str(&text).map_err(|e| BadInput(format!("{}: not a `contend plan --json` result: {e}", a.plan.display())))?;
    let template = RunSettings {
        agents: Vec::new(),
        mode: if a.gpu { Mode::TimeSlicing } else { Mode::SameCore },
        trials: a.trials,
        warmup: a.window.warmup,
        duration: a.window.duration,
        iterations: None,
        bootstrap_rounds: 0,
        thresholds: VerdictThresholds::default(),
        devices: a.devices.clone(),
        program: std::env::current_exe().context("cannot find the tailcut executable to start agents")?,
        seed: 1,
    };
    let settings =
        tailcut_contend::verify::VerifySettings { plan, run: template, gpu: a.gpu, think_ms: a.window.think_ms, solo: !a.no_solo };
    let solo_runs: usize = if settings.solo { settings.plan.gpus.iter().map(|g| g.seats.len()).filter(|&n| n > 1).sum() } else { 0 };
    let runs = u64::from(a.trials) * (settings.plan.gpus.len() + solo_runs) as u64 * u64::from(a.repeat);
    let bar = crate::commands::progress(runs, "verifying the plan", a.output.json);
    let mut reports = Vec::new();
    for _ in 0..a.repeat {
        reports.push(tailcut_contend::verify::run(&settings, &step_reporter(&bar, a.output.json)).map_err(protocol_error)?);
    }
    bar.finish_and_clear();
    if a.repeat == 1 {
        let report = &reports[0];
        emit(a.output.json, a.output.json_out.as_deref(), report, || report.render())?;
        return Ok(if report.all_met { ExitCode::SUCCESS } else { ExitCode::from(1) });
    }
    let scored = tailcut_contend::verify::score(reports);
    emit(a.output.json, a.output.json_out.as_deref(), &scored, || scored.render())?;
    Ok(if scored.promise_kept { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
