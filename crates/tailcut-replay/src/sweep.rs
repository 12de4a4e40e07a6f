//! Policy families replayed over paired rounds, with the reference tool's exact latency
//! and cost rules (`replay-semantics.md` §5), and the standard sweep (§7).
//!
//! Per round each policy yields a latency (+∞ when no valid result), an *active* cost
//! (execution seconds × rate, the loser treated as cancelled when the winner finishes)
//! and a *billed* cost (active plus each started worker's idle window; a primary
//! cancelled while still queued bills nothing). Sums run in round order, exactly as the
//! reference adds them, so means agree to the last bit.

use crate::fmt_g;
use crate::rounds::RoundSet;

/// A provider's prices as the float models use them.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderRates {
    /// Provider key.
    pub name: String,
    /// Billed rate, $/s.
    pub rate: f64,
    /// Idle window billed per worker start, s.
    pub idle_s: f64,
}

impl ProviderRates {
    /// The reference tool's 2026-07 rates, in its configuration order.
    pub fn reference_2026_07() -> Vec<ProviderRates> {
        vec![
            ProviderRates { name: "runpod".into(), rate: 0.000306, idle_s: 60.0 },
            ProviderRates { name: "modal".into(), rate: 0.000704, idle_s: 0.0 },
            ProviderRates { name: "cerebrium".into(), rate: 0.000736, idle_s: 0.0 },
        ]
    }

    fn idle_usd(&self) -> f64 {
        self.idle_s * self.rate
    }
}

/// A policy family with its providers (indices into the round set) and timers (s).
#[derive(Debug, Clone, PartialEq)]
pub enum Family {
    /// One provider.
    Single {
        /// Provider.
        p: usize,
    },
    /// Fixed delayed hedge; delay 0 is the immediate pair race.
    Hedge {
        /// Primary.
        p: usize,
        /// Hedge.
        h: usize,
        /// Delay, s.
        delay: f64,
    },
    /// Queue-state cutover.
    Cutover {
        /// Primary.
        p: usize,
        /// Hedge.
        h: usize,
        /// Poll time, s.
        cutover: f64,
        /// Safety-hedge time, s.
        safety: f64,
    },
    /// Cutover plus escalation to a fallback.
    Cascade {
        /// Primary.
        p: usize,
        /// Hedge.
        h: usize,
        /// Fallback.
        f: usize,
        /// Poll time, s.
        cutover: f64,
        /// Safety-hedge time, s.
        safety: f64,
        /// Escalation time, s.
        escalate: f64,
    },
}

impl Family {
    /// The kind of policy this family is (a delay-0 hedge is a `hedge`, as its label says).
    pub fn kind(&self) -> tailcut_core::PolicyKind {
        use tailcut_core::PolicyKind;
        match self {
            Family::Single { .. } => PolicyKind::Single,
            Family::Hedge { .. } => PolicyKind::Hedge,
            Family::Cutover { .. } => PolicyKind::Cutover,
            Family::Cascade { .. } => PolicyKind::Cascade,
        }
    }
}

/// A labelled policy to replay.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyDef {
    /// Label, spelled as the reference spells it.
    pub label: String,
    /// What it does.
    pub family: Family,
}

/// Per-policy results over one split: latencies in round order and the cost sums.
#[derive(Debug, Clone, Default)]
pub struct Evaluated {
    /// Latency per round (+∞ for no valid result).
    pub lats: Vec<f64>,
    /// Σ active cost.
    pub active_sum: f64,
    /// Σ billed cost.
    pub billed_sum: f64,
    /// Rounds counted as hedged.
    pub hedged: u64,
}

/// Timers used by the sweep's queue-state families.
pub const CUTOVER_S: f64 = 2.5;
/// Safety-hedge time of the sweep.
pub const SAFETY_S: f64 = 8.5;
/// Escalation time of the sweep.
pub const ESCALATE_S: f64 = 25.0;

/// The standard sweep over a split: singles, then for each primary and hedge the delay
/// grid, and (when the primary has a queue signal in this split) the cutover and every
/// cascade.
pub fn standard_sweep(set: &RoundSet, rates: &[ProviderRates], delays: &[f64]) -> Vec<PolicyDef> {
    standard_sweep_scaled(set, rates, delays, 1.0)
}

/// [`standard_sweep`] with the queue-state timers (cutover poll, safety hedge,
/// escalation) multiplied by `timer_scale`: 1 for real providers, 0.01 for rounds recorded
/// against `tailcut sim-provider --time-scale 0.01`, whose 100 s cold start takes 1 s (at
/// the reference's 2.5 s the cutover would never fire). The fixed-hedge delays come from
/// `delays` and are not scaled.
pub fn standard_sweep_scaled(set: &RoundSet, rates: &[ProviderRates], delays: &[f64], timer_scale: f64) -> Vec<PolicyDef> {
    let (cutover_s, safety_s, escalate_s) = (CUTOVER_S * timer_scale, SAFETY_S * timer_scale, ESCALATE_S * timer_scale);
    let names: Vec<&str> = rates.iter().map(|r| r.name.as_str()).collect();
    let mut out: Vec<PolicyDef> =
        (0..names.len()).map(|p| PolicyDef { label: format!("single:{}", names[p]), family: Family::Single { p } }).collect();
    for p in 0..names.len() {
        let queue_signal = set.has_queue_signal(p);
        for h in (0..names.len()).filter(|&h| h != p) {
            for &delay in delays {
                out.push(PolicyDef {
                    label: format!("hedge:{}->{}@{}s", names[p], names[h], fmt_g(delay)),
                    family: Family::Hedge { p, h, delay },
                });
            }
            if queue_signal {
                out.push(PolicyDef {
                    label: format!("cutover:{}->{}@q{}s+s{}s", names[p], names[h], fmt_g(cutover_s), fmt_g(safety_s)),
                    family: Family::Cutover { p, h, cutover: cutover_s, safety: safety_s },
                });
                for f in (0..names.len()).filter(|&f| f != p && f != h) {
                    out.push(PolicyDef {
                        label: format!(
                            "cascade:{}->{}->{}@q{}s+s{}s+e{}s",
                            names[p],
                            names[h],
                            names[f],
                            fmt_g(cutover_s),
                            fmt_g(safety_s),
                            fmt_g(escalate_s)
                        ),
                        family: Family::Cascade { p, h, f, cutover: cutover_s, safety: safety_s, escalate: escalate_s },
                    });
                }
            }
        }
    }
    out
}

struct Row<'a> {
    set: &'a RoundSet,
    r: usize,
    cap: f64,
}

impl Row<'_> {
    fn l(&self, p: usize) -> f64 {
        self.set.latency[self.r * self.set.width() + p]
    }
    /// Billed seconds, with `default` for a provider absent from the round.
    fn b(&self, p: usize, default: f64) -> f64 {
        let v = self.set.billed[self.r * self.set.width() + p];
        if v.is_nan() {
            default
        } else {
            v
        }
    }
    fn bc(&self, p: usize) -> f64 {
        self.b(p, self.cap)
    }
    fn q(&self, p: usize) -> Option<f64> {
        let v = self.set.queue[self.r * self.set.width() + p];
        (!v.is_nan()).then_some(v)
    }
    /// The queue delay the cutover families assume: the reported one, else +∞ for a
    /// primary with no valid result and 0 for one with a result.
    fn q_star(&self, p: usize) -> f64 {
        self.q(p).unwrap_or(if self.l(p).is_infinite() { f64::INFINITY } else { 0.0 })
    }
}

fn fmin(a: f64, b: f64) -> f64 {
    if b < a {
        b
    } else {
        a
    }
}

fn fmax(a: f64, b: f64) -> f64 {
    if b > a {
        b
    } else {
        a
    }
}

/// Replays one policy over every round of `set`. `cap_s` is the billed time assumed for
/// a provider absent from a round (hedge, cutover and cascade families).
pub fn evaluate(set: &RoundSet, rates: &[ProviderRates], family: &Family, cap_s: f64) -> Evaluated {
    let n = set.len();
    let mut ev = Evaluated { lats: Vec::with_capacity(n), ..Evaluated::default() };
    for r in 0..n {
        let (lat, act, bill, hedged) = evaluate_round(set, rates, family, cap_s, r);
        ev.lats.push(lat);
        ev.active_sum += act;
        ev.billed_sum += bill;
        ev.hedged += u64::from(hedged);
    }
    ev
}

/// Replays one policy over round `r` of `set`: (latency, active $, billed $, hedged).
/// The learned policies' replay calls this one round at a time, so a round is priced by
/// exactly the rules the fixed policies use.
#[inline]
pub fn evaluate_round(set: &RoundSet, rates: &[ProviderRates], family: &Family, cap_s: f64, r: usize) -> RoundOutcome {
    let row = Row { set, r, cap: cap_s };
    match *family {
        Family::Single { p } => single(&row, &rates[p], p),
        Family::Hedge { p, h, delay } => hedge(&row, (&rates[p], p), (&rates[h], h), delay),
        Family::Cutover { p, h, cutover, safety } => cutover_round(&row, (&rates[p], p), (&rates[h], h), cutover, safety),
        Family::Cascade { p, h, f, cutover, safety, escalate } => {
            cascade(&row, (&rates[p], p), (&rates[h], h), (&rates[f], f), cutover, safety, escalate)
        }
    }
}

/// One round's (latency, active $, billed $, counted as hedged).
pub type RoundOutcome = (f64, f64, f64, bool);

fn single(row: &Row<'_>, pr: &ProviderRates, p: usize) -> RoundOutcome {
    let cost = row.b(p, 0.0) * pr.rate;
    (row.l(p), cost, cost + pr.idle_usd(), false)
}

fn hedge(row: &Row<'_>, (pr, p): (&ProviderRates, usize), (hr, h): (&ProviderRates, usize), delay: f64) -> RoundOutcome {
    let (rp, rh) = (row.l(p), row.l(h));
    let (cp, ch) = (pr.rate, hr.rate);
    if rp <= delay {
        let cost = cp * fmin(row.bc(p), rp);
        return (rp, cost, cost + pr.idle_usd(), false);
    }
    let lat = fmin(rp, delay + rh);
    if lat.is_infinite() {
        let cost = cp * row.bc(p) + ch * row.bc(h);
        return (f64::INFINITY, cost, cost + pr.idle_usd() + hr.idle_usd(), true);
    }
    let started = row.q(p).is_none_or(|q| lat > q);
    let (mut cost, billed_p) = if started {
        let c = cp * fmin(row.bc(p), lat);
        (c, c + pr.idle_usd())
    } else {
        (0.0, 0.0)
    };
    let hedge_part = ch * fmax(0.0, lat - delay);
    cost += hedge_part;
    (lat, cost, billed_p + hedge_part + hr.idle_usd(), true)
}

fn kept_with_safety(row: &Row<'_>, (pr, p): (&ProviderRates, usize), (hr, h): (&ProviderRates, usize), safety: f64) -> RoundOutcome {
    let (rp, rh) = (row.l(p), row.l(h));
    let (cp, ch) = (pr.rate, hr.rate);
    let lat = fmin(rp, safety + rh);
    let cost = if lat.is_infinite() {
        cp * row.bc(p) + ch * row.bc(h)
    } else {
        let mut c = cp * fmin(row.bc(p), lat);
        c += ch * fmax(0.0, lat - safety);
        c
    };
    (lat, cost, cost + pr.idle_usd() + hr.idle_usd(), true)
}

fn cutover_round(row: &Row<'_>, prim: (&ProviderRates, usize), hed: (&ProviderRates, usize), cutover: f64, safety: f64) -> RoundOutcome {
    let ((pr, p), (hr, h)) = (prim, hed);
    let (rp, rh) = (row.l(p), row.l(h));
    if row.q_star(p) > cutover {
        let cost = hr.rate * if rh.is_infinite() { row.bc(h) } else { rh };
        return (cutover + rh, cost, cost + hr.idle_usd(), true);
    }
    if rp <= safety {
        let cost = pr.rate * fmin(row.bc(p), rp);
        return (rp, cost, cost + pr.idle_usd(), false);
    }
    kept_with_safety(row, prim, hed, safety)
}

fn cascade(
    row: &Row<'_>,
    prim: (&ProviderRates, usize),
    hed: (&ProviderRates, usize),
    (fr, f): (&ProviderRates, usize),
    cutover: f64,
    safety: f64,
    escalate: f64,
) -> RoundOutcome {
    let ((pr, p), (hr, h)) = (prim, hed);
    let (rp, rh, rf) = (row.l(p), row.l(h), row.l(f));
    if row.q_star(p) > cutover {
        let h_done = cutover + rh;
        let f_done = escalate + rf;
        if h_done <= escalate {
            let cost = hr.rate * if rh.is_infinite() { row.bc(h) } else { rh };
            return (h_done, cost, cost + hr.idle_usd(), true);
        }
        let lat = fmin(h_done, f_done);
        let cost = if lat.is_infinite() {
            hr.rate * row.bc(h) + fr.rate * row.bc(f)
        } else {
            let mut c = hr.rate * fmin(row.bc(h), lat - cutover);
            c += fr.rate * fmax(0.0, lat - escalate);
            c
        };
        return (lat, cost, cost + hr.idle_usd() + fr.idle_usd(), true);
    }
    if rp <= safety {
        let cost = pr.rate * fmin(row.bc(p), rp);
        return (rp, cost, cost + pr.idle_usd(), false);
    }
    kept_with_safety(row, prim, hed, safety)
}
