//! `[policies.NAME]` as written: one raw struct per [`PolicyKind`], each rejecting the
//! keys its kind does not take, tagged by `kind` in [`RawPolicy`]. [`RawPolicy::read`]
//! reads the tag first and then the kind's struct, so every error names its key path
//! (`policies.p.delay_ms`), which serde's own tagged-enum reading loses.

use crate::context::Ctx;
use crate::error::ConfigError;
use serde::Deserialize;
use tailcut_core::PolicyKind;

/// A policy table, by kind.
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub(crate) enum RawPolicy {
    Single(RawSingle),
    Race(RawRaceOf),
    Hedge(RawHedge),
    Cutover(RawCutover),
    Cascade(RawCascade),
    Deadline(RawDeadline),
    Adaptive(RawAdaptive),
    Singler(RawSingler),
    Auto(RawAuto),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSingle {
    pub provider: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRaceOf {
    pub providers: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHedge {
    pub primary: Option<String>,
    pub hedge: Option<String>,
    pub delay_ms: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCutover {
    pub primary: Option<String>,
    pub hedge: Option<String>,
    pub poll_after_ms: Option<i64>,
    pub safety_at_ms: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCascade {
    pub primary: Option<String>,
    pub hedge: Option<String>,
    pub fallback: Option<String>,
    pub poll_after_ms: Option<i64>,
    pub safety_at_ms: Option<i64>,
    pub escalate_at_ms: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDeadline {
    pub primary: Option<String>,
    pub hedge: Option<String>,
    pub fallback: Option<String>,
    pub poll_after_ms: Option<i64>,
    pub safety_at_ms: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAdaptive {
    pub primary: Option<String>,
    pub hedge: Option<String>,
    pub quantile: Option<f64>,
    pub min_samples: Option<i64>,
    pub min_delay_ms: Option<i64>,
    pub max_delay_ms: Option<i64>,
    pub extra_load_percent: Option<f64>,
    pub extra_load_burst: Option<f64>,
    pub half_life: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSingler {
    pub primary: Option<String>,
    pub hedge: Option<String>,
    pub level: Option<f64>,
    pub min_samples: Option<i64>,
    pub extra_load_percent: Option<f64>,
    pub extra_load_burst: Option<f64>,
    pub half_life: Option<f64>,
}

/// What an `auto` policy's cost counts.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawCost {
    /// Seconds a provider was running the job.
    #[default]
    Active,
    /// What the provider bills.
    Billed,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAuto {
    pub providers: Option<Vec<String>>,
    pub deadline_ms: Option<i64>,
    pub target_miss: Option<f64>,
    pub extra_load_percent: Option<f64>,
    pub extra_load_burst: Option<f64>,
    pub poll_after_ms: Option<i64>,
    pub safety_at_ms: Option<i64>,
    pub escalate_at_ms: Option<i64>,
    pub cost: Option<RawCost>,
    pub half_life: Option<f64>,
}

impl RawPolicy {
    /// Reads the table at `key`: its `kind`, then the keys that kind takes.
    pub fn read(cx: &Ctx<'_>, key: &str, value: toml::Value) -> Result<RawPolicy, ConfigError> {
        let toml::Value::Table(mut table) = value else {
            return Err(cx.err(key, "expected a table"));
        };
        let kind_key = format!("{key}.kind");
        let expected = || PolicyKind::CONFIGURED.map(PolicyKind::as_str).join(", ");
        let kind = match table.remove("kind") {
            None => return Err(cx.err(kind_key, format!("required (one of {})", expected()))),
            Some(toml::Value::String(s)) => PolicyKind::CONFIGURED
                .into_iter()
                .find(|k| k.as_str() == s)
                .ok_or_else(|| cx.err(&kind_key, format!("unknown policy kind `{s}`; expected one of {}", expected())))?,
            Some(other) => return Err(cx.err(kind_key, format!("expected a string, found {}", other.type_str()))),
        };
        let rest = toml::Value::Table(table);
        let read = |e: ConfigError| not_used(e, kind);
        Ok(match kind {
            PolicyKind::Single => RawPolicy::Single(cx.typed(key, rest).map_err(read)?),
            PolicyKind::Race => RawPolicy::Race(cx.typed(key, rest).map_err(read)?),
            PolicyKind::Hedge => RawPolicy::Hedge(cx.typed(key, rest).map_err(read)?),
            PolicyKind::Cutover => RawPolicy::Cutover(cx.typed(key, rest).map_err(read)?),
            PolicyKind::Cascade => RawPolicy::Cascade(cx.typed(key, rest).map_err(read)?),
            PolicyKind::Deadline => RawPolicy::Deadline(cx.typed(key, rest).map_err(read)?),
            PolicyKind::Adaptive => RawPolicy::Adaptive(cx.typed(key, rest).map_err(read)?),
            PolicyKind::Singler => RawPolicy::Singler(cx.typed(key, rest).map_err(read)?),
            PolicyKind::Auto => RawPolicy::Auto(cx.typed(key, rest).map_err(read)?),
            PolicyKind::FirstToken => unreachable!("not a configured kind"),
        })
    }

    /// The kind it was tagged with.
    pub fn kind(&self) -> PolicyKind {
        match self {
            RawPolicy::Single(_) => PolicyKind::Single,
            RawPolicy::Race(_) => PolicyKind::Race,
            RawPolicy::Hedge(_) => PolicyKind::Hedge,
            RawPolicy::Cutover(_) => PolicyKind::Cutover,
            RawPolicy::Cascade(_) => PolicyKind::Cascade,
            RawPolicy::Deadline(_) => PolicyKind::Deadline,
            RawPolicy::Adaptive(_) => PolicyKind::Adaptive,
            RawPolicy::Singler(_) => PolicyKind::Singler,
            RawPolicy::Auto(_) => PolicyKind::Auto,
        }
    }
}

/// A key the kind does not take, said in the configuration's words: serde's
/// ``unknown field `delay_ms`, expected `provider` `` becomes
/// ``not used by kind = "single" (it takes: `provider`)``.
fn not_used(e: ConfigError, kind: PolicyKind) -> ConfigError {
    match e {
        ConfigError::Invalid { file, key, expected } if expected.starts_with("unknown field") => {
            let takes = expected.split_once(", expected ").map_or("", |(_, t)| t);
            let takes = takes.strip_prefix("one of ").unwrap_or(takes);
            let takes = if takes.starts_with("fields") { "no other keys" } else { takes };
            ConfigError::Invalid { file, key, expected: format!("not used by kind = \"{kind}\" (it takes: {takes})") }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::{RawPolicy, RawSingle};
    use crate::context::Ctx;
    use crate::ConfigError;
    use tailcut_core::PolicyKind;

    fn read(text: &str) -> Result<RawPolicy, ConfigError> {
        let value: toml::Value = toml::from_str(text).unwrap();
        RawPolicy::read(&Ctx { file: "t.toml" }, "policies.p", value)
    }

    #[test]
    fn each_kind_reads_only_its_keys_and_errors_name_the_key() {
        assert_eq!(read("kind = \"hedge\"\nprimary = \"a\"\nhedge = \"b\"\ndelay_ms = 5\n").unwrap().kind(), PolicyKind::Hedge);
        let e = read("kind = \"single\"\nprovider = \"a\"\ndelay_ms = 5\n").unwrap_err().to_string();
        assert_eq!(e, "t.toml: key `policies.p.delay_ms`: not used by kind = \"single\" (it takes: `provider`)");
        let e = read("kind = \"magic\"\n").unwrap_err().to_string();
        assert!(e.starts_with("t.toml: key `policies.p.kind`: unknown policy kind `magic`; expected one of single, race"), "{e}");
        let e = read("provider = \"a\"\n").unwrap_err().to_string();
        assert!(e.starts_with("t.toml: key `policies.p.kind`: required"), "{e}");
        let e = read("kind = \"auto\"\nproviders = [\"a\"]\ncost = \"cheap\"\n").unwrap_err().to_string();
        assert!(e.starts_with("t.toml: key `policies.p.cost`: unknown variant `cheap`"), "{e}");
        let e = read("kind = \"hedge\"\ndelay_ms = \"soon\"\n").unwrap_err().to_string();
        assert!(e.starts_with("t.toml: key `policies.p.delay_ms`: invalid type"), "{e}");
    }

    #[test]
    fn serde_tagged_reading_agrees() {
        let v: RawPolicy = toml::from_str("kind = \"single\"\nprovider = \"a\"\n").unwrap();
        assert!(matches!(v, RawPolicy::Single(RawSingle { provider: Some(ref p) }) if p == "a"));
        assert!(toml::from_str::<RawPolicy>("kind = \"single\"\nprovider = \"a\"\ndelay_ms = 5\n").is_err());
    }
}
