//! `[providers.NAME]`: a provider's kind (`adapter`), its pricing, and its kind's own
//! keys. The simulator's keys are read here; every HTTP kind's keys, defaults, factory and
//! credential check belong to its provider module in `tailcut-providers`, which this
//! module only dispatches to (through [`ProviderKind`] and [`KindSeed`]).

use crate::bounds::{Lo, MAX_USD_PER_S, WEEK_S};
use crate::context::Ctx;
use crate::error::ConfigError;
use serde::Deserialize;
use std::sync::Arc;
use tailcut_core::{Pricing, Provider, RateNanoUsdPerSec};
use tailcut_providers::config::{fields, SharedKeys};
use tailcut_providers::{HttpConfig, KindSeed, ProviderKind};
use tailcut_sim::{SimProfile, SimProvider};

/// One provider.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// Its key.
    pub name: String,
    /// Billed rate, idle window, expected run.
    pub pricing: Pricing,
    /// Rate as decimal dollars per second (for float models such as replay).
    pub rate_usd_per_s: f64,
    /// Idle window in seconds (for float models such as replay).
    pub idle_window_s: f64,
    /// How the engine talks to it.
    pub api: ApiConfig,
}

/// How the engine talks to a provider: by kind.
#[derive(Debug, Clone)]
pub enum ApiConfig {
    /// The in-process simulator (`adapter = "sim"`).
    Sim {
        /// Behaviour.
        profile: Box<SimProfile>,
        /// RNG seed.
        seed: u64,
    },
    /// An HTTP provider of any other kind.
    Http(Box<HttpConfig>),
}

/// The pricing keys every kind takes.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PricingKeys {
    rate_usd_per_s: Option<f64>,
    idle_window_s: Option<f64>,
    expected_run_s: Option<f64>,
}

/// The simulator's own keys.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SimKeys {
    sim: Option<toml::Table>,
}

impl ProviderConfig {
    /// Which kind.
    pub fn kind(&self) -> ProviderKind {
        match &self.api {
            ApiConfig::Sim { .. } => ProviderKind::Sim,
            ApiConfig::Http(h) => h.kind(),
        }
    }

    /// Builds the engine entry (for `sim`, a fresh simulator with its seed). HTTP
    /// providers are built without requiring credentials (for validation and dry runs).
    pub fn entry(&self) -> Provider {
        match self.try_entry("<config>", false) {
            Ok(e) => e,
            Err(_) => Provider {
                name: self.name.clone(),
                api: Arc::new(SimProvider::new(&self.name, SimProfile::instant(), 0)),
                pricing: self.pricing,
            },
        }
    }

    /// Builds the engine entry; with `strict`, a paid provider's missing credential is an error.
    pub fn try_entry(&self, file: &str, strict: bool) -> Result<Provider, ConfigError> {
        let api: Arc<dyn tailcut_core::ProviderApi> = match &self.api {
            ApiConfig::Sim { profile, seed } => Arc::new(SimProvider::new(&self.name, profile.as_ref().clone(), *seed)),
            ApiConfig::Http(h) => h
                .build(&self.name, self.pricing.rate, strict)
                .map_err(|e| Ctx { file }.invalid_in(&format!("providers.{}", self.name), e))?,
        };
        Ok(Provider { name: self.name.clone(), api, pricing: self.pricing })
    }

    /// Whether submitting to it can cost money (an HTTP provider not on loopback).
    pub fn is_paid(&self) -> bool {
        match &self.api {
            ApiConfig::Sim { .. } => false,
            ApiConfig::Http(h) => h.is_paid(),
        }
    }

    /// The simulator profile, for simulated providers.
    pub fn sim_profile(&self) -> Option<(&SimProfile, u64)> {
        match &self.api {
            ApiConfig::Sim { profile, seed } => Some((profile.as_ref(), *seed)),
            ApiConfig::Http(_) => None,
        }
    }

    /// The settings of an OpenAI-compatible provider (`adapter = "openai"`), from which
    /// [`tailcut_providers::openai::Settings::provider`] builds its client per endpoint.
    pub fn openai(&self) -> Option<&tailcut_providers::openai::Settings> {
        match &self.api {
            ApiConfig::Http(h) => h.openai(),
            ApiConfig::Sim { .. } => None,
        }
    }
}

fn name_seed(name: &str) -> u64 {
    // FNV-1a: distinct, stable default seeds per provider name.
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// A provider's billed rate, idle window and expected run (with their float forms).
fn pricing(cx: &Ctx<'_>, key: &str, raw: &PricingKeys, rate: f64, idle: f64) -> Result<(Pricing, f64, f64), ConfigError> {
    let rate = cx.float(&format!("{key}.rate_usd_per_s"), raw.rate_usd_per_s, rate, Lo::Incl(0.0), MAX_USD_PER_S, "dollars per second")?;
    let idle_key = format!("{key}.idle_window_s");
    let idle = cx.float(&idle_key, raw.idle_window_s, idle, Lo::Incl(0.0), WEEK_S, "seconds")?;
    let idle_window = cx.seconds(&idle_key, Some(idle), idle, Lo::Incl(0.0), WEEK_S)?;
    let expected_run = cx.seconds(&format!("{key}.expected_run_s"), raw.expected_run_s, 30.0, Lo::Incl(0.0), WEEK_S)?;
    let pricing = Pricing { rate: RateNanoUsdPerSec::from_usd_per_s(rate), idle_window, expected_run };
    Ok((pricing, rate, idle))
}

/// Reads `[providers.NAME]`: the `adapter` tag selects the kind; its keys go to the
/// pricing, to the keys every HTTP kind shares, or to the kind's own config. A key none
/// of these take is refused, naming what this kind takes.
pub(crate) fn provider(cx: &Ctx<'_>, name: &str, value: toml::Value) -> Result<ProviderConfig, ConfigError> {
    let key = format!("providers.{name}");
    let mut table = match value {
        toml::Value::Table(t) => t,
        other => return Err(cx.err(&key, format!("invalid type: {}, expected a table", other.type_str()))),
    };
    let tag = match table.remove("adapter") {
        None => return Err(cx.err(&key, "missing field `adapter`")),
        Some(toml::Value::String(s)) => s,
        Some(other) => return Err(cx.err(format!("{key}.adapter"), format!("invalid type: {}, expected a string", other.type_str()))),
    };
    let Some(kind) = ProviderKind::parse(&tag) else {
        return Err(cx.err(format!("{key}.adapter"), format!("unknown adapter `{tag}`; expected {}", ProviderKind::expected())));
    };
    let (shared, own) = match kind {
        ProviderKind::Sim => (&[][..], fields::<SimKeys>()),
        _ => (fields::<SharedKeys>(), kind.fields()),
    };
    let (mut pricing_t, mut shared_t, mut own_t) = (toml::Table::new(), toml::Table::new(), toml::Table::new());
    for (k, v) in table {
        let into = if fields::<PricingKeys>().contains(&k.as_str()) {
            &mut pricing_t
        } else if shared.contains(&k.as_str()) {
            &mut shared_t
        } else if own.contains(&k.as_str()) {
            &mut own_t
        } else {
            return Err(cx.err(format!("{key}.{k}"), not_taken(kind, &k, shared, own)));
        };
        into.insert(k, v);
    }
    let prices: PricingKeys = cx.typed(&key, toml::Value::Table(pricing_t))?;
    if kind == ProviderKind::Sim {
        let keys: SimKeys = cx.typed(&key, toml::Value::Table(own_t))?;
        let (profile, seed) = sim(cx, &key, name, keys.sim.unwrap_or_default())?;
        let (pricing, rate, idle) = pricing(cx, &key, &prices, profile.rate_usd_per_s, profile.idle_window_s)?;
        let api = ApiConfig::Sim { profile: Box::new(profile), seed };
        return Ok(ProviderConfig { name: name.to_string(), pricing, rate_usd_per_s: rate, idle_window_s: idle, api });
    }
    let shared: SharedKeys = cx.typed(&key, toml::Value::Table(shared_t))?;
    let config = cx.seeded(&key, KindSeed(kind), toml::Value::Table(own_t))?;
    if prices.rate_usd_per_s.is_none() {
        return Err(
            cx.err(format!("{key}.rate_usd_per_s"), "required for a real provider: money is real, so tailcut needs its billed rate ($/s)")
        );
    }
    let http = config.http(&shared).map_err(|e| cx.invalid_in(&key, e))?;
    let (pricing, rate, idle) = pricing(cx, &key, &prices, 0.0, 0.0)?;
    Ok(ProviderConfig { name: name.to_string(), pricing, rate_usd_per_s: rate, idle_window_s: idle, api: ApiConfig::Http(Box::new(http)) })
}

/// Why `k` is refused for `kind`: another kind's key, or no kind's.
fn not_taken(kind: ProviderKind, k: &str, shared: &[&str], own: &[&str]) -> String {
    if ProviderKind::ALL.iter().any(|other| other.fields().contains(&k)) || fields::<SharedKeys>().contains(&k) || k == "sim" {
        return format!("not used by adapter = \"{kind}\" (it takes: {})", own.join(", "));
    }
    let mut takes = vec!["adapter"];
    takes.extend(fields::<PricingKeys>());
    takes.extend(shared);
    takes.extend(own);
    format!("unknown key; adapter = \"{kind}\" takes: {}", takes.join(", "))
}

/// The simulator's `sim` table: a named profile (default: the provider's name) with
/// overrides, and a seed (default: derived from the name).
fn sim(cx: &Ctx<'_>, key: &str, name: &str, mut table: toml::Table) -> Result<(SimProfile, u64), ConfigError> {
    let profile_name = match table.remove("profile") {
        None => name.to_string(),
        Some(toml::Value::String(s)) => s,
        Some(_) => return Err(cx.err(format!("{key}.sim.profile"), "expected a profile name (runpod, cerebrium, modal, instant)")),
    };
    let seed = match table.remove("seed") {
        None => name_seed(name),
        Some(toml::Value::Integer(s)) if s >= 0 => s as u64,
        Some(_) => return Err(cx.err(format!("{key}.sim.seed"), "expected a non-negative integer")),
    };
    let base = SimProfile::named(&profile_name).map_err(|e| cx.err(format!("{key}.sim.profile"), e.to_string()))?;
    let mut merged = match toml::Value::try_from(&base) {
        Ok(toml::Value::Table(t)) => t,
        _ => return Err(cx.err(format!("{key}.sim"), "internal error: profile is not a table")),
    };
    for (k, v) in table {
        if !merged.contains_key(&k) {
            return Err(cx.err(format!("{key}.sim.{k}"), "unknown simulator setting"));
        }
        merged.insert(k, v);
    }
    let profile: SimProfile = cx.typed(&format!("{key}.sim"), toml::Value::Table(merged))?;
    profile.validate().map_err(|e| match e {
        tailcut_sim::ProfileError::Invalid { key: k, expected } => cx.err(format!("{key}.sim.{k}"), expected),
        other => cx.err(format!("{key}.sim"), other.to_string()),
    })?;
    Ok((profile, seed))
}
