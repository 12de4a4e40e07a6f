//! Simulator profiles: the numbers that make a simulated provider behave like a real one.

use serde::{Deserialize, Serialize};

/// The output a simulated job produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SimOutput {
    /// A JSON document `{"provider", "job_id", "output"}`; malformed results are truncated JSON.
    Json,
    /// A 1 s, 16 kHz, 220 Hz sine WAV; malformed results are near-silent.
    Wav,
}

/// A uniform range `[lo, hi]` in seconds.
pub type Range = (f64, f64);

/// The longest duration a profile may name: one week.
pub const MAX_SECONDS: f64 = 7.0 * 86_400.0;

/// The largest worker pool a profile may name.
pub const MAX_WORKERS: usize = 10_000_000;

/// How a simulated provider behaves. All times are seconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimProfile {
    /// Status tells queued from running (else it reports `PENDING`).
    pub reports_queued: bool,
    /// Latency of the submit call itself.
    pub submit_latency_s: Range,
    /// Queue delay when a warm worker is free.
    pub warm_dispatch_s: Range,
    /// Execution on a warm worker.
    pub warm_run_s: Range,
    /// Probability a cold start takes the fast (snapshot-restore) path.
    pub cold_fast_p: f64,
    /// Queue delay on the fast cold path.
    pub cold_fast_queue_s: Range,
    /// Load + execution on the fast cold path.
    pub cold_fast_run_s: Range,
    /// Queue delay on the full cold start.
    pub cold_slow_queue_s: Range,
    /// Load + execution on the full cold start.
    pub cold_slow_run_s: Range,
    /// How long an idle worker stays warm; billed.
    pub idle_window_s: f64,
    /// Most workers at once; further requests queue behind busy workers.
    pub max_workers: usize,
    /// Probability a job fails.
    pub failure_p: f64,
    /// Probability a completed job's output is malformed.
    pub malformed_p: f64,
    /// Cancel acknowledgement latency, milliseconds.
    pub cancel_ack_ms: Range,
    /// Extra time from ack to the confirmed terminal state of a running job, ms.
    pub cancel_confirm_ms: Range,
    /// Probability a cancel of a running job is acknowledged but does nothing.
    pub leak_p: f64,
    /// Billed rate, dollars per second.
    pub rate_usd_per_s: f64,
    /// What results look like.
    pub output: SimOutput,
    /// Billing granularity: each worker session is rounded up to a multiple of this.
    #[serde(default = "one_second")]
    pub billing_granularity_s: f64,
}

fn one_second() -> f64 {
    1.0
}

/// Why a profile is unusable.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProfileError {
    /// No built-in profile has this name.
    #[error("unknown simulator profile `{name}` (known: runpod, cerebrium, modal, instant)")]
    Unknown {
        /// The name asked for.
        name: String,
    },
    /// A setting is out of range.
    #[error("simulator setting `{key}`: {expected}")]
    Invalid {
        /// The setting.
        key: &'static str,
        /// What was expected.
        expected: &'static str,
    },
}

impl SimProfile {
    /// RunPod-like, calibrated on the 2026-07 benchmark: warm 6–8 s; cold starts take the
    /// FlashBoot fast path two times in three (queue delay 1–2 s, 5.8–8.3 s in all) and
    /// otherwise a full cold start (queue delay 9–28 s, 89–122 s in all); a 60 s billed
    /// idle window; reports queued vs running.
    pub fn runpod() -> SimProfile {
        SimProfile {
            reports_queued: true,
            submit_latency_s: (0.15, 0.35),
            warm_dispatch_s: (0.05, 0.3),
            warm_run_s: (5.8, 7.6),
            cold_fast_p: 0.67,
            cold_fast_queue_s: (1.1, 1.9),
            cold_fast_run_s: (4.6, 6.4),
            cold_slow_queue_s: (8.9, 27.7),
            cold_slow_run_s: (80.0, 95.0),
            idle_window_s: 60.0,
            max_workers: 3,
            failure_p: 0.005,
            malformed_p: 0.01,
            cancel_ack_ms: (250.0, 310.0),
            cancel_confirm_ms: (40.0, 120.0),
            leak_p: 0.0,
            rate_usd_per_s: 0.000306,
            output: SimOutput::Json,
            billing_granularity_s: 1.0,
        }
    }

    /// Cerebrium-like: ~19 s cold starts with a rare ~100 s tail; no queued state; no
    /// billed idle window.
    pub fn cerebrium() -> SimProfile {
        SimProfile {
            reports_queued: false,
            submit_latency_s: (0.1, 0.3),
            warm_dispatch_s: (0.05, 0.2),
            warm_run_s: (1.5, 2.5),
            cold_fast_p: 0.95,
            cold_fast_queue_s: (16.0, 17.5),
            cold_fast_run_s: (1.8, 2.6),
            cold_slow_queue_s: (88.0, 100.0),
            cold_slow_run_s: (2.0, 4.0),
            idle_window_s: 0.0,
            max_workers: 4,
            failure_p: 0.005,
            malformed_p: 0.005,
            cancel_ack_ms: (200.0, 400.0),
            cancel_confirm_ms: (100.0, 400.0),
            leak_p: 0.0,
            rate_usd_per_s: 0.000736,
            output: SimOutput::Json,
            billing_granularity_s: 1.0,
        }
    }

    /// Modal-like: ~38 s cold starts, a heavier tail, no queued state.
    pub fn modal() -> SimProfile {
        SimProfile {
            reports_queued: false,
            submit_latency_s: (0.1, 0.3),
            warm_dispatch_s: (0.05, 0.2),
            warm_run_s: (3.0, 5.0),
            cold_fast_p: 0.86,
            cold_fast_queue_s: (30.0, 36.0),
            cold_fast_run_s: (3.5, 6.5),
            cold_slow_queue_s: (70.0, 100.0),
            cold_slow_run_s: (5.0, 12.0),
            idle_window_s: 0.0,
            max_workers: 4,
            failure_p: 0.005,
            malformed_p: 0.005,
            cancel_ack_ms: (150.0, 350.0),
            cancel_confirm_ms: (100.0, 300.0),
            leak_p: 0.0,
            rate_usd_per_s: 0.000704,
            output: SimOutput::Json,
            billing_granularity_s: 1.0,
        }
    }

    /// Answers at once, always valid, never bills: for engine tests and benchmarks.
    pub fn instant() -> SimProfile {
        SimProfile {
            reports_queued: true,
            submit_latency_s: (0.0, 0.0),
            warm_dispatch_s: (0.0, 0.0),
            warm_run_s: (0.0, 0.0),
            cold_fast_p: 1.0,
            cold_fast_queue_s: (0.0, 0.0),
            cold_fast_run_s: (0.0, 0.0),
            cold_slow_queue_s: (0.0, 0.0),
            cold_slow_run_s: (0.0, 0.0),
            idle_window_s: 0.0,
            max_workers: 1_000_000,
            failure_p: 0.0,
            malformed_p: 0.0,
            cancel_ack_ms: (0.0, 0.0),
            cancel_confirm_ms: (0.0, 0.0),
            leak_p: 0.0,
            rate_usd_per_s: 0.0,
            output: SimOutput::Json,
            billing_granularity_s: 1.0,
        }
    }

    /// A built-in profile by name.
    pub fn named(name: &str) -> Result<SimProfile, ProfileError> {
        match name {
            "runpod" => Ok(SimProfile::runpod()),
            "cerebrium" => Ok(SimProfile::cerebrium()),
            "modal" => Ok(SimProfile::modal()),
            "instant" => Ok(SimProfile::instant()),
            other => Err(ProfileError::Unknown { name: other.to_string() }),
        }
    }

    /// Checks every probability is in [0, 1], every range ordered, non-negative and at
    /// most [`MAX_SECONDS`] (ranges in milliseconds: as many milliseconds), every other
    /// duration and the rate finite and in range, and the pool non-empty and bounded: a
    /// profile that validates can never make a simulated attempt's clock arithmetic panic.
    pub fn validate(&self) -> Result<(), ProfileError> {
        let probs: [(&'static str, f64); 4] =
            [("cold_fast_p", self.cold_fast_p), ("failure_p", self.failure_p), ("malformed_p", self.malformed_p), ("leak_p", self.leak_p)];
        for (key, p) in probs {
            if !(0.0..=1.0).contains(&p) {
                return Err(ProfileError::Invalid { key, expected: "a probability between 0 and 1" });
            }
        }
        let seconds: [(&'static str, Range); 7] = [
            ("submit_latency_s", self.submit_latency_s),
            ("warm_dispatch_s", self.warm_dispatch_s),
            ("warm_run_s", self.warm_run_s),
            ("cold_fast_queue_s", self.cold_fast_queue_s),
            ("cold_fast_run_s", self.cold_fast_run_s),
            ("cold_slow_queue_s", self.cold_slow_queue_s),
            ("cold_slow_run_s", self.cold_slow_run_s),
        ];
        for (key, (lo, hi)) in seconds {
            // NaN fails every comparison.
            if !(lo >= 0.0 && hi >= lo && hi <= MAX_SECONDS) {
                return Err(ProfileError::Invalid { key, expected: "a range [lo, hi] of seconds with 0 <= lo <= hi <= 604800 (one week)" });
            }
        }
        let millis: [(&'static str, Range); 2] = [("cancel_ack_ms", self.cancel_ack_ms), ("cancel_confirm_ms", self.cancel_confirm_ms)];
        for (key, (lo, hi)) in millis {
            if !(lo >= 0.0 && hi >= lo && hi <= MAX_SECONDS * 1000.0) {
                return Err(ProfileError::Invalid {
                    key,
                    expected: "a range [lo, hi] of milliseconds with 0 <= lo <= hi <= 604800000 (one week)",
                });
            }
        }
        if !(1..=MAX_WORKERS).contains(&self.max_workers) {
            return Err(ProfileError::Invalid { key: "max_workers", expected: "an integer from 1 to 10000000" });
        }
        if !(self.idle_window_s >= 0.0 && self.idle_window_s <= MAX_SECONDS) {
            return Err(ProfileError::Invalid { key: "idle_window_s", expected: "0 to 604800 seconds (one week)" });
        }
        if !(self.billing_granularity_s >= 0.0 && self.billing_granularity_s <= MAX_SECONDS) {
            return Err(ProfileError::Invalid { key: "billing_granularity_s", expected: "0 to 604800 seconds (one week)" });
        }
        if !(self.rate_usd_per_s >= 0.0 && self.rate_usd_per_s <= 1000.0) {
            return Err(ProfileError::Invalid { key: "rate_usd_per_s", expected: "a rate from 0 to 1000 dollars per second" });
        }
        Ok(())
    }
}

impl SimProfile {
    /// The same provider with every duration multiplied by `factor` (0.01 makes a 100 s
    /// cold start take 1 s), for real-time simulation servers. Rates are unchanged:
    /// divide billed dollars by `factor` to get simulated-time dollars.
    pub fn scaled(&self, factor: f64) -> SimProfile {
        let r = |(a, b): Range| (a * factor, b * factor);
        SimProfile {
            submit_latency_s: r(self.submit_latency_s),
            warm_dispatch_s: r(self.warm_dispatch_s),
            warm_run_s: r(self.warm_run_s),
            cold_fast_queue_s: r(self.cold_fast_queue_s),
            cold_fast_run_s: r(self.cold_fast_run_s),
            cold_slow_queue_s: r(self.cold_slow_queue_s),
            cold_slow_run_s: r(self.cold_slow_run_s),
            idle_window_s: self.idle_window_s * factor,
            billing_granularity_s: self.billing_granularity_s * factor,
            cancel_ack_ms: r(self.cancel_ack_ms),
            cancel_confirm_ms: r(self.cancel_confirm_ms),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_profiles_are_valid() {
        for name in ["runpod", "cerebrium", "modal", "instant"] {
            SimProfile::named(name).unwrap().validate().unwrap();
        }
        assert!(SimProfile::named("aws").is_err());
    }

    #[test]
    fn bad_probability_is_rejected() {
        let p = SimProfile { leak_p: 1.5, ..SimProfile::runpod() };
        assert_eq!(p.validate(), Err(ProfileError::Invalid { key: "leak_p", expected: "a probability between 0 and 1" }));
    }

    #[test]
    fn huge_and_non_finite_durations_are_rejected() {
        // `1e308` passed validation and then panicked in `Duration::from_secs_f64` on
        // every simulated attempt.
        for bad in [(1e308, 1e308), (0.0, f64::INFINITY), (f64::NAN, 1.0), (0.0, MAX_SECONDS + 1.0)] {
            let p = SimProfile { cold_slow_queue_s: bad, ..SimProfile::runpod() };
            assert!(matches!(p.validate(), Err(ProfileError::Invalid { key: "cold_slow_queue_s", .. })), "{bad:?}");
        }
        let p = SimProfile { cancel_ack_ms: (0.0, 1e308), ..SimProfile::runpod() };
        assert!(matches!(p.validate(), Err(ProfileError::Invalid { key: "cancel_ack_ms", .. })));
        let p = SimProfile { billing_granularity_s: f64::NAN, ..SimProfile::runpod() };
        assert!(matches!(p.validate(), Err(ProfileError::Invalid { key: "billing_granularity_s", .. })));
        let p = SimProfile { idle_window_s: 1e308, ..SimProfile::runpod() };
        assert!(matches!(p.validate(), Err(ProfileError::Invalid { key: "idle_window_s", .. })));
        let p = SimProfile { max_workers: usize::MAX, ..SimProfile::runpod() };
        assert!(matches!(p.validate(), Err(ProfileError::Invalid { key: "max_workers", .. })));
    }

    #[test]
    fn runpod_cold_totals_match_the_published_ranges() {
        let p = SimProfile::runpod();
        // Fast path 5.8–8.3 s, slow path 89–122 s in the 2026-07 data.
        assert!(p.cold_fast_queue_s.0 + p.cold_fast_run_s.0 >= 5.6);
        assert!(p.cold_fast_queue_s.1 + p.cold_fast_run_s.1 <= 8.4);
        assert!(p.cold_slow_queue_s.0 + p.cold_slow_run_s.0 >= 88.0);
        assert!(p.cold_slow_queue_s.1 + p.cold_slow_run_s.1 <= 123.0);
    }
}
