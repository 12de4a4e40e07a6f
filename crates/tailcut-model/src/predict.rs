//! The [`Predictor`]: tables precomputed from a [`Model`] — per provider and warmth, the
//! survival `P(L > t)` on a uniform grid up to 1.5× the deadline (failures count as never
//! finishing), the mean time past the grid, the chance a cutover poll finds it queued,
//! `P(warm | gap)` per gap bucket, and the pairs' dependence weights — and the `auto`
//! choice over the candidate [`Plan`]s, memoised per quantised P(warm) of each provider
//! and per working miss level (the controller's, quantised to a tenth of the target)
//! until the next refresh. A plan's predicted miss is blended with what it did when it
//! ran ([`Tally::blended`]): the model where its record is thin, its record where not.
//! Live, a single-provider plan's predicted miss is also blended with its provider's
//! recent attempts read by Kaplan–Meier ([`Censored`], set by [`Predictor::set_censored`]),
//! and it qualifies for the miss target only when the blend's upper bound is within the
//! working level.

use crate::guard::censored::Censored;
use crate::guard::{Tally, QUALIFY_Z};
use crate::model::{joint_survival, Model, GAP_EDGES_S};
use crate::plan::{AutoSettings, Choice, Plan, PlanBits, Prediction, COST_TIE, TAIL_TRADE, TAIL_TRADE_MIN_GAIN};
use crate::sketch::{bucket_of, bucket_value, DecayedSketch};
use rustc_hash::FxHashMap as HashMap;

/// Grid points of the survival tables.
pub const GRID: usize = 96;

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

/// Levels P(warm) is quantised to for the memo: 0, 1/4, ..., 1, and "unknown".
const LEVELS: usize = 6;
const UNKNOWN_LEVEL: usize = 5;

/// Precomputed tables and the memoised `auto` choices.
#[derive(Debug, Clone)]
pub struct Predictor {
    settings: AutoSettings,
    dt: f64,
    providers: Vec<ProviderTables>,
    /// Dependence weight per ordered pair (see [`crate::model::PairStat::dependence`]).
    dep: Vec<f64>,
    memo: HashMap<u32, Choice>,
    /// [`Predictor::predict_memo`]'s predictions, by P(warm) levels and plan.
    predicted: HashMap<(u32, PlanBits), Prediction>,
    epoch: u64,
    /// The settings' target miss; `settings.target_miss` is the working level in use.
    target: f64,
    /// The working level's bucket (tenths of the target, 0..=LEVEL_BUCKETS).
    bucket: u32,
    /// Realized outcomes of the plans that ran, by plan shape, with the request each was
    /// last decayed at.
    tallies: HashMap<PlanKey, (Tally, u64)>,
    /// Requests recorded.
    recorded: u64,
    /// Live: each provider's recent attempts at the deadline (empty: not used).
    censored: Vec<Option<Censored>>,
    /// The same, quantised, to clear the memo only when a choice could change.
    censored_key: Vec<Option<(u32, u32)>>,
}

/// Working levels are quantised to tenths of the target, from 0 to twice the target.
const LEVEL_BUCKETS: u32 = 20;

/// A record's weight in trials of the model's prediction of the same plan
/// ([`Tally::blended`]).
pub const MODEL_PRIOR_TRIALS: f64 = 128.0;

/// Each request keeps this share of every plan's older record (a half-life of 256
/// requests, counted whether the plan ran or not), so that a record follows a world that
/// changes, and a plan avoided after a bad stretch is judged by its model again.
pub const TALLY_KEEP: f64 = 0.997_296;

/// A plan's shape for its record: family, providers, and its delays in twelfths of the
/// deadline (a learned hedge delay moves a little with every refresh).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PlanKey(u8, u8, u8, u8, u16);

impl PlanKey {
    /// The key of `plan` for deadline `deadline_s`.
    pub fn of(plan: &Plan, deadline_s: f64) -> PlanKey {
        let q = |d: f64| (d / deadline_s.max(1e-9) * 12.0).round().clamp(0.0, 1000.0) as u16;
        match *plan {
            Plan::Single { p } => PlanKey(0, p as u8, 0, 0, 0),
            Plan::Hedge { p, h, delay_s } => PlanKey(1, p as u8, h as u8, 0, q(delay_s)),
            Plan::Cutover { p, h, .. } => PlanKey(2, p as u8, h as u8, 0, 0),
            Plan::Cascade { p, h, f, .. } => PlanKey(3, p as u8, h as u8, f as u8, 0),
        }
    }
}

/// A sketch as planning reads it: its placed masses and the share left unplaced (see
/// [`DecayedSketch::masses_known`]), read once per refresh.
struct Shape {
    masses: Vec<f64>,
    unplaced: f64,
}

impl Shape {
    fn of(s: &DecayedSketch) -> Shape {
        let (masses, unplaced) = s.masses_known();
        Shape { masses, unplaced }
    }
}

/// `P(L > t)` on the grid: failures (`p_bad`) and the unplaced share of `s` (attempts
/// cancelled past every latency seen) never end on the grid.
fn survival(s: &Shape, p_bad: f64, dt: f64, out: &mut Vec<f64>) {
    out.clear();
    let (mut acc, mut k) = (0.0, 0usize);
    for j in 0..GRID {
        let last = bucket_of(j as f64 * dt);
        while k <= last && k < s.masses.len() {
            acc += s.masses[k];
            k += 1;
        }
        let placed_done = if s.masses.is_empty() { 0.0 } else { acc.min(1.0) };
        out.push((p_bad + (1.0 - p_bad) * (1.0 - placed_done)).clamp(0.0, 1.0));
    }
    if let Some(first) = out.first_mut() {
        *first = 1.0;
    }
}

fn tail_excess(s: &Shape, p_bad: f64, h: f64, cap: f64) -> f64 {
    // Mean of min(L, cap) − h over L > h; failures and the unplaced share run to the cap.
    let (mut w, mut acc) = (0.0, 0.0);
    for (k, b) in s.masses.iter().enumerate().skip(bucket_of(h) + 1) {
        if *b > 0.0 {
            w += b;
            acc += b * (bucket_value(k).min(cap) - h).max(0.0);
        }
    }
    let never = p_bad + (1.0 - p_bad) * s.unplaced;
    let (num, den) = ((1.0 - p_bad) * acc + never * (cap - h).max(0.0), (1.0 - p_bad) * w + never);
    if den > 0.0 {
        num / den
    } else {
        0.0
    }
}

/// The provider a plan leaves alone until the deadline: a single's, and a hedge's
/// primary when the hedge fires only past the deadline (its miss is the primary's).
fn alone(plan: &Plan, deadline_s: f64) -> Option<usize> {
    match *plan {
        Plan::Single { p } => Some(p),
        Plan::Hedge { p, delay_s, .. } if delay_s >= deadline_s => Some(p),
        _ => None,
    }
}

impl Predictor {
    /// Tables for `settings` from the model's current state.
    pub fn new(model: &Model, settings: AutoSettings) -> Predictor {
        let mut p = Predictor {
            settings,
            dt: 1.0,
            providers: Vec::new(),
            dep: Vec::new(),
            memo: HashMap::default(),
            predicted: HashMap::default(),
            epoch: 0,
            target: settings.target_miss,
            bucket: LEVEL_BUCKETS / 2,
            tallies: HashMap::default(),
            recorded: 0,
            censored: Vec::new(),
            censored_key: Vec::new(),
        };
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
                let shape = Shape::of(&pm.latency);
                let mut all = Vec::new();
                survival(&shape, bad, dt, &mut all);
                let opt = |sk: &DecayedSketch| {
                    (sk.samples() >= 3).then(|| {
                        let mut v = Vec::new();
                        survival(&Shape::of(sk), bad, dt, &mut v);
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
                    tail_all: tail_excess(&shape, bad, h, s.cap_s),
                    all,
                    p_queued: pm.has_queue_signal().then(|| pm.queued_at_poll.rate(0.3, 1.0)),
                    p_warm: (0..=GAP_EDGES_S.len()).map(|k| pm.p_warm(if k == 0 { 0.0 } else { GAP_EDGES_S[k - 1] })).collect(),
                    delays_steps,
                    samples: pm.samples(),
                }
            })
            .collect();
        let n = self.providers.len();
        self.dep = (0..n * n).map(|ij| model.dependence(ij / n, ij % n)).collect();
        self.memo.clear();
        self.predicted.clear();
        self.epoch += 1;
    }

    /// Sets the working miss level the plans are chosen for (the controller's `α_t`),
    /// quantised to tenths of the target between 0 and twice the target.
    pub fn set_level(&mut self, level: f64) {
        let t = self.target;
        let b = if t > 0.0 { (level / t * 10.0).round().clamp(0.0, f64::from(LEVEL_BUCKETS)) as u32 } else { 0 };
        if b != self.bucket {
            self.bucket = b;
            self.settings.target_miss = t * f64::from(b) / 10.0;
        }
    }

    /// The working miss level in use (quantised).
    pub fn level(&self) -> f64 {
        self.settings.target_miss
    }

    /// Sets each provider's recent history at the deadline (live; see the module doc).
    /// The memo is cleared when a provider's estimate or bound moved by a thousandth of
    /// the miss scale, so an unchanged history costs no re-planning.
    pub fn set_censored(&mut self, censored: Vec<Option<Censored>>) {
        let q = |x: f64| (x.clamp(0.0, 1.0) * 1000.0).round() as u32;
        let key: Vec<Option<(u32, u32)>> = censored.iter().map(|c| c.map(|c| (q(c.blended(0.0)), q(c.upper(0.0, QUALIFY_Z))))).collect();
        if key != self.censored_key {
            self.memo.clear();
            self.censored_key = key;
        }
        self.censored = censored;
    }

    /// Provider `p`'s recent history at the deadline, when set.
    pub fn censored(&self, p: usize) -> Option<Censored> {
        self.censored.get(p).copied().flatten()
    }

    /// Records what a plan did when it ran (read at the next refresh).
    pub fn record(&mut self, plan: &Plan, missed: bool, cost_usd: f64) {
        self.recorded += 1;
        let now = self.recorded;
        let (t, last) = self.tallies.entry(PlanKey::of(plan, self.settings.deadline_s)).or_insert((Tally::default(), now));
        t.add(missed, cost_usd, TALLY_KEEP.powf((now - *last) as f64));
        *last = now;
    }

    /// A plan's realized record as of now, if it ran.
    pub fn tally(&self, plan: &Plan) -> Option<Tally> {
        self.tallies.get(&PlanKey::of(plan, self.settings.deadline_s)).map(|(t, last)| self.aged(t, *last))
    }

    fn aged(&self, t: &Tally, last: u64) -> Tally {
        let k = TALLY_KEEP.powf(self.recorded.saturating_sub(last) as f64);
        Tally { n: t.n * k, misses: t.misses * k, cost: t.cost * k }
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

    fn warm_level(&self, p: usize, gap_s: Option<f64>) -> usize {
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

    /// The first time the survival `s` falls to the miss target (interpolated on the
    /// grid), +∞ if it never does on the grid.
    fn at_level(&self, s: &[f64]) -> f64 {
        let m = self.target;
        match s.iter().position(|v| *v <= m) {
            Some(0) => 0.0,
            Some(k) => {
                let (a, b) = (s[k - 1], s[k]);
                let f = if a > b { ((a - m) / (a - b)).clamp(0.0, 1.0) } else { 1.0 };
                (k as f64 - 1.0 + f) * self.dt
            }
            None => f64::INFINITY,
        }
    }

    /// ∫ from step `from` to the end of the grid of `s`, plus the tail beyond it.
    fn integral(&self, s: &[f64], from: usize, tail: f64) -> f64 {
        let mut acc = 0.0;
        for k in from..GRID - 1 {
            acc += 0.5 * (s[k] + s[k + 1]);
        }
        acc * self.dt + s[GRID - 1] * tail
    }

    fn joint(&self, a: &[f64], b: &[f64], shift: usize, dep: f64, out: &mut [f64]) {
        for k in 0..GRID {
            out[k] = if k < shift { a[k] } else { joint_survival(a[k], b[k - shift], dep) };
        }
    }

    /// Predicts one plan with each provider's survival given by `surv`.
    fn predict_with(&self, plan: &Plan, surv: &[Vec<f64>]) -> Prediction {
        let t = &self.providers;
        let dep = |a: usize, b: usize| self.dep[a * t.len() + b];
        let steps = |s: f64| ((s / self.dt).round() as usize).min(GRID - 1);
        let mut buf = [0.0; GRID];
        match *plan {
            Plan::Single { p } => {
                let s = &surv[p];
                Prediction {
                    miss: self.at_deadline(s),
                    tail_s: self.at_level(s),
                    active_usd: t[p].rate * self.integral(s, 0, t[p].tail_all),
                    idle_usd: t[p].idle_usd,
                    extra: 0.0,
                }
            }
            Plan::Hedge { p, h, delay_s } => {
                let m = steps(delay_s);
                self.joint(&surv[p], &surv[h], m, dep(p, h), &mut buf);
                let tail = t[p].tail_all.min(t[h].tail_all);
                let launch = if m == 0 { 1.0 } else { surv[p][m] };
                Prediction {
                    miss: self.at_deadline(&buf),
                    tail_s: self.at_level(&buf),
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
                    self.joint(&sw, &surv[f], me, dep(h, f), &mut j);
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
                self.joint(started, &surv[h], ms, dep(p, h), &mut buf);
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
                    tail_s: self.at_level(&mix),
                    active_usd: a * sw_active + (1.0 - a) * kept_active,
                    idle_usd: a * sw_idle + (1.0 - a) * kept_idle,
                    extra: a * sw_extra + (1.0 - a) * kept_launch,
                }
            }
        }
    }

    /// Predicts `plan` for a request arriving after the given idle gaps.
    pub fn predict(&self, plan: &Plan, gaps: &[Option<f64>]) -> Prediction {
        let surv: Vec<Vec<f64>> =
            (0..self.providers.len()).map(|p| self.mixed(p, self.warm_level(p, gaps.get(p).copied().flatten()))).collect();
        self.predict_with(plan, &surv)
    }

    /// [`Predictor::predict`], memoised per plan and quantised P(warm) of each provider
    /// until the next refresh (the expert `auto` plays is predicted every request).
    pub fn predict_memo(&mut self, plan: &Plan, gaps: &[Option<f64>]) -> Prediction {
        let memoise = self.providers.len() <= 6;
        let key = PlanBits::of(plan).filter(|_| memoise).map(|b| (self.levels_key(gaps, 0), b));
        if let Some(hit) = key.and_then(|k| self.predicted.get(&k)) {
            return *hit;
        }
        let pr = self.predict(plan, gaps);
        if let Some(k) = key {
            self.predicted.insert(k, pr);
        }
        pr
    }

    /// The memo key of the providers' quantised P(warm) after `gaps`, from `start`.
    fn levels_key(&self, gaps: &[Option<f64>], start: usize) -> u32 {
        (0..self.providers.len())
            .fold(start, |k, p| k.wrapping_mul(LEVELS).wrapping_add(self.warm_level(p, gaps.get(p).copied().flatten()))) as u32
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
                let mut pr = self.predict_with(&p, surv);
                if let Some(c) = alone(&p, s.deadline_s).and_then(|q| self.censored(q)) {
                    pr.miss = c.blended(pr.miss);
                }
                if let Some((t, last)) = self.tallies.get(&PlanKey::of(&p, s.deadline_s)) {
                    pr.miss = self.aged(t, *last).blended(pr.miss, MODEL_PRIOR_TRIALS);
                }
                (p, pr)
            })
            .collect();
        // A plan that leaves one provider alone until the deadline qualifies, when that
        // provider has live history, only when the upper bound of its blended miss is
        // within the working level (hedges within the deadline, cutovers, cascades: the
        // model).
        let upper: Vec<f64> = (0..self.providers.len())
            .map(|q| self.censored(q).map_or(0.0, |c| c.upper(self.predict_with(&Plan::Single { p: q }, surv).miss, QUALIFY_Z)))
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
        let meets = |p: &Plan, pr: &Prediction| {
            pr.miss <= s.target_miss && alone(p, s.deadline_s).is_none_or(|q| upper.get(q).is_none_or(|u| *u <= s.target_miss))
        };
        let fallback = (Plan::Single { p: 0 }, Prediction { miss: 1.0, active_usd: 0.0, idle_usd: 0.0, extra: 0.0, tail_s: f64::INFINITY });
        if let Some(best) = cheapest(&mut preds.iter().filter(|(p, pr)| within(pr) && meets(p, pr))) {
            // Plans within COST_TIE of the cheapest cost the same for practical purposes:
            // among them take the least predicted miss (a queue cutover costs what the
            // primary alone costs when the primary is warm, and misses less).
            let bar = best.1.cost_on(basis) * (1.0 + COST_TIE) + 1e-12;
            let pick =
                least_miss(&mut preds.iter().filter(|(p, pr)| within(pr) && meets(p, pr) && pr.cost_on(basis) <= bar)).unwrap_or(best);
            // Trade up to TAIL_TRADE of the cost for a faster tail (see its doc).
            let trade = best.1.cost_on(basis) * (1.0 + TAIL_TRADE) + 1e-12;
            let faster = preds
                .iter()
                .filter(|(p, pr)| within(pr) && meets(p, pr) && pr.cost_on(basis) <= trade)
                .min_by(|a, b| a.1.tail_s.total_cmp(&b.1.tail_s).then(a.1.cost_on(basis).total_cmp(&b.1.cost_on(basis))));
            let pick = match faster {
                Some(f) if f.1.tail_s < pick.1.tail_s * (1.0 - TAIL_TRADE_MIN_GAIN) => *f,
                _ => pick,
            };
            return Choice { base: pick, alt: None };
        }
        let base = least_miss(&mut preds.iter().filter(|(_, pr)| within(pr))).unwrap_or(fallback);
        let over = cheapest(&mut preds.iter().filter(|(p, pr)| meets(p, pr)))
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
                base: (Plan::Single { p: 0 }, Prediction { miss: 1.0, active_usd: 0.0, idle_usd: 0.0, extra: 0.0, tail_s: f64::INFINITY }),
                alt: None,
            };
        }
        let level = |p: usize| self.warm_level(p, gaps.get(p).copied().flatten());
        let key = self.levels_key(gaps, self.bucket as usize);
        let memoise = n <= 6;
        if let Some(hit) = self.memo.get(&key).filter(|_| memoise) {
            return *hit;
        }
        let surv: Vec<Vec<f64>> = (0..n).map(|p| self.mixed(p, level(p))).collect();
        let choice = self.choose(&surv);
        if memoise {
            self.memo.insert(key, choice);
        }
        choice
    }

    /// Attempts the model has seen of provider `p`.
    pub fn samples(&self, p: usize) -> u64 {
        self.providers.get(p).map_or(0, |t| t.samples)
    }
}

#[cfg(test)]
mod tests;
