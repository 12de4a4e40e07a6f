//! The interference matrix (`tailcut contend matrix`): every unordered pair of agents
//! together (one run measures both ordered cells `a<-b` and `b<-a`), and optionally every
//! triple, each run in its own processes. A trial runs every group once as a **block**:
//! the solo runs of the group's members and the group's shared run, back to back, so a
//! trial's solo and shared arms see the same background load. Blocks rotate and reverse
//! from trial to trial (so drift hits every cell alike), and so does the order inside a
//! block (solos first on odd trials, last on even ones).
//!
//! Each cell's factor is the **median across trials of that trial's own shared / solo
//! p99** (p95 when a run has under 100 samples), with a bootstrap 95% interval over the
//! trials ([`crate::stats::trial_degradation`]). One trial spoiled by a load burst moves
//! one ratio, which the median ignores from three trials on; pooling all trials' samples
//! would let that burst own the p99.
//!
//! From the cells it writes the interference table `contend plan --table` reads
//! ([`MatrixReport::table`]), fits the composition model on the triples (the one with the
//! smaller mean absolute error) and states the expected error of pair and group
//! predictions.
//!
//! CPU modes map onto the planner's GPU modes: `same-core` (the OS time-slices one core)
//! fills `time-slicing`, `separate-cores` (concurrent, sharing caches and the memory bus)
//! fills `mps`; the CUDA modes `time-slicing` and `mps` fill themselves.

use crate::agent::Samples;
use crate::plan::{AgentsFile, Composition, CompositionModel, Interference, SoloSpread};
use crate::protocol::{run_placed, validate, BadRun, Mode, ProtocolError, RunSettings};
use crate::report::Placement;
use crate::stats::{arm_stats, trial_degradation, ArmStats, Degradation};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Instant;

/// One matrix cell: a victim's p99 next to one or more aggressors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// The agent measured.
    pub victim: String,
    /// The agents running with it.
    pub aggressors: Vec<String>,
    /// The victim next to them.
    pub shared: ArmStats,
    /// Shared / solo factors with bootstrap intervals.
    pub degradation: Degradation,
    /// The tail quantile the factor uses: `p99`, or `p95` under 100 samples in an arm.
    pub quantile: String,
    /// The factor on that quantile: the median of [`Cell::trial_factors`].
    pub factor: f64,
    /// Its bootstrap 95% interval (resampling trials).
    pub ci95: [f64; 2],
    /// Each trial's own shared / solo factor on that quantile, in trial order.
    #[serde(default)]
    pub trial_factors: Vec<f64>,
}

/// How well one composition model predicts the measured triples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompositionCheck {
    /// The model.
    pub model: CompositionModel,
    /// Mean |predicted / measured − 1| over the triple cells.
    pub mean_abs_error: f64,
    /// Largest such error.
    pub max_abs_error: f64,
}

/// A whole matrix run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatrixReport {
    /// Always `tailcut contend matrix`.
    pub tool: String,
    /// Measurement mode.
    pub mode: String,
    /// The planner mode the table fills.
    pub table_mode: String,
    /// Trials.
    pub trials: u32,
    /// Warm-up per run, s.
    pub warmup_s: f64,
    /// Measurement window per run, s.
    pub duration_s: f64,
    /// CPUs on the host.
    pub host_cpus: usize,
    /// Wall time of the whole matrix, s.
    pub run_time_s: f64,
    /// Agent names (the interference classes of the table).
    pub agents: Vec<String>,
    /// Each agent alone (all its solo runs pooled; `trial_p99_ms` lists each run's p99).
    pub solo: BTreeMap<String, ArmStats>,
    /// Each agent's solo tail for the table: the median over its solo runs of each run's
    /// p99 (p95 when a run has under 100 samples), robust to a burst in one run.
    #[serde(default)]
    pub solo_tail_ms: BTreeMap<String, f64>,
    /// The quantile of each `solo_tail_ms`: `p99`, or `p95` when a run had under 100
    /// samples.
    #[serde(default)]
    pub solo_tail_quantile: BTreeMap<String, String>,
    /// How much each agent's solo runs' tail spread from run to run (log-SD over its solo
    /// runs): the solo part of the planner's error bars, and wide when the matrix ran under
    /// load.
    #[serde(default)]
    pub solo_spread: BTreeMap<String, SoloSpread>,
    /// Ordered pairs.
    pub pairs: Vec<Cell>,
    /// Victims with two aggressors (`--triples`).
    pub triples: Vec<Cell>,
    /// Each composition model's error on the triples (empty without them).
    pub checks: Vec<CompositionCheck>,
    /// The composition the table states.
    pub composition: Composition,
}

/// Matrix settings: the run settings (agents, mode, trials, windows, bootstrap, devices,
/// program, seed) plus whether to measure triples.
#[derive(Clone, Debug)]
pub struct MatrixSettings {
    /// As for `contend run` (the verdict thresholds are unused).
    pub run: RunSettings,
    /// Agent names (unique), one per agent.
    pub names: Vec<String>,
    /// Also measure every victim with every two others.
    pub triples: bool,
}

/// The planner mode a measurement mode fills.
pub fn table_mode(mode: Mode) -> Option<&'static str> {
    match mode {
        Mode::SameCore | Mode::TimeSlicing => Some("time-slicing"),
        Mode::SeparateCores | Mode::Mps => Some("mps"),
        _ => None,
    }
}

/// The interference class of an agent name: `fft#2` → `fft` (a second copy of an agent
/// measures the agent against itself).
pub fn class(name: &str) -> &str {
    name.split('#').next().unwrap_or(name)
}

/// The groups run per trial (each as a block with its members' solo runs): pairs, then
/// triples.
pub fn groups(n: usize, triples: bool) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            out.push(vec![i, j]);
        }
    }
    if triples {
        for i in 0..n {
            for j in i + 1..n {
                for k in j + 1..n {
                    out.push(vec![i, j, k]);
                }
            }
        }
    }
    out
}

/// The order of the groups in a trial: rotated by the trial number, reversed every
/// other trial.
pub fn trial_order(count: usize, trial: u32) -> Vec<usize> {
    let shift = (trial as usize).saturating_sub(1) % count.max(1);
    let mut order: Vec<usize> = (0..count).map(|k| (k + shift) % count).collect();
    if trial.is_multiple_of(2) {
        order.reverse();
    }
    order
}

/// Processes runs per trial: every group's shared run plus one solo run per member.
pub fn runs_per_trial(n: usize, triples: bool) -> usize {
    groups(n, triples).iter().map(|g| g.len() + 1).sum()
}

/// The arm label of a victim's solo run inside the block of the group it is measured in
/// (`solo/with:b+c`).
pub fn solo_arm(shared_arm: &str) -> String {
    format!("solo/{shared_arm}")
}

fn arm_label(group: &[usize], victim: usize, names: &[String]) -> String {
    if group.len() == 1 {
        return "solo".into();
    }
    let others: Vec<&str> = group.iter().filter(|&&j| j != victim).map(|&j| names[j].as_str()).collect();
    format!("with:{}", others.join("+"))
}

fn placements(run: &RunSettings, group: &[usize], cpus: usize) -> Vec<Placement> {
    (0..group.len())
        .map(|pos| match run.mode {
            Mode::SameCore => Placement { cpu: Some(0), device: None },
            Mode::SeparateCores => Placement { cpu: Some(pos % cpus.max(1)), device: None },
            _ => Placement { cpu: None, device: run.devices.first().cloned().or_else(|| Some("0".into())) },
        })
        .collect()
}

/// Runs the matrix. `progress` receives a line per run.
pub fn run(settings: &MatrixSettings, progress: &dyn Fn(&str)) -> Result<MatrixReport, ProtocolError> {
    let run = &settings.run;
    let cpus = core_affinity::get_core_ids().map_or(1, |c| c.len());
    let Some(table) = table_mode(run.mode) else {
        return Err(BadRun::MatrixMode { mode: run.mode.name() }.into());
    };
    if run.agents.len() < 2 {
        return Err(BadRun::MatrixTooFewAgents.into());
    }
    if settings.names.len() != run.agents.len() {
        return Err(BadRun::NamesPerAgent.into());
    }
    if settings.triples && run.agents.len() < 3 {
        return Err(BadRun::TriplesTooFewAgents.into());
    }
    // Only groups of up to three run at once: separate-cores needs that many cores.
    let widest = if settings.triples { 3 } else { 2 };
    let probe = RunSettings { agents: run.agents[..widest].to_vec(), ..run.clone() };
    validate(&probe, cpus)?;
    let started = Instant::now();
    let groups = groups(run.agents.len(), settings.triples);
    let mut collected: Vec<Samples> = Vec::new();
    for trial in 1..=run.trials {
        for g in trial_order(groups.len(), trial) {
            let group = &groups[g];
            // The block: each member alone, then the group (reversed on even trials).
            let mut steps: Vec<Vec<usize>> = trial_order(group.len(), trial).iter().map(|&k| vec![group[k]]).collect();
            steps.push(group.clone());
            if trial.is_multiple_of(2) {
                steps.reverse();
            }
            for step in steps {
                let label: Vec<&str> = step.iter().map(|&i| settings.names[i].as_str()).collect();
                let what = if step.len() == 1 { format!("{} alone", label[0]) } else { label.join(" + ") };
                progress(&format!("trial {trial}/{}: {what}", run.trials));
                let places = placements(run, &step, cpus);
                let mut got = run_placed(run, &settings.names, &step, &places, "matrix", trial)?;
                for (s, &victim) in got.iter_mut().zip(&step) {
                    let shared = arm_label(group, victim, &settings.names);
                    s.arm = Some(if step.len() == 1 { solo_arm(&shared) } else { shared });
                    s.trial = Some(trial);
                }
                collected.extend(got);
            }
        }
    }
    let mut report = assemble(&collected, &settings.names, &groups, run.bootstrap_rounds, run.seed);
    report.mode = run.mode.name().into();
    report.table_mode = table.into();
    report.trials = run.trials;
    report.warmup_s = run.warmup.as_secs_f64();
    report.duration_s = run.duration.as_secs_f64();
    report.host_cpus = cpus;
    report.run_time_s = started.elapsed().as_secs_f64();
    Ok(report)
}

fn to_ms(s: &Samples) -> Vec<f64> {
    s.samples_ns.iter().map(|&x| x as f64 / 1e6).collect()
}

/// One run's stats.
fn run_stats(s: &Samples) -> ArmStats {
    arm_stats(&to_ms(s), s.window_ns as f64 / 1e9, Vec::new())
}

/// Pools runs into one arm (descriptive: counts, quantiles of everything, each run's p99).
fn pool(runs: &[&Samples]) -> ArmStats {
    let ms: Vec<f64> = runs.iter().flat_map(|s| to_ms(s)).collect();
    let window = runs.iter().map(|s| s.window_ns as f64 / 1e9).sum();
    let trial_p99 = runs.iter().filter_map(|s| run_stats(s).p99_ms).collect();
    arm_stats(&ms, window, trial_p99)
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    tailcut_stats::sort_latencies(&mut v);
    if v.is_empty() {
        f64::NAN
    } else {
        tailcut_stats::quantile_linear(&v, 0.5)
    }
}

/// The standard deviation of ln(x) over `values` (n − 1 in the denominator; 0 under two).
pub fn log_sd(values: &[f64]) -> f64 {
    let logs: Vec<f64> = values.iter().filter(|x| **x > 0.0 && x.is_finite()).map(|x| x.ln()).collect();
    if logs.len() < 2 {
        return 0.0;
    }
    let mean = logs.iter().sum::<f64>() / logs.len() as f64;
    (logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (logs.len() - 1) as f64).sqrt()
}

/// Builds the report from samples labelled `with:<others>` (shared) and
/// `solo/with:<others>` (the victim alone in the same block), each with its trial (public
/// so tests and sample files can feed it). A cell's factor is the median across trials of
/// each trial's shared / solo ratio.
pub fn assemble(samples: &[Samples], names: &[String], groups: &[Vec<usize>], rounds: usize, seed: u64) -> MatrixReport {
    let of = |name: &str, arm: &dyn Fn(&str) -> bool| -> Vec<&Samples> {
        samples.iter().filter(|s| s.name.as_deref() == Some(name) && s.arm.as_deref().is_some_and(arm)).collect()
    };
    let mut solo = BTreeMap::new();
    let mut solo_tail_ms = BTreeMap::new();
    let mut solo_tail_quantile = BTreeMap::new();
    let mut solo_spread = BTreeMap::new();
    for name in names {
        let runs = of(name, &|a| a == "solo" || a.starts_with("solo/"));
        let stats: Vec<ArmStats> = runs.iter().map(|s| run_stats(s)).filter(|s| s.samples > 0).collect();
        let (q, tail): (&str, Vec<f64>) = if !stats.is_empty() && stats.iter().all(|s| s.p99_ms.is_some()) {
            ("p99", stats.iter().filter_map(|s| s.p99_ms).collect())
        } else {
            ("p95", stats.iter().map(|s| s.p95_ms).collect())
        };
        if !tail.is_empty() {
            solo_tail_ms.insert(name.clone(), median(&tail));
            solo_tail_quantile.insert(name.clone(), q.to_string());
            solo_spread.insert(name.clone(), SoloSpread { runs: tail.len() as u32, log_sd: log_sd(&tail) });
        }
        solo.insert(name.clone(), pool(&runs));
    }
    let mut pairs = Vec::new();
    let mut triples = Vec::new();
    for (gi, group) in groups.iter().enumerate().filter(|(_, g)| g.len() > 1) {
        for &victim in group {
            let name = &names[victim];
            let arm = arm_label(group, victim, names);
            let solo_label = solo_arm(&arm);
            let shared_runs = of(name, &|a| a == arm);
            let solo_runs = of(name, &|a| a == solo_label);
            // Trials with both arms, in trial order.
            let mut trials: Vec<u32> = shared_runs.iter().filter_map(|s| s.trial).collect();
            trials.sort_unstable();
            trials.dedup();
            let arms: Vec<(ArmStats, ArmStats)> = trials
                .iter()
                .filter_map(|&t| {
                    let pick = |runs: &[&Samples]| {
                        let r: Vec<&Samples> = runs.iter().copied().filter(|s| s.trial == Some(t)).collect();
                        (!r.is_empty()).then(|| pool(&r)).filter(|a| a.samples > 0)
                    };
                    Some((pick(&solo_runs)?, pick(&shared_runs)?))
                })
                .collect();
            if arms.is_empty() {
                continue;
            }
            let d = trial_degradation(&arms, rounds, seed ^ ((gi as u64) << 8) ^ victim as u64);
            let (quantile, factor) = match d.p99 {
                Some(f) => ("p99", f),
                None => ("p95", d.p95),
            };
            let trial_factors = arms
                .iter()
                .map(
                    |(a, b)| {
                        if quantile == "p99" {
                            b.p99_ms.unwrap_or(f64::NAN) / a.p99_ms.unwrap_or(f64::NAN)
                        } else {
                            b.p95_ms / a.p95_ms
                        }
                    },
                )
                .collect();
            let ci95 = d.ci95.get(quantile).copied().unwrap_or([f64::NAN, f64::NAN]);
            let cell = Cell {
                victim: name.clone(),
                aggressors: group.iter().filter(|&&j| j != victim).map(|&j| names[j].clone()).collect(),
                shared: pool(&shared_runs),
                degradation: d,
                quantile: quantile.into(),
                factor,
                ci95,
                trial_factors,
            };
            if group.len() == 2 {
                pairs.push(cell);
            } else {
                triples.push(cell);
            }
        }
    }
    let (checks, composition) = fit(&pairs, &triples);
    MatrixReport {
        tool: "tailcut contend matrix".into(),
        mode: String::new(),
        table_mode: String::new(),
        trials: 0,
        warmup_s: 0.0,
        duration_s: 0.0,
        host_cpus: 0,
        run_time_s: 0.0,
        agents: names.to_vec(),
        solo,
        solo_tail_ms,
        solo_tail_quantile,
        solo_spread,
        pairs,
        triples,
        checks,
        composition,
    }
}

/// The pair factor of `victim<-aggressor`, if measured.
pub fn pair_factor(pairs: &[Cell], victim: &str, aggressor: &str) -> Option<f64> {
    pairs.iter().find(|c| c.victim == victim && c.aggressors.len() == 1 && c.aggressors[0] == aggressor).map(|c| c.factor)
}

/// Fits the composition: each model's error on the triples; the one with the smaller mean
/// error wins (multiplicative without triples). The pair error is the median relative
/// half-width of the pair factors' bootstrap intervals.
pub fn fit(pairs: &[Cell], triples: &[Cell]) -> (Vec<CompositionCheck>, Composition) {
    let mut widths: Vec<f64> = pairs
        .iter()
        .filter(|c| c.ci95[0].is_finite() && c.ci95[1].is_finite() && c.factor > 0.0)
        .map(|c| (c.ci95[1] - c.ci95[0]) / 2.0 / c.factor)
        .collect();
    widths.sort_by(f64::total_cmp);
    let pair_error = (!widths.is_empty()).then(|| widths[widths.len() / 2]);
    let mut checks = Vec::new();
    for model in CompositionModel::ALL {
        let errors: Vec<f64> = triples
            .iter()
            .filter_map(|c| {
                let fs: Option<Vec<f64>> = c.aggressors.iter().map(|a| pair_factor(pairs, &c.victim, a)).collect();
                fs.map(|fs| (model.combine(&fs) / c.factor - 1.0).abs())
            })
            .collect();
        if errors.is_empty() {
            continue;
        }
        checks.push(CompositionCheck {
            model,
            mean_abs_error: errors.iter().sum::<f64>() / errors.len() as f64,
            max_abs_error: errors.iter().copied().fold(0.0, f64::max),
        });
    }
    let best = checks.iter().min_by(|a, b| a.mean_abs_error.total_cmp(&b.mean_abs_error));
    let composition = Composition {
        model: best.map_or(CompositionModel::default(), |c| c.model),
        pair_error,
        group_error: best.map(|c| c.mean_abs_error),
        groups_checked: if best.is_some() { triples.len() } else { 0 },
        trials: 0,
    };
    (checks, composition)
}

mod output;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{AgentKind, AgentSpec};

    #[test]
    fn groups_cover_pairs_and_triples_once() {
        let g = groups(4, false);
        assert_eq!(g.len(), 6);
        let t = groups(4, true);
        assert_eq!(t.len(), 6 + 4);
        let mut seen = std::collections::BTreeSet::new();
        for x in &t {
            assert!(x.len() >= 2, "{x:?}: solos run inside the blocks");
            assert!(seen.insert(x.clone()), "{x:?} twice");
        }
        assert_eq!(runs_per_trial(4, false), 6 * 3);
        assert_eq!(runs_per_trial(4, true), 6 * 3 + 4 * 4);
    }

    #[test]
    fn trial_orders_are_permutations_that_differ() {
        let a = trial_order(7, 1);
        let b = trial_order(7, 2);
        for o in [&a, &b] {
            let mut s = o.clone();
            s.sort_unstable();
            assert_eq!(s, (0..7).collect::<Vec<_>>());
        }
        assert_ne!(a, b);
        assert_eq!(a[0], 0);
    }

    fn samples(name: &str, arm: &str, ms: impl Iterator<Item = f64>) -> Samples {
        samples_in(name, arm, 1, ms)
    }

    fn samples_in(name: &str, arm: &str, trial: u32, ms: impl Iterator<Item = f64>) -> Samples {
        let v: Vec<u64> = ms.map(|x| (x * 1e6) as u64).collect();
        Samples {
            kind: AgentKind::Fft,
            spec: AgentSpec::new(AgentKind::Fft),
            cpu: None,
            window_ns: 1_000_000_000,
            samples_ns: v,
            ttft_ns: vec![],
            tpot_ns: vec![],
            errors: 0,
            name: Some(name.into()),
            arm: Some(arm.into()),
            trial: Some(trial),
        }
    }

    /// Synthetic matrix: each victim's tail is scaled by 1 + Σ extra over its aggressors
    /// (an additive world), so the fit must pick additive with near-zero error.
    #[test]
    fn fit_picks_the_model_that_generated_the_triples() {
        let names: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let extra = |v: usize, a: usize| 0.2 + 0.3 * ((v * 3 + a) % 4) as f64;
        let base = |i: usize| (0..1000).map(move |k| 1.0 + k as f64 / 1000.0 + i as f64);
        let g = groups(3, true);
        let mut all = Vec::new();
        for group in &g {
            for &v in group {
                let f = 1.0 + group.iter().filter(|&&a| a != v).map(|&a| extra(v, a)).sum::<f64>();
                let arm = arm_label(group, v, &names);
                all.push(samples(&names[v], &solo_arm(&arm), base(v)));
                all.push(samples(&names[v], &arm, base(v).map(move |x| x * f)));
            }
        }
        let r = assemble(&all, &names, &g, 100, 1);
        assert_eq!(r.pairs.len(), 6);
        assert_eq!(r.triples.len(), 3);
        let ab = pair_factor(&r.pairs, "a", "b").unwrap();
        assert!((ab - (1.0 + extra(0, 1))).abs() < 1e-6, "{ab}");
        assert_eq!(r.composition.model, CompositionModel::Additive, "{:?}", r.checks);
        assert!(r.composition.group_error.unwrap() < 1e-6);
        let mult = r.checks.iter().find(|c| c.model == CompositionModel::Multiplicative).unwrap();
        assert!(mult.mean_abs_error > 0.05, "{mult:?}");
        assert_eq!(r.composition.groups_checked, 3);
        let pe = r.composition.pair_error.unwrap();
        assert!((0.0..0.05).contains(&pe), "scaled copies have tight intervals: {pe}");
    }

    #[test]
    fn table_speaks_the_planner_schema_and_averages_copies() {
        let names: Vec<String> = ["fft", "fft#2", "gemm"].iter().map(|s| s.to_string()).collect();
        let g = groups(3, false);
        let mut all = Vec::new();
        let f = |v: &str, a: &str| match (v, a) {
            ("fft", "fft#2") => 1.4,
            ("fft#2", "fft") => 1.6,
            ("fft" | "fft#2", "gemm") => 2.0,
            _ => 1.1,
        };
        for group in g.iter().filter(|g| g.len() == 2) {
            for &v in group {
                let a = group.iter().find(|&&j| j != v).copied().unwrap();
                let factor = f(&names[v], &names[a]);
                let arm = arm_label(group, v, &names);
                all.push(samples(&names[v], &solo_arm(&arm), (0..500).map(|k| 1.0 + k as f64 / 500.0)));
                all.push(samples(&names[v], &arm, (0..500).map(move |k| (1.0 + k as f64 / 500.0) * factor)));
            }
        }
        let mut r = assemble(&all, &names, &g, 50, 1);
        r.table_mode = "time-slicing".into();
        let t = r.table();
        let ts = &t.interference.modes["time-slicing"];
        assert!((ts["fft<-fft"] - 1.5).abs() < 1e-3, "{ts:?}");
        assert!((ts["fft<-gemm"] - 2.0).abs() < 1e-3, "{ts:?}");
        assert!(t.solo_p99_ms.contains_key("fft") && t.solo_p99_ms.contains_key("gemm"));
        let text = r.table_toml("tailcut contend matrix --agent fft").unwrap();
        let back: AgentsFile = toml::from_str(&text).unwrap();
        assert_eq!(back.interference.factor(crate::plan::GroupMode::TimeSlicing, "fft", "gemm"), Some(ts["fft<-gemm"]));
        assert!(r.render().contains("victim \\ aggressor"));
    }

    /// Five trials of `a<-b` at ×1.5, each trial's solo and shared arms measured back to
    /// back. In one trial a load burst hits the solo arm (every sample ×6, and a tail of
    /// 60 ms). Pooling every trial's samples lets that burst own the solo p99 (the factor
    /// falls below 1, as it did on the loaded machine); the median of per-trial ratios
    /// does not move.
    #[test]
    fn one_burst_trial_does_not_move_the_factor() {
        let names: Vec<String> = ["a", "b"].iter().map(|s| s.to_string()).collect();
        let g = groups(2, false);
        let ramp = |k: usize| 1.0 + k as f64 / 400.0; // 1–2 ms
        let mut all = Vec::new();
        for t in 1..=5u32 {
            // Each trial's background differs a little, and both arms of the trial see it.
            let bg = 1.0 + 0.05 * f64::from(t);
            for (v, other) in [(0usize, 1usize), (1, 0)] {
                let arm = format!("with:{}", names[other]);
                let burst = t == 3 && v == 0;
                let solo = (0..400).map(move |k| if burst { ramp(k) * 6.0 + if k > 390 { 60.0 } else { 0.0 } } else { ramp(k) * bg });
                all.push(samples_in(&names[v], &solo_arm(&arm), t, solo));
                let f = if v == 0 { 1.5 } else { 1.2 };
                all.push(samples_in(&names[v], &arm, t, (0..400).map(move |k| ramp(k) * bg * f)));
            }
        }
        let r = assemble(&all, &names, &g, 200, 7);
        let ab = r.pairs.iter().find(|c| c.victim == "a").unwrap();
        assert_eq!(ab.quantile, "p99");
        assert!((ab.factor - 1.5).abs() < 1e-6, "median of per-trial ratios: {} from {:?}", ab.factor, ab.trial_factors);
        assert_eq!(ab.trial_factors.len(), 5);
        assert!(ab.ci95[0] <= 1.5 + 1e-6 && ab.ci95[1] >= 1.5 - 1e-6, "{:?}", ab.ci95);
        // What pooling would have said on the same samples.
        let pooled = |arm: &str| {
            let mut v: Vec<f64> = all
                .iter()
                .filter(|s| s.name.as_deref() == Some("a") && s.arm.as_deref() == Some(arm))
                .flat_map(|s| s.samples_ns.iter().map(|&x| x as f64 / 1e6))
                .collect();
            tailcut_stats::sort_latencies(&mut v);
            tailcut_stats::quantile_linear(&v, 0.99)
        };
        let pooled_factor = pooled("with:b") / pooled("solo/with:b");
        assert!(pooled_factor < 1.0, "the pooled estimator is spoiled by the burst: {pooled_factor}");
        // The table's solo tail is the median of runs, not the burst.
        let tail = r.solo_tail_ms["a"];
        assert!(tail < 2.5, "{tail}");
        let b = r.pairs.iter().find(|c| c.victim == "b").unwrap();
        assert!((b.factor - 1.2).abs() < 1e-6, "{}", b.factor);
    }
}
