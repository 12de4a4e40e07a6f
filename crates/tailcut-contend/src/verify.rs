//! `tailcut contend verify PLAN`: runs a plan's co-locations and checks each agent's
//! measured p99 against its objective and against the plan's prediction.
//!
//! On the CPU each planned device is a core: a `dedicated` device is one agent alone on
//! its core, a `time-slicing` device is its agents pinned together to one core (what
//! `contend matrix --mode same-core` measured), an `mps` device runs its agents
//! concurrently on separate cores (what `separate-cores` measured). Devices run one at a
//! time, device `g` on core `g mod cores`, over interleaved trials. An agent's measured p99
//! is the median over trials of each trial's p99, so one trial hit by a load burst on the
//! machine does not decide the verdict. With `gpu`, the seats must be CUDA agents and device `g` is CUDA device `devices[g]` (or `g`).
//!
//! With `solo` (the default), each trial also runs every sharing agent alone on its
//! device, back to back with the group: the measured factor (shared over solo p99, the
//! median of the trials' own ratios) is compared with the planned factor, so the error
//! reported beside the absolute one is the interference model's alone, not the machine's
//! drift since the matrix measured the solo p99s.

use crate::agent::{AgentSpec, Samples};
use crate::matrix::trial_order;
use crate::plan::{GroupMode, Plan};
use crate::protocol::{run_placed, BadRun, ProtocolError, RunSettings};
use crate::report::Placement;
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// One agent's check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeatCheck {
    /// Agent.
    pub agent: String,
    /// Kind run.
    pub kind: String,
    /// Planned device.
    pub gpu: usize,
    /// Its mode.
    pub mode: GroupMode,
    /// Iterations measured.
    pub samples: usize,
    /// Measured p99, ms: the median over trials of each trial's p99 (one trial hit by a
    /// load burst does not move it from three trials on).
    pub measured_p99_ms: f64,
    /// Each trial's p99, ms, in trial order.
    #[serde(default)]
    pub trial_p99_ms: Vec<f64>,
    /// Objective, ms.
    pub objective_ms: f64,
    /// The plan's prediction, ms.
    pub predicted_p99_ms: f64,
    /// measured / predicted − 1.
    pub prediction_error: f64,
    /// Solo p99 measured in this run, back to back with the group, ms (sharing agents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solo_now_p99_ms: Option<f64>,
    /// Measured factor: the median over trials of shared p99 / solo p99.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_factor: Option<f64>,
    /// The plan's factor: predicted p99 / the solo p99 it scaled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_factor: Option<f64>,
    /// measured factor / predicted factor − 1: the prediction rebased on this run's solo.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub factor_error: Option<f64>,
    /// The plan's expected error, if it stated one.
    pub expected_error: Option<f64>,
    /// Whether |prediction error| is within the expected error.
    pub within_expected: Option<bool>,
    /// Whether the objective was met.
    pub met: bool,
    /// The band the plan stated for this agent, ms (absent at confidence 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub band_ms: Option<[f64; 2]>,
    /// Whether the measured p99 fell inside that band.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inside_band: Option<bool>,
    /// The plan's estimated probability that the objective holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_objective: Option<f64>,
}

impl SeatCheck {
    /// Whether a trial averaged under 100 samples (its p99 is then close to its maximum).
    pub fn few_samples(&self) -> bool {
        self.samples < 100 * self.trial_p99_ms.len().max(1)
    }
}

/// The whole check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VerifyReport {
    /// Always `tailcut contend verify`.
    pub tool: String,
    /// `cpu` or `gpu`.
    pub target: String,
    /// Trials.
    pub trials: u32,
    /// Measurement window per run, s.
    pub duration_s: f64,
    /// Wall time, s.
    pub run_time_s: f64,
    /// Per agent.
    pub seats: Vec<SeatCheck>,
    /// Every objective met.
    pub all_met: bool,
    /// The confidence the plan promised (`contend plan --confidence`).
    #[serde(default)]
    pub confidence: f64,
    /// Mean |prediction error| over agents sharing with one other.
    pub pair_mean_abs_error: Option<f64>,
    /// Mean |prediction error| over agents sharing with two or more others.
    pub group_mean_abs_error: Option<f64>,
    /// Mean |factor error| (the prediction rebased on this run's solo) over agents sharing
    /// with one other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair_mean_abs_factor_error: Option<f64>,
    /// The same over agents sharing with two or more others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_mean_abs_factor_error: Option<f64>,
}

/// What to verify and how.
#[derive(Clone, Debug)]
pub struct VerifySettings {
    /// The plan (`contend plan --json`).
    pub plan: Plan,
    /// Template for the runs: trials, warm-up, duration, iterations, devices, program (the
    /// agents and mode are set per device).
    pub run: RunSettings,
    /// Run on CUDA devices instead of CPU cores.
    pub gpu: bool,
    /// Think time of agent-loop agents, ms.
    pub think_ms: u64,
    /// Also run each sharing agent alone in every trial (the measured factor).
    pub solo: bool,
}

/// Runs one device's group and, with `solo`, each of its agents alone, in an order that
/// flips between trials.
fn run_device(
    run: &RunSettings,
    names: &[String],
    which: &[usize],
    places: &[Placement],
    solo: bool,
    trial: u32,
    progress: &dyn Fn(&str),
) -> Result<Vec<Samples>, ProtocolError> {
    let mut out = Vec::new();
    let alone = |out: &mut Vec<Samples>| -> Result<(), ProtocolError> {
        for (k, &i) in which.iter().enumerate() {
            progress(&format!("trial {trial}/{}: {} alone", run.trials, names[i]));
            out.extend(run_placed(run, names, &[i], &places[k..=k], "solo", trial)?);
        }
        Ok(())
    };
    let solo = solo && which.len() > 1;
    if solo && trial.is_multiple_of(2) {
        alone(&mut out)?;
    }
    out.extend(run_placed(run, names, which, places, "verify", trial)?);
    if solo && !trial.is_multiple_of(2) {
        alone(&mut out)?;
    }
    Ok(out)
}

/// Per trial, the samples (ms) of `agent` in `arm`.
fn per_trial(collected: &[Samples], agent: &str, arm: &str, trials: u32) -> Vec<Vec<f64>> {
    (1..=trials)
        .map(|t| {
            collected
                .iter()
                .filter(|s| s.name.as_deref() == Some(agent) && s.arm.as_deref() == Some(arm) && s.trial == Some(t))
                .flat_map(|s| s.samples_ns.iter().map(|&x| x as f64 / 1e6))
                .collect()
        })
        .collect()
}

/// The median over trials of each trial's shared p99 / solo p99 (trials missing either
/// are skipped; None when none has both).
fn median_trial_ratio(shared: &[Vec<f64>], solo: &[Vec<f64>]) -> Option<f64> {
    let mut ratios: Vec<f64> = shared
        .iter()
        .zip(solo)
        .filter_map(|(a, b)| {
            let (pa, _) = median_trial_p99(std::slice::from_ref(a));
            let (pb, _) = median_trial_p99(std::slice::from_ref(b));
            (pa.is_finite() && pb.is_finite() && pb > 0.0).then(|| pa / pb)
        })
        .collect();
    if ratios.is_empty() {
        return None;
    }
    tailcut_stats::sort_latencies(&mut ratios);
    Some(tailcut_stats::quantile_linear(&ratios, 0.5))
}

/// Runs the check. `progress` receives a line per run.
pub fn run(settings: &VerifySettings, progress: &dyn Fn(&str)) -> Result<VerifyReport, ProtocolError> {
    let cpus = core_affinity::get_core_ids().map_or(1, |c| c.len());
    let mut agents: Vec<AgentSpec> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    // Per device: (gpu, mode, indices into agents, placements).
    let mut devices: Vec<(usize, GroupMode, Vec<usize>, Vec<Placement>)> = Vec::new();
    for (k, g) in settings.plan.gpus.iter().enumerate() {
        let mut which = Vec::new();
        let mut places = Vec::new();
        for (pos, seat) in g.seats.iter().enumerate() {
            let kind = if seat.kind.is_empty() { seat.agent.as_str() } else { seat.kind.as_str() };
            let mut spec = AgentSpec::parse(kind)
                .map_err(|e| ProtocolError::from(BadRun::SeatKind { seat: seat.agent.clone(), kind: kind.to_string(), source: e }))?;
            if spec.kind == crate::agent::AgentKind::AgentLoop {
                spec.think_ms = settings.think_ms;
            }
            if spec.kind.is_cuda() != settings.gpu {
                return Err(BadRun::SeatRunner { seat: seat.agent.clone(), kind: spec.kind.name(), gpu: settings.gpu }.into());
            }
            let place = if settings.gpu {
                let dev = settings.run.devices.get(k).cloned().unwrap_or_else(|| k.to_string());
                if g.mode == GroupMode::Mig {
                    return Err(BadRun::MigNeedsUuids { gpu: g.gpu }.into());
                }
                Placement { cpu: None, device: Some(dev) }
            } else {
                let core = match g.mode {
                    GroupMode::Dedicated | GroupMode::TimeSlicing => k % cpus,
                    GroupMode::Mps => {
                        if g.seats.len() > cpus {
                            return Err(BadRun::MpsTooFewCores { gpu: g.gpu, seats: g.seats.len(), cpus }.into());
                        }
                        (k + pos) % cpus
                    }
                    GroupMode::Mig => {
                        return Err(BadRun::MigOnCpu { gpu: g.gpu }.into());
                    }
                };
                Placement { cpu: Some(core), device: None }
            };
            which.push(agents.len());
            agents.push(spec);
            names.push(seat.agent.clone());
            places.push(place);
        }
        devices.push((g.gpu, g.mode, which, places));
    }
    if agents.is_empty() {
        return Err(BadRun::EmptyPlan.into());
    }
    let run = RunSettings { agents, ..settings.run.clone() };
    if run.trials == 0 {
        return Err(BadRun::NoTrials.into());
    }
    let started = Instant::now();
    let mut collected: Vec<Samples> = Vec::new();
    for trial in 1..=run.trials {
        for d in trial_order(devices.len(), trial) {
            let (gpu, mode, which, places) = &devices[d];
            let label: Vec<&str> = which.iter().map(|&i| names[i].as_str()).collect();
            progress(&format!("trial {trial}/{}: device {gpu} ({}): {}", run.trials, mode.name(), label.join(" + ")));
            collected.extend(run_device(&run, &names, which, places, settings.solo, trial, progress)?);
        }
    }
    let mut seats = Vec::new();
    for g in &settings.plan.gpus {
        for seat in &g.seats {
            let shared = per_trial(&collected, &seat.agent, "verify", run.trials);
            let alone = per_trial(&collected, &seat.agent, "solo", run.trials);
            let (p99, trial_p99_ms) = median_trial_p99(&shared);
            let samples = shared.iter().map(Vec::len).sum();
            let err = p99 / seat.predicted_p99_ms - 1.0;
            let solo_now = Some(median_trial_p99(&alone).0).filter(|x| x.is_finite());
            let measured_factor = median_trial_ratio(&shared, &alone);
            let predicted_factor = seat.solo_p99_ms.filter(|s| *s > 0.0).map(|s| seat.predicted_p99_ms / s);
            let factor_error = measured_factor.zip(predicted_factor).map(|(m, p)| m / p - 1.0);
            seats.push(SeatCheck {
                agent: seat.agent.clone(),
                kind: seat.kind.clone(),
                gpu: g.gpu,
                mode: g.mode,
                samples,
                measured_p99_ms: p99,
                trial_p99_ms,
                objective_ms: seat.objective_ms,
                predicted_p99_ms: seat.predicted_p99_ms,
                prediction_error: err,
                solo_now_p99_ms: solo_now,
                measured_factor,
                predicted_factor,
                factor_error,
                expected_error: seat.expected_error,
                within_expected: seat.expected_error.map(|e| err.abs() <= e),
                met: p99 <= seat.objective_ms,
                band_ms: seat.band_ms,
                inside_band: seat.band_ms.map(|[lo, hi]| lo <= p99 && p99 <= hi),
                p_objective: seat.p_objective,
            });
        }
    }
    Ok(summarise(&settings.plan, seats, run.trials, run.duration.as_secs_f64(), started.elapsed().as_secs_f64(), settings.gpu))
}

/// The median over trials of each trial's p99 (linear quantile; trials without samples
/// are skipped), and the per-trial p99s. NaN when no trial has samples.
pub fn median_trial_p99(per_trial: &[Vec<f64>]) -> (f64, Vec<f64>) {
    let p99s: Vec<f64> = per_trial
        .iter()
        .filter(|v| !v.is_empty())
        .map(|v| {
            let mut v = v.clone();
            tailcut_stats::sort_latencies(&mut v);
            tailcut_stats::quantile_linear(&v, 0.99)
        })
        .collect();
    let mut sorted = p99s.clone();
    tailcut_stats::sort_latencies(&mut sorted);
    let m = if sorted.is_empty() { f64::NAN } else { tailcut_stats::quantile_linear(&sorted, 0.5) };
    (m, p99s)
}

/// Builds the report from the per-seat checks.
pub fn summarise(plan: &Plan, seats: Vec<SeatCheck>, trials: u32, duration_s: f64, run_time_s: f64, gpu: bool) -> VerifyReport {
    let size = |s: &SeatCheck| plan.gpus.iter().find(|g| g.gpu == s.gpu).map_or(1, |g| g.seats.len());
    let mean = |pick: &dyn Fn(usize) -> bool, error: &dyn Fn(&SeatCheck) -> Option<f64>| {
        let v: Vec<f64> = seats
            .iter()
            .filter(|s| matches!(s.mode, GroupMode::TimeSlicing | GroupMode::Mps) && pick(size(s)))
            .filter_map(|s| error(s).map(f64::abs))
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let (absolute, factor) = (|s: &SeatCheck| Some(s.prediction_error), |s: &SeatCheck| s.factor_error);
    VerifyReport {
        tool: "tailcut contend verify".into(),
        target: if gpu { "gpu" } else { "cpu" }.into(),
        trials,
        duration_s,
        run_time_s,
        all_met: seats.iter().all(|s| s.met),
        confidence: plan.confidence,
        pair_mean_abs_error: mean(&|n| n == 2, &absolute),
        group_mean_abs_error: mean(&|n| n >= 3, &absolute),
        pair_mean_abs_factor_error: mean(&|n| n == 2, &factor),
        group_mean_abs_factor_error: mean(&|n| n >= 3, &factor),
        seats,
    }
}

impl VerifyReport {
    /// Text: one row per agent and the summary.
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let mut s = format!(
            "tailcut contend verify — on the {} ({} trial(s) × {:.2} s per device, {:.1} s in all)\n\n",
            self.target, self.trials, self.duration_s, self.run_time_s
        );
        let rows: Vec<Vec<String>> = self
            .seats
            .iter()
            .map(|c| {
                vec![
                    c.agent.clone(),
                    format!("{} {}", c.gpu, c.mode.name()),
                    c.samples.to_string(),
                    format!("{:.3}{}", c.measured_p99_ms, if c.few_samples() { "*" } else { "" }),
                    format!("{:.3}", c.objective_ms),
                    if c.met { "met".into() } else { "MISSED".into() },
                    format!("{:.3}", c.predicted_p99_ms),
                    format!("{:+.1}%", c.prediction_error * 100.0),
                    c.solo_now_p99_ms.map_or("-".into(), |x| format!("{x:.3}")),
                    match (c.measured_factor, c.predicted_factor) {
                        (Some(m), Some(p)) => format!("×{m:.2} / ×{p:.2}"),
                        _ => "-".into(),
                    },
                    c.factor_error.map_or("-".into(), |e| format!("{:+.1}%", e * 100.0)),
                    match (c.expected_error, c.within_expected) {
                        (Some(e), Some(true)) => format!("within ±{:.0}%", e * 100.0),
                        (Some(e), _) => format!("OUTSIDE ±{:.0}%", e * 100.0),
                        _ => "-".into(),
                    },
                    match (c.band_ms, c.inside_band) {
                        (Some([lo, hi]), Some(inside)) => format!("{lo:.3}–{hi:.3} {}", if inside { "in" } else { "OUT" }),
                        _ => "-".into(),
                    },
                    c.p_objective.map_or("-".into(), |p| format!("{:.0}%", p * 100.0)),
                ]
            })
            .collect();
        let head = [
            "agent",
            "device",
            "n",
            "p99 ms",
            "objective",
            "",
            "predicted",
            "error",
            "solo now",
            "factor meas/plan",
            "factor error",
            "expected",
            "band",
            "P(met)",
        ];
        s.push_str(&crate::report::table(&head, &rows));
        if self.seats.iter().any(SeatCheck::few_samples) {
            s.push_str("* under 100 samples per trial: each trial's p99 is close to its maximum; give a longer --duration\n");
        }
        if let Some(e) = self.pair_mean_abs_error {
            let _ = writeln!(s, "\nprediction error, agents sharing with one other: mean |error| {:.1}%", e * 100.0);
        }
        if let Some(e) = self.group_mean_abs_error {
            let _ = writeln!(s, "prediction error, agents sharing with two or more: mean |error| {:.1}%", e * 100.0);
        }
        if let Some(e) = self.pair_mean_abs_factor_error {
            let _ = writeln!(s, "factor error (the prediction rebased on this run's solo p99), pairs: mean |error| {:.1}%", e * 100.0);
        }
        if let Some(e) = self.group_mean_abs_factor_error {
            let _ = writeln!(s, "factor error, two or more: mean |error| {:.1}%", e * 100.0);
        }
        if self.seats.iter().any(|c| c.band_ms.is_some()) {
            let banded: Vec<&SeatCheck> = self.seats.iter().filter(|c| c.band_ms.is_some()).collect();
            let inside = banded.iter().filter(|c| c.inside_band == Some(true)).count();
            let _ = writeln!(
                s,
                "\nband: the plan's prediction ÷ and × its {:.0}% bound factor (the upper end is what the planner held within the objective): {inside} of {} outcomes inside",
                self.confidence * 100.0,
                banded.len()
            );
        }
        let missed: Vec<&str> = self.seats.iter().filter(|c| !c.met).map(|c| c.agent.as_str()).collect();
        if missed.is_empty() {
            s.push_str("\nevery objective met\n");
        } else {
            let _ = writeln!(s, "\nobjective MISSED: {}", missed.join(", "));
        }
        s
    }
}

/// One agent's outcomes over repeated verify runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentScore {
    /// Agent.
    pub agent: String,
    /// Runs it was measured in.
    pub runs: usize,
    /// Runs whose measured p99 met the objective.
    pub met: usize,
    /// Runs with a stated band.
    pub banded: usize,
    /// Runs whose measured p99 fell inside it.
    pub inside_band: usize,
    /// The plan's estimated probability that the objective holds.
    pub p_objective: Option<f64>,
    /// Each run's measured p99, ms.
    pub measured_p99_ms: Vec<f64>,
    /// The objective, ms.
    pub objective_ms: f64,
}

/// Several verify runs of one plan (`contend verify --repeat N`), scored against the
/// plan's promise: the share of (agent, run) objectives met against the confidence the
/// plan was made at, and the share of outcomes inside their stated bands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RepeatReport {
    /// Always `tailcut contend verify --repeat`.
    pub tool: String,
    /// The confidence the plan promised.
    pub confidence: f64,
    /// (agent, run) outcomes.
    pub outcomes: usize,
    /// Of them, objectives met.
    pub met: usize,
    /// met / outcomes.
    pub share_met: f64,
    /// Outcomes with a stated band.
    pub banded: usize,
    /// Of them, inside the band.
    pub inside_band: usize,
    /// The mean of the plan's estimated probabilities over the outcomes that state one.
    pub mean_p_objective: Option<f64>,
    /// Whether the promise held: at confidence C > 0, share met ≥ C; at 0, every objective met.
    pub promise_kept: bool,
    /// Per agent.
    pub agents: Vec<AgentScore>,
    /// Each run.
    pub runs: Vec<VerifyReport>,
}

/// Scores repeated verify runs of one plan.
pub fn score(runs: Vec<VerifyReport>) -> RepeatReport {
    let confidence = runs.first().map_or(0.0, |r| r.confidence);
    let mut agents: Vec<AgentScore> = Vec::new();
    for r in &runs {
        for c in &r.seats {
            let k = match agents.iter().position(|a| a.agent == c.agent) {
                Some(k) => k,
                None => {
                    agents.push(AgentScore {
                        agent: c.agent.clone(),
                        runs: 0,
                        met: 0,
                        banded: 0,
                        inside_band: 0,
                        p_objective: c.p_objective,
                        measured_p99_ms: Vec::new(),
                        objective_ms: c.objective_ms,
                    });
                    agents.len() - 1
                }
            };
            let a = &mut agents[k];
            a.runs += 1;
            a.met += usize::from(c.met);
            a.banded += usize::from(c.inside_band.is_some());
            a.inside_band += usize::from(c.inside_band == Some(true));
            a.measured_p99_ms.push(c.measured_p99_ms);
        }
    }
    let outcomes: usize = agents.iter().map(|a| a.runs).sum();
    let met: usize = agents.iter().map(|a| a.met).sum();
    let share_met = if outcomes == 0 { f64::NAN } else { met as f64 / outcomes as f64 };
    let probs: Vec<f64> =
        agents.iter().filter_map(|a| a.p_objective.map(|p| (p, a.runs))).flat_map(|(p, n)| std::iter::repeat_n(p, n)).collect();
    RepeatReport {
        tool: "tailcut contend verify --repeat".into(),
        confidence,
        outcomes,
        met,
        share_met,
        banded: agents.iter().map(|a| a.banded).sum(),
        inside_band: agents.iter().map(|a| a.inside_band).sum(),
        mean_p_objective: (!probs.is_empty()).then(|| probs.iter().sum::<f64>() / probs.len() as f64),
        promise_kept: if confidence > 0.0 { share_met >= confidence } else { met == outcomes },
        agents,
        runs,
    }
}

impl RepeatReport {
    /// Text: each run's table, then the score per agent and overall.
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        for (k, r) in self.runs.iter().enumerate() {
            let _ = writeln!(s, "── run {} of {} ──", k + 1, self.runs.len());
            s.push_str(&r.render());
            s.push('\n');
        }
        let _ = writeln!(s, "Score over {} runs (plan confidence {:.0}%)\n", self.runs.len(), self.confidence * 100.0);
        let rows: Vec<Vec<String>> = self
            .agents
            .iter()
            .map(|a| {
                vec![
                    a.agent.clone(),
                    format!("{:.3}", a.objective_ms),
                    a.measured_p99_ms.iter().map(|x| format!("{x:.3}")).collect::<Vec<_>>().join(" "),
                    format!("{}/{}", a.met, a.runs),
                    if a.banded > 0 { format!("{}/{}", a.inside_band, a.banded) } else { "-".into() },
                    a.p_objective.map_or("-".into(), |p| format!("{:.0}%", p * 100.0)),
                ]
            })
            .collect();
        s.push_str(&crate::report::table(&["agent", "objective", "measured p99 ms per run", "met", "in band", "P(met) planned"], &rows));
        let _ = writeln!(
            s,
            "\nobjectives met: {} of {} (agent, run) outcomes = {:.0}%{}",
            self.met,
            self.outcomes,
            self.share_met * 100.0,
            self.mean_p_objective.map_or(String::new(), |p| format!("; the plan estimated {:.0}% on average", p * 100.0))
        );
        if self.banded > 0 {
            let _ = writeln!(s, "inside the stated band: {} of {}", self.inside_band, self.banded);
        }
        let _ = writeln!(
            s,
            "{}",
            match (self.confidence > 0.0, self.promise_kept) {
                (true, true) => format!("promise kept: {:.0}% met ≥ the promised {:.0}%", self.share_met * 100.0, self.confidence * 100.0),
                (true, false) =>
                    format!("promise BROKEN: {:.0}% met < the promised {:.0}%", self.share_met * 100.0, self.confidence * 100.0),
                (false, true) => "confidence 0 (planned on the predictions): every objective met".to_string(),
                (false, false) => "confidence 0 (planned on the predictions): objectives MISSED".to_string(),
            }
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{GpuPlan, Seat};

    fn seat(agent: &str, predicted: f64, objective: f64) -> Seat {
        Seat {
            agent: agent.into(),
            kind: "fft".into(),
            profile: None,
            predicted_p99_ms: predicted,
            solo_p99_ms: Some(1.0),
            objective_ms: objective,
            memory_gb: 0.0,
            expected_error: Some(0.1),
            prediction_sd: Some(0.05),
            bound_p99_ms: Some(predicted * 1.1),
            band_ms: Some([predicted * 0.9, predicted * 1.1]),
            margin: Some(objective / (predicted * 1.1) - 1.0),
            p_objective: Some(0.95),
        }
    }

    fn check(agent: &str, gpu: usize, mode: GroupMode, measured: f64, predicted: f64, objective: f64) -> SeatCheck {
        let err = measured / predicted - 1.0;
        SeatCheck {
            agent: agent.into(),
            kind: "fft".into(),
            gpu,
            mode,
            samples: 500,
            measured_p99_ms: measured,
            trial_p99_ms: vec![measured],
            objective_ms: objective,
            predicted_p99_ms: predicted,
            prediction_error: err,
            solo_now_p99_ms: None,
            measured_factor: None,
            predicted_factor: None,
            factor_error: None,
            expected_error: Some(0.1),
            within_expected: Some(err.abs() <= 0.1),
            met: measured <= objective,
            band_ms: Some([predicted * 0.9, predicted * 1.1]),
            inside_band: Some((predicted * 0.9..=predicted * 1.1).contains(&measured)),
            p_objective: Some(0.95),
        }
    }

    /// Three trials of one agent, the second hit by a burst (a 50 ms tail): the median of
    /// per-trial p99s stays with the clean trials; the pooled p99 follows the burst.
    #[test]
    fn one_burst_trial_does_not_move_the_measured_p99() {
        let clean = |scale: f64| (0..500).map(move |k| (1.0 + k as f64 / 500.0) * scale).collect::<Vec<f64>>();
        let mut burst = clean(1.0);
        for x in burst.iter_mut().rev().take(25) {
            *x = 50.0;
        }
        let trials = vec![clean(1.0), burst, clean(1.02)];
        let (m, per) = median_trial_p99(&trials);
        assert_eq!(per.len(), 3);
        assert!((m - per[2]).abs() < 1e-12 && m < 2.1, "{m} from {per:?}");
        let mut pooled: Vec<f64> = trials.concat();
        tailcut_stats::sort_latencies(&mut pooled);
        let p = tailcut_stats::quantile_linear(&pooled, 0.99);
        assert!(p > 40.0, "pooling lets the burst own the p99: {p}");
        assert!(median_trial_p99(&[vec![], vec![]]).0.is_nan());
    }

    /// The measured factor is the median of the trials' own shared/solo ratios: a trial
    /// whose solo run was hit by a burst (ratio ×0.1) does not move it, a trial missing its
    /// solo run is skipped, and no solo run at all gives no factor.
    #[test]
    fn the_measured_factor_is_the_median_of_per_trial_ratios() {
        let flat = |v: f64| vec![v; 200];
        let shared = vec![flat(3.0), flat(3.0), flat(3.3), flat(9.0)];
        let solo = vec![flat(2.0), flat(30.0), flat(2.0), vec![]];
        let f = median_trial_ratio(&shared, &solo).unwrap();
        assert!((f - 1.5).abs() < 1e-9, "ratios 1.5, 0.1, 1.65: median 1.5, got {f}");
        assert_eq!(median_trial_ratio(&shared, &[vec![], vec![], vec![], vec![]]), None);
    }

    /// Five runs of two agents: 9 of 10 objectives met against a promise of 90% keeps it;
    /// the per-agent counts, the bands and the mean planned probability add up.
    #[test]
    fn repeated_runs_score_the_promise() {
        let plan = Plan {
            model: "h100-80gb".into(),
            gpus_used: 1,
            lower_bound: 1,
            method: "exact".into(),
            optimal: true,
            gpus: vec![GpuPlan {
                gpu: 0,
                mode: GroupMode::TimeSlicing,
                seats: vec![seat("a", 2.0, 3.0), seat("b", 2.0, 3.0)],
                why: String::new(),
            }],
            explanations: vec![],
            confidence: 0.9,
            noise: vec![],
        };
        let ts = GroupMode::TimeSlicing;
        let runs: Vec<VerifyReport> = (0..5)
            .map(|k| {
                let b = if k == 3 { 3.2 } else { 2.1 };
                summarise(&plan, vec![check("a", 0, ts, 1.9, 2.0, 3.0), check("b", 0, ts, b, 2.0, 3.0)], 3, 1.0, 5.0, false)
            })
            .collect();
        let r = score(runs);
        assert_eq!((r.outcomes, r.met), (10, 9));
        assert!((r.share_met - 0.9).abs() < 1e-12 && r.promise_kept, "{r:?}");
        assert_eq!((r.banded, r.inside_band), (10, 9), "3.2 ms is outside 1.8–2.2");
        let b = r.agents.iter().find(|a| a.agent == "b").unwrap();
        assert_eq!((b.runs, b.met, b.inside_band), (5, 4, 4));
        assert!((r.mean_p_objective.unwrap() - 0.95).abs() < 1e-12);
        let text = r.render();
        assert!(text.contains("objectives met: 9 of 10 (agent, run) outcomes = 90%") && text.contains("promise kept"), "{text}");
        let mut broken = r.runs.clone();
        broken[0].seats[0].met = false;
        assert!(!score(broken).promise_kept, "8 of 10 breaks a 90% promise");
    }

    #[test]
    fn summary_separates_pairs_from_groups_and_flags_a_miss() {
        let plan = Plan {
            model: "h100-80gb".into(),
            gpus_used: 2,
            lower_bound: 1,
            method: "exact".into(),
            optimal: true,
            gpus: vec![
                GpuPlan { gpu: 0, mode: GroupMode::TimeSlicing, seats: vec![seat("a", 2.0, 3.0), seat("b", 2.0, 3.0)], why: String::new() },
                GpuPlan {
                    gpu: 1,
                    mode: GroupMode::TimeSlicing,
                    seats: vec![seat("c", 2.0, 3.0), seat("d", 2.0, 3.0), seat("e", 2.0, 3.0)],
                    why: String::new(),
                },
            ],
            explanations: vec![],
            confidence: 0.9,
            noise: vec![],
        };
        let ts = GroupMode::TimeSlicing;
        let seats = vec![
            check("a", 0, ts, 2.2, 2.0, 3.0),
            check("b", 0, ts, 1.8, 2.0, 3.0),
            check("c", 1, ts, 3.0, 2.0, 3.0),
            check("d", 1, ts, 2.0, 2.0, 3.0),
            check("e", 1, ts, 3.5, 2.0, 3.0),
        ];
        let mut seats = seats;
        seats[0].factor_error = Some(0.05);
        seats[1].factor_error = Some(-0.15);
        let r = summarise(&plan, seats, 2, 1.0, 10.0, false);
        assert!((r.pair_mean_abs_error.unwrap() - 0.1).abs() < 1e-9);
        assert!((r.pair_mean_abs_factor_error.unwrap() - 0.1).abs() < 1e-9);
        assert_eq!(r.group_mean_abs_factor_error, None);
        assert!((r.group_mean_abs_error.unwrap() - (0.5 + 0.0 + 0.75) / 3.0).abs() < 1e-9);
        assert!(!r.all_met);
        let text = r.render();
        assert!(text.contains("objective MISSED: e"), "{text}");
        assert!(text.contains("OUTSIDE ±10%"), "{text}");
    }
}
