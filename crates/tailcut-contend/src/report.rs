//! Run reports: the JSON document, the text tables, and side-by-side comparison.

use crate::agent::AgentSpec;
use crate::stats::{ArmStats, Degradation, VerdictThresholds};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Where an agent ran.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    /// Pinned CPU.
    pub cpu: Option<usize>,
    /// CUDA device (index or UUID).
    pub device: Option<String>,
}

/// One agent's results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentReport {
    /// Name (`fft`, `gemm`, `fft#2`).
    pub agent: String,
    /// What it ran.
    pub spec: Option<AgentSpec>,
    /// Where it ran.
    pub placement: Placement,
    /// Alone.
    pub solo: ArmStats,
    /// Together with the others (absent in solo mode).
    pub shared: Option<ArmStats>,
    /// Shared / solo factors.
    pub degradation: Option<Degradation>,
    /// One-line reading, from the factors' intervals.
    pub verdict: Option<String>,
    /// False when an interval straddles a verdict threshold (the verdict then says
    /// "unstable"); absent in solo mode and in reports written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict_stable: Option<bool>,
    /// TTFT and TPOT per arm (agents that make model calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenStats>,
}

/// One agent's measured share of the device against its configured share.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShareCheck {
    /// Agent.
    pub agent: String,
    /// Configured share (0–1).
    pub expected: f64,
    /// Measured: shared throughput / solo throughput.
    pub measured: f64,
    /// Allowed absolute difference.
    pub tolerance: f64,
    /// Within tolerance.
    pub ok: bool,
}

/// Time to first token and time per output token of one arm, ms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenArm {
    /// Model calls.
    pub calls: usize,
    /// TTFT median.
    pub ttft_p50_ms: f64,
    /// TTFT p99.
    pub ttft_p99_ms: f64,
    /// TPOT median.
    pub tpot_p50_ms: f64,
    /// TPOT p99.
    pub tpot_p99_ms: f64,
}

/// Token timings of an agent that makes model calls (agent-loop, http).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenStats {
    /// Alone.
    pub solo: Option<TokenArm>,
    /// Shared.
    pub shared: Option<TokenArm>,
}

/// Pooled samples (ms) keyed by (agent, arm).
pub type SamplesByArm = BTreeMap<(String, String), Vec<f64>>;

type Metric = (&'static str, fn(&AgentReport) -> Option<f64>);

/// A whole run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// Always `tailcut contend`.
    pub tool: String,
    /// Sharing mode.
    pub mode: String,
    /// Trials.
    pub trials: u32,
    /// Warm-up per run, s.
    pub warmup_s: f64,
    /// Measurement window per run, s.
    pub duration_s: f64,
    /// CPUs on the host.
    pub host_cpus: usize,
    /// Cost of one timer reading, ns.
    pub timer_overhead_ns: f64,
    /// Timer cost as a share of the fastest agent's solo median iteration.
    pub timer_overhead_share: f64,
    /// Whether that share is under 1%.
    pub timer_overhead_ok: bool,
    /// Verdict thresholds.
    pub thresholds: VerdictThresholds,
    /// What the degradation intervals resample: `N trials` (each factor the median of
    /// the trials' own ratios, the interval a bootstrap over trials) or `samples of one
    /// trial` (within-run only); empty in solo mode and in older reports.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub interval_over: String,
    /// Per agent.
    pub agents: Vec<AgentReport>,
    /// The share checks of `contend run --expect-share`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shares: Vec<ShareCheck>,
    /// Pooled samples (ms) by (agent, arm), kept for plots; written only with `--include-samples`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default, with = "samples_map")]
    pub samples: SamplesByArm,
}

mod samples_map {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct Entry {
        agent: String,
        arm: String,
        ms: Vec<f64>,
    }

    pub fn serialize<S: Serializer>(m: &super::SamplesByArm, s: S) -> Result<S::Ok, S::Error> {
        let v: Vec<Entry> = m.iter().map(|((agent, arm), ms)| Entry { agent: agent.clone(), arm: arm.clone(), ms: ms.clone() }).collect();
        v.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<super::SamplesByArm, D::Error> {
        let v: Vec<Entry> = Vec::deserialize(d)?;
        Ok(v.into_iter().map(|e| ((e.agent, e.arm), e.ms)).collect())
    }
}

impl RunReport {
    /// An empty report.
    pub fn empty() -> RunReport {
        RunReport {
            tool: "tailcut contend".into(),
            mode: "unknown".into(),
            trials: 0,
            warmup_s: 0.0,
            duration_s: 0.0,
            host_cpus: 0,
            timer_overhead_ns: 0.0,
            timer_overhead_share: 0.0,
            timer_overhead_ok: true,
            thresholds: VerdictThresholds::default(),
            interval_over: String::new(),
            agents: Vec::new(),
            shares: Vec::new(),
            samples: BTreeMap::new(),
        }
    }

    /// Checks each agent's measured share of the device against the share it was
    /// configured (`expected`: one for all agents, or one per agent in order). The
    /// measured share is the agent's shared throughput over its solo throughput: the
    /// fraction of the device's work rate it actually got. A share off by more than
    /// `tolerance` (absolute: 0.1 = 10 points) is flagged; this is the silent failure of
    /// sharing configurations that are not enforced.
    pub fn check_shares(&mut self, expected: &[f64], tolerance: f64) {
        self.shares = self
            .agents
            .iter()
            .enumerate()
            .filter_map(|(i, a)| {
                let want = if expected.len() == 1 { expected[0] } else { *expected.get(i)? };
                let got = a.degradation.as_ref().map(|d| d.throughput)?;
                Some(ShareCheck { agent: a.agent.clone(), expected: want, measured: got, ok: (got - want).abs() <= tolerance, tolerance })
            })
            .collect();
    }

    /// Whether every share check passed (true without checks).
    pub fn shares_ok(&self) -> bool {
        self.shares.iter().all(|s| s.ok)
    }

    /// Computes the timer's share of the fastest solo median.
    pub fn finish_timer_check(&mut self) {
        let fastest = self.agents.iter().map(|a| a.solo.p50_ms).filter(|x| x.is_finite() && *x > 0.0).fold(f64::INFINITY, f64::min);
        self.timer_overhead_share = if fastest.is_finite() { self.timer_overhead_ns / (fastest * 1e6) } else { 0.0 };
        self.timer_overhead_ok = self.timer_overhead_share < 0.01;
    }

    /// Text tables and verdict lines.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "tailcut contend — mode {}, {} trial(s) × ({:.1} s warm-up + {:.1} s measured) per arm, arm order interleaved, {} CPU(s)",
            self.mode, self.trials, self.warmup_s, self.duration_s, self.host_cpus
        );
        if let Some(fastest) = self.agents.iter().min_by(|a, b| a.solo.p50_ms.total_cmp(&b.solo.p50_ms)) {
            let _ = writeln!(
                s,
                "timer: one clock reading costs {:.0} ns = {:.3}% of the fastest median iteration ({} {:.3} ms) — {}",
                self.timer_overhead_ns,
                self.timer_overhead_share * 100.0,
                fastest.agent,
                fastest.solo.p50_ms,
                if self.timer_overhead_ok { "under the 1% bound" } else { "OVER the 1% bound: use larger work units" }
            );
        }
        s.push('\n');
        let header = ["agent", "arm", "n", "p50 ms", "p95 ms", "p99 ms", "p99.9 ms", "max ms", "jitter", "throughput/s"];
        let mut rows: Vec<Vec<String>> = Vec::new();
        let f = |x: f64| if x.is_finite() { format!("{x:.3}") } else { "-".into() };
        let o = |x: Option<f64>| x.map_or("-".into(), f);
        for a in &self.agents {
            let mut arms = vec![("solo", &a.solo)];
            if let Some(sh) = &a.shared {
                arms.push(("shared", sh));
            }
            for (arm, st) in arms {
                rows.push(vec![
                    a.agent.clone(),
                    arm.into(),
                    st.samples.to_string(),
                    f(st.p50_ms),
                    f(st.p95_ms),
                    o(st.p99_ms),
                    o(st.p999_ms),
                    f(st.max_ms),
                    format!("{:.2}", st.jitter),
                    format!("{:.1}", st.throughput_per_s),
                ]);
            }
        }
        s.push_str(&table(&header, &rows));
        let degs: Vec<&AgentReport> = self.agents.iter().filter(|a| a.degradation.is_some()).collect();
        if !degs.is_empty() {
            if self.interval_over.ends_with("trials") {
                let _ = writeln!(
                    s,
                    "\nDegradation, shared / solo: median over trials of each trial's own ratio (95% interval over the {}: bootstrap,\n\
                     widened to the t interval of the trials' log ratios)",
                    self.interval_over
                );
            } else {
                s.push_str(
                    "\nDegradation, shared / solo (bootstrap 95% interval over the samples of one trial: it does not show how much\n\
                     the factor moves from run to run; give --trials 3 or more)\n",
                );
            }
            let header = ["agent", "p50", "p95", "p99", "p99.9", "jitter", "throughput"];
            let mut rows = Vec::new();
            for a in &degs {
                let Some(d) = &a.degradation else { continue };
                let cell = |name: &str, v: Option<f64>| match (v, d.ci95.get(name)) {
                    (Some(v), Some(ci)) => format!("×{v:.2} ({:.2}–{:.2})", ci[0], ci[1]),
                    (Some(v), None) => format!("×{v:.2}"),
                    (None, _) => "-".into(),
                };
                rows.push(vec![
                    a.agent.clone(),
                    cell("p50", Some(d.p50)),
                    cell("p95", Some(d.p95)),
                    cell("p99", d.p99),
                    cell("p999", d.p999),
                    format!("×{:.2}", d.jitter),
                    format!("×{:.2} ({:+.1}%)", d.throughput, (d.throughput - 1.0) * 100.0),
                ]);
            }
            s.push_str(&table(&header, &rows));
            s.push('\n');
            for a in &degs {
                if let Some(v) = &a.verdict {
                    let _ = writeln!(s, "{}: {v}", a.agent);
                }
            }
        }
        let tokens: Vec<&AgentReport> = self.agents.iter().filter(|a| a.tokens.is_some()).collect();
        if !tokens.is_empty() {
            s.push_str(
                "
Model calls: time to first token and time per output token, p50 / p99 ms
",
            );
            let header = ["agent", "arm", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99"];
            let mut rows = Vec::new();
            for a in tokens {
                let Some(t) = &a.tokens else { continue };
                for (arm, x) in [("solo", &t.solo), ("shared", &t.shared)] {
                    let Some(x) = x else { continue };
                    let f = |v: f64| if v.is_finite() { format!("{v:.3}") } else { "-".into() };
                    rows.push(vec![a.agent.clone(), arm.into(), f(x.ttft_p50_ms), f(x.ttft_p99_ms), f(x.tpot_p50_ms), f(x.tpot_p99_ms)]);
                }
            }
            s.push_str(&table(&header, &rows));
        }
        if !self.shares.is_empty() {
            s.push_str(
                "
Share of the device: shared throughput / solo throughput
",
            );
            for c in &self.shares {
                let _ = writeln!(
                    s,
                    "{}: configured {:.2}, measured {:.2} — {}",
                    c.agent,
                    c.expected,
                    c.measured,
                    if c.ok {
                        format!("within ±{:.2}", c.tolerance)
                    } else {
                        format!("NOT ENFORCED: off by {:+.2} (tolerance ±{:.2})", c.measured - c.expected, c.tolerance)
                    }
                );
            }
        }
        s
    }
}

/// Aligned plain-text table (first column left, the rest right).
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut w: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(w.len()) {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            let pad = " ".repeat(w[i] - c.chars().count());
            if i > 0 {
                out.push_str("  ");
            }
            if i == 0 {
                out.push_str(c);
                out.push_str(&pad);
            } else {
                out.push_str(&pad);
                out.push_str(c);
            }
        }
        out.trim_end().to_string() + "\n"
    };
    let mut s = line(header.to_vec());
    s.push_str(&(w.iter().map(|n| "─".repeat(*n)).collect::<Vec<_>>().join("  ") + "\n"));
    for r in rows {
        s.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    s
}

/// Two runs side by side (e.g. time-slicing vs MIG), per agent.
pub fn compare(a: &RunReport, b: &RunReport, label_a: &str, label_b: &str) -> String {
    let mut s = format!("{label_a}: mode {}    {label_b}: mode {}\n\n", a.mode, b.mode);
    let header = ["agent", "metric", label_a, label_b, "change"];
    let mut rows = Vec::new();
    let names: Vec<&String> = {
        let mut n: Vec<&String> = a.agents.iter().map(|x| &x.agent).collect();
        for x in &b.agents {
            if !n.contains(&&x.agent) {
                n.push(&x.agent);
            }
        }
        n
    };
    for name in names {
        let (ra, rb) = (a.agents.iter().find(|x| &x.agent == name), b.agents.iter().find(|x| &x.agent == name));
        let metrics: [Metric; 8] = [
            ("solo p50 ms", |r| Some(r.solo.p50_ms)),
            ("solo p99 ms", |r| r.solo.p99_ms),
            ("shared p50 ms", |r| r.shared.as_ref().map(|x| x.p50_ms)),
            ("shared p99 ms", |r| r.shared.as_ref().and_then(|x| x.p99_ms)),
            ("p50 factor", |r| r.degradation.as_ref().map(|d| d.p50)),
            ("p99 factor", |r| r.degradation.as_ref().and_then(|d| d.p99)),
            ("jitter shared", |r| r.shared.as_ref().map(|x| x.jitter)),
            ("throughput factor", |r| r.degradation.as_ref().map(|d| d.throughput)),
        ];
        for (label, get) in metrics {
            let va = ra.and_then(get);
            let vb = rb.and_then(get);
            let fmt = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.3}"));
            let change = match (va, vb) {
                (Some(x), Some(y)) if x != 0.0 => format!("{:+.1}%", (y / x - 1.0) * 100.0),
                _ => "-".into(),
            };
            rows.push(vec![name.clone(), label.into(), fmt(va), fmt(vb), change]);
        }
    }
    s.push_str(&table(&header, &rows));
    s
}
