//! # tailcut-config
//!
//! Reads `tailcut.toml` in two stages: raw structs that reject unknown keys, then
//! validation into the typed [`Config`], so every error names the file, the key path
//! and what was expected (`tailcut.toml: key `providers.runpod.rate_usd_per_s`:
//! expected a non-negative number`). It also builds the engine's providers and
//! policies from the validated config. The file format is documented in
//! `docs/configuration.md`; [`BUILT_IN`] is the no-account demo configuration.

mod bounds;
mod paths;
mod raw;
pub mod remote;
mod typed;

pub use typed::{
    spec_providers, Adapter, ApiKey, AuthMode, BudgetConfig, Config, GatewayConfig, PolicySpec, ProviderConfig, ReplayConfig, RouteConfig,
    RouteKind,
};

/// The built-in configuration: three simulated providers calibrated on the 2026-07
/// benchmark and one policy of each kind.
pub const BUILT_IN: &str = include_str!("built_in.toml");

/// A configuration problem, naming the file, the key and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{file}: cannot read: {source}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML.
    #[error("{file}: invalid TOML: {message}")]
    Syntax {
        /// The file.
        file: String,
        /// The parser's message (with line and column).
        message: String,
    },
    /// A key is missing, unknown, or has a bad value.
    #[error("{file}: key `{key}`: {expected}")]
    Invalid {
        /// The file.
        file: String,
        /// Dotted key path.
        key: String,
        /// What was expected.
        expected: String,
    },
}

impl ConfigError {
    pub(crate) fn invalid(file: &str, key: impl Into<String>, expected: impl Into<String>) -> ConfigError {
        ConfigError::Invalid { file: file.to_string(), key: key.into(), expected: expected.into() }
    }
}
