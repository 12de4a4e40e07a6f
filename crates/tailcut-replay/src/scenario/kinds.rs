//! Which learned policies a scenario evaluates.

use super::Scenario;
use tailcut_core::PolicyKind;
use tailcut_model::{AdaptiveSettings, AutoSettings, LearnedKind, SingleRSettings};

/// The policy kind of a learned policy.
pub fn learned_policy_kind(kind: &LearnedKind) -> PolicyKind {
    match kind {
        LearnedKind::Adaptive(_) => PolicyKind::Adaptive,
        LearnedKind::Singler(_) => PolicyKind::Singler,
        LearnedKind::Auto(_) => PolicyKind::Auto,
    }
}

/// Learned policies of a scenario: auto at its deadline, and adaptive and singler for
/// each ordered pair (5 % budget).
pub fn learned_kinds(sc: &Scenario) -> Vec<(String, LearnedKind)> {
    let names = sc.names();
    let auto = AutoSettings { deadline_s: sc.deadline_s, max_extra: 1.0, ..AutoSettings::default() };
    let mut out = vec![(crate::learned::auto_label(&auto), LearnedKind::Auto(auto))];
    for p in 0..names.len() {
        for h in (0..names.len()).filter(|&h| h != p) {
            out.push((
                format!("adaptive:{}->{}@p95", names[p], names[h]),
                LearnedKind::Adaptive(AdaptiveSettings {
                    primary: p,
                    hedge: h,
                    quantile: 0.95,
                    min_samples: 10,
                    min_delay_s: 0.0,
                    max_delay_s: crate::synth::CAP_S,
                    budget: 0.05,
                }),
            ));
            out.push((
                format!("singler:{}->{}@B5%", names[p], names[h]),
                LearnedKind::Singler(SingleRSettings { primary: p, hedge: h, budget: 0.05, level: 0.99, min_samples: 10 }),
            ));
        }
    }
    out
}
