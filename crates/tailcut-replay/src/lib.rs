//! # tailcut-replay
//!
//! Offline evaluation of hedging policies, reproducing the reference tool's published
//! tables to the digit and going beyond them:
//!
//! - [`rounds`]: streaming, parallel reader of paired-round traces (the reference
//!   `round` records and tailcut's `tailcut_round`) into a compact column store;
//! - [`sweep`]: the policy families (single, fixed hedge / immediate race, queue
//!   cutover, cascade) with the reference's exact latency and two cost models, and the
//!   standard sweep;
//! - [`summary`]: per-policy statistics (quantiles by either estimator, misses with
//!   Wilson intervals, $/request, hedge rate);
//! - [`learned`]: causal replay of the learned policies (`auto`, `adaptive`, `singler`):
//!   round *i* decided by a model that saw only the warm-up rounds and rounds before *i*;
//! - [`calibration`]: the reliability of learned decisions recorded in live traces
//!   (predicted miss and cost against what happened);
//! - [`traces`]: summaries of live request traces (reference `hedged_request`,
//!   `state_aware_request`, ... and tailcut's `tailcut_request`) and cancel audits;
//! - [`scenario`]: simulated request streams (cadence, degradation, correlation, outage,
//!   price, stragglers) where each policy's launches shape what later requests find;
//! - [`synth`]: synthetic paired rounds drawn from the simulator profiles;
//! - [`verdict`]: `auto` against the calibration-frozen and the hindsight-best fixed
//!   plans (p95 × cost, domination);
//! - [`plot`]: SVG latency distributions;
//! - [`error`]: why a trace could not be read (file, line, and the typed problem).

#![warn(missing_docs)]
// Unit tests spawn and read the wall clock freely (clippy.toml).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod calibration;
pub mod error;
pub mod learned;
pub mod plot;
pub mod rounds;
pub mod runner;
pub mod scenario;
pub mod summary;
pub mod sweep;
pub mod synth;
pub mod traces;
pub mod verdict;

pub use error::ReplayError;
pub use rounds::{LoadOptions, Loaded, RoundSet};
pub use summary::PolicySummary;
pub use sweep::{Family, PolicyDef, ProviderRates};

/// Python's `:g` formatting of a number (6 significant digits, trailing zeros removed),
/// used in policy labels: `0`, `10`, `2.5`.
pub fn fmt_g(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    if x.fract() == 0.0 && x.abs() < 1e6 {
        return format!("{}", x as i64);
    }
    let exp = x.abs().log10().floor() as i32;
    if !(-5..6).contains(&exp) {
        let s = format!("{x:.5e}");
        return s;
    }
    let decimals = (5 - exp).max(0) as usize;
    let mut s = format!("{x:.decimals$}");
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn fmt_g_matches_python() {
        assert_eq!(super::fmt_g(0.0), "0");
        assert_eq!(super::fmt_g(10.0), "10");
        assert_eq!(super::fmt_g(2.5), "2.5");
        assert_eq!(super::fmt_g(8.5), "8.5");
        assert_eq!(super::fmt_g(12.345678), "12.3457");
        assert_eq!(super::fmt_g(0.25), "0.25");
    }
}
