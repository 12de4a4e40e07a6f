//! The live half of `auto`'s guarantees (issue 28 items 1 and 6): what each settled
//! request did, fed back to the learner that decided it.
//!
//! `LiveGuard` remembers which plan each decision's label stands for, and when a
//! request's trace comes back settled:
//!
//! - judges it: a **miss** is a request with no valid winner, or whose winner came past
//!   the deadline (`winner_total_ms`: for a stream, the time to its first content token);
//! - settles it ([`Learner::settle`]): the miss controller moves its working level `α_t`
//!   (adaptive conformal inference, `tailcut_model::guard::MissController`) and the plan's
//!   realized record grows;
//! - keeps every attempt in its provider's censored history (launched ones exact,
//!   cancelled ones right-censored at their cancel; cleared when the provider's shift
//!   detector fires) and hands the planner each provider's Kaplan–Meier estimate at the
//!   deadline (`Predictor::set_censored`), which single-provider plans are judged by.
//!
//! A request the caller stopped (a hang-up, a DELETE, shutdown) is not an outcome of its
//! plan and is not settled; its attempts still reach the model and the history.

use crate::trace::RequestTrace;
use std::collections::HashMap;
use std::sync::Arc;
use tailcut_model::guard::censored::CensoredSet;
use tailcut_model::{LearnedKind, Learner, Observation, Plan};

/// Labels remembered before the map starts over (a route decides a handful of plans; a
/// hedge's delay moves with the model, so labels accumulate slowly).
const LABELS_KEPT: usize = 256;

/// Settles an `auto` policy's requests; see the module doc.
#[derive(Debug)]
pub(super) struct LiveGuard {
    deadline_ms: f64,
    plans: HashMap<Arc<str>, Plan>,
    history: CensoredSet,
    settled: u64,
}

/// Whether a settled request missed a deadline of `deadline_ms`: no valid winner, or
/// one past it.
pub fn missed(trace: &RequestTrace, deadline_ms: f64) -> bool {
    trace.winner.is_none() || trace.winner_total_ms.is_none_or(|t| t.is_nan() || t > deadline_ms)
}

impl LiveGuard {
    /// The guard of an `auto` policy over `providers` providers (None for the others).
    pub(super) fn new(kind: &LearnedKind, providers: usize) -> Option<LiveGuard> {
        match kind {
            LearnedKind::Auto(a) => Some(LiveGuard {
                deadline_ms: a.deadline_s * 1000.0,
                plans: HashMap::new(),
                history: CensoredSet::new(providers),
                settled: 0,
            }),
            _ => None,
        }
    }

    /// A decision labelled `label` ran `plan`.
    pub(super) fn decided(&mut self, label: &Arc<str>, plan: Plan) {
        if self.plans.get(label) != Some(&plan) {
            if self.plans.len() >= LABELS_KEPT {
                self.plans.clear();
            }
            self.plans.insert(label.clone(), plan);
        }
    }

    /// Requests settled so far.
    pub(super) fn settled(&self) -> u64 {
        self.settled
    }

    /// Feeds one settled request, whose attempts `obs` the learner's model was just fed.
    pub(super) fn settle(&mut self, learner: &mut Learner, trace: &RequestTrace, obs: &[Observation]) {
        self.history.observe(learner.model(), obs);
        let at = self.history.at(self.deadline_ms / 1000.0);
        if let Some(p) = learner.state().predictor() {
            p.set_censored(at);
        }
        if trace.decisions.stopped_by_caller {
            return;
        }
        let Some(plan) = trace.decisions.learned.as_ref().and_then(|l| self.plans.get(&l.plan)).copied() else { return };
        learner.settle(&plan, missed(trace, self.deadline_ms), trace.projected_cost_micro_usd.as_usd().max(0.0));
        self.settled += 1;
    }
}
