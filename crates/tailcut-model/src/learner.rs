//! The learned policies' decision logic, shared by the live engine (`tailcut-core`), the
//! replay and the scenarios so that all three decide with the same code:
//!
//! - `adaptive`: hedge when the primary has not answered by its learned q-quantile
//!   (tower / Finagle style), after a minimum number of samples, clamped;
//! - `singler`: one reissue at `d` with probability `q`, fitted to the model under the
//!   extra-load budget (Kaler, He and Elnikety's SingleR);
//! - `auto`: per request, the cheapest plan predicted to meet a deadline's miss target
//!   (see [`crate::plan`]).
//!
//! Every extra attempt also needs a token from the policy's [`HedgeBudget`] (in
//! [`crate::budget`]), so the
//! extra load stays within budget over any window whatever the model says.

pub use crate::budget::HedgeBudget;
use crate::model::{Model, ModelConfig, Observation};
use crate::plan::{AutoSettings, Plan, Prediction};
use crate::predict::Predictor;
use crate::sketch::CdfTable;
use serde::Serialize;

/// Settings of `adaptive`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AdaptiveSettings {
    /// Primary provider index.
    pub primary: usize,
    /// Hedge provider index.
    pub hedge: usize,
    /// Hedge at this quantile of the primary's learned latency.
    pub quantile: f64,
    /// No hedging before this many primary samples.
    pub min_samples: u64,
    /// Clamp of the delay, s.
    pub min_delay_s: f64,
    /// Clamp of the delay, s.
    pub max_delay_s: f64,
    /// Extra attempts per request allowed (token rate).
    pub budget: f64,
}

/// Settings of `singler`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SingleRSettings {
    /// Primary provider index.
    pub primary: usize,
    /// Reissue target index (may equal the primary for a same-provider reissue).
    pub hedge: usize,
    /// Extra attempts per request allowed (B).
    pub budget: f64,
    /// Tail level minimised (0.99 = p99).
    pub level: f64,
    /// No reissue before this many primary samples.
    pub min_samples: u64,
}

/// Which learned policy, with its settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "policy", rename_all = "snake_case")]
pub enum LearnedKind {
    /// Quantile-triggered hedge.
    Adaptive(AdaptiveSettings),
    /// Randomised single reissue.
    Singler(SingleRSettings),
    /// Deadline-driven plan choice.
    Auto(AutoSettings),
}

/// One request's decision, with the reason recorded in traces.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    /// The plan to run.
    pub plan: Plan,
    /// Its label.
    pub plan_label: String,
    /// Why.
    pub reason: String,
    /// What the model predicted (auto only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted: Option<Prediction>,
}

/// SplitMix64: a tiny deterministic generator for the SingleR coin.
#[derive(Debug, Clone)]
struct Coin(u64);

impl Coin {
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A fitted SingleR reissue.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SingleRFit {
    /// Reissue delay, s.
    pub delay_s: f64,
    /// Reissue probability.
    pub q: f64,
    /// Predicted tail at the level, s.
    pub tail_s: f64,
    /// Predicted extra attempts per request.
    pub extra: f64,
    /// Reissue delay used while the budget's bucket is low ([`SINGLER_RESERVE`]
    /// tokens or fewer), s: where the primary's tail mode starts (the gap below its
    /// `level`-quantile), so that a reissue there is spent only on a tail request; never
    /// below `delay_s`.
    #[serde(default)]
    pub reserve_delay_s: f64,
}

/// Fits SingleR's (d, q) to the model: for each candidate d, the largest q within the
/// budget, `q = min(1, h·B / P(L_p > d))` with the headroom `h` = [`SINGLER_HEADROOM`];
/// keeps the (d, q) whose predicted tail at `level`
/// is smallest, with
/// `P(L > t) = (1 − q)·S_p(t) + q·J(S_p(t), S_h(t − d))` for t ≥ d, where `J` is the
/// pair's joint survival ([`crate::model::joint_survival`]; independence for a reissue
/// to the same provider).
///
/// The CDFs are the sketches' with each bucket's mass spread evenly over it
/// ([`CdfTable`]), the candidate delays are the primary's quantiles on a fine grid of
/// levels plus the starts of gaps in its distribution (the upper edge of a fast mode),
/// and the tail is found by bisection, so the fit is not bound to a coarse time grid.
pub fn fit_singler(model: &Model, s: &SingleRSettings) -> Option<SingleRFit> {
    let pm = model.providers.get(s.primary)?;
    let mut hm = model.providers.get(s.hedge)?;
    if pm.latency.samples() < s.min_samples.max(1) {
        return None;
    }
    // A reissue target never launched yet has no data of its own: until it has, assume it
    // behaves like the primary (the SingleR setting: a copy of the same request).
    if hm.latency.samples() < s.min_samples.max(1) {
        hm = pm;
    }
    let (tp, th) = (CdfTable::new(pm.tail_latency())?, CdfTable::new(hm.tail_latency())?);
    let (bp, bh) = (pm.p_bad(), hm.p_bad());
    let sp = |t: f64| bp + (1.0 - bp) * (1.0 - tp.cdf(t));
    let sh = |t: f64| if t < 0.0 { 1.0 } else { bh + (1.0 - bh) * (1.0 - th.cdf(t)) };
    let dep = if std::ptr::eq(pm, hm) { 0.0 } else { model.dependence(s.primary, s.hedge) };
    // The tail is fitted at a level with a margin ([`SINGLER_TAIL_MARGIN`]).
    let target = (1.0 - s.level) * SINGLER_TAIL_MARGIN;
    let top = tp.quantile(1.0).max(th.quantile(1.0)) * 2.5 + 1.0;
    // Smallest t in [lo, top] with f(t) ≤ target (f non-increasing), or +∞.
    let first_below = |f: &dyn Fn(f64) -> f64, lo: f64| -> f64 {
        if f(top) > target {
            return f64::INFINITY;
        }
        if f(lo) <= target {
            return lo;
        }
        let (mut a, mut b) = (lo, top);
        for _ in 0..24 {
            let m = 0.5 * (a + b);
            if f(m) <= target {
                b = m;
            } else {
                a = m;
            }
        }
        b
    };
    let plain = first_below(&sp, 0.0);
    let mut best = SingleRFit { delay_s: 0.0, q: 0.0, tail_s: plain, extra: 0.0, reserve_delay_s: 0.0 };
    let mut delays: Vec<f64> = (0..=64).map(|i| tp.quantile(0.5 + 0.5 * f64::from(i) / 64.0)).collect();
    delays.extend((0..=64).map(|i| tp.hedge_point(0.5 + 0.5 * f64::from(i) / 64.0)));
    delays.sort_by(f64::total_cmp);
    delays.dedup_by(|a, b| (*a - *b).abs() < 1e-6);
    for d in delays {
        let above = sp(d);
        if above <= 0.0 || d >= plain {
            continue;
        }
        let q = (s.budget * SINGLER_HEADROOM / above).min(1.0);
        let f = |t: f64| if t < d { sp(t) } else { (1.0 - q) * sp(t) + q * crate::model::joint_survival(sp(t), sh(t - d), dep) };
        // A candidate whose tail is not reached by the best one's cannot win: one look
        // instead of a bisection.
        if best.tail_s.is_finite() && f(best.tail_s) > target {
            continue;
        }
        let tail = first_below(&f, d);
        let extra = q * above;
        if tail < best.tail_s - 1e-9 || (tail <= best.tail_s + 1e-9 && extra < best.extra) {
            best = SingleRFit { delay_s: d, q, tail_s: tail, extra, reserve_delay_s: d };
        }
    }
    best.reserve_delay_s = tp.hedge_point(s.level).max(best.delay_s);
    Some(best)
}

/// Share of the extra-load budget the SingleR fit plans to use. The budget's bucket
/// starts empty and holds 5 tokens, so a fit that expects to launch at exactly the
/// budget rate runs the bucket dry at every random run of launches above the mean, and
/// the refused reissues are as likely to be the stragglers the reissue is for: at 20 %
/// in `straggler` that put p99 back at 10 s. The fill level of the bucket is a random
/// walk that drifts up by `B − launches` per request; at 80 % the drift was small
/// enough that the bucket was often below one token (B = 3 %, seed 2: 4 of ~40
/// stragglers refused, p99 +0.04 s above the fixed hedge at 1.2 s, which has no
/// bucket). At 60 % the drift is twice that, and with [`SINGLER_RESERVE`] refusals are
/// rare. (Tried on straggler seeds 1–5, checked on 6–10: 0.8 and 0.5 were worse.)
pub const SINGLER_HEADROOM: f64 = 0.6;

/// Share of the tail mass `1 − level` the SingleR fit lets a plan leave above its
/// predicted tail. A randomised reissue leaves `(1 − q)·P(L_p > t)` unrescued; the fit
/// pushes that to just under `1 − level` (in `straggler`, 0.94 % unhedged stragglers
/// against a 1 % level), where the realised straggler share of a run, a few tens of
/// requests, decides whether p99 is 2.3 s or 10 s. Fitting at 80 % of the tail mass
/// keeps a margin for that noise.
pub const SINGLER_TAIL_MARGIN: f64 = 0.8;

/// Tokens under which SingleR reissues at its fit's `reserve_delay_s` (the start of the
/// primary's tail mode) instead of its delay. A reissue before the tail mode starts
/// also fires for requests of the fast mode that would have answered moments later;
/// when the budget's bucket (5 tokens) is nearly empty, those launches take the token
/// that the next straggler needs, and a refused straggler is a 10 s answer. In
/// `straggler` that is what put SingleR above the fixed-delay curve: 4 of ~40
/// stragglers refused at B = 3 % (seed 2), while the fixed hedge at 1.2 s, which has
/// no bucket, rescued them all.
pub const SINGLER_RESERVE: f64 = 2.0;

/// One learned policy's decision state (tables, fit, budget, coin), deciding from a
/// [`Model`] it does not own, so that several policies can share one model (the replay
/// feeds the same rounds to all of them).
#[derive(Debug, Clone)]
pub struct PolicyState {
    kind: LearnedKind,
    predictor: Option<Predictor>,
    budget: HedgeBudget,
    refresh_every: u64,
    since_refresh: u64,
    singler: Option<SingleRFit>,
    adaptive_delay: Option<(f64, u64)>,
    coin: Coin,
    names: Vec<String>,
}

impl PolicyState {
    /// A policy deciding from `model`; tables refresh every `refresh_every` attempts fed
    /// (and at least every 1/64 of the attempts seen, capped at 4,096, on long replays).
    pub fn new(kind: LearnedKind, model: &Model, seed: u64) -> PolicyState {
        let (rate, burst) = match kind {
            LearnedKind::Adaptive(a) => (a.budget, 5.0),
            LearnedKind::Singler(s) => (s.budget, 5.0),
            LearnedKind::Auto(a) => (a.max_extra, 5.0),
        };
        let mut st = PolicyState {
            kind,
            predictor: None,
            budget: HedgeBudget::new(rate, burst),
            refresh_every: 16,
            since_refresh: 0,
            singler: None,
            adaptive_delay: None,
            coin: Coin(seed ^ 0x5EED_5EED),
            names: model.providers.iter().map(|p| p.name.clone()).collect(),
        };
        st.refresh(model);
        st
    }

    /// Sets how many fed attempts pass between table refreshes (≥ 1).
    pub fn with_refresh_every(mut self, n: u64) -> PolicyState {
        self.refresh_every = n.max(1);
        self
    }

    /// Sets the extra-load bucket's burst.
    pub fn with_burst(mut self, burst: f64) -> PolicyState {
        self.budget = HedgeBudget::new(self.budget.rate(), burst);
        self
    }

    /// The policy and its settings.
    pub fn kind(&self) -> &LearnedKind {
        &self.kind
    }

    /// The extra-load budget.
    pub fn budget(&mut self) -> &mut HedgeBudget {
        &mut self.budget
    }

    /// `auto`'s tables (None for the other policies).
    pub fn predictor(&mut self) -> Option<&mut Predictor> {
        self.predictor.as_mut()
    }

    /// The current SingleR fit.
    pub fn singler_fit(&self) -> Option<SingleRFit> {
        self.singler
    }

    /// Rebuilds tables and fits from `model` now.
    pub fn refresh(&mut self, model: &Model) {
        self.since_refresh = 0;
        match self.kind {
            LearnedKind::Auto(a) => match &mut self.predictor {
                Some(p) => p.refresh(model),
                None => self.predictor = Some(Predictor::new(model, a)),
            },
            LearnedKind::Singler(s) => self.singler = fit_singler(model, &s),
            LearnedKind::Adaptive(a) => {
                let pm = model.providers.get(a.primary);
                let n = pm.map_or(0, |p| p.latency.samples());
                // The learned q-quantile, or, when it sits above a gap in the primary's
                // latencies (a tail mode), the start of that gap: the same launches, sooner.
                self.adaptive_delay = pm
                    .and_then(|p| CdfTable::new(p.tail_latency()))
                    .map(|t| t.hedge_point(a.quantile))
                    .filter(|_| n >= a.min_samples)
                    .map(|d| (d.clamp(a.min_delay_s, a.max_delay_s.max(a.min_delay_s)), n));
            }
        }
    }

    /// `attempts` more attempts were fed to `model`: refresh when due.
    pub fn observed(&mut self, model: &Model, attempts: u64) {
        self.since_refresh += attempts;
        let every = self.refresh_every.max((model.updates / 64).min(4096));
        let due = match self.kind {
            // Until it hedges, adaptive re-reads the sample count at every request.
            LearnedKind::Adaptive(_) if self.adaptive_delay.is_none() => true,
            _ => self.since_refresh >= every,
        };
        if due {
            self.refresh(model);
        }
    }

    /// Decides one request (idle gap per provider, None = unknown) and earns the
    /// request's budget tokens, without building the explanation (the replay's fast
    /// path). Extra attempts still need [`HedgeBudget::try_take`] when they fire.
    pub fn decide_plan(&mut self, gaps: &[Option<f64>]) -> (Plan, Why) {
        self.budget.request();
        match self.kind {
            LearnedKind::Adaptive(a) => match self.adaptive_delay {
                Some((delay_s, n)) => (Plan::Hedge { p: a.primary, h: a.hedge, delay_s }, Why::Quantile { delay_s, samples: n }),
                None => (Plan::Single { p: a.primary }, Why::TooFewSamples),
            },
            LearnedKind::Singler(s) => match self.singler {
                Some(fit) if fit.q > 0.0 => {
                    let draw = self.coin.next_f64();
                    if draw < fit.q {
                        // Low on tokens: keep them for the tail requests the reissue is for.
                        let delay_s = if self.budget.tokens() < SINGLER_RESERVE { fit.reserve_delay_s } else { fit.delay_s };
                        (Plan::Hedge { p: s.primary, h: s.hedge, delay_s }, Why::Coin { fit, draw, armed: true })
                    } else {
                        (Plan::Single { p: s.primary }, Why::Coin { fit, draw, armed: false })
                    }
                }
                _ => (Plan::Single { p: s.primary }, Why::TooFewSamples),
            },
            LearnedKind::Auto(a) => match &mut self.predictor {
                Some(pred) => {
                    let u = self.coin.next_f64();
                    let (plan, pr) = pred.decide(gaps, u);
                    // A provider the model has (almost) never seen cannot be predicted, and
                    // a policy that never tries it never will: race it beside the chosen
                    // primary (the race needs a budget token like any extra attempt).
                    let unseen = (0..self.names.len()).find(|&p| pred.samples(p) < EXPLORE_SAMPLES && p != plan.primary());
                    match unseen {
                        Some(h) if a.max_live >= 2 && a.max_extra > 0.0 => {
                            (Plan::Hedge { p: plan.primary(), h, delay_s: 0.0 }, Why::Explore { provider: h, samples: pred.samples(h) })
                        }
                        _ => (plan, Why::Predicted(pr)),
                    }
                }
                None => (Plan::Single { p: 0 }, Why::TooFewSamples),
            },
        }
    }

    /// Decides one request like [`PolicyState::decide_plan`] and explains it.
    pub fn decide(&mut self, gaps: &[Option<f64>]) -> Decision {
        let (plan, why) = self.decide_plan(gaps);
        let (reason, predicted) = match (why, self.kind) {
            (Why::Quantile { delay_s, samples }, LearnedKind::Adaptive(a)) => {
                (format!("hedge at learned p{} = {:.3}s of {} samples", fmt_q(a.quantile), delay_s, samples), None)
            }
            (Why::TooFewSamples, LearnedKind::Adaptive(a)) => (format!("no hedge: fewer than {} samples", a.min_samples), None),
            (Why::TooFewSamples, _) => ("no hedge: model not fitted yet".to_string(), None),
            (Why::Coin { fit, draw, armed: true }, LearnedKind::Singler(s)) => (
                format!(
                    "reissue armed at d={:.3}s{} (q={:.3}, coin {:.3}; predicted p{} {:.2}s)",
                    hedge_delay(&plan).unwrap_or(fit.delay_s),
                    if hedge_delay(&plan).is_some_and(|d| d != fit.delay_s) { ", the tail mode's start: budget low" } else { "" },
                    fit.q,
                    draw,
                    fmt_q(s.level),
                    fit.tail_s
                ),
                None,
            ),
            (Why::Coin { fit, draw, .. }, _) => (format!("no reissue: coin {:.3} >= q={:.3} (d={:.3}s)", draw, fit.q, fit.delay_s), None),
            (Why::Predicted(pr), LearnedKind::Auto(a)) => {
                let head = if pr.miss <= a.target_miss {
                    format!("cheapest meeting miss<={} at {}s", a.target_miss, a.deadline_s)
                } else {
                    format!("no plan meets miss<={} at {}s: least predicted miss", a.target_miss, a.deadline_s)
                };
                (format!("{head}: predicted miss {:.3}, ${:.5}, extra {:.2}", pr.miss, pr.cost_on(a.cost), pr.extra), Some(pr))
            }
            (Why::Explore { provider, samples }, _) => {
                (format!("exploring: {} has {samples} of {EXPLORE_SAMPLES} samples, raced beside the primary", self.names[provider]), None)
            }
            (w, _) => (format!("{w:?}"), None),
        };
        Decision { plan_label: plan.label(&self.names), plan, reason, predicted }
    }
}

/// Why a plan was chosen (the unformatted reason).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Why {
    /// Not enough samples (or no tables) yet.
    TooFewSamples,
    /// Adaptive: the learned quantile.
    Quantile {
        /// Delay, s.
        delay_s: f64,
        /// Primary samples.
        samples: u64,
    },
    /// SingleR: the coin against the fitted q.
    Coin {
        /// The fit.
        fit: SingleRFit,
        /// The draw.
        draw: f64,
        /// Whether the reissue is armed.
        armed: bool,
    },
    /// Auto: the prediction of the chosen plan.
    Predicted(Prediction),
    /// Auto: racing a provider the model has not seen enough of.
    Explore {
        /// The provider.
        provider: usize,
        /// Its samples so far.
        samples: u64,
    },
}

/// Observations of a provider before `auto` trusts its predictions.
pub const EXPLORE_SAMPLES: u64 = 5;

/// A learned policy with its own model: what the live engine holds.
#[derive(Debug, Clone)]
pub struct Learner {
    model: Model,
    state: PolicyState,
}

impl Learner {
    /// A learner over `providers` `(name, rate $/s, idle window s)`, starting from
    /// `model` when given and it lists the same providers.
    pub fn new(kind: LearnedKind, providers: &[(String, f64, f64)], model: Option<Model>, config: ModelConfig, seed: u64) -> Learner {
        let model = model
            .filter(|m| m.providers.len() == providers.len() && m.providers.iter().zip(providers).all(|(a, b)| a.name == b.0))
            .unwrap_or_else(|| Model::new(providers, config));
        let state = PolicyState::new(kind, &model, seed);
        Learner { model, state }
    }

    /// The model learned so far.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The decision state.
    pub fn state(&mut self) -> &mut PolicyState {
        &mut self.state
    }

    /// Feeds one request's attempts.
    pub fn observe(&mut self, attempts: &[Observation]) {
        self.model.observe_request(attempts);
        self.state.observed(&self.model, attempts.len() as u64);
    }

    /// Decides one request; see [`PolicyState::decide`].
    pub fn decide(&mut self, gaps: &[Option<f64>]) -> Decision {
        self.state.decide(gaps)
    }
}

fn hedge_delay(plan: &Plan) -> Option<f64> {
    match *plan {
        Plan::Hedge { delay_s, .. } => Some(delay_s),
        _ => None,
    }
}

fn fmt_q(q: f64) -> String {
    let mut s = format!("{:.2}", q * 100.0);
    while s.ends_with('0') {
        s.pop();
    }
    if s.ends_with('.') {
        s.pop();
    }
    s
}

#[cfg(test)]
mod tests;
