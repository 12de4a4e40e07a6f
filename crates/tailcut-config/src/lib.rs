//! # tailcut-config
//!
//! Reads `tailcut.toml` in two stages: raw structs that reject unknown keys, then
//! validation into the typed [`Config`], so every error names the file, the key path
//! and what was expected (`tailcut.toml: key `providers.runpod.rate_usd_per_s`:
//! expected a non-negative number`). It also builds the engine's providers and
//! policies from the validated config: a provider's keys are read by its kind's provider
//! module in `tailcut-providers` (see `docs/adding-a-provider.md`). [`import`] turns a
//! GPUHedge YAML config into this TOML. The file format is documented in
//! `docs/configuration.md`; [`BUILT_IN`] is the no-account demo configuration.

#![warn(missing_docs)]
// Unit tests spawn and read the wall clock freely (clippy.toml).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

mod bounds;
mod context;
mod error;
mod gateway;
pub mod import;
mod paths;
mod policy;
mod provider;
mod raw;
mod state;
mod typed;

pub use error::{plain_message, ConfigError};
pub use gateway::{ApiKey, AuthMode, GatewayConfig, RouteConfig, RouteKind};
pub use policy::{spec_providers, LearnedSpec, PolicySpec};
pub use provider::{ApiConfig, ProviderConfig};
pub use state::{ChargeRows, SecretUrl, StateBackend, StateConfig, UrlEnvError};
pub use typed::{BudgetConfig, Config, ReplayConfig};

/// The built-in configuration: three simulated providers calibrated on the 2026-07
/// benchmark and one policy of each kind.
pub const BUILT_IN: &str = include_str!("built_in.toml");
