//! Range checks for every number a configuration holds: the checkers of
//! [`tailcut_providers::bounds`] (shared with the provider modules), with the file named
//! in the error.

use crate::error::ConfigError;
use std::time::Duration;
use tailcut_providers::bounds as b;
pub(crate) use tailcut_providers::bounds::{Lo, MAX_USD, MAX_USD_PER_S, WEEK_MS, WEEK_S};

/// Checks a float key against `[lo, hi]` (or `(lo, hi]`); `default` when absent.
pub(crate) fn float(file: &str, key: &str, v: Option<f64>, default: f64, lo: Lo, hi: f64, unit: &str) -> Result<f64, ConfigError> {
    b::float(key, v, default, lo, hi, unit).map_err(|e| ConfigError::invalid(file, e.key, e.expected))
}

/// Checks a duration in seconds; `default` when absent.
pub(crate) fn seconds(file: &str, key: &str, v: Option<f64>, default: f64, lo: Lo, hi: f64) -> Result<Duration, ConfigError> {
    b::seconds(key, v, default, lo, hi).map_err(|e| ConfigError::invalid(file, e.key, e.expected))
}

/// Checks an integer key against `[lo, hi]`; `default` when absent.
pub(crate) fn int(file: &str, key: &str, v: Option<i64>, default: i64, lo: i64, hi: i64, unit: &str) -> Result<i64, ConfigError> {
    b::int(key, v, default, lo, hi, unit).map_err(|e| ConfigError::invalid(file, e.key, e.expected))
}

/// Checks a duration in whole milliseconds against `[lo, hi]`; `default` when absent.
pub(crate) fn millis(file: &str, key: &str, v: Option<i64>, default: i64, lo: i64, hi: i64) -> Result<Duration, ConfigError> {
    b::millis(key, v, default, lo, hi).map_err(|e| ConfigError::invalid(file, e.key, e.expected))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_file_and_key() {
        let e = seconds("f.toml", "race.cap_s", Some(f64::NAN), 1.0, Lo::Excl(0.0), WEEK_S).unwrap_err().to_string();
        assert!(e.starts_with("f.toml: key `race.cap_s`: expected"), "{e}");
    }
}
