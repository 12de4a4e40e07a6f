//! The reading context every section's reader shares: the file being read, with
//! deserialization that names the failing key path, and the range checks of
//! [`crate::bounds`] with the file filled in.

use crate::bounds::{self, Lo, WEEK_MS};
use crate::error::ConfigError;
use serde::de::{DeserializeOwned, DeserializeSeed};
use std::marker::PhantomData;
use std::time::Duration;

/// The file being read.
pub(crate) struct Ctx<'a> {
    pub file: &'a str,
}

impl Ctx<'_> {
    pub fn err(&self, key: impl Into<String>, expected: impl Into<String>) -> ConfigError {
        ConfigError::invalid(self.file, key, expected)
    }

    /// A provider module's error for a key of the table at `prefix`.
    pub fn invalid_in(&self, prefix: &str, e: tailcut_providers::Invalid) -> ConfigError {
        self.err(if e.key.is_empty() { prefix.to_string() } else { format!("{prefix}.{}", e.key) }, e.expected)
    }

    /// Reads `value` (the table at `prefix`) as a `T`, naming the failing key path.
    pub fn typed<T: DeserializeOwned>(&self, prefix: &str, value: toml::Value) -> Result<T, ConfigError> {
        self.seeded(prefix, PhantomData::<T>, value)
    }

    /// Reads `value` (the table at `prefix`) with `seed`, naming the failing key path.
    pub fn seeded<'de, S: DeserializeSeed<'de>>(&self, prefix: &str, seed: S, value: toml::Value) -> Result<S::Value, ConfigError> {
        let mut track = serde_path_to_error::Track::new();
        seed.deserialize(serde_path_to_error::Deserializer::new(value, &mut track)).map_err(|e| {
            let path = track.path().to_string();
            let key = match (prefix.is_empty(), path == ".") {
                (true, _) => path,
                (false, true) => prefix.to_string(),
                (false, false) => format!("{prefix}.{path}"),
            };
            self.err(key, crate::error::plain_message(&e.to_string()))
        })
    }

    pub fn float(&self, key: &str, v: Option<f64>, default: f64, lo: Lo, hi: f64, unit: &str) -> Result<f64, ConfigError> {
        bounds::float(self.file, key, v, default, lo, hi, unit)
    }

    pub fn seconds(&self, key: &str, v: Option<f64>, default: f64, lo: Lo, hi: f64) -> Result<Duration, ConfigError> {
        bounds::seconds(self.file, key, v, default, lo, hi)
    }

    pub fn int(&self, key: &str, v: Option<i64>, default: i64, lo: i64, hi: i64, unit: &str) -> Result<i64, ConfigError> {
        bounds::int(self.file, key, v, default, lo, hi, unit)
    }

    /// A policy or route timer: 0 to one week in milliseconds.
    pub fn millis(&self, key: &str, v: Option<i64>, default: u64) -> Result<Duration, ConfigError> {
        bounds::millis(self.file, key, v, default.min(WEEK_MS as u64) as i64, 0, WEEK_MS)
    }
}
