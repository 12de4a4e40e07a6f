//! The coordinator: runs each agent solo and all agents together, as separate OS
//! processes, over several trials with the arm order interleaved (so slow drift —
//! thermal, frequency, background load — hits both arms), and assembles the report.

mod error;

pub use error::{BadRun, ProtocolError};

use crate::agent::{unix_ms, AgentSpec, Samples};
use crate::report::{AgentReport, Placement, RunReport, TokenArm, TokenStats};
use crate::stats::{arm_stats, degradation, trial_degradation, verdict_from_intervals, widen_over_trials, ArmStats, VerdictThresholds};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// How agents share the processor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// CPU: every agent pinned to core 0; the OS time-slices them (the CPU analogue of
    /// GPU time-slicing).
    SameCore,
    /// CPU: each agent on its own core; they share only caches and the memory bus.
    SeparateCores,
    /// Only the solo baselines.
    Solo,
    /// CUDA: several processes on one GPU (the default GPU sharing).
    TimeSlicing,
    /// CUDA: several processes through the MPS daemon.
    Mps,
    /// CUDA: each agent on its own MIG instance (`--devices MIG-…`).
    Mig,
    /// CUDA: each agent on its own GPU (`--devices 0,1`).
    Dedicated,
}

impl Mode {
    /// Parses the kebab-case name.
    pub fn parse(s: &str) -> Option<Mode> {
        Some(match s {
            "same-core" => Mode::SameCore,
            "separate-cores" => Mode::SeparateCores,
            "solo" => Mode::Solo,
            "time-slicing" => Mode::TimeSlicing,
            "mps" => Mode::Mps,
            "mig" => Mode::Mig,
            "dedicated" => Mode::Dedicated,
            _ => return None,
        })
    }

    /// The kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::SameCore => "same-core",
            Mode::SeparateCores => "separate-cores",
            Mode::Solo => "solo",
            Mode::TimeSlicing => "time-slicing",
            Mode::Mps => "mps",
            Mode::Mig => "mig",
            Mode::Dedicated => "dedicated",
        }
    }

    fn is_gpu(self) -> bool {
        matches!(self, Mode::TimeSlicing | Mode::Mps | Mode::Mig | Mode::Dedicated)
    }
}

/// Everything a run needs.
#[derive(Clone, Debug)]
pub struct RunSettings {
    /// The agents.
    pub agents: Vec<AgentSpec>,
    /// Sharing mode.
    pub mode: Mode,
    /// Trials (each: every agent solo, then all shared, order alternating).
    pub trials: u32,
    /// Warm-up per run.
    pub warmup: Duration,
    /// Measurement window per run.
    pub duration: Duration,
    /// Stop each run after this many measured iterations, if that comes first.
    pub iterations: Option<u64>,
    /// Bootstrap resamples.
    pub bootstrap_rounds: usize,
    /// Verdict thresholds.
    pub thresholds: VerdictThresholds,
    /// CUDA devices per agent (MIG or dedicated), or one shared device.
    pub devices: Vec<String>,
    /// The `tailcut` executable used to start agent processes.
    pub program: PathBuf,
    /// Seed of the bootstrap.
    pub seed: u64,
}

/// Unique display names: `fft`, `gemm`, `fft#2`, ...
pub fn agent_names(agents: &[AgentSpec]) -> Vec<String> {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    agents
        .iter()
        .map(|a| {
            let n = seen.entry(a.kind.name()).or_insert(0);
            *n += 1;
            if *n == 1 {
                a.kind.name().to_string()
            } else {
                format!("{}#{}", a.kind.name(), n)
            }
        })
        .collect()
}

fn placement(settings: &RunSettings, i: usize, cpus: usize) -> Placement {
    let cpu = match settings.mode {
        Mode::SameCore => Some(0),
        Mode::SeparateCores => Some(i % cpus.max(1)),
        _ => None,
    };
    let device = match settings.mode {
        Mode::Mig | Mode::Dedicated => settings.devices.get(i).cloned(),
        Mode::TimeSlicing | Mode::Mps => settings.devices.first().cloned().or_else(|| Some("0".into())),
        _ => settings.agents[i].device.clone(),
    };
    Placement { cpu, device }
}

pub(crate) fn validate(settings: &RunSettings, cpus: usize) -> Result<(), ProtocolError> {
    if settings.agents.is_empty() {
        return Err(BadRun::NoAgents.into());
    }
    if settings.trials == 0 {
        return Err(BadRun::NoTrials.into());
    }
    if settings.mode == Mode::SeparateCores && settings.agents.len() > cpus {
        return Err(BadRun::TooFewCores { agents: settings.agents.len(), cpus }.into());
    }
    if matches!(settings.mode, Mode::Mig | Mode::Dedicated) && settings.devices.len() < settings.agents.len() {
        return Err(BadRun::TooFewDevices {
            mode: settings.mode.name(),
            example: if settings.mode == Mode::Mig { "MIG-<uuid>,MIG-<uuid>" } else { "0,1" },
            devices: settings.devices.len(),
        }
        .into());
    }
    if settings.mode.is_gpu() && !settings.agents.iter().any(|a| a.kind.is_cuda()) {
        return Err(BadRun::CpuAgentsInGpuMode { mode: settings.mode.name() }.into());
    }
    if settings.mode == Mode::Mps
        && std::env::var_os("CUDA_MPS_PIPE_DIRECTORY").is_none()
        && !std::path::Path::new("/tmp/nvidia-mps").exists()
    {
        return Err(BadRun::NoMpsDaemon.into());
    }
    Ok(())
}

/// Starts the given agents together (each in its own process, at `places[k]` for
/// `which[k]`) and collects their samples, labelled with `arm`.
pub(crate) fn run_placed(
    settings: &RunSettings,
    names: &[String],
    which: &[usize],
    places: &[Placement],
    arm: &str,
    trial: u32,
) -> Result<Vec<Samples>, ProtocolError> {
    let start_at = unix_ms() + 250;
    let mut children = Vec::new();
    for (&i, place) in which.iter().zip(places) {
        let spec = &settings.agents[i];
        let mut cmd = Command::new(&settings.program);
        cmd.args(["contend", "agent", "--kind", spec.kind.name()])
            .args(["--size", &spec.size.to_string(), "--batch", &spec.batch.to_string()])
            .args(["--start-at-ms", &start_at.to_string()])
            .args(["--warmup-ms", &settings.warmup.as_millis().to_string(), "--duration-ms", &settings.duration.as_millis().to_string()])
            .args(["--name", &names[i], "--arm", arm, "--trial", &trial.to_string()])
            .args(settings.iterations.map(|n| vec!["--iterations".to_string(), n.to_string()]).unwrap_or_default())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(cpu) = place.cpu {
            cmd.args(["--cpu", &cpu.to_string()]);
        }
        if let Some(dev) = &place.device {
            if spec.kind.is_cuda() {
                cmd.env("CUDA_VISIBLE_DEVICES", dev);
                cmd.args(["--device", "0"]);
            }
        }
        if let Some(url) = &spec.url {
            cmd.args(["--url", url, "--rate", &spec.rate_per_s.to_string()]);
        }
        if let Some(model) = &spec.model {
            cmd.args(["--model", model]);
        }
        if spec.think_ms > 0 {
            cmd.args(["--think-ms", &spec.think_ms.to_string()]);
        }
        let child =
            cmd.spawn().map_err(|e| ProtocolError::Agent { agent: names[i].clone(), arm: arm.into(), trial, message: e.to_string() })?;
        children.push((i, child));
    }
    let mut out = Vec::new();
    for (i, child) in children {
        let fail = |message: String| ProtocolError::Agent { agent: names[i].clone(), arm: arm.into(), trial, message };
        let output = child.wait_with_output().map_err(|e| fail(e.to_string()))?;
        if !output.status.success() {
            return Err(fail(String::from_utf8_lossy(&output.stderr).trim().to_string()));
        }
        let samples: Samples = serde_json::from_slice(&output.stdout).map_err(|e| fail(format!("unreadable samples: {e}")))?;
        out.push(samples);
    }
    Ok(out)
}

/// Starts the given agents together at their run placements.
fn run_together(
    settings: &RunSettings,
    names: &[String],
    which: &[usize],
    arm: &str,
    trial: u32,
    cpus: usize,
) -> Result<Vec<Samples>, ProtocolError> {
    let places: Vec<Placement> = which.iter().map(|&i| placement(settings, i, cpus)).collect();
    run_placed(settings, names, which, &places, arm, trial)
}

/// Runs the whole protocol. `progress` receives a line per step.
pub fn run(settings: &RunSettings, progress: &dyn Fn(&str)) -> Result<RunReport, ProtocolError> {
    let cpus = core_affinity::get_core_ids().map_or(1, |c| c.len());
    validate(settings, cpus)?;
    let names = agent_names(&settings.agents);
    let timer_ns = crate::workload::timer_overhead_ns();
    let mut collected: Vec<Samples> = Vec::new();
    for trial in 1..=settings.trials {
        let solo_first = trial % 2 == 1;
        let shared_arm = settings.mode != Mode::Solo;
        let mut steps: Vec<&str> = vec!["solo"];
        if shared_arm {
            if solo_first {
                steps.push("shared");
            } else {
                steps.insert(0, "shared");
            }
        }
        for step in steps {
            if step == "solo" {
                let n = settings.agents.len();
                // Rotate the solo order across trials as well.
                for k in 0..n {
                    let i = (k + trial as usize - 1) % n;
                    progress(&format!("trial {trial}/{}: {} solo", settings.trials, names[i]));
                    collected.extend(run_together(settings, &names, &[i], "solo", trial, cpus)?);
                }
            } else {
                progress(&format!("trial {trial}/{}: all {} agents shared", settings.trials, settings.agents.len()));
                let all: Vec<usize> = (0..settings.agents.len()).collect();
                collected.extend(run_together(settings, &names, &all, "shared", trial, cpus)?);
            }
        }
    }
    let mut report = assemble(&collected, &names, &settings.agents, settings.bootstrap_rounds, settings.seed, &settings.thresholds);
    report.mode = settings.mode.name().to_string();
    report.trials = settings.trials;
    report.warmup_s = settings.warmup.as_secs_f64();
    report.duration_s = settings.duration.as_secs_f64();
    report.host_cpus = cpus;
    report.timer_overhead_ns = timer_ns;
    for (i, a) in report.agents.iter_mut().enumerate() {
        a.placement = placement(settings, i, cpus);
    }
    report.finish_timer_check();
    Ok(report)
}

/// Each trial's (solo, shared) arm stats of one agent, for the trials that have both arms
/// with samples, in trial order.
fn trial_arms(solo: &[&Samples], shared: &[&Samples]) -> Vec<(ArmStats, ArmStats)> {
    let stats = |runs: &[&Samples], t: u32| -> Option<ArmStats> {
        let mine: Vec<&&Samples> = runs.iter().filter(|s| s.trial == Some(t)).collect();
        let ms: Vec<f64> = mine.iter().flat_map(|s| s.samples_ns.iter().map(|&x| x as f64 / 1e6)).collect();
        let window = mine.iter().map(|s| s.window_ns as f64 / 1e9).sum();
        (!ms.is_empty()).then(|| arm_stats(&ms, window, Vec::new()))
    };
    let mut trials: Vec<u32> = shared.iter().filter_map(|s| s.trial).collect();
    trials.sort_unstable();
    trials.dedup();
    trials.into_iter().filter_map(|t| Some((stats(solo, t)?, stats(shared, t)?))).collect()
}

/// Builds a report from samples grouped by agent name and arm (from a live run or from
/// sample files written by Kubernetes jobs).
///
/// With two or more trials holding both arms, each factor is the **median over trials of
/// each trial's own shared / solo ratio** and its 95% interval a bootstrap over trials
/// ([`trial_degradation`], as `contend matrix` does), widened to the Student t interval of
/// the trials' log ratios ([`widen_over_trials`]: with 3 trials a bootstrap is just their
/// range): the interval then shows how much the factor moves from run to run. A bootstrap over one run's samples cannot: one run's
/// thousands of samples make a narrow interval that the next run misses (issue 32: p50
/// ×1.32, interval 1.31–1.33, then ×1.00). With one trial the samples are resampled and
/// the report says the interval is not run to run. The verdict follows the intervals
/// ([`verdict_from_intervals`]) and says "unstable" when one straddles a threshold.
pub fn assemble(
    samples: &[Samples],
    names: &[String],
    specs: &[AgentSpec],
    rounds: usize,
    seed: u64,
    thresholds: &VerdictThresholds,
) -> RunReport {
    let mut report = RunReport::empty();
    report.thresholds = *thresholds;
    for (idx, name) in names.iter().enumerate() {
        let mine =
            |arm: &str| samples.iter().filter(|s| s.name.as_deref() == Some(name) && s.arm.as_deref() == Some(arm)).collect::<Vec<_>>();
        let pool = |runs: &[&Samples]| -> (Vec<f64>, f64, Vec<f64>) {
            let ms: Vec<f64> = runs.iter().flat_map(|s| s.samples_ns.iter().map(|&x| x as f64 / 1e6)).collect();
            let window = runs.iter().map(|s| s.window_ns as f64 / 1e9).sum();
            let trial_p99 = runs
                .iter()
                .filter(|s| s.samples_ns.len() >= 100)
                .map(|s| {
                    let mut v: Vec<f64> = s.samples_ns.iter().map(|&x| x as f64 / 1e6).collect();
                    tailcut_stats::sort_latencies(&mut v);
                    tailcut_stats::quantile_linear(&v, 0.99)
                })
                .collect();
            (ms, window, trial_p99)
        };
        let (solo_ms, solo_w, solo_t) = pool(&mine("solo"));
        let (shared_ms, shared_w, shared_t) = pool(&mine("shared"));
        let solo = arm_stats(&solo_ms, solo_w, solo_t);
        let shared = (!shared_ms.is_empty()).then(|| arm_stats(&shared_ms, shared_w, shared_t));
        let arms = trial_arms(&mine("solo"), &mine("shared"));
        let over_trials = arms.len() >= 2;
        let deg = shared.as_ref().filter(|_| !solo_ms.is_empty()).map(|sh| {
            if over_trials {
                let mut d = trial_degradation(&arms, rounds, seed ^ idx as u64);
                widen_over_trials(&mut d, &arms);
                d
            } else {
                degradation(&solo_ms, &shared_ms, &solo, sh, rounds, seed ^ idx as u64)
            }
        });
        if deg.is_some() {
            report.interval_over = if over_trials { format!("{} trials", arms.len()) } else { "samples of one trial".into() };
        }
        let judged = deg.as_ref().map(|d| verdict_from_intervals(d, thresholds));
        let verdict_stable = judged.as_ref().map(|(_, stable)| *stable);
        let verdict_line = judged.map(|(line, _)| line);
        let spec = specs.get(idx).cloned().or_else(|| samples.iter().find(|s| s.name.as_deref() == Some(name)).map(|s| s.spec.clone()));
        let tokens = token_stats(&mine("solo"), &mine("shared"));
        report.agents.push(AgentReport {
            agent: name.clone(),
            spec,
            placement: Placement::default(),
            solo,
            shared,
            degradation: deg,
            verdict: verdict_line,
            verdict_stable,
            tokens,
        });
        report.samples.insert((name.clone(), "solo".into()), solo_ms);
        if !shared_ms.is_empty() {
            report.samples.insert((name.clone(), "shared".into()), shared_ms);
        }
    }
    report
}

/// TTFT and TPOT quantiles of the runs that recorded them.
fn token_arm(runs: &[&Samples]) -> Option<TokenArm> {
    let ms = |pick: fn(&Samples) -> &Vec<u64>| {
        let mut v: Vec<f64> = runs.iter().flat_map(|s| pick(s).iter().map(|&x| x as f64 / 1e6)).collect();
        tailcut_stats::sort_latencies(&mut v);
        v
    };
    let ttft = ms(|s| &s.ttft_ns);
    if ttft.is_empty() {
        return None;
    }
    let tpot = ms(|s| &s.tpot_ns);
    let q = |v: &[f64], q: f64| if v.is_empty() { f64::NAN } else { tailcut_stats::quantile_linear(v, q) };
    Some(TokenArm {
        calls: ttft.len(),
        ttft_p50_ms: q(&ttft, 0.5),
        ttft_p99_ms: q(&ttft, 0.99),
        tpot_p50_ms: q(&tpot, 0.5),
        tpot_p99_ms: q(&tpot, 0.99),
    })
}

fn token_stats(solo: &[&Samples], shared: &[&Samples]) -> Option<TokenStats> {
    let (a, b) = (token_arm(solo), token_arm(shared));
    (a.is_some() || b.is_some()).then_some(TokenStats { solo: a, shared: b })
}
