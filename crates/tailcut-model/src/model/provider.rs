//! [`ProviderModel`]: what is known about one provider, and how one attempt updates it.

use super::shift::{Kept, ShiftDetector};
use super::{gap_bucket, ModelConfig, Observation, Outcome, GAP_EDGES_S};
use crate::field::{within, FieldError, FieldPath};
use crate::sketch::{DecayedRate, DecayedSketch, MIN_AGE};
use serde::{Deserialize, Serialize};

/// What is known about one provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderModel {
    /// Provider key.
    pub name: String,
    /// Billed rate, $/s.
    pub rate_usd_per_s: f64,
    /// Idle window billed per worker start, s.
    pub idle_s: f64,
    /// Valid latencies (censored attempts redistributed to the right).
    pub latency: DecayedSketch,
    /// The same latencies with a [`TAIL_MEMORY`]× longer half-life, for the fits of a
    /// tail (the `adaptive` delay, the SingleR fit): a p99 needs hundreds of samples,
    /// and `latency` holds about 1.4 half-lives' worth, so with a 64-attempt half-life a
    /// 2 % straggler mode is one or two samples and the fit follows their noise.
    /// Absent in files saved before it existed (then it starts empty and the fits read
    /// `latency` until it has [`TAIL_MEMORY`] attempts).
    #[serde(default = "empty_long_sketch")]
    pub latency_long: DecayedSketch,
    /// Valid latencies of attempts known to have found a warm worker.
    pub latency_warm: DecayedSketch,
    /// Valid latencies of attempts known to have started a cold worker.
    pub latency_cold: DecayedSketch,
    /// Latencies of attempts whose queue delay was at most the cutover poll (kept by a
    /// cutover).
    pub latency_started: DecayedSketch,
    /// Latencies of attempts whose queue delay was above the cutover poll: what a
    /// primary cancelled while still queued would have taken.
    #[serde(default = "empty_sketch")]
    pub latency_queued: DecayedSketch,
    /// Queue delays (time to start).
    pub queue: DecayedSketch,
    /// P(still queued at the cutover poll): queue delay above the poll, among attempts that
    /// reported a queue delay.
    pub queued_at_poll: DecayedRate,
    /// P(failed).
    pub failed: DecayedRate,
    /// Wall times of failed attempts: when a failure shows. A cancelled attempt that ran
    /// past most of them without failing counts as (mostly) not failed
    /// ([`ProviderModel::p_failed_if_running`]). Absent in files saved before it existed.
    #[serde(default = "empty_sketch")]
    pub failure_wall: DecayedSketch,
    /// P(invalid result).
    pub invalid: DecayedRate,
    /// P(warm | idle gap), one counter per [`GAP_EDGES_S`] bucket.
    pub warm_by_gap: Vec<DecayedRate>,
    /// Slow threshold (the slow quantile of `latency`), re-read after each of the first
    /// [`crate::model::THRESHOLD_EXACT_UNTIL`] observations and every
    /// [`crate::model::THRESHOLD_EVERY`]-th after.
    pub slow_threshold_s: Option<f64>,
    /// Attempts observed, censored ones included.
    #[serde(default)]
    pub attempts: u64,
    /// [`crate::Model::requests`] when an attempt of this provider was last observed (0: never).
    #[serde(default)]
    pub last_request: u64,
    /// When the provider last served a valid result, in seconds since the Unix epoch, as
    /// of the model's saving: a restarted process measures idle gaps (and so P(warm))
    /// from it instead of starting with every gap unknown. Written by the live policies
    /// when they save; absent in models fitted offline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_served_unix_s: Option<f64>,
    /// When its latencies leave the shape held for them ([`ShiftDetector`]; runs when
    /// [`ModelConfig::shift_threshold`] is positive). Absent in files saved before it
    /// existed.
    #[serde(default)]
    pub shift: ShiftDetector,
}

fn empty_sketch() -> DecayedSketch {
    DecayedSketch::new(ModelConfig::default().half_life)
}

fn empty_long_sketch() -> DecayedSketch {
    DecayedSketch::new(ModelConfig::default().half_life * TAIL_MEMORY as f64)
}

/// How many times longer the half-life of [`ProviderModel::latency_long`] is.
pub const TAIL_MEMORY: u64 = 16;

impl ProviderModel {
    /// Checks a loaded provider's numbers; `field` names it (`providers[3]`) in the error.
    pub(crate) fn check(&self, field: &FieldPath) -> Result<(), FieldError> {
        within(|| field.key("rate_usd_per_s"), self.rate_usd_per_s, 0.0, 1e6)?;
        within(|| field.key("idle_s"), self.idle_s, 0.0, 1e9)?;
        if let Some(t) = self.slow_threshold_s {
            within(|| field.key("slow_threshold_s"), t, 0.0, 1e6)?;
        }
        for (name, s) in [
            ("latency", &self.latency),
            ("latency_long", &self.latency_long),
            ("latency_warm", &self.latency_warm),
            ("latency_cold", &self.latency_cold),
            ("latency_started", &self.latency_started),
            ("latency_queued", &self.latency_queued),
            ("queue", &self.queue),
            ("failure_wall", &self.failure_wall),
        ] {
            s.check(&field.key(name))?;
        }
        for (name, r) in [("queued_at_poll", &self.queued_at_poll), ("failed", &self.failed), ("invalid", &self.invalid)] {
            r.check(&field.key(name))?;
        }
        let gaps = field.key("warm_by_gap");
        for (k, r) in self.warm_by_gap.iter().enumerate() {
            r.check(&gaps.index(k))?;
        }
        Ok(())
    }

    pub(super) fn new(name: &str, rate_usd_per_s: f64, idle_s: f64, hl: f64) -> ProviderModel {
        ProviderModel {
            name: name.to_string(),
            rate_usd_per_s,
            idle_s,
            latency: DecayedSketch::new(hl),
            latency_long: DecayedSketch::new(hl * TAIL_MEMORY as f64),
            latency_warm: DecayedSketch::new(hl),
            latency_cold: DecayedSketch::new(hl),
            latency_started: DecayedSketch::new(hl),
            latency_queued: DecayedSketch::new(hl),
            queue: DecayedSketch::new(hl),
            queued_at_poll: DecayedRate::new(hl),
            failed: DecayedRate::new(hl),
            failure_wall: DecayedSketch::new(hl),
            invalid: DecayedRate::new(hl),
            warm_by_gap: (0..=GAP_EDGES_S.len()).map(|_| DecayedRate::new(hl)).collect(),
            slow_threshold_s: None,
            attempts: 0,
            last_request: 0,
            last_served_unix_s: None,
            shift: ShiftDetector::default(),
        }
    }

    /// Attempts observed, censored ones included.
    pub fn samples(&self) -> u64 {
        self.attempts
    }

    /// The latencies a tail fit reads: [`ProviderModel::latency_long`] once it has
    /// [`TAIL_MEMORY`] attempts (a model saved before it existed starts it empty),
    /// else `latency`.
    pub fn tail_latency(&self) -> &DecayedSketch {
        if self.latency_long.samples() >= TAIL_MEMORY {
            &self.latency_long
        } else {
            &self.latency
        }
    }

    /// P(no valid result): failed or invalid, with a weak prior of 1 %.
    pub fn p_bad(&self) -> f64 {
        let f = self.failed.rate(0.01, 1.0);
        let i = self.invalid.rate(0.0, 1.0);
        (f + (1.0 - f) * i).clamp(0.0, 1.0)
    }

    /// P(warm | idle gap), pooled toward the neighbouring buckets when a bucket is
    /// unseen; `None` when no warmth was ever observed.
    pub fn p_warm(&self, gap_s: f64) -> Option<f64> {
        if self.warm_by_gap.iter().all(|r| r.samples() == 0) {
            return None;
        }
        let k = gap_bucket(gap_s).min(self.warm_by_gap.len() - 1);
        if self.warm_by_gap[k].samples() > 0 {
            return Some(self.warm_by_gap[k].rate(0.5, 1.0));
        }
        // Nearest observed bucket: P(warm) only falls with the gap, so take the bucket
        // below for gaps inside the window and above for gaps beyond it.
        let below = (0..k).rev().find(|&i| self.warm_by_gap[i].samples() > 0);
        let above = (k + 1..self.warm_by_gap.len()).find(|&i| self.warm_by_gap[i].samples() > 0);
        match (below, above) {
            (Some(b), Some(a)) => Some(0.5 * (self.warm_by_gap[b].rate(0.5, 1.0) + self.warm_by_gap[a].rate(0.5, 1.0))),
            (Some(b), None) => Some(self.warm_by_gap[b].rate(0.5, 1.0)),
            (None, Some(a)) => Some(self.warm_by_gap[a].rate(0.5, 1.0)),
            (None, None) => None,
        }
    }

    /// P(this attempt fails | it was still running, neither failed nor finished, `t`
    /// seconds after launch): Bayes' rule over the failure rate, when failures show
    /// ([`ProviderModel::failure_wall`]) and when valid results arrive (`latency`).
    /// `None` while no failure was ever seen (when a failure would show is unknown) or
    /// when neither a failure nor a valid result is known to take longer than `t`.
    ///
    /// Without it a cancelled attempt said nothing about failure, so a provider that
    /// failed for a while and recovered kept its learned failure rate for as long as
    /// its attempts were the cancelled losers of races and cascades (in `outage`,
    /// Cerebrium's stayed above 0.5 through the 800 requests after it recovered, 80 % of
    /// its attempts there being cancelled escalations).
    pub fn p_failed_if_running(&self, t: f64) -> Option<f64> {
        if self.failure_wall.samples() == 0 {
            return None;
        }
        let pf = self.failed.rate(0.01, 1.0);
        let still_failing = pf * (1.0 - self.failure_wall.cdf(t));
        let still_valid = (1.0 - pf) * (1.0 - self.latency.cdf(t));
        let all = still_failing + still_valid;
        (all > 1e-12).then(|| still_failing / all)
    }

    /// Ages what was learned about this provider's rates (failed, invalid, queued at the
    /// poll, P(warm | gap)) to `factor` of its weight against the next observation (see
    /// [`crate::Model::observe_request`]). Each rate reads as its weak prior once its evidence
    /// is gone, so the first new attempts decide it: a provider that failed, was avoided
    /// and recovered is trusted again after one good probe, not after as many as it
    /// failed. The latency shapes are kept (they still move with every new attempt at the
    /// provider's own half-life): a shape has no prior but itself, and aged away, a single
    /// probe's cold start became the whole shape and `auto` switched plans on it
    /// (`degrade` seed 7 went from a 22.6 s to a 41.3 s p95, `correlated` seed 2 from
    /// 22.5 s to 27.6 s, with shapes aged to 8 observations' weight). The pairs are left
    /// alone.
    pub fn age(&mut self, factor: f64) {
        if factor >= 1.0 {
            return;
        }
        for r in [&mut self.queued_at_poll, &mut self.failed, &mut self.invalid] {
            r.age(factor);
        }
        self.warm_by_gap.iter_mut().for_each(|r| r.age(factor));
    }

    /// Whether the provider ever reported a queue delay.
    pub fn has_queue_signal(&self) -> bool {
        self.queue.samples() > 0
    }

    /// Files one latency, or one censoring, through `put` into the sketches it belongs
    /// to: all attempts, the long memory, warm or cold by `label`, and the attempts that
    /// had started by the cutover poll.
    fn file(&mut self, label: Option<bool>, started: bool, put: impl Fn(&mut DecayedSketch)) {
        put(&mut self.latency);
        put(&mut self.latency_long);
        match label {
            Some(true) => put(&mut self.latency_warm),
            Some(false) => put(&mut self.latency_cold),
            None => {}
        }
        if started {
            put(&mut self.latency_started);
        }
    }

    /// Files one attempt; returns whether it completed a detected shift (the short-memory
    /// shapes then restarted from the attempts since the change, see [`ShiftDetector`]).
    pub(super) fn observe(&mut self, o: &Observation, cfg: &ModelConfig) -> bool {
        self.attempts += 1;
        // Warmth is reported with results only, so a cancelled attempt's is unknown; file
        // it by the likelier state for its idle gap, or the warm/cold sketches would only
        // ever see the attempts that finished (biased fast).
        let label = o.warm.or_else(|| o.idle_gap_s.and_then(|g| self.p_warm(g)).map(|w| w >= 0.5));
        let started = o.queue_s.is_some_and(|q| q <= cfg.cutover_poll_s);
        // A cancelled attempt counts as failed by the chance it would still have failed,
        // given that it was running when it was cancelled.
        if let Outcome::Censored { after_s } = o.outcome {
            if let Some(p) = self.p_failed_if_running(after_s) {
                self.failed.record_share(p);
            }
        }
        match o.outcome {
            Outcome::Valid { latency_s } => {
                self.file(label, started, |s| s.insert(latency_s));
                if o.queue_s.is_some_and(|q| q > cfg.cutover_poll_s) {
                    self.latency_queued.insert(latency_s);
                }
                self.failed.record(false);
                self.invalid.record(false);
            }
            Outcome::Invalid { .. } => {
                self.failed.record(false);
                self.invalid.record(true);
            }
            Outcome::Failed { wall_s } => {
                self.failed.record(true);
                self.failure_wall.insert(wall_s);
            }
            Outcome::Censored { after_s } if o.queue_s.is_some_and(|q| q > cfg.cutover_poll_s && q >= after_s) => {
                // Cancelled while still queued past the poll: the cancel was *because* it
                // looked slow, so the ordinary censoring step (which assumes the cancel says
                // nothing about the latency) would file it with the fast attempts. File it
                // like the finished attempts that also queued past the poll.
                let shape = &self.latency_queued;
                self.latency.insert_censored_like(after_s, shape);
                self.latency_long.insert_censored_like(after_s, shape);
                if label == Some(false) {
                    self.latency_cold.insert_censored_like(after_s, shape);
                }
            }
            Outcome::Censored { after_s } => self.file(label, started, |s| s.insert_censored(after_s)),
        }
        if let Some(q) = o.queue_s {
            self.queue.insert(q);
            self.queued_at_poll.record(q > cfg.cutover_poll_s);
        }
        if let (Some(gap), Some(w)) = (o.idle_gap_s, o.warm) {
            let k = gap_bucket(gap).min(self.warm_by_gap.len() - 1);
            self.warm_by_gap[k].record(w);
        }
        let kept = match o.outcome {
            Outcome::Valid { latency_s } => Kept { value_s: latency_s, censored: false, warm: label, started },
            Outcome::Censored { after_s } => Kept { value_s: after_s, censored: true, warm: label, started },
            Outcome::Invalid { .. } | Outcome::Failed { .. } => return false,
        };
        match self.shift.observe(kept, cfg.shift_threshold) {
            Some(run) => {
                self.restart_shapes(&run);
                true
            }
            None => false,
        }
    }

    /// After a detected shift: the short-memory latency shapes (all, warm, cold, started)
    /// keep what they knew at [`MIN_AGE`] of its weight and are filed again with the
    /// attempts since the change, so the next plans read the new regime from them. The
    /// tail memory, the queued shape, the rates and the pairs are left to their own
    /// half-lives; the slow threshold is re-read.
    fn restart_shapes(&mut self, run: &[Kept]) {
        for s in [&mut self.latency, &mut self.latency_warm, &mut self.latency_cold, &mut self.latency_started] {
            s.age(MIN_AGE);
        }
        for k in run {
            let put = |s: &mut DecayedSketch| if k.censored { s.insert_censored(k.value_s) } else { s.insert(k.value_s) };
            put(&mut self.latency);
            match k.warm {
                Some(true) => put(&mut self.latency_warm),
                Some(false) => put(&mut self.latency_cold),
                None => {}
            }
            if k.started {
                put(&mut self.latency_started);
            }
        }
        self.slow_threshold_s = None;
    }
}
