//! The error bar of a p99 prediction: how far the measured p99 may land from the
//! prediction, the upper bound the planner holds within an objective at a confidence, the
//! probability that an objective holds, and how many matrix trials would make the bound
//! useful.
//!
//! A prediction is solo p99 × composed factor. Its spread is stated as a standard
//! deviation `s` of the logarithm (0.05 ≈ ±5 % per standard deviation), from three parts
//! that add in quadrature:
//!
//! - **factor**: pairs, the cell's bootstrap 95 % half-width over trials (`contend matrix`)
//!   ÷ 1.96, or the table's `pair_error` when the cell states none; three or more agents,
//!   the composition model's mean absolute error on the measured triples × √(π/2) (the
//!   standard deviation of a normal error with that mean absolute value), with the cells'
//!   own terms added;
//! - **solo estimate**: the table's solo p99 is the median of `runs` solo runs whose p99s
//!   spread with log-SD `d`; the median's standard error is ≈ 1.2533 · d / √runs;
//! - **outcome**: `contend verify` measures the median over its trials (3 by default) of
//!   each trial's p99, which spreads like 1.2533 · d / √3 however well the matrix measured.
//!
//! The upper bound at confidence C is prediction × exp(Φ⁻¹(C) · s) (the prediction itself
//! for C ≤ 0.5, and at C = 0, today's rule); the probability that the objective holds is
//! Φ(ln(objective / prediction) / s). A prediction without a stated error (a hand-written
//! factor, a one-trial matrix) has no bound: it is admitted on the prediction and said so.

use super::types::{Composition, SoloSpread};
use crate::stats::{normal_cdf, normal_quantile};

/// Trials `contend verify` takes the median over by default (its outcome term).
pub const VERIFY_TRIALS: f64 = 3.0;

/// The bound is "useful" when it adds at most this much to the prediction.
pub const USEFUL_WIDTH: f64 = 0.10;

/// Standard error of a median over that of a mean, for normal data: √(π/2).
const MEDIAN_SE: f64 = 1.253_314_137_315_500_3;

/// The log-SD of a prediction, split into the parts more matrix trials shrink and the part
/// they do not.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Spread {
    /// Factor and solo-estimate terms (∝ 1 / √trials).
    pub estimate: f64,
    /// The verify outcome's own run-to-run term.
    pub outcome: f64,
}

impl Spread {
    /// The total log-SD.
    pub fn sd(&self) -> f64 {
        self.estimate.hypot(self.outcome)
    }

    /// The total log-SD if the matrix had `scale` times as many trials.
    pub fn sd_with(&self, scale: f64) -> f64 {
        (self.estimate / scale.sqrt()).hypot(self.outcome)
    }
}

/// z of the one-sided bound at confidence `c`: Φ⁻¹(c), never below 0 (so C ≤ 0.5 and
/// C = 0 plan on the prediction itself).
pub fn z(c: f64) -> f64 {
    if c <= 0.5 {
        0.0
    } else {
        normal_quantile(c)
    }
}

/// The solo terms of an agent kind: (estimate, outcome) log-SDs, if the table measured
/// the spread of its solo runs (two runs at least).
pub fn solo_terms(spread: Option<&SoloSpread>) -> Option<(f64, f64)> {
    let s = spread.filter(|s| s.runs >= 2 && s.log_sd.is_finite() && s.log_sd >= 0.0)?;
    Some((MEDIAN_SE * s.log_sd / f64::from(s.runs).sqrt(), MEDIAN_SE * s.log_sd / VERIFY_TRIALS.sqrt()))
}

/// The factor term of a seat sharing with `cells.len()` others: each cell's relative 95%
/// half-width (None: the table's pair error), and for three or more agents the model's
/// error. None when some needed error is unknown, or the matrix ran under two trials (a
/// bootstrap over one trial is a point, not an error bar).
pub fn factor_term(composition: &Composition, cells: &[Option<f64>]) -> Option<f64> {
    if composition.trials == 1 {
        return None;
    }
    let half_width = |h: f64| (1.0 + h.max(0.0)).ln() / 1.96;
    let mut sum = 0.0;
    for c in cells {
        let h = c.or(composition.pair_error)?;
        sum += half_width(h).powi(2);
    }
    if cells.len() >= 2 {
        let g = composition.group_error?;
        sum += (1.0 + MEDIAN_SE * g.max(0.0)).ln().powi(2);
    }
    Some(sum.sqrt())
}

/// The spread of one agent's prediction. Alone (`factor` None) it is the solo terms,
/// unknown without a measured solo spread. Sharing (`factor` Some) the factor term is
/// required and the solo terms count when measured (a table written before solo spreads
/// were recorded states factor errors only).
pub fn spread(solo: Option<&SoloSpread>, factor: Option<Option<f64>>) -> Option<Spread> {
    let terms = solo_terms(solo);
    match factor {
        None => terms.map(|(estimate, outcome)| Spread { estimate, outcome }),
        Some(f) => {
            let f = f?;
            let (solo_est, outcome) = terms.unwrap_or((0.0, 0.0));
            Some(Spread { estimate: solo_est.hypot(f), outcome })
        }
    }
}

/// The upper bound of `predicted` at `z`.
pub fn upper(predicted: f64, sd: f64, z: f64) -> f64 {
    predicted * (z * sd).exp()
}

/// The probability that a measured p99 stays within `objective`.
pub fn probability(predicted: f64, sd: f64, objective: f64) -> f64 {
    if sd <= 0.0 {
        return if predicted <= objective { 1.0 } else { 0.0 };
    }
    normal_cdf((objective / predicted).ln() / sd)
}

/// How many matrix trials (from `trials`) would bring the bound at `z` within
/// [`USEFUL_WIDTH`] of the prediction: `Ok(None)` when it already is, `Ok(Some(n))` the
/// trials needed, `Err(floor)` when no number of trials will (the outcome term alone,
/// the machine's run-to-run spread, is wider: `floor` is the width it leaves).
pub fn trials_for_useful_bound(s: &Spread, z: f64, trials: u32) -> Result<Option<u32>, f64> {
    let width = |sd: f64| (z * sd).exp() - 1.0;
    if width(s.sd()) <= USEFUL_WIDTH {
        return Ok(None);
    }
    if width(s.outcome) >= USEFUL_WIDTH * 0.95 {
        return Err(width(s.outcome));
    }
    let t0 = f64::from(trials.max(1));
    let mut n = trials.max(1);
    while n < 10_000 {
        n += 1;
        if width(s.sd_with(f64::from(n) / t0)) <= USEFUL_WIDTH {
            return Ok(Some(n));
        }
    }
    Err(width(s.outcome))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_widens_with_confidence_and_is_the_prediction_at_zero() {
        assert_eq!(z(0.0), 0.0);
        assert_eq!(z(0.5), 0.0);
        assert!((z(0.9) - 1.281_551_6).abs() < 1e-6);
        assert_eq!(upper(5.0, 0.1, z(0.0)), 5.0);
        assert!(upper(5.0, 0.1, z(0.9)) > upper(5.0, 0.1, z(0.6)));
        assert!((probability(5.0, 0.1, 5.0) - 0.5).abs() < 1e-9, "at the prediction, even odds");
        let p = probability(5.0, 0.1, upper(5.0, 0.1, z(0.9)));
        assert!((p - 0.9).abs() < 1e-6, "the bound at 0.9 holds with probability 0.9: {p}");
    }

    #[test]
    fn more_trials_help_the_estimate_but_not_the_machine() {
        let s = Spread { estimate: 0.12, outcome: 0.02 };
        let n = trials_for_useful_bound(&s, z(0.9), 3).unwrap().unwrap();
        assert!(n > 3, "{n}");
        assert!(((z(0.9) * s.sd_with(f64::from(n) / 3.0)).exp() - 1.0) <= USEFUL_WIDTH);
        let floor = trials_for_useful_bound(&Spread { estimate: 0.05, outcome: 0.2 }, z(0.9), 3).unwrap_err();
        assert!(floor > USEFUL_WIDTH, "{floor}");
        assert_eq!(trials_for_useful_bound(&Spread { estimate: 0.01, outcome: 0.01 }, z(0.9), 3), Ok(None));
    }
}
