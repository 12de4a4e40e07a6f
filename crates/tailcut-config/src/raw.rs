//! Stage one: the file's shape. Unknown keys are rejected here (a provider's keys are
//! read by [`crate::provider`], by kind; a policy's by its kind's struct in [`policy`]).

use serde::Deserialize;

mod policy;

pub(crate) use policy::*;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    #[serde(default)]
    pub race: RawRace,
    #[serde(default)]
    pub budget: RawBudget,
    #[serde(default)]
    pub trace: RawTrace,
    #[serde(default)]
    pub validator: Option<toml::Table>,
    #[serde(default)]
    pub providers: toml::Table,
    #[serde(default)]
    pub policies: toml::Table,
    #[serde(default)]
    pub replay: RawReplay,
    #[serde(default)]
    pub gateway: Option<toml::Table>,
    #[serde(default)]
    pub routes: toml::Table,
    #[serde(default)]
    pub state: Option<RawState>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawState {
    pub url: Option<String>,
    pub url_env: Option<String>,
    pub pool_size: Option<i64>,
    pub lease_ttl_s: Option<f64>,
    pub lease_slice_usd: Option<f64>,
    pub charge_rows: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGateway {
    pub listen: Option<String>,
    pub max_body_bytes: Option<i64>,
    pub max_in_flight: Option<i64>,
    pub admission_wait_ms: Option<i64>,
    pub total_timeout_s: Option<f64>,
    pub job_retention_s: Option<f64>,
    pub store: Option<String>,
    pub hedge_budget_percent: Option<f64>,
    pub hedge_budget_burst: Option<i64>,
    pub auth: Option<String>,
    #[serde(default)]
    pub keys: Vec<RawKey>,
    pub webhook_allow_private: Option<bool>,
    pub header_read_timeout_s: Option<f64>,
    pub body_read_timeout_s: Option<f64>,
    pub idle_timeout_s: Option<f64>,
    pub fast_path: Option<bool>,
    pub max_connections: Option<i64>,
    pub max_running_jobs_per_key: Option<i64>,
    pub drain_timeout_s: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawKey {
    pub name: String,
    pub sha256: String,
    pub budget_usd: Option<f64>,
    pub rate_per_s: Option<f64>,
    pub routes: Option<Vec<String>>,
    pub admin: Option<bool>,
    pub max_running_jobs: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRoute {
    pub kind: String,
    #[serde(default)]
    pub models: Vec<String>,
    pub policy: String,
    pub first_token_hedge_ms: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRace {
    pub max_live: Option<i64>,
    pub cap_s: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBudget {
    pub soft_stop_usd: Option<f64>,
    pub hard_stop_usd: Option<f64>,
    pub ledger: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTrace {
    pub path: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawReplay {
    pub deadlines_s: Option<Vec<i64>>,
    pub delays_s: Option<Vec<f64>>,
    pub calibration_rounds: Option<i64>,
    pub cap_s: Option<f64>,
}
