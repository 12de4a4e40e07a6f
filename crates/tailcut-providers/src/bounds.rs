//! Range checks for every number a configuration holds. Each key is read through one
//! of these checkers, which refuse NaN, infinities and anything outside the key's
//! range with an error naming the key, so a file that loads can never make a later
//! `Duration::from_secs_f64`, cast or sum panic or wrap. The limits are chosen well
//! above any sensible setting (durations at most one week unless noted). The provider
//! modules check their keys here, and `tailcut-config` checks every other key here.

use crate::invalid::Invalid;
use std::time::Duration;

/// One week, in seconds: the upper bound of most durations.
pub const WEEK_S: f64 = 7.0 * 86_400.0;
/// One week, in milliseconds.
pub const WEEK_MS: i64 = 7 * 86_400 * 1000;
/// The largest amount of money any key may name ($1 billion).
pub const MAX_USD: f64 = 1e9;
/// The largest billed rate ($1,000 per second; a GPU costs well under $0.01/s).
pub const MAX_USD_PER_S: f64 = 1000.0;

/// The lower end of a range.
#[derive(Clone, Copy, Debug)]
pub enum Lo {
    /// At least this.
    Incl(f64),
    /// More than this.
    Excl(f64),
}

/// A number formatted for an error message (huge values in exponent form).
fn shown(x: f64) -> String {
    if x.is_finite() && x.abs() < 1e15 {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}

fn expectation(lo: Lo, hi: f64, unit: &str) -> String {
    let unit = if unit.is_empty() { String::new() } else { format!(" {unit}") };
    match lo {
        Lo::Incl(l) => format!("expected a number from {} to {}{unit}", shown(l), shown(hi)),
        Lo::Excl(l) => format!("expected a number greater than {} and at most {}{unit}", shown(l), shown(hi)),
    }
}

/// Checks a float key against `[lo, hi]` (or `(lo, hi]`); `default` when absent.
pub fn float(key: &str, v: Option<f64>, default: f64, lo: Lo, hi: f64, unit: &str) -> Result<f64, Invalid> {
    let Some(x) = v else { return Ok(default) };
    let above = match lo {
        Lo::Incl(l) => x >= l,
        Lo::Excl(l) => x > l,
    };
    // NaN fails both comparisons.
    if above && x <= hi && x.is_finite() {
        Ok(x)
    } else {
        Err(Invalid::new(key, format!("{}, got {}", expectation(lo, hi, unit), shown(x))))
    }
}

/// Checks a duration in seconds; `default` when absent.
pub fn seconds(key: &str, v: Option<f64>, default: f64, lo: Lo, hi: f64) -> Result<Duration, Invalid> {
    let s = float(key, v, default, lo, hi, "seconds")?;
    // In range, so this cannot fail; a failure would still be reported, not a panic.
    Duration::try_from_secs_f64(s).map_err(|e| Invalid::new(key, format!("not a duration: {e}")))
}

/// Checks an integer key against `[lo, hi]`; `default` when absent.
pub fn int(key: &str, v: Option<i64>, default: i64, lo: i64, hi: i64, unit: &str) -> Result<i64, Invalid> {
    let Some(x) = v else { return Ok(default) };
    if (lo..=hi).contains(&x) {
        Ok(x)
    } else {
        let unit = if unit.is_empty() { String::new() } else { format!(" {unit}") };
        Err(Invalid::new(key, format!("expected an integer from {lo} to {hi}{unit}, got {x}")))
    }
}

/// Checks a duration in whole milliseconds against `[lo, hi]`; `default` when absent.
pub fn millis(key: &str, v: Option<i64>, default: i64, lo: i64, hi: i64) -> Result<Duration, Invalid> {
    let ms = int(key, v, default, lo, hi, "milliseconds")?;
    Ok(Duration::from_millis(ms.unsigned_abs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_non_finite_or_out_of_range_value_is_refused_with_its_key() {
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e308, -1.0, WEEK_S + 1.0] {
            let e = seconds("race.cap_s", Some(bad), 1.0, Lo::Excl(0.0), WEEK_S).unwrap_err();
            assert_eq!(e.key, "race.cap_s");
            assert!(e.expected.starts_with("expected"), "{e}");
        }
        assert!(seconds("k", Some(0.0), 1.0, Lo::Excl(0.0), WEEK_S).is_err());
        assert_eq!(seconds("k", Some(0.0), 1.0, Lo::Incl(0.0), WEEK_S).unwrap(), Duration::ZERO);
        assert_eq!(seconds("k", None, 2.5, Lo::Excl(0.0), WEEK_S).unwrap(), Duration::from_millis(2500));
        let e = seconds("k", Some(1e308), 1.0, Lo::Excl(0.0), WEEK_S).unwrap_err().to_string();
        assert!(e.contains("got 1e308"), "{e}");
        assert!(int("k", Some(-1), 0, 0, 10, "").is_err());
        assert!(millis("k", Some(i64::MAX), 0, 0, WEEK_MS).is_err());
    }
}
