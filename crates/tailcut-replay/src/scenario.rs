//! Scenario suite: simulated request streams for what the paired cold rounds cannot show
//! (warm/cold mixes, regime changes, correlated slowness, outages, price changes,
//! stragglers).
//!
//! A stream is N requests at scenario-specific arrival times over providers built from
//! the simulator's profiles. Each policy runs the *whole* stream with its own provider
//! state: a provider is warm for a request when one of its workers finished (or was
//! cancelled after it had started) within its warm window, so what a policy launched
//! decides what later requests find. Draws use common random numbers: provider `p` at
//! request `k` always draws from the same seeded stream, whatever the policy. Each round
//! is priced by the sweep's own rules ([`evaluate_round`]).
//!
//! Fixed policies are the standard sweep over the scenario's delay grid; `tuned:<policy>`
//! is the fixed policy the reference's ranking (miss rate at the deadline, then active
//! cost) picks on the first half; learned policies learn online from what they launched
//! (censored losers included) and decide before each request; `auto` by default also
//! with paired information, as `scenario sweep` runs it (its fixed experts priced on
//! their own runs, each learned only after the request is decided). Every row is
//! measured on the second half and carries its policy's kind.

use crate::rounds::RoundSet;
use crate::sweep::{evaluate_round, standard_sweep, Family, ProviderRates};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use tailcut_model::{
    AdaptiveSettings, CostBasis, HedgeBudget, LearnedKind, Model, ModelConfig, Observation, Outcome, PolicyState, SingleRSettings,
};
use tailcut_sim::SimProfile;

mod curve;
mod kinds;
mod rows;
pub mod worlds;

pub use curve::{fixed_envelope, tail_load_svg};
pub use kinds::learned_kinds;
use rows::{frozen_index, row};
pub use rows::{ScenarioRow, StreamRun};

/// A scenario's result.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult {
    /// Scenario name.
    pub scenario: String,
    /// Seed.
    pub seed: u64,
    /// Requests in the stream.
    pub requests: usize,
    /// Deadline the miss rate is measured at, s.
    pub deadline_s: f64,
    /// How `auto` learned.
    pub auto: worlds::AutoMode,
    /// Rows: fixed policies, `tuned:`, learned.
    pub rows: Vec<ScenarioRow>,
}

/// The scenario families.
pub const NAMES: [&str; 7] = ["steady-cold", "cadence", "degrade", "correlated", "outage", "price", "straggler"];

/// One line per family for `scenario list`.
pub fn describe(name: &str) -> &'static str {
    match name {
        "steady-cold" => "every request after a scale-to-zero wait (like the 2026-07 benchmark): runpod, modal, cerebrium; deadline 60 s",
        "cadence" => "Poisson arrivals (mean gap 75 s) straddling the idle windows, which differ per platform (runpod 5 s, modal 60 s, cerebrium 300 s), so warm and cold requests mix; deadline 30 s",
        "degrade" => "runpod's cold starts take the slow path 10% of the time, then 75% from 60% into the stream; deadline 60 s",
        "correlated" => "runpod and modal share a slow regime (runs of ~20 requests where both cold-start slowly); deadline 60 s",
        "outage" => "cerebrium fails every request from 60% to 80% into the stream; deadline 60 s",
        "price" => "cerebrium's rate quadruples from the middle of the stream; deadline 60 s",
        "straggler" => "two replicas of a fast provider (0.8-1.2 s) with 2% stragglers at 10-20x; deadline 5 s",
        _ => "unknown",
    }
}

/// A simulated provider in a scenario.
#[derive(Debug, Clone)]
struct Prov {
    name: String,
    profile: SimProfile,
    /// How long a worker stays warm after its last job, s.
    warm_window_s: f64,
    /// Idle seconds billed per worker start.
    billed_idle_s: f64,
}

/// A scenario instance.
#[derive(Debug, Clone)]
pub struct Scenario {
    name: String,
    providers: Vec<Prov>,
    deadline_s: f64,
    delays: Vec<f64>,
    requests: usize,
    seed: u64,
    arrivals: Vec<f64>,
    /// Correlated regime per request (true = slow regime).
    regime: Vec<bool>,
    /// Common random numbers: per request and provider, its cold and warm draw.
    draws: Vec<[Draw; 2]>,
    /// A random world's rules (`scenario sweep`), in place of the named families'.
    world: Option<Box<worlds::World>>,
}

fn prov(name: &str, profile: SimProfile, warm_window_s: f64) -> Prov {
    let billed_idle_s = profile.idle_window_s;
    Prov { name: name.into(), profile, warm_window_s, billed_idle_s }
}

fn straggler_profile() -> SimProfile {
    SimProfile {
        reports_queued: false,
        submit_latency_s: (0.0, 0.0),
        warm_dispatch_s: (0.0, 0.0),
        warm_run_s: (0.8, 1.2),
        cold_fast_p: 1.0,
        cold_fast_queue_s: (0.0, 0.0),
        cold_fast_run_s: (0.8, 1.2),
        cold_slow_queue_s: (0.0, 0.0),
        cold_slow_run_s: (0.8, 1.2),
        idle_window_s: 0.0,
        max_workers: 1000,
        failure_p: 0.0,
        malformed_p: 0.0,
        rate_usd_per_s: 0.0002,
        ..SimProfile::instant()
    }
}

fn seed_for(seed: u64, p: usize, k: usize) -> u64 {
    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (p as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03)
        ^ (k as u64).wrapping_mul(0x94D0_49BB_1331_11EB)
}

impl Scenario {
    /// Builds a scenario by name.
    pub fn new(name: &str, seed: u64, requests: usize) -> Option<Scenario> {
        let requests = requests.max(20);
        let three = || {
            vec![
                prov("runpod", SimProfile::runpod(), 60.0),
                prov("modal", SimProfile::modal(), 60.0),
                prov("cerebrium", SimProfile::cerebrium(), 60.0),
            ]
        };
        let sweep = vec![0.0, 5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0];
        let (providers, deadline_s, delays, mean_gap) = match name {
            "steady-cold" | "degrade" | "correlated" | "outage" | "price" => (three(), 60.0, sweep, 600.0),
            "cadence" => (
                // Each platform keeps an idle worker for its own window (RunPod's idle
                // timeout, Modal's scaledown window, Cerebrium's cooldown): RunPod at its
                // default 5 s, Modal at its default 60 s, Cerebrium at 300 s. RunPod bills
                // the idle seconds it keeps.
                vec![
                    Prov { billed_idle_s: 5.0, ..prov("runpod", SimProfile::runpod(), 5.0) },
                    prov("modal", SimProfile::modal(), 60.0),
                    prov("cerebrium", SimProfile::cerebrium(), 300.0),
                ],
                30.0,
                sweep,
                75.0,
            ),
            "straggler" => (
                vec![prov("fast-a", straggler_profile(), 1e9), prov("fast-b", straggler_profile(), 1e9)],
                5.0,
                vec![0.0, 0.5, 0.8, 1.0, 1.1, 1.2, 1.5, 2.0, 3.0],
                2.0,
            ),
            _ => return None,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xA5A5_0000);
        let mut t = 0.0;
        let arrivals: Vec<f64> = (0..requests)
            .map(|_| {
                let gap = if name == "steady-cold" {
                    mean_gap * (0.9 + 0.2 * rng.gen::<f64>())
                } else {
                    -mean_gap * (1.0 - rng.gen::<f64>()).ln()
                };
                t += gap;
                t
            })
            .collect();
        // Slow regime: a two-state chain entered with probability 1/60, left with 1/20.
        let mut slow = false;
        let regime: Vec<bool> = (0..requests)
            .map(|_| {
                slow = if slow { rng.gen::<f64>() >= 0.05 } else { rng.gen::<f64>() < 1.0 / 60.0 };
                slow && name == "correlated"
            })
            .collect();
        let mut sc =
            Scenario { name: name.into(), providers, deadline_s, delays, requests, seed, arrivals, regime, draws: Vec::new(), world: None };
        let n = sc.providers.len();
        sc.draws = (0..requests * n).map(|i| [sc.draw(i % n, i / n, false), sc.draw(i % n, i / n, true)]).collect();
        Some(sc)
    }

    /// Provider names.
    pub fn names(&self) -> Vec<String> {
        self.providers.iter().map(|p| p.name.clone()).collect()
    }

    /// The deadline, s.
    pub fn deadline_s(&self) -> f64 {
        self.deadline_s
    }

    fn rates_at(&self, k: usize) -> Vec<ProviderRates> {
        self.providers
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let mut rate = p.profile.rate_usd_per_s;
                if self.name == "price" && p.name == "cerebrium" && k >= self.requests / 2 {
                    rate *= 4.0;
                }
                if let Some(w) = &self.world {
                    rate *= w.price_factor(i, k as f64 / self.requests as f64);
                }
                ProviderRates { name: p.name.clone(), rate, idle_s: p.billed_idle_s }
            })
            .collect()
    }

    /// What provider `p` does if launched for request `k`: (latency or +∞, billed wall,
    /// queue delay, ran past its queue, warm).
    fn draw(&self, p: usize, k: usize, warm: bool) -> Draw {
        let pr = &self.providers[p];
        let prof = &pr.profile;
        let mut rng = ChaCha8Rng::seed_from_u64(seed_for(self.seed, p, k));
        let u = |rng: &mut ChaCha8Rng, (lo, hi): (f64, f64)| lo + (hi - lo) * rng.gen::<f64>();
        let submit = u(&mut rng, prof.submit_latency_s);
        let (wq, wr) = (u(&mut rng, prof.warm_dispatch_s), u(&mut rng, prof.warm_run_s));
        let fast_draw = rng.gen::<f64>();
        let (fq, fr) = (u(&mut rng, prof.cold_fast_queue_s), u(&mut rng, prof.cold_fast_run_s));
        let (sq, sr) = (u(&mut rng, prof.cold_slow_queue_s), u(&mut rng, prof.cold_slow_run_s));
        let fails = rng.gen::<f64>() < prof.failure_p;
        let malformed = rng.gen::<f64>() < prof.malformed_p;
        let straggle = rng.gen::<f64>();
        let factor = 10.0 + 10.0 * rng.gen::<f64>();
        let frac = k as f64 / self.requests as f64;
        let mut fast_p = prof.cold_fast_p;
        if self.name == "degrade" && p == 0 {
            fast_p = if frac >= 0.6 { 0.25 } else { 0.9 };
        }
        if self.regime[k] && (p == 0 || p == 1) && self.world.is_none() {
            fast_p = 0.0;
        }
        if let Some(w) = &self.world {
            fast_p = w.fast_p(p, frac, fast_p);
            if self.regime[k] && w.correlated(p) {
                fast_p = 0.0;
            }
        }
        let (queue, mut run) = if warm {
            (wq, wr)
        } else if fast_draw < fast_p {
            (fq, fr)
        } else {
            (sq, sr)
        };
        if self.name == "straggler" && straggle < 0.02 {
            run *= factor;
        }
        if let Some(w) = &self.world {
            run *= w.straggle(p, straggle, factor);
        }
        let out = (self.name == "outage" && pr.name == "cerebrium" && (0.6..0.8).contains(&frac))
            || self.world.as_ref().is_some_and(|w| w.out(p, frac));
        let wall = (submit + queue + run).min(crate::synth::CAP_S);
        if out {
            return Draw {
                latency: f64::INFINITY,
                wall: submit + 2.0,
                queue: Some(0.0).filter(|_| prof.reports_queued),
                started_at: submit,
                warm,
            };
        }
        let valid = wall < crate::synth::CAP_S && !fails && !malformed;
        Draw {
            latency: if valid { wall } else { f64::INFINITY },
            wall,
            queue: prof.reports_queued.then_some(queue),
            started_at: submit + queue,
            warm,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Draw {
    latency: f64,
    wall: f64,
    queue: Option<f64>,
    /// Seconds after submit when it left the queue.
    started_at: f64,
    warm: bool,
}

/// Per-provider state a policy's stream evolves: when its worker last went idle.
#[derive(Debug, Clone)]
struct ProvState {
    idle_since: Option<f64>,
    busy_until: f64,
}

/// Attempts a family launched in one round: (provider, launch offset, end offset, ran
/// past its queue, completed).
fn launches(f: &Family, d: &[Draw], lat: f64) -> Vec<(usize, f64, f64, bool)> {
    let run = |p: usize, at: f64| -> (usize, f64, f64, bool) {
        let own_end = at + d[p].wall;
        let end = if lat.is_finite() { own_end.min(lat.max(at)) } else { own_end };
        (p, at, end, end - at >= d[p].started_at)
    };
    let q_star = |p: usize| d[p].queue.unwrap_or(if d[p].latency.is_infinite() { f64::INFINITY } else { 0.0 });
    match *f {
        Family::Single { p } => vec![run(p, 0.0)],
        Family::Hedge { p, h, delay } => {
            if d[p].latency <= delay {
                vec![run(p, 0.0)]
            } else {
                vec![run(p, 0.0), run(h, delay)]
            }
        }
        Family::Cutover { p, h, cutover, safety } | Family::Cascade { p, h, cutover, safety, .. } => {
            if q_star(p) > cutover {
                let mut v = vec![(p, 0.0, cutover, false), run(h, cutover)];
                if let Family::Cascade { f, escalate, .. } = *f {
                    if cutover + d[h].latency > escalate {
                        v.push(run(f, escalate));
                    }
                }
                v
            } else if d[p].latency <= safety {
                vec![run(p, 0.0)]
            } else {
                vec![run(p, 0.0), run(h, safety)]
            }
        }
    }
}

enum Driver<'a> {
    Fixed(&'a Family),
    /// A fixed family whose extra attempts are gated by an extra-load bucket, as `auto`'s
    /// are when it plays the plan (its experts' own runs under its cap).
    Capped(&'a Family, HedgeBudget),
    /// A learned policy; `true` = `auto` settles each outcome (controller, plan records);
    /// with paired information, the fixed experts' own runs of the stream and the
    /// model-only `auto`'s own run (its plans and outcomes).
    Learned(Box<PolicyState>, Model, bool, Option<&'a [StreamRun]>, Option<&'a StreamRun>),
}

/// Replaces the fixed experts' outcomes in `buf` (and the judged expert's, a fixed plan)
/// with what each fixed plan's own run of the stream did at request `k`.
fn own_run_outcomes(state: &PolicyState, own: &[StreamRun], k: usize, deadline: f64, basis: CostBasis, buf: &mut [(bool, f64)]) {
    let Some(plans) = state.expert_plans() else { return };
    let fixed = own.len().min(state.fixed_experts());
    let at = |i: usize| {
        let run = &own[i];
        let cost = if basis == CostBasis::Billed { run.billed[k] } else { run.active[k] };
        (run.lats[k] > deadline, cost)
    };
    for (i, slot) in buf.iter_mut().enumerate().take(fixed) {
        *slot = at(i);
    }
    // The judged expert plays one of the fixed plans: its own run too.
    if let (Some(judged), Some(last)) = (plans.last(), buf.len().checked_sub(1)) {
        if let Some(i) = plans[..fixed].iter().position(|p| p == judged) {
            buf[last] = at(i);
        }
    }
}

impl Scenario {
    fn run(&self, mut driver: Driver<'_>) -> StreamRun {
        let n = self.providers.len();
        let mut st: Vec<ProvState> = vec![ProvState { idle_since: None, busy_until: f64::NEG_INFINITY }; n];
        let mut out = StreamRun::default();
        let mut one = RoundSet::new(self.names());
        one.round_ids.push(1);
        one.blocks.push(0);
        one.latency = vec![0.0; n];
        one.billed = vec![0.0; n];
        one.queue = vec![f64::NAN; n];
        let mut obs = Vec::with_capacity(4);
        for k in 0..self.requests {
            let t = self.arrivals[k];
            let gaps: Vec<Option<f64>> = st.iter().map(|s| s.idle_since.map(|i| (t - i).max(0.0))).collect();
            let draws: Vec<Draw> = (0..n)
                .map(|p| {
                    let s = &st[p];
                    let warm = s.busy_until <= t && s.idle_since.is_some_and(|i| t - i <= self.providers[p].warm_window_s);
                    self.draws[k * n + p][usize::from(warm)]
                })
                .collect();
            for (p, d) in draws.iter().enumerate() {
                one.latency[p] = d.latency;
                one.billed[p] = d.wall;
                one.queue[p] = d.queue.unwrap_or(f64::NAN);
            }
            let mut decided = None;
            let (family, extra) = match &mut driver {
                Driver::Fixed(f) => ((*f).clone(), 0u8),
                Driver::Capped(f, budget) => {
                    budget.request();
                    crate::learned::gate_with(&one, 0, &crate::learned::family_plan(f), budget)
                }
                Driver::Learned(state, _, _, _, model_only) => {
                    if let Some(m) = model_only {
                        // The model-only instance's decision for this request on its
                        // own run (decided from its own past only: causal).
                        state.set_model_only_plan(m.plans[k]);
                    }
                    let (plan, _) = state.decide_plan(&gaps);
                    decided = Some(plan);
                    crate::learned::gate_plan(&one, 0, &plan, state)
                }
            };
            let rates = self.rates_at(k);
            let (lat, act, bill, hedged) = evaluate_round(&one, &rates, &family, crate::synth::CAP_S, 0);
            if let (Driver::Learned(state, _, true, own, model_only), Some(_)) = (&mut driver, decided) {
                // Paired information (`scenario sweep --auto paired`): every expert plan
                // is priced on this request, as a paired benchmark would run them. A
                // fixed expert is priced on its own run of the stream (its own provider
                // state, as its row is), once this request's decision is made; the
                // model's choice on this request's draws as `auto` found them.
                if let LearnedKind::Auto(a) = *state.kind() {
                    let mut buf = Vec::new();
                    crate::learned::price_experts(state, &one, &rates, &a, 0, &[], &mut buf);
                    if let Some(own) = own {
                        own_run_outcomes(state, own, k, self.deadline_s, a.cost, &mut buf);
                    }
                    // The model-only expert: what its own run did at this request.
                    if let (Some(m), Some(i)) = (model_only, state.model_only_index()) {
                        let cost = if a.cost == CostBasis::Billed { m.billed[k] } else { m.active[k] };
                        buf[i] = (m.lats[k] > self.deadline_s, cost);
                    }
                    state.settle_experts(&buf);
                }
            }
            if let (Driver::Learned(state, _, true, _, _), Some(plan)) = (&mut driver, decided) {
                // Partial information: only what the plan it ran did (the controller's
                // miss and the plan's record).
                let cost = match state.kind() {
                    LearnedKind::Auto(a) if a.cost == CostBasis::Billed => bill,
                    _ => act,
                };
                state.settle(&plan, lat > self.deadline_s, cost);
            }
            let launched = launches(&family, &draws, lat);
            let extra = if matches!(driver, Driver::Fixed(_)) { (launched.len() - 1) as u8 } else { extra };
            out.lats.push(lat);
            out.active.push(act);
            out.billed.push(bill);
            out.hedged.push(hedged);
            out.extra.push(extra);
            if let Some(plan) = decided {
                out.plans.push(plan);
            }
            obs.clear();
            for &(p, at, end, started) in &launched {
                let d = &draws[p];
                let completed = at + d.wall <= end + 1e-9;
                if started || completed {
                    let s = &mut st[p];
                    s.idle_since = Some(s.idle_since.map_or(t + end, |i| i.max(t + end)));
                    s.busy_until = s.busy_until.max(t + end);
                }
                let outcome = if completed {
                    if d.latency.is_finite() {
                        Outcome::Valid { latency_s: d.latency }
                    } else {
                        Outcome::Failed { wall_s: d.wall }
                    }
                } else {
                    Outcome::Censored { after_s: end - at }
                };
                // A poll (or the result) tells the queue delay once it started; cancelled
                // while still queued, only that it was still queued at the cancel: its
                // queue delay is *more* than that (a millisecond more here).
                let queue_s = if completed || started { d.queue } else { d.queue.map(|_| end - at + 1e-3) };
                obs.push(Observation { provider: p, outcome, queue_s, idle_gap_s: gaps[p], warm: completed.then_some(d.warm) });
            }
            if let Driver::Learned(state, model, _, _, _) = &mut driver {
                model.observe_request(&obs);
                state.observed(model, obs.len() as u64);
            }
        }
        out
    }
}

impl Scenario {
    /// Runs a fixed family over the stream.
    pub fn run_fixed(&self, f: &Family) -> StreamRun {
        self.run(Driver::Fixed(f))
    }

    /// Runs a fixed family with its extra attempts gated by an extra-load bucket of
    /// `rate` per request (burst 5, starting empty), as `auto`'s bucket gates them when it
    /// plays the plan. Identical to [`Scenario::run_fixed`] for a family that never needs
    /// more than one extra attempt per request with `rate` ≥ 1.
    pub fn run_fixed_capped(&self, f: &Family, rate: f64) -> StreamRun {
        self.run(Driver::Capped(f, HedgeBudget::new(rate, 5.0)))
    }

    /// Runs a learned policy over the stream from an empty model.
    pub fn run_learned(&self, kind: LearnedKind, seed: u64) -> StreamRun {
        self.run_learned_guarded(kind, seed, false)
    }

    /// [`Scenario::run_learned`]; with `guarded`, `auto` settles every outcome (its
    /// miss controller and its plans' records, [`PolicyState::settle`]).
    pub fn run_learned_guarded(&self, kind: LearnedKind, seed: u64, guarded: bool) -> StreamRun {
        self.run_learned_with(kind, seed, guarded, false)
    }

    /// [`Scenario::run_learned_guarded`]; with `paired`, `auto` also plays its experts
    /// (the fixed sweep, its model, its record) with every expert priced on each
    /// request's draws, as a paired benchmark would run them (full information).
    pub fn run_learned_with(&self, kind: LearnedKind, seed: u64, guarded: bool, paired: bool) -> StreamRun {
        if paired {
            let own: Vec<StreamRun> = self.fixed_defs().iter().map(|d| self.run_fixed(&d.family)).collect();
            return self.run_learned_paired(kind, seed, &own);
        }
        self.run_learned_inner(kind, seed, guarded, None, None)
    }

    /// `auto` with paired information, its fixed experts (the order of
    /// [`Scenario::fixed_defs`]) priced on `own`, their own runs of the stream, and the
    /// model-only `auto` (the `model` learner, same kind and seed) priced on its own run:
    /// at request `k` an expert's loss is what its run did at `k`, learned only after
    /// request `k` is decided (causal). When the model-only expert is drawn, `auto` plays
    /// the plan the model-only instance decided for `k`. A plan the cap can bind (a
    /// cascade's third attempt) is priced on its own run under `auto`'s cap instead
    /// ([`Scenario::own_runs_capped`]): what it does when `auto` plays it.
    pub fn run_learned_paired(&self, kind: LearnedKind, seed: u64, own: &[StreamRun]) -> StreamRun {
        let model_only = self.run_learned(kind, seed);
        self.run_learned_inner(kind, seed, true, Some(own), Some(&model_only))
    }

    fn run_learned_inner(
        &self,
        kind: LearnedKind,
        seed: u64,
        guarded: bool,
        own: Option<&[StreamRun]>,
        model_only: Option<&StreamRun>,
    ) -> StreamRun {
        let rates = self.rates_at(0);
        let meta: Vec<(String, f64, f64)> = rates.iter().map(|r| (r.name.clone(), r.rate, r.idle_s)).collect();
        let model = Model::new(&meta, ModelConfig::default());
        let mut state = PolicyState::new(kind, &model, seed);
        let mut capped = None;
        if let (LearnedKind::Auto(a), Some(own)) = (kind, own) {
            let defs = self.fixed_defs();
            let plans = defs.iter().map(|d| crate::learned::family_plan(&d.family)).collect();
            state = state.with_experts(plans, crate::learned::loss_cost_ref(&rates, a.deadline_s), 1.0, true);
            capped = Some(self.own_runs_capped(&defs, own, a.max_extra));
            if model_only.is_some() {
                state = state.with_model_only_expert();
            }
        }
        let own = capped.as_deref().or(own);
        self.run(Driver::Learned(Box::new(state), model, guarded || own.is_some(), own, model_only))
    }

    /// The fixed plans' own runs as `auto`'s experts see them: each family run under an
    /// extra-load bucket at `auto`'s cap `max_extra` (a cascade's third attempt may be
    /// refused, as it is when `auto` plays the cascade); `uncapped` (the runs of `defs`
    /// without a cap) are reused where the cap never binds.
    pub fn own_runs_capped(&self, defs: &[crate::sweep::PolicyDef], uncapped: &[StreamRun], max_extra: f64) -> Vec<StreamRun> {
        defs.iter()
            .zip(uncapped)
            .map(|(d, run)| match d.family {
                Family::Cascade { .. } => self.run_fixed_capped(&d.family, max_extra),
                _ if max_extra < 1.0 => self.run_fixed_capped(&d.family, max_extra),
                _ => run.clone(),
            })
            .collect()
    }

    /// The fixed sweep of this scenario.
    pub fn fixed_defs(&self) -> Vec<crate::sweep::PolicyDef> {
        let mut probe = RoundSet::new(self.names());
        probe.round_ids.push(1);
        probe.blocks.push(0);
        probe.latency = vec![1.0; self.providers.len()];
        probe.billed = vec![1.0; self.providers.len()];
        probe.queue = self.providers.iter().map(|p| if p.profile.reports_queued { 1.0 } else { f64::NAN }).collect();
        standard_sweep(&probe, &self.rates_at(0), &self.delays)
    }

    /// Runs every fixed policy, `tuned:` and the learned policies, `auto` with paired
    /// information ([`worlds::AutoMode::Paired`], as `scenario sweep` runs it).
    pub fn evaluate(&self) -> ScenarioResult {
        self.evaluate_with(worlds::AutoMode::Paired)
    }

    /// [`Scenario::evaluate`] with `auto` learning as `mode` says: from its model alone,
    /// guarded (its miss controller and plan records), or paired (also its experts over
    /// the fixed plans, each priced on its own run of the stream, learned only after each
    /// request is decided). `adaptive` and `singler` learn from what they launched either
    /// way.
    pub fn evaluate_with(&self, mode: worlds::AutoMode) -> ScenarioResult {
        let half = self.requests / 2;
        let first = 0..half;
        let second = half..self.requests;
        let defs = self.fixed_defs();
        let runs: Vec<StreamRun> = defs.iter().map(|d| self.run_fixed(&d.family)).collect();
        let mut rows: Vec<ScenarioRow> =
            defs.iter().zip(&runs).map(|(d, run)| row(d.label.clone(), d.family.kind(), run, second.clone(), self.deadline_s)).collect();
        if !runs.is_empty() {
            let i = frozen_index(&runs, first, self.deadline_s);
            let mut t = rows[i].clone();
            t.policy = format!("tuned:{}", defs[i].label);
            t.tuned = true;
            rows.push(t);
        }
        for (i, (label, kind)) in learned_kinds(self).into_iter().enumerate() {
            let seed = self.seed.wrapping_add(i as u64);
            let run = match (kind, mode) {
                (LearnedKind::Auto(_), worlds::AutoMode::Paired) => self.run_learned_paired(kind, seed, &runs),
                (LearnedKind::Auto(_), worlds::AutoMode::Guarded) => self.run_learned_guarded(kind, seed, true),
                _ => self.run_learned(kind, seed),
            };
            rows.push(row(label, kinds::learned_policy_kind(&kind), &run, second.clone(), self.deadline_s));
        }
        ScenarioResult {
            scenario: self.name.clone(),
            seed: self.seed,
            requests: self.requests,
            deadline_s: self.deadline_s,
            auto: mode,
            rows,
        }
    }

    /// p99 against extra attempts per request on the second half, for fixed-delay hedges
    /// over a fine delay grid, adaptive over a quantile grid and singler over a budget
    /// grid (primary = first provider, hedge = second).
    pub fn tail_vs_load(&self) -> Vec<(String, Vec<(f64, f64)>)> {
        let second = self.requests / 2..self.requests;
        // Only the statistics are read: the points carry no label or kind.
        let point = |run: &StreamRun| {
            let r = row(String::new(), tailcut_core::PolicyKind::Hedge, run, second.clone(), self.deadline_s);
            (r.extra_per_req, r.p99_s.unwrap_or(f64::INFINITY))
        };
        let none = point(&self.run_fixed(&Family::Single { p: 0 }));
        let mut fixed = vec![none];
        let mut d = 0.6;
        while d <= 3.0 {
            fixed.push(point(&self.run_fixed(&Family::Hedge { p: 0, h: 1, delay: d })));
            d += 0.05;
        }
        let mut adaptive = vec![none];
        for q in [0.80, 0.85, 0.88, 0.9, 0.92, 0.94, 0.95, 0.96, 0.97, 0.98, 0.985, 0.99, 0.995] {
            let k = LearnedKind::Adaptive(AdaptiveSettings {
                primary: 0,
                hedge: 1,
                quantile: q,
                min_samples: 10,
                min_delay_s: 0.0,
                max_delay_s: crate::synth::CAP_S,
                budget: 1.0,
            });
            adaptive.push(point(&self.run_learned(k, 7)));
        }
        let mut singler = vec![none];
        for b in [0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.07, 0.1, 0.15, 0.2] {
            let k = LearnedKind::Singler(SingleRSettings { primary: 0, hedge: 1, budget: b, level: 0.99, min_samples: 10 });
            singler.push(point(&self.run_learned(k, 7)));
        }
        for v in [&mut fixed, &mut adaptive, &mut singler] {
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        vec![("fixed-delay hedge".into(), fixed), ("adaptive (quantile grid)".into(), adaptive), ("singler (budget grid)".into(), singler)]
    }
}

#[cfg(test)]
mod tests;
