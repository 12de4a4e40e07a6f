//! [`PolicyKind`]: which kind of policy ran, as configured (`kind = "hedge"`), as written
//! to each trace record (`policy_kind`), and as read back by replay and reports, which
//! tell policies apart by it and never by their labels.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The kind of a policy. Serialized in lower case, as `tailcut.toml` spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyKind {
    /// One provider, no hedge.
    Single,
    /// Every provider at once.
    Race,
    /// A timer hedge (`delay` 0 is an immediate pair race).
    Hedge,
    /// Queue-state cutover.
    Cutover,
    /// Cutover, safety hedge and escalation to a fallback.
    Cascade,
    /// The critical tier.
    Deadline,
    /// A learned hedge delay (a quantile of the primary's latency).
    Adaptive,
    /// A learned hedge delay minimising a tail level under an extra-load budget.
    Singler,
    /// A learned choice among plans for a deadline.
    Auto,
    /// A stream hedged when its first token is late.
    #[serde(rename = "first_token")]
    FirstToken,
}

impl PolicyKind {
    /// Every kind a configuration file may name, in the order the docs list them.
    pub const CONFIGURED: [PolicyKind; 9] = [
        PolicyKind::Single,
        PolicyKind::Race,
        PolicyKind::Hedge,
        PolicyKind::Cutover,
        PolicyKind::Cascade,
        PolicyKind::Deadline,
        PolicyKind::Adaptive,
        PolicyKind::Singler,
        PolicyKind::Auto,
    ];

    /// The name as configured and traced (`hedge`, `first_token`).
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyKind::Single => "single",
            PolicyKind::Race => "race",
            PolicyKind::Hedge => "hedge",
            PolicyKind::Cutover => "cutover",
            PolicyKind::Cascade => "cascade",
            PolicyKind::Deadline => "deadline",
            PolicyKind::Adaptive => "adaptive",
            PolicyKind::Singler => "singler",
            PolicyKind::Auto => "auto",
            PolicyKind::FirstToken => "first_token",
        }
    }

    /// The kind of a record written before records carried `policy_kind`, from its
    /// label's prefix (`hedge:a->b@10s`). Only for such legacy records: everything
    /// written since names its kind.
    pub fn from_legacy_label(label: &str) -> Option<PolicyKind> {
        let (prefix, _) = label.split_once(':')?;
        if prefix == "stream" {
            return Some(PolicyKind::FirstToken);
        }
        PolicyKind::CONFIGURED.into_iter().find(|k| k.as_str() == prefix)
    }

    /// Whether the policy learns from what it observes (`adaptive`, `singler`, `auto`).
    pub fn is_learned(self) -> bool {
        matches!(self, PolicyKind::Adaptive | PolicyKind::Singler | PolicyKind::Auto)
    }

    /// Whether it ever sends a request to more than one provider.
    pub fn hedges(self) -> bool {
        self != PolicyKind::Single
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::PolicyKind;

    #[test]
    fn serialized_names_are_the_configured_names() {
        for k in PolicyKind::CONFIGURED.into_iter().chain([PolicyKind::FirstToken]) {
            assert_eq!(serde_json::to_string(&k).unwrap(), format!("\"{}\"", k.as_str()));
            assert_eq!(serde_json::from_str::<PolicyKind>(&format!("\"{k}\"")).unwrap(), k);
        }
    }

    #[test]
    fn legacy_labels_name_their_kind() {
        assert_eq!(PolicyKind::from_legacy_label("hedge:a->b@0s"), Some(PolicyKind::Hedge));
        assert_eq!(PolicyKind::from_legacy_label("auto:a,b@250ms/miss1%"), Some(PolicyKind::Auto));
        assert_eq!(PolicyKind::from_legacy_label("stream:a->b@first-token+300ms"), Some(PolicyKind::FirstToken));
        assert_eq!(PolicyKind::from_legacy_label("tuned:x"), None);
        assert_eq!(PolicyKind::from_legacy_label("hedge"), None);
    }
}
