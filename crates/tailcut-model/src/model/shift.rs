//! [`ShiftDetector`]: when a provider's latencies leave the shape the model holds for it.
//!
//! A decayed sketch forgets at its half-life: after a provider that answered in 120 ms
//! starts answering in 400 ms, its learned P(L > 250 ms) grows by about `1/(1.44·H)` per
//! new attempt (H the half-life, 64), so a plan built on it keeps running for dozens of
//! requests after the world changed. The detector is a two-sided CUSUM (Page's
//! cumulative sum) on the provider's own attempts against its own quantile bars, read
//! from the short memory before the attempt is filed:
//!
//! - *up*: the attempt took longer than the provider's p95 (a cancelled attempt counts
//!   only when it was cancelled past the bar, since it is known to be slower than that);
//! - *down*: a valid attempt faster than its p05 (a cancelled one counts as "not below"
//!   when it ran past the bar).
//!
//! Each side sums the log-likelihood ratio of "half of the attempts cross the bar"
//! against "5 % do" (`ln 10` per crossing, `ln(0.5/0.95)` per attempt that does not),
//! floored at 0. When a side reaches the threshold `h`
//! ([`crate::ModelConfig::shift_threshold`]), the provider's short-memory latency shapes
//! restart from the attempts of the excursion that raised the alarm (the CUSUM's own
//! estimate of the change point: everything since the sum last stood at 0), and the
//! model counts a shift, on which `auto` rebuilds its tables at once.
//!
//! The bound this gives: after a shift that puts every attempt past the old bar, the
//! alarm comes on the `⌈h / ln 10⌉`-th attempt (3 with the live default `h` = 6.5);
//! a regime in which 5 % of attempts cross their p95 raises a false alarm about once in
//! 8,000 attempts (three crossings in a row, 0.05³). The detector is held off for the
//! first [`SHIFT_MIN_ATTEMPTS`] attempts of a provider and after each alarm, while its
//! bars rest on a handful of attempts.
//!
//! What it does not see: a slow *mode* that vanishes (a provider that stalled on one
//! request in five and healed) moves no bar: its attempts were fast before, too. That
//! is learned at the half-life, from the attempts the plans give it.

use serde::{Deserialize, Serialize};

/// Log-likelihood ratio of an attempt crossing its bar: `ln(0.5 / 0.05)`.
pub const SHIFT_LLR_CROSS: f64 = std::f64::consts::LN_10;
/// Log-likelihood ratio of an attempt not crossing: `ln(0.5 / 0.95)`.
pub const SHIFT_LLR_STAY: f64 = -0.641_853_886_172_394_8;
/// Attempts of a provider (since the start or its last shift) before the detector runs.
pub const SHIFT_MIN_ATTEMPTS: u64 = 16;
/// The live default of [`crate::ModelConfig::shift_threshold`]: three crossings in a
/// row (3 · ln 10 = 6.91).
pub const SHIFT_THRESHOLD_LIVE: f64 = 6.5;
/// Attempts of one excursion kept to restart from (the oldest are dropped beyond it).
const RUN_CAP: usize = 32;

/// One attempt as the detector keeps it, to file again after an alarm.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Kept {
    /// Latency, or the time a cancelled attempt ran.
    pub value_s: f64,
    /// Cancelled (right-censored at `value_s`).
    pub censored: bool,
    /// Warm (true), cold (false) or unknown, as it was filed.
    pub warm: Option<bool>,
    /// Started by the cutover poll.
    pub started: bool,
}

/// The two-sided CUSUM of one provider; see the module doc.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShiftDetector {
    /// The bars: the lower edge of the bucket holding the short memory's p05 and the
    /// upper edge of the one holding its p95 (a quantile reads as its bucket's middle,
    /// and a provider whose every attempt falls in one bucket must not cross its own
    /// bar), re-read with the slow threshold.
    pub bars: (Option<f64>, Option<f64>),
    up: f64,
    down: f64,
    run_up: Vec<Kept>,
    run_down: Vec<Kept>,
    /// Attempts since the start or the last alarm.
    since: u64,
    /// Alarms so far.
    pub shifts: u64,
}

fn step(sum: &mut f64, run: &mut Vec<Kept>, cross: Option<bool>, kept: Kept) {
    let Some(cross) = cross else { return };
    *sum = (*sum + if cross { SHIFT_LLR_CROSS } else { SHIFT_LLR_STAY }).max(0.0);
    if *sum <= 0.0 {
        run.clear();
    } else {
        if run.len() >= RUN_CAP {
            run.remove(0);
        }
        run.push(kept);
    }
}

impl ShiftDetector {
    /// Sets the bars from the short memory's p05 and p95 (None: not reached).
    pub fn set_bars(&mut self, p05: Option<f64>, p95: Option<f64>) {
        use crate::sketch::{bucket_lower, bucket_of, bucket_upper};
        self.bars = (p05.map(|x| bucket_lower(bucket_of(x))), p95.map(|x| bucket_upper(bucket_of(x))));
    }

    /// Steps both sums with one attempt (before it is filed or after: the bars are the
    /// ones read earlier); returns the attempts to restart the shapes from when a side
    /// reached `threshold` (≤ 0: never).
    pub fn observe(&mut self, kept: Kept, threshold: f64) -> Option<Vec<Kept>> {
        if threshold.is_nan() || threshold <= 0.0 || !kept.value_s.is_finite() {
            return None;
        }
        self.since += 1;
        if self.since <= SHIFT_MIN_ATTEMPTS {
            return None;
        }
        let (lo, hi) = self.bars;
        let x = kept.value_s;
        // A cancelled attempt is only known to exceed x.
        let up = hi.and_then(|hi| {
            if x > hi {
                Some(true)
            } else if kept.censored {
                None
            } else {
                Some(false)
            }
        });
        let down = lo.and_then(|lo| {
            if x >= lo {
                Some(false)
            } else if kept.censored {
                None
            } else {
                Some(true)
            }
        });
        step(&mut self.up, &mut self.run_up, up, kept);
        step(&mut self.down, &mut self.run_down, down, kept);
        let run = if self.up >= threshold {
            std::mem::take(&mut self.run_up)
        } else if self.down >= threshold {
            std::mem::take(&mut self.run_down)
        } else {
            return None;
        };
        self.up = 0.0;
        self.down = 0.0;
        self.run_up.clear();
        self.run_down.clear();
        self.since = 0;
        self.shifts += 1;
        Some(run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(x: f64) -> Kept {
        Kept { value_s: x, censored: false, warm: None, started: false }
    }

    fn primed() -> ShiftDetector {
        let mut d = ShiftDetector { bars: (Some(0.1), Some(0.13)), ..ShiftDetector::default() };
        for _ in 0..SHIFT_MIN_ATTEMPTS {
            assert!(d.observe(at(0.12), SHIFT_THRESHOLD_LIVE).is_none());
        }
        d
    }

    #[test]
    fn three_attempts_past_the_bar_raise_an_alarm_with_them() {
        let mut d = primed();
        assert!(d.observe(at(0.4), SHIFT_THRESHOLD_LIVE).is_none());
        assert!(d.observe(at(0.41), SHIFT_THRESHOLD_LIVE).is_none());
        let run = d.observe(at(0.42), SHIFT_THRESHOLD_LIVE).expect("alarm on the third");
        assert_eq!(run.iter().map(|k| k.value_s).collect::<Vec<_>>(), [0.4, 0.41, 0.42]);
        assert_eq!(d.shifts, 1);
        // Held off again while the bars rest on the restarted shape.
        for _ in 0..SHIFT_MIN_ATTEMPTS {
            assert!(d.observe(at(0.9), SHIFT_THRESHOLD_LIVE).is_none());
        }
    }

    #[test]
    fn isolated_crossings_and_early_cancels_raise_none() {
        let mut d = primed();
        // One crossing in five, for a long time: the sum keeps falling back to 0.
        for i in 0..5_000 {
            let x = if i % 5 == 0 { 0.5 } else { 0.12 };
            assert!(d.observe(at(x), SHIFT_THRESHOLD_LIVE).is_none(), "attempt {i}");
        }
        // Cancelled before the bar: unknown, so no step either way.
        for _ in 0..10 {
            assert!(d.observe(Kept { censored: true, ..at(0.05) }, SHIFT_THRESHOLD_LIVE).is_none());
        }
        // Two crossings, one ordinary attempt, two crossings: 2·2.30 − 0.64 + 2·2.30 ≥ 6.5.
        for x in [0.5, 0.5, 0.12, 0.5] {
            assert!(d.observe(at(x), SHIFT_THRESHOLD_LIVE).is_none());
        }
        assert!(d.observe(at(0.5), SHIFT_THRESHOLD_LIVE).is_some());
    }

    #[test]
    fn a_faster_provider_is_detected_from_below_and_off_means_off() {
        let mut d = primed();
        let mut off = d.clone();
        assert!(d.observe(at(0.02), SHIFT_THRESHOLD_LIVE).is_none());
        assert!(d.observe(at(0.02), SHIFT_THRESHOLD_LIVE).is_none());
        assert!(d.observe(at(0.02), SHIFT_THRESHOLD_LIVE).is_some());
        for _ in 0..100 {
            assert!(off.observe(at(0.02), 0.0).is_none());
        }
    }
}
