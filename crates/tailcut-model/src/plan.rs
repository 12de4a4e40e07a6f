//! Plans and their predictions: what the learned policies choose between.
//!
//! A [`Plan`] is one of the fixed families (single, delayed hedge — a delay of 0 is the
//! immediate pair race —, queue cutover, cascade) with concrete providers and timers. A
//! [`Predictor`] holds tables precomputed from a [`Model`]: per provider and warmth, the
//! survival `P(L > t)` on a uniform grid up to 1.5× the deadline (failures count as never
//! finishing), the mean time past the grid, the chance a cutover poll finds it queued,
//! `P(warm | gap)` per gap bucket, and the pairs' slow-together lift. Shifting a survival
//! by a delay is then an index offset, so predicting one plan is one pass over ~100
//! numbers, and [`Predictor::decide`] memoises its choice per (quantised P(warm) of each
//! provider) until the next refresh: a decision is a table lookup in the steady state.
//!
//! The predictions are approximations, stated where made: attempts on different
//! providers are independent apart from the lift; a cutover's kept primary follows the
//! latencies of attempts that had started by the poll; beyond the grid the joint tail
//! keeps its mass for the shorter of the tails' mean excesses.

use crate::model::{Model, GAP_EDGES_S};
use crate::sketch::DecayedSketch;
use serde::Serialize;

/// Grid points of the survival tables.
pub const GRID: usize = 96;

/// A concrete plan for one request.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "plan", rename_all = "snake_case")]
pub enum Plan {
    /// One provider.
    Single {
        /// Provider index.
        p: usize,
    },
    /// Launch `h` if `p` has no valid result `delay_s` after its submit (0 = race both).
    Hedge {
        /// Primary.
        p: usize,
        /// Hedge.
        h: usize,
        /// Delay, s.
        delay_s: f64,
    },
    /// Poll `p` at `poll_s`; if queued, cancel it and launch `h`; else hedge at `safety_s`.
    Cutover {
        /// Primary.
        p: usize,
        /// Hedge.
        h: usize,
        /// Poll time, s.
        poll_s: f64,
        /// Safety-hedge time, s.
        safety_s: f64,
    },
    /// A cutover that also escalates to `f` at `escalate_s` after a switch.
    Cascade {
        /// Primary.
        p: usize,
        /// Hedge.
        h: usize,
        /// Fallback.
        f: usize,
        /// Poll time, s.
        poll_s: f64,
        /// Safety-hedge time, s.
        safety_s: f64,
        /// Escalation time, s.
        escalate_s: f64,
    },
}

fn g(x: f64) -> String {
    let mut t = format!("{x:.2}");
    while t.ends_with('0') {
        t.pop();
    }
    if t.ends_with('.') {
        t.pop();
    }
    t
}

impl Plan {
    /// A label in the sweep's spelling (`hedge:runpod->cerebrium@7.5s`).
    pub fn label(&self, names: &[String]) -> String {
        let n = |i: usize| names.get(i).map_or("?", String::as_str);
        match *self {
            Plan::Single { p } => format!("single:{}", n(p)),
            Plan::Hedge { p, h, delay_s } => format!("hedge:{}->{}@{}s", n(p), n(h), g(delay_s)),
            Plan::Cutover { p, h, poll_s, safety_s } => format!("cutover:{}->{}@q{}s+s{}s", n(p), n(h), g(poll_s), g(safety_s)),
            Plan::Cascade { p, h, f, poll_s, safety_s, escalate_s } => {
                format!("cascade:{}->{}->{}@q{}s+s{}s+e{}s", n(p), n(h), n(f), g(poll_s), g(safety_s), g(escalate_s))
            }
        }
    }

    /// The primary.
    pub fn primary(&self) -> usize {
        match *self {
            Plan::Single { p } | Plan::Hedge { p, .. } | Plan::Cutover { p, .. } | Plan::Cascade { p, .. } => p,
        }
    }

    /// Most attempts the plan keeps live at once (a queued primary cancelled at the poll
    /// is counted until confirmed, so a cutover needs 2 and a cascade 3 at worst... the
    /// sweep's cascade escalates long after the queued cancel is confirmed: 2).
    pub fn live_needed(&self) -> usize {
        match self {
            Plan::Single { .. } => 1,
            _ => 2,
        }
    }
}

/// What the model predicts for a plan.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Prediction {
    /// P(latency > deadline).
    pub miss: f64,
    /// Expected active cost, $.
    pub active_usd: f64,
    /// Expected billed idle, $.
    pub idle_usd: f64,
    /// Expected extra attempts (launched − 1).
    pub extra: f64,
}

impl Prediction {
    /// Active plus billed idle.
    pub fn cost_usd(&self) -> f64 {
        self.active_usd + self.idle_usd
    }

    /// The cost `auto` minimises under `basis`.
    pub fn cost_on(&self, basis: CostBasis) -> f64 {
        match basis {
            CostBasis::Active => self.active_usd,
            CostBasis::Billed => self.cost_usd(),
        }
    }
}

/// Which cost `auto` minimises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CostBasis {
    /// Execution seconds × rate.
    Active,
    /// Active plus each started worker's billed idle window.
    Billed,
}

/// Settings of the `auto` choice.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AutoSettings {
    /// Deadline, s.
    pub deadline_s: f64,
    /// Target P(latency > deadline).
    pub target_miss: f64,
    /// Most expected extra attempts per request a plan may have.
    pub max_extra: f64,
    /// Live-attempt cap (plans needing more are never chosen).
    pub max_live: usize,
    /// Cutover poll, s.
    pub poll_s: f64,
    /// Safety hedge, s.
    pub safety_s: f64,
    /// Cascade escalation, s.
    pub escalate_s: f64,
    /// Billed seconds of an attempt that never finishes (the per-attempt cap).
    pub cap_s: f64,
    /// The cost minimised.
    pub cost: CostBasis,
}

impl Default for AutoSettings {
    fn default() -> Self {
        AutoSettings {
            deadline_s: 60.0,
            target_miss: 0.05,
            max_extra: 0.35,
            max_live: 2,
            poll_s: 2.5,
            safety_s: 8.5,
            escalate_s: 25.0,
            cap_s: 300.0,
            cost: CostBasis::Active,
        }
    }
}

#[derive(Debug, Clone, Default)]
struct ProviderTables {
    rate: f64,
    idle_usd: f64,
    /// Survival on the grid for: all, warm, cold, started-by-poll.
    all: Vec<f64>,
    warm: Option<Vec<f64>>,
    cold: Option<Vec<f64>>,
    started: Option<Vec<f64>>,
    /// E[min(L, cap) − H | L > H].
    tail_all: f64,
    p_queued: Option<f64>,
    p_warm: Vec<Option<f64>>,
    delays_steps: Vec<usize>,
    samples: u64,
}

/// `auto`'s choice for one context: `base`, or with probability `w` the plan in `alt`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Choice {
    /// The in-budget plan.
    pub base: (Plan, Prediction),
    /// A better plan over budget, and the probability of running it.
    pub alt: Option<(Plan, Prediction, f64)>,
}

/// Relative cost difference under which `auto` treats two plans as costing the same.
pub const COST_TIE: f64 = 0.02;

/// Levels P(warm) is quantised to for the memo: 0, 1/4, ..., 1, and "unknown".
const LEVELS: usize = 6;
const UNKNOWN_LEVEL: usize = 5;

/// Precomputed tables and the memoised `auto` choices.
#[derive(Debug, Clone)]
pub struct Predictor {
    settings: AutoSettings,
    dt: f64,
    providers: Vec<ProviderTables>,
    lift: Vec<f64>,
    memo: Vec<Option<Choice>>,
    epoch: u64,
}

fn survival(s: &DecayedSketch, p_bad: f64, dt: f64, out: &mut Vec<f64>) {
    let grid: Vec<f64> = (0..GRID).map(|k| k as f64 * dt).collect();
    let mut cdf = vec![0.0; GRID];
    s.cdf_on(&grid, &mut cdf);
    out.clear();
    out.extend(cdf.iter().map(|c| (p_bad + (1.0 - p_bad) * (1.0 - c)).clamp(0.0, 1.0)));
    if let Some(first) = out.first_mut() {
        *first = 1.0;
    }
}

fn tail_excess(s: &DecayedSketch, p_bad: f64, h: f64, cap: f64) -> f64 {
    // Mean of min(L, cap) − h over L > h, with failures running to the cap.
    let (mut num, mut den) = (0.0, 0.0);
    if let Some((mean, share)) = s.mean_excess(h, cap) {
        num += mean * (1.0 - p_bad) * share;
        den += (1.0 - p_bad) * share;
    }
    num += (cap - h).max(0.0) * p_bad;
    den += p_bad;
    if den > 0.0 {
        num / den
    } else {
        0.0
    }
}

impl Predictor {
    /// Tables for `settings` from the model's current state.
    pub fn new(model: &Model, settings: AutoSettings) -> Predictor {
        let mut p = Predictor { settings, dt: 1.0, providers: Vec::new(), lift: Vec::new(), memo: Vec::new(), epoch: 0 };
        p.refresh(model);
        p
    }

    /// The settings.
    pub fn settings(&self) -> &AutoSettings {
        &self.settings
    }

    /// Rebuilds the tables from the model and clears the memo.
    pub fn refresh(&mut self, model: &Model) {
        let s = self.settings;
        let h = (1.5 * s.deadline_s).max(s.escalate_s + 1.0).min(s.cap_s);
        self.dt = h / (GRID - 1) as f64;
        let dt = self.dt;
        self.providers = model
            .providers
            .iter()
            .map(|pm| {
                let bad = pm.p_bad();
                let mut all = Vec::new();
                survival(&pm.latency, bad, dt, &mut all);
                let opt = |sk: &DecayedSketch| {
                    (sk.samples() >= 3).then(|| {
                        let mut v = Vec::new();
                        survival(sk, bad, dt, &mut v);
                        v
                    })
                };
                let delays_steps = [0.5, 0.75, 0.9, 0.95]
                    .iter()
                    .filter_map(|q| pm.latency.quantile(*q))
                    .map(|d| ((d / dt).round() as usize).clamp(1, GRID - 1))
                    .collect::<Vec<_>>();
                ProviderTables {
                    rate: pm.rate_usd_per_s,
                    idle_usd: pm.rate_usd_per_s * pm.idle_s,
                    warm: opt(&pm.latency_warm),
                    cold: opt(&pm.latency_cold),
                    started: opt(&pm.latency_started),
                    tail_all: tail_excess(&pm.latency, bad, h, s.cap_s),
                    all,
                    p_queued: pm.has_queue_signal().then(|| pm.queued_at_poll.rate(0.3, 1.0)),
                    p_warm: (0..=GAP_EDGES_S.len()).map(|k| pm.p_warm(if k == 0 { 0.0 } else { GAP_EDGES_S[k - 1] })).collect(),
                    delays_steps,
                    samples: pm.samples(),
                }
            })
            .collect();
        let n = self.providers.len();
        self.lift = (0..n * n).map(|ij| model.lift(ij / n, ij % n)).collect();
        self.memo = if n <= 4 { vec![None; LEVELS.pow(n as u32)] } else { Vec::new() };
        self.epoch += 1;
    }

    /// Refreshes so far.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Grid step, s.
    pub fn dt(&self) -> f64 {
        self.dt
    }

    /// P(warm) of provider `p` after an idle gap (None = unknown).
    pub fn p_warm(&self, p: usize, gap_s: Option<f64>) -> Option<f64> {
        let t = self.providers.get(p)?;
        let gap = gap_s?;
        t.p_warm.get(crate::model::gap_bucket(gap).min(t.p_warm.len() - 1)).copied().flatten()
    }

    fn level(&self, p: usize, gap_s: Option<f64>) -> usize {
        let t = &self.providers[p];
        if t.warm.is_none() || t.cold.is_none() {
            return UNKNOWN_LEVEL;
        }
        match self.p_warm(p, gap_s) {
            Some(w) => (w * 4.0).round().clamp(0.0, 4.0) as usize,
            None => UNKNOWN_LEVEL,
        }
    }

    fn mixed(&self, p: usize, level: usize) -> Vec<f64> {
        let t = &self.providers[p];
        match (level, &t.warm, &t.cold) {
            (l, Some(w), Some(c)) if l < UNKNOWN_LEVEL => {
                let pw = l as f64 / 4.0;
                w.iter().zip(c).map(|(a, b)| pw * a + (1.0 - pw) * b).collect()
            }
            _ => t.all.clone(),
        }
    }

    fn k_deadline(&self) -> (usize, f64) {
        let x = self.settings.deadline_s / self.dt;
        let k = (x.floor() as usize).min(GRID - 2);
        (k, x - k as f64)
    }

    fn at_deadline(&self, s: &[f64]) -> f64 {
        let (k, f) = self.k_deadline();
        s[k] * (1.0 - f) + s[k + 1] * f
    }

    /// ∫ from step `from` to the end of the grid of `s`, plus the tail beyond it.
    fn integral(&self, s: &[f64], from: usize, tail: f64) -> f64 {
        let mut acc = 0.0;
        for k in from..GRID - 1 {
            acc += 0.5 * (s[k] + s[k + 1]);
        }
        acc * self.dt + s[GRID - 1] * tail
    }

    fn joint(&self, a: &[f64], b: &[f64], shift: usize, lift: f64, out: &mut [f64]) {
        for k in 0..GRID {
            out[k] = if k < shift {
                a[k]
            } else {
                let (x, y) = (a[k], b[k - shift]);
                (x * y * lift).min(x).min(y)
            };
        }
    }

    /// Predicts one plan with each provider's survival given by `surv`.
    fn predict_with(&self, plan: &Plan, surv: &[Vec<f64>]) -> Prediction {
        let t = &self.providers;
        let lift = |a: usize, b: usize| self.lift[a * t.len() + b];
        let steps = |s: f64| ((s / self.dt).round() as usize).min(GRID - 1);
        let mut buf = [0.0; GRID];
        match *plan {
            Plan::Single { p } => {
                let s = &surv[p];
                Prediction {
                    miss: self.at_deadline(s),
                    active_usd: t[p].rate * self.integral(s, 0, t[p].tail_all),
                    idle_usd: t[p].idle_usd,
                    extra: 0.0,
                }
            }
            Plan::Hedge { p, h, delay_s } => {
                let m = steps(delay_s);
                self.joint(&surv[p], &surv[h], m, lift(p, h), &mut buf);
                let tail = t[p].tail_all.min(t[h].tail_all);
                let launch = if m == 0 { 1.0 } else { surv[p][m] };
                Prediction {
                    miss: self.at_deadline(&buf),
                    active_usd: t[p].rate * self.integral(&buf, 0, tail) + t[h].rate * self.integral(&buf, m, tail),
                    idle_usd: t[p].idle_usd + t[h].idle_usd * launch,
                    extra: launch,
                }
            }
            Plan::Cutover { p, h, poll_s, safety_s } | Plan::Cascade { p, h, poll_s, safety_s, .. } => {
                let a = t[p].p_queued.unwrap_or(0.0);
                let (mp, ms) = (steps(poll_s), steps(safety_s));
                // Switched branch: the hedge from the poll (and the fallback from escalation).
                let mut sw = [1.0; GRID];
                sw[mp..GRID].copy_from_slice(&surv[h][..GRID - mp]);
                let tail_sw;
                let mut sw_active = 0.0;
                let mut sw_idle = t[h].idle_usd;
                let mut sw_extra = 1.0;
                if let Plan::Cascade { f, escalate_s, .. } = *plan {
                    let me = steps(escalate_s);
                    let mut j = [0.0; GRID];
                    self.joint(&sw, &surv[f], me, lift(h, f), &mut j);
                    sw = j;
                    tail_sw = t[h].tail_all.min(t[f].tail_all);
                    let launched_f = sw[me];
                    sw_active += t[f].rate * self.integral(&sw, me, tail_sw);
                    sw_idle += t[f].idle_usd * launched_f;
                    sw_extra += launched_f;
                } else {
                    tail_sw = t[h].tail_all;
                }
                sw_active += t[h].rate * self.integral(&sw, mp, tail_sw);
                // Kept branch: the started primary, safety hedge at `safety`.
                let started = t[p].started.as_ref().unwrap_or(&surv[p]);
                self.joint(started, &surv[h], ms, lift(p, h), &mut buf);
                let tail_k = t[p].tail_all.min(t[h].tail_all);
                let kept_launch = started[ms];
                let kept_active = t[p].rate * self.integral(&buf, 0, tail_k) + t[h].rate * self.integral(&buf, ms, tail_k);
                let kept_idle = t[p].idle_usd + t[h].idle_usd * kept_launch;
                let mut mix = [0.0; GRID];
                for k in 0..GRID {
                    mix[k] = a * sw[k] + (1.0 - a) * buf[k];
                }
                Prediction {
                    miss: self.at_deadline(&mix),
                    active_usd: a * sw_active + (1.0 - a) * kept_active,
                    idle_usd: a * sw_idle + (1.0 - a) * kept_idle,
                    extra: a * sw_extra + (1.0 - a) * kept_launch,
                }
            }
        }
    }

    /// Predicts `plan` for a request arriving after the given idle gaps.
    pub fn predict(&self, plan: &Plan, gaps: &[Option<f64>]) -> Prediction {
        let surv: Vec<Vec<f64>> = (0..self.providers.len()).map(|p| self.mixed(p, self.level(p, gaps.get(p).copied().flatten()))).collect();
        self.predict_with(plan, &surv)
    }

    /// Every candidate plan: singles; for each primary and partner the race, hedges at
    /// the primary's learned p50/p75/p90/p95, a cutover when the primary has a queue
    /// signal, and every cascade.
    pub fn candidates(&self) -> Vec<Plan> {
        let n = self.providers.len();
        let s = self.settings;
        let mut out: Vec<Plan> = (0..n).map(|p| Plan::Single { p }).collect();
        if s.max_live < 2 {
            return out;
        }
        for p in 0..n {
            for h in (0..n).filter(|&h| h != p) {
                out.push(Plan::Hedge { p, h, delay_s: 0.0 });
                let mut last = 0;
                for &m in &self.providers[p].delays_steps {
                    if m != last {
                        out.push(Plan::Hedge { p, h, delay_s: m as f64 * self.dt });
                        last = m;
                    }
                }
                if self.providers[p].p_queued.is_some() {
                    out.push(Plan::Cutover { p, h, poll_s: s.poll_s, safety_s: s.safety_s });
                    for f in (0..n).filter(|&f| f != p && f != h) {
                        out.push(Plan::Cascade { p, h, f, poll_s: s.poll_s, safety_s: s.safety_s, escalate_s: s.escalate_s });
                    }
                }
            }
        }
        out
    }

    /// The choice for one context: the cheapest plan meeting the miss target within the
    /// extra-load budget; else the least predicted miss within it. When a plan outside the
    /// budget would do better (it meets the target, or misses less), the choice is a
    /// SingleR-style mix: that plan with probability `w` and the in-budget one otherwise,
    /// `w` set so that the expected extra load equals the budget.
    fn choose(&self, surv: &[Vec<f64>]) -> Choice {
        let s = self.settings;
        let basis = s.cost;
        let preds: Vec<(Plan, Prediction)> = self
            .candidates()
            .into_iter()
            .filter(|p| p.live_needed() <= s.max_live)
            .map(|p| {
                let pr = self.predict_with(&p, surv);
                (p, pr)
            })
            .collect();
        let cheapest = |it: &mut dyn Iterator<Item = &(Plan, Prediction)>| -> Option<(Plan, Prediction)> {
            it.fold(None, |best: Option<(Plan, Prediction)>, (p, pr)| match best {
                Some((_, b))
                    if !(pr.cost_on(basis) < b.cost_on(basis) - 1e-12
                        || (pr.cost_on(basis) <= b.cost_on(basis) + 1e-12 && pr.miss < b.miss)) =>
                {
                    best
                }
                _ => Some((*p, *pr)),
            })
        };
        let least_miss = |it: &mut dyn Iterator<Item = &(Plan, Prediction)>| -> Option<(Plan, Prediction)> {
            it.fold(None, |best: Option<(Plan, Prediction)>, (p, pr)| match best {
                Some((_, b)) if !(pr.miss < b.miss - 1e-9 || (pr.miss <= b.miss + 1e-9 && pr.cost_on(basis) < b.cost_on(basis))) => best,
                _ => Some((*p, *pr)),
            })
        };
        let within = |pr: &Prediction| pr.extra <= s.max_extra + 1e-9;
        let meets = |pr: &Prediction| pr.miss <= s.target_miss;
        let fallback = (Plan::Single { p: 0 }, Prediction { miss: 1.0, active_usd: 0.0, idle_usd: 0.0, extra: 0.0 });
        if let Some(best) = cheapest(&mut preds.iter().filter(|(_, pr)| within(pr) && meets(pr))) {
            // Plans within COST_TIE of the cheapest cost the same for practical purposes:
            // among them take the least predicted miss (a queue cutover costs what the
            // primary alone costs when the primary is warm, and misses less).
            let bar = best.1.cost_on(basis) * (1.0 + COST_TIE) + 1e-12;
            let pick = least_miss(&mut preds.iter().filter(|(_, pr)| within(pr) && meets(pr) && pr.cost_on(basis) <= bar)).unwrap_or(best);
            return Choice { base: pick, alt: None };
        }
        let base = least_miss(&mut preds.iter().filter(|(_, pr)| within(pr))).unwrap_or(fallback);
        let over = cheapest(&mut preds.iter().filter(|(_, pr)| meets(pr)))
            .or_else(|| least_miss(&mut preds.iter()))
            .filter(|(_, pr)| pr.miss < base.1.miss - 1e-9 && pr.extra > base.1.extra);
        match over {
            Some(alt) => {
                let w = ((s.max_extra - base.1.extra) / (alt.1.extra - base.1.extra)).clamp(0.0, 1.0);
                Choice { base, alt: (w > 0.0).then_some((alt.0, alt.1, w)) }
            }
            None => Choice { base, alt: None },
        }
    }

    /// The `auto` choice for a request arriving after the given idle gaps (one per
    /// provider, None = unknown); `u` is a uniform draw in [0, 1) for the mixed choice.
    /// Memoised per quantised P(warm) until the next [`Predictor::refresh`].
    pub fn decide(&mut self, gaps: &[Option<f64>], u: f64) -> (Plan, Prediction) {
        let c = self.choice(gaps);
        match c.alt {
            Some((plan, pr, w)) if u < w => (plan, pr),
            _ => c.base,
        }
    }

    /// The (possibly mixed) choice for a context; see [`Predictor::decide`].
    pub fn choice(&mut self, gaps: &[Option<f64>]) -> Choice {
        let n = self.providers.len();
        if n == 0 {
            return Choice {
                base: (Plan::Single { p: 0 }, Prediction { miss: 1.0, active_usd: 0.0, idle_usd: 0.0, extra: 0.0 }),
                alt: None,
            };
        }
        let levels: Vec<usize> = (0..n).map(|p| self.level(p, gaps.get(p).copied().flatten())).collect();
        let key = levels.iter().fold(0usize, |k, l| k * LEVELS + l);
        if let Some(Some(hit)) = self.memo.get(key) {
            return *hit;
        }
        let surv: Vec<Vec<f64>> = (0..n).map(|p| self.mixed(p, levels[p])).collect();
        let choice = self.choose(&surv);
        if let Some(slot) = self.memo.get_mut(key) {
            *slot = Some(choice);
        }
        choice
    }

    /// Attempts the model has seen of provider `p`.
    pub fn samples(&self, p: usize) -> u64 {
        self.providers.get(p).map_or(0, |t| t.samples)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ModelConfig, Observation, Outcome};

    fn obs(p: usize, l: f64, q: Option<f64>) -> Observation {
        Observation { provider: p, outcome: Outcome::Valid { latency_s: l }, queue_s: q, idle_gap_s: None, warm: None }
    }

    /// RunPod-like primary (2/3 fast at 6 s, 1/3 slow at 100 s, queue signal) and a
    /// Cerebrium-like steady 19 s partner.
    fn moss_like() -> Model {
        let mut m = Model::new(
            &[("rp".into(), 0.000306, 60.0), ("cer".into(), 0.000736, 0.0)],
            ModelConfig { half_life: 1e6, ..ModelConfig::default() },
        );
        for i in 0..300 {
            let slow = i % 3 == 0;
            m.observe_request(&[
                obs(0, if slow { 100.0 } else { 6.0 + (i % 5) as f64 * 0.3 }, Some(if slow { 15.0 } else { 1.2 })),
                obs(1, 19.0 + (i % 4) as f64 * 0.2, None),
            ]);
        }
        m
    }

    #[test]
    fn single_predictions_match_the_data() {
        let m = moss_like();
        let p = Predictor::new(&m, AutoSettings::default());
        let single = p.predict(&Plan::Single { p: 0 }, &[None, None]);
        assert!((single.miss - 0.34).abs() < 0.03, "{single:?}");
        // Active: (2/3 × ~6.6 s + 1/3 × 100 s) × rate.
        let want = (2.0 / 3.0 * 6.6 + 100.0 / 3.0) * 0.000306;
        assert!((single.active_usd / want - 1.0).abs() < 0.1, "{} vs {want}", single.active_usd);
        assert_eq!(single.idle_usd, 0.000306 * 60.0);
    }

    #[test]
    fn auto_picks_the_cutover_for_the_moss_shape() {
        let m = moss_like();
        let active = AutoSettings { cost: CostBasis::Active, ..AutoSettings::default() };
        let mut p = Predictor::new(&m, active);
        let (plan, pr) = p.decide(&[None, None], 0.5);
        assert_eq!(plan, Plan::Cutover { p: 0, h: 1, poll_s: 2.5, safety_s: 8.5 }, "{pr:?}");
        assert!(pr.miss < 0.05 && (pr.extra - 0.34).abs() < 0.05, "{pr:?}");
        // The memo answers the same.
        assert_eq!(p.decide(&[None, None], 0.5).0, plan);
        // With no extra load allowed only singles remain: least miss is the partner.
        let mut tight = Predictor::new(&m, AutoSettings { max_extra: 0.0, ..active });
        assert_eq!(tight.decide(&[None, None], 0.5).0, Plan::Single { p: 1 });
    }

    #[test]
    fn over_budget_plans_are_mixed_to_the_budget() {
        // Two independent providers, each slow one time in three: no plan meets 5 %, and
        // every plan that helps needs ≥ 1/3 extra attempts.
        let mut m =
            Model::new(&[("a".into(), 0.001, 0.0), ("b".into(), 0.001, 0.0)], ModelConfig { half_life: 1e6, ..ModelConfig::default() });
        for i in 0..300 {
            m.observe_request(&[
                obs(0, if i % 3 == 0 { 100.0 } else { 6.0 }, None),
                obs(1, if (i / 3) % 3 == 1 { 100.0 } else { 7.0 }, None),
            ]);
        }
        let mut p = Predictor::new(&m, AutoSettings { max_extra: 0.2, ..AutoSettings::default() });
        let c = p.choice(&[None, None]);
        let (_, alt, w) = c.alt.expect("a mixed choice");
        assert!(alt.miss < c.base.1.miss, "{c:?}");
        assert!((w * alt.extra + (1.0 - w) * c.base.1.extra - 0.2).abs() < 1e-9, "{c:?}");
        assert_eq!(p.decide(&[None, None], 0.999).0, c.base.0);
    }

    #[test]
    fn hedge_prediction_uses_the_joint_tail() {
        let m = moss_like();
        let p = Predictor::new(&m, AutoSettings::default());
        let h = p.predict(&Plan::Hedge { p: 0, h: 1, delay_s: 10.0 }, &[None, None]);
        assert!(h.miss < 0.02, "{h:?}");
        assert!((h.extra - 0.34).abs() < 0.05, "{h:?}");
    }
}
