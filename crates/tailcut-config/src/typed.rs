//! Stage two: the validated, typed [`Config`], read section by section (providers in
//! [`crate::provider`], policies in [`crate::policy`], gateway and routes in
//! [`crate::gateway`]), and the engine objects built from it.

use crate::bounds::{Lo, MAX_USD, WEEK_S};
use crate::context::Ctx;
use crate::error::ConfigError;
use crate::gateway::{GatewayConfig, RouteConfig};
use crate::policy::PolicySpec;
use crate::provider::ProviderConfig;
use crate::raw::{RawConfig, RawPolicy};
use std::path::{Path, PathBuf};
use tailcut_core::engine::RaceSettings;
use tailcut_core::ledger::BudgetLimits;
use tailcut_core::validate::{ValidatorRegistry, ValidatorSpec};
use tailcut_core::{MicroUsd, Provider};

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where it came from (a path, or `<built-in>`).
    pub source: String,
    /// Live-attempt cap and per-attempt cap.
    pub race: RaceSettings,
    /// Spending limits and where the ledger lives.
    pub budget: BudgetConfig,
    /// Where request traces are appended, if anywhere.
    pub trace_path: Option<PathBuf>,
    /// The result validator.
    pub validator: ValidatorSpec,
    /// Providers, in file order.
    pub providers: Vec<ProviderConfig>,
    /// Named policies, in file order.
    pub policies: Vec<(String, PolicySpec)>,
    /// Replay settings.
    pub replay: ReplayConfig,
    /// Gateway settings (`tailcut serve`).
    pub gateway: GatewayConfig,
    /// Gateway routes, in file order.
    pub routes: Vec<RouteConfig>,
    /// Where the gateway's shared state lives (`[state]`).
    pub state: crate::state::StateConfig,
}

/// Budget settings.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetConfig {
    /// The two stops.
    pub limits: BudgetLimits,
    /// SQLite file; `None` keeps the ledger in memory.
    pub ledger: Option<PathBuf>,
}

/// Replay settings (deadlines, hedge-delay grid, calibration split, censoring cap).
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayConfig {
    /// Deadlines whose misses are counted, seconds.
    pub deadlines_s: Vec<u32>,
    /// Fixed-hedge delay grid, seconds.
    pub delays_s: Vec<f64>,
    /// Rounds with `round_id <= this` form the calibration split, when the file sets it
    /// (`tailcut replay --config` then splits by it unless `--calibration-rounds` says
    /// otherwise; `config import-gpuhedge` writes the reference's 18).
    pub calibration_rounds: Option<u64>,
    /// Billed seconds assumed for a provider missing from a round.
    pub cap_s: f64,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig {
            deadlines_s: vec![30, 60, 90, 120],
            delays_s: vec![0.0, 5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0],
            calibration_rounds: None,
            cap_s: 300.0,
        }
    }
}

impl Config {
    /// Reads and validates a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { file: file.clone(), source })?;
        Config::parse(&text, &file)
    }

    /// The built-in demo configuration.
    pub fn built_in() -> Config {
        match Config::parse(crate::BUILT_IN, "<built-in>") {
            Ok(c) => c,
            // The built-in file is covered by tests; failing here is a build defect.
            Err(e) => unreachable!("built-in configuration is invalid: {e}"),
        }
    }

    /// Parses and validates configuration text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
        let cx = Ctx { file };
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::Syntax { file: file.into(), message: e.to_string().trim().to_string() })?;
        let raw: RawConfig = cx.typed("", toml::Value::Table(table))?;

        let max_live = cx.int("race.max_live", raw.race.max_live, 2, 1, 64, "attempts")? as usize;
        let race = RaceSettings { max_live, cap: cx.seconds("race.cap_s", raw.race.cap_s, 300.0, Lo::Excl(0.0), WEEK_S)? };

        let soft = cx.float("budget.soft_stop_usd", raw.budget.soft_stop_usd, 45.0, Lo::Incl(0.0), MAX_USD, "dollars")?;
        let hard = cx.float("budget.hard_stop_usd", raw.budget.hard_stop_usd, 50.0, Lo::Incl(0.0), MAX_USD, "dollars")?;
        if soft > hard {
            return Err(cx.err("budget.soft_stop_usd", format!("expected at most budget.hard_stop_usd ({hard})")));
        }
        let (state, state_sqlite) = crate::state::state(&cx, raw.state)?;
        if state_sqlite.is_some() && raw.budget.ledger.is_some() {
            return Err(cx.err("state.url", "either state.url = \"sqlite:...\" or budget.ledger, not both (both name the ledger's file)"));
        }
        let ledger = match raw.budget.ledger.as_deref() {
            None => Some(PathBuf::from(".tailcut/ledger.sqlite")),
            Some(":memory:") => None,
            Some("") => return Err(cx.err("budget.ledger", "expected a file path or \":memory:\"")),
            Some(p) => Some(PathBuf::from(p)),
        };
        let on_postgres = matches!(state.backend, crate::state::StateBackend::Postgres { .. });
        if on_postgres && raw.budget.ledger.is_some() {
            return Err(cx.err(
                "budget.ledger",
                "no ledger file with state.url on PostgreSQL (the ledger is in the database): remove budget.ledger",
            ));
        }
        let ledger = match &state_sqlite {
            Some(p) => p.clone(),
            None if on_postgres => None,
            None => ledger,
        };
        let budget =
            BudgetConfig { limits: BudgetLimits { soft_stop: MicroUsd::from_usd(soft), hard_stop: MicroUsd::from_usd(hard) }, ledger };

        let validator = match raw.validator {
            None => ValidatorSpec::named("nonempty"),
            Some(t) => {
                let spec: ValidatorSpec = cx.typed("validator", toml::Value::Table(t))?;
                ValidatorRegistry::default().build(&spec).map_err(|e| cx.err("validator", e.to_string()))?;
                spec
            }
        };

        let mut providers = Vec::new();
        for (name, value) in raw.providers {
            providers.push(crate::provider::provider(&cx, &name, value)?);
        }
        let entries: Vec<Provider> = providers.iter().map(ProviderConfig::entry).collect();

        let mut policies = Vec::new();
        for (name, value) in raw.policies {
            let key = format!("policies.{name}");
            let rp = RawPolicy::read(&cx, &key, value)?;
            let spec = crate::policy::policy(&cx, &key, rp)?;
            spec.build(&entries).map_err(|e| cx.err(&key, e.to_string()))?;
            policies.push((name, spec));
        }

        let d = ReplayConfig::default();
        let deadlines_s = match raw.replay.deadlines_s {
            None => d.deadlines_s,
            Some(v) => v
                .into_iter()
                .map(|x| u32::try_from(x).ok().filter(|x| *x > 0 && f64::from(*x) <= WEEK_S))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| cx.err("replay.deadlines_s", format!("expected whole seconds from 1 to {WEEK_S}")))?,
        };
        let delays_s = match raw.replay.delays_s {
            None => d.delays_s,
            Some(v) => {
                for (i, x) in v.iter().enumerate() {
                    cx.float(&format!("replay.delays_s[{i}]"), Some(*x), 0.0, Lo::Incl(0.0), WEEK_S, "seconds")?;
                }
                v
            }
        };
        let calibration_rounds = match raw.replay.calibration_rounds {
            None => d.calibration_rounds,
            Some(k) => Some(cx.int("replay.calibration_rounds", Some(k), 1, 1, i64::from(u32::MAX), "rounds")? as u64),
        };
        let cap = cx.float("replay.cap_s", raw.replay.cap_s, d.cap_s, Lo::Incl(0.0), WEEK_S, "seconds")?;
        let replay = ReplayConfig { deadlines_s, delays_s, calibration_rounds, cap_s: cap };

        let store_explicit = raw.gateway.as_ref().is_some_and(|g| g.contains_key("store"));
        let mut gateway = crate::gateway::gateway(&cx, raw.gateway)?;
        if let Some(p) = state_sqlite {
            if store_explicit {
                return Err(
                    cx.err("state.url", "either state.url = \"sqlite:...\" or gateway.store, not both (both name the job store's file)")
                );
            }
            gateway.store = p;
        }
        if on_postgres {
            if store_explicit {
                return Err(cx.err(
                    "gateway.store",
                    "no job store file with state.url on PostgreSQL (jobs are in the database): remove gateway.store",
                ));
            }
            gateway.store = None;
        }
        let routes = crate::gateway::routes(&cx, raw.routes, &policies, &providers, &gateway)?;
        Ok(Config {
            source: file.to_string(),
            race,
            budget,
            trace_path: raw.trace.path.map(PathBuf::from),
            validator,
            providers,
            policies,
            replay,
            gateway,
            routes,
            state,
        })
    }

    /// Checks that every file the configuration writes can be written: the ledger, the
    /// trace and (`gateway`: for `tailcut serve`) the job store. A file that does not exist
    /// yet needs its nearest existing parent directory to be writable (missing
    /// directories are created at start); SQLite files also need their directory writable
    /// for their journal. Nothing is created or changed.
    pub fn check_writable(&self, gateway: bool) -> Result<(), ConfigError> {
        let mut files: Vec<(&str, &Path)> = Vec::new();
        if let Some(p) = &self.budget.ledger {
            files.push(("budget.ledger", p));
        }
        if let Some(p) = &self.trace_path {
            files.push(("trace.path", p));
        }
        if gateway {
            if let Some(p) = &self.gateway.store {
                files.push(("gateway.store", p));
            }
        }
        files.into_iter().try_for_each(|(key, path)| self.writable(key, path))
    }

    /// Checks that the ledger file (if any) can be written (see [`Config::check_writable`]).
    pub fn check_ledger_writable(&self) -> Result<(), ConfigError> {
        self.budget.ledger.as_deref().map_or(Ok(()), |p| self.writable("budget.ledger", p))
    }

    fn writable(&self, key: &str, path: &Path) -> Result<(), ConfigError> {
        crate::paths::writable(path).map_err(|why| ConfigError::invalid(&self.source, key, format!("`{}`: {why}", path.display())))
    }

    /// Engine provider entries, in file order (credentials not required).
    pub fn provider_entries(&self) -> Vec<Provider> {
        self.providers.iter().map(ProviderConfig::entry).collect()
    }

    /// Engine provider entries for live use: every paid provider's credential must resolve.
    pub fn live_entries(&self) -> Result<Vec<Provider>, ConfigError> {
        self.providers.iter().map(|p| p.try_entry(&self.source, true)).collect()
    }

    /// A named policy's spec.
    pub fn policy(&self, name: &str) -> Option<&PolicySpec> {
        self.policies.iter().find(|(n, _)| n == name).map(|(_, p)| p)
    }

    /// A provider by key.
    pub fn provider(&self, name: &str) -> Option<&ProviderConfig> {
        self.providers.iter().find(|p| p.name == name)
    }
}

#[cfg(test)]
mod tests;
