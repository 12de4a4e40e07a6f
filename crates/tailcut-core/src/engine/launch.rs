//! Why an attempt is launched. A policy names the reason at launch; the [`Race`](super::Race)
//! derives the attempt's trace [`Role`] from it and records the matching decision itself,
//! so no policy writes the trace's decision flags by hand.

use crate::trace::{Decisions, Role};

/// Why an attempt is launched: the attempt's [`Role`] in the trace, and the decision the
/// race records once the launch goes through (a submit that fails still counts: the
/// attempt is in the race).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Launch {
    /// The first choice (role `primary`). Records nothing.
    Primary,
    /// One of several providers raced at once (role `racer`). Any racer but the race's
    /// first attempt sets `hedge_launched`.
    Racer,
    /// A timer hedge beside a slow primary (role `hedge`). Sets `hedge_launched`.
    Hedge,
    /// The provider switched to after a cutover (role `hedge`). Records nothing itself:
    /// the cutover is recorded when it fires ([`Race::cut_over`](super::Race::cut_over)).
    CutoverTarget,
    /// A safety hedge beside a kept primary (role `hedge`). Sets `safety_hedge_fired`.
    SafetyHedge,
    /// An escalation to a third provider (role `fallback`). Sets `escalation_fired`; a
    /// refusal at the live-attempt cap sets `escalation_skipped_at_capacity`.
    Escalation,
}

impl Launch {
    /// The attempt's role in the trace.
    pub fn role(self) -> Role {
        match self {
            Launch::Primary => Role::Primary,
            Launch::Racer => Role::Racer,
            Launch::Hedge | Launch::CutoverTarget | Launch::SafetyHedge => Role::Hedge,
            Launch::Escalation => Role::Fallback,
        }
    }

    /// Records a launch that went through; `first` is whether it opened the race.
    pub(crate) fn record_launched(self, decisions: &mut Decisions, first: bool) {
        match self {
            Launch::Primary | Launch::CutoverTarget => {}
            Launch::Racer => decisions.hedge_launched |= !first,
            Launch::Hedge => decisions.hedge_launched = true,
            Launch::SafetyHedge => decisions.safety_hedge_fired = true,
            Launch::Escalation => decisions.escalation_fired = true,
        }
    }

    /// Records a launch the live-attempt cap refused.
    pub(crate) fn record_at_capacity(self, decisions: &mut Decisions) {
        if self == Launch::Escalation {
            decisions.escalation_skipped_at_capacity = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_launch_has_its_trace_role_and_decision() {
        let all = [Launch::Primary, Launch::Racer, Launch::Hedge, Launch::CutoverTarget, Launch::SafetyHedge, Launch::Escalation];
        let roles: Vec<Role> = all.iter().map(|l| l.role()).collect();
        assert_eq!(roles, [Role::Primary, Role::Racer, Role::Hedge, Role::Hedge, Role::Hedge, Role::Fallback]);
        let recorded = |l: Launch, first: bool| {
            let mut d = Decisions::default();
            l.record_launched(&mut d, first);
            d
        };
        assert_eq!(recorded(Launch::Primary, true), Decisions::default());
        assert_eq!(recorded(Launch::CutoverTarget, false), Decisions::default());
        assert_eq!(recorded(Launch::Racer, true), Decisions::default(), "the first racer is no hedge");
        assert!(recorded(Launch::Racer, false).hedge_launched);
        assert!(recorded(Launch::Hedge, false).hedge_launched);
        assert_eq!(recorded(Launch::SafetyHedge, false), Decisions { safety_hedge_fired: true, ..Decisions::default() });
        assert_eq!(recorded(Launch::Escalation, false), Decisions { escalation_fired: true, ..Decisions::default() });
        let mut d = Decisions::default();
        Launch::Hedge.record_at_capacity(&mut d);
        assert_eq!(d, Decisions::default());
        Launch::Escalation.record_at_capacity(&mut d);
        assert!(d.escalation_skipped_at_capacity && !d.escalation_fired);
    }
}
