//! Money as integers: micro-USD amounts and nano-USD-per-second rates.
//!
//! Floats never hold money in the engine or the ledger. Rates in config files are
//! decimal dollars per second (`0.000306`); they are converted once, on load, to an
//! integer number of nano-USD per second so that a rate as small as a millionth of a
//! cent per second stays exact.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// An amount of money in millionths of a US dollar.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MicroUsd(pub i64);

impl MicroUsd {
    /// Zero dollars.
    pub const ZERO: MicroUsd = MicroUsd(0);

    /// Converts decimal dollars, rounding to the nearest micro-dollar.
    pub fn from_usd(usd: f64) -> MicroUsd {
        MicroUsd((usd * 1_000_000.0).round() as i64)
    }

    /// The amount as decimal dollars, for display only.
    pub fn as_usd(self) -> f64 {
        self.0 as f64 / 1_000_000.0
    }
}

impl Add for MicroUsd {
    type Output = MicroUsd;
    fn add(self, rhs: MicroUsd) -> MicroUsd {
        MicroUsd(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign for MicroUsd {
    fn add_assign(&mut self, rhs: MicroUsd) {
        self.0 = self.0.saturating_add(rhs.0);
    }
}

impl Sub for MicroUsd {
    type Output = MicroUsd;
    fn sub(self, rhs: MicroUsd) -> MicroUsd {
        MicroUsd(self.0.saturating_sub(rhs.0))
    }
}

impl std::iter::Sum for MicroUsd {
    fn sum<I: Iterator<Item = MicroUsd>>(iter: I) -> MicroUsd {
        iter.fold(MicroUsd::ZERO, |a, b| a + b)
    }
}

impl fmt::Display for MicroUsd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        write!(f, "{sign}${}.{:06}", abs / 1_000_000, abs % 1_000_000)
    }
}

/// A billing rate in nano-USD per second (10⁻⁹ dollars per second).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RateNanoUsdPerSec(pub i64);

impl RateNanoUsdPerSec {
    /// Converts a decimal dollars-per-second rate, rounding to the nearest nano-dollar.
    pub fn from_usd_per_s(usd_per_s: f64) -> RateNanoUsdPerSec {
        RateNanoUsdPerSec((usd_per_s * 1e9).round() as i64)
    }

    /// The rate as decimal dollars per second, for display and float models.
    pub fn as_usd_per_s(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// Cost of running for `duration`, rounded **up** to the next micro-dollar, so that
    /// projections never under-count.
    pub fn cost_of(self, duration: Duration) -> MicroUsd {
        let nano_usd = i128::from(self.0) * duration.as_millis() as i128 / 1000;
        let micro = (nano_usd + 999).div_euclid(1000);
        MicroUsd(micro.clamp(i64::MIN as i128, i64::MAX as i128) as i64)
    }
}

/// How a provider charges: its rate, the idle window billed after each worker start,
/// and how long a typical job runs (used to project a submission's cost up front).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pricing {
    /// Billed rate while a worker runs.
    pub rate: RateNanoUsdPerSec,
    /// Idle window billed after a worker finishes (RunPod: 60 s), zero where not billed.
    pub idle_window: Duration,
    /// Expected billed execution of one job, for projections.
    pub expected_run: Duration,
}

impl Pricing {
    /// Projected cost of one submission: rate × (expected run + idle window).
    pub fn projected_submission(&self) -> MicroUsd {
        self.rate.cost_of(self.expected_run + self.idle_window)
    }
}

impl Default for Pricing {
    fn default() -> Self {
        Pricing { rate: RateNanoUsdPerSec(0), idle_window: Duration::ZERO, expected_run: Duration::ZERO }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_round_trips_reference_rates() {
        assert_eq!(RateNanoUsdPerSec::from_usd_per_s(0.000306).0, 306_000);
        assert_eq!(RateNanoUsdPerSec::from_usd_per_s(0.000736).0, 736_000);
    }

    #[test]
    fn cost_rounds_up_to_micro_usd() {
        let rate = RateNanoUsdPerSec::from_usd_per_s(0.000306);
        // 60 s of idle at RunPod's rate is exactly $0.01836.
        assert_eq!(rate.cost_of(Duration::from_secs(60)), MicroUsd(18_360));
        // 1 ms costs 0.306 micro-USD: rounds up to 1.
        assert_eq!(rate.cost_of(Duration::from_millis(1)), MicroUsd(1));
        assert_eq!(rate.cost_of(Duration::ZERO), MicroUsd(0));
    }

    #[test]
    fn projection_includes_idle_window() {
        let p = Pricing {
            rate: RateNanoUsdPerSec::from_usd_per_s(0.000306),
            idle_window: Duration::from_secs(60),
            expected_run: Duration::from_secs(10),
        };
        assert_eq!(p.projected_submission(), MicroUsd(21_420));
    }

    #[test]
    fn display_is_dollars() {
        assert_eq!(MicroUsd(18_360).to_string(), "$0.018360");
        assert_eq!(MicroUsd(-5).to_string(), "-$0.000005");
    }
}
