//! The provider model: what tailcut has learned about each provider from per-attempt
//! records, and how pairs of providers are slow together.
//!
//! Fed one [`Observation`] per attempt (the fields a trace's attempt holds: provider,
//! outcome and wall time, queue delay, the idle gap before it and, when known, whether
//! it found a warm worker), grouped per request or paired round so that pairs can be
//! counted. Every statistic decays with the provider's own observation count
//! (half-life [`ModelConfig::half_life`]), so a changed tail is learned again within a
//! few half-lives. Saved and restored as versioned JSON.

pub use crate::pair::{joint_survival, PairStat, PAIR_PRIOR};
use crate::sketch::{DecayedRate, DecayedSketch};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Format tag of a saved model.
pub const MODEL_FORMAT: &str = "tailcut-model";
/// Current version of the saved format.
pub const MODEL_VERSION: u32 = 1;

/// Upper edges of the idle-gap buckets for P(warm | gap), s; the last bucket is open.
pub const GAP_EDGES_S: [f64; 9] = [5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0];

/// Index of the idle-gap bucket of `gap_s`.
pub fn gap_bucket(gap_s: f64) -> usize {
    GAP_EDGES_S.iter().position(|e| gap_s < *e).unwrap_or(GAP_EDGES_S.len())
}

/// Human label of gap bucket `k` (`<5s`, `5-15s`, ..., `>=3600s`).
pub fn gap_label(k: usize) -> String {
    match k {
        0 => format!("<{}s", GAP_EDGES_S[0]),
        k if k >= GAP_EDGES_S.len() => format!(">={}s", GAP_EDGES_S[GAP_EDGES_S.len() - 1]),
        k => format!("{}-{}s", GAP_EDGES_S[k - 1], GAP_EDGES_S[k]),
    }
}

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// A valid result after `latency_s` (its own wall time).
    Valid {
        /// Wall time, s.
        latency_s: f64,
    },
    /// A result that failed validation after `wall_s`.
    Invalid {
        /// Wall time, s.
        wall_s: f64,
    },
    /// The job failed (or timed out) after `wall_s`.
    Failed {
        /// Wall time, s.
        wall_s: f64,
    },
    /// Cancelled before it resolved: only known to take longer than `after_s`.
    Censored {
        /// Time it ran, s.
        after_s: f64,
    },
}

/// One attempt, as the model sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observation {
    /// Provider index in the model.
    pub provider: usize,
    /// How it ended.
    pub outcome: Outcome,
    /// Queue delay (time to start), s, when the provider reported one.
    pub queue_s: Option<f64>,
    /// Time since this provider last served a request, s, when known.
    pub idle_gap_s: Option<f64>,
    /// Whether it found a warm worker, when known.
    pub warm: Option<bool>,
}

impl Observation {
    /// Latency the slow/fast classification uses: +∞ for failed or invalid results.
    fn slow_value(&self) -> Option<f64> {
        match self.outcome {
            Outcome::Valid { latency_s } => Some(latency_s),
            Outcome::Invalid { .. } | Outcome::Failed { .. } => Some(f64::INFINITY),
            Outcome::Censored { after_s } => Some(after_s),
        }
    }
}

/// Learning settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    /// Observations (per provider) after which an old one counts half.
    pub half_life: f64,
    /// A provider counts as "slow" in a request above this quantile of its own latency.
    pub slow_quantile: f64,
    /// Queue delay above which a cutover poll would find the attempt still queued, s.
    pub cutover_poll_s: f64,
    /// Requests the model may see without an attempt of a provider before that
    /// provider's evidence starts to age ([`Model::observe_request`]): beyond it, the
    /// evidence halves every [`STALE_AGE_DIVISOR`]-th of this many further requests
    /// without the provider, and `auto` re-probes a provider after twice this many
    /// ([`ModelConfig::reprobe_after`]). Absent in files saved before it existed.
    #[serde(default = "default_stale_after")]
    pub stale_after: u64,
}

fn default_stale_after() -> u64 {
    128
}

/// How fast stale evidence ages: its half-life is `stale_after / STALE_AGE_DIVISOR`
/// requests (8 with the default 128), so after `2 · stale_after` requests without a
/// provider its old evidence weighs 2^-16 of one new observation.
pub const STALE_AGE_DIVISOR: u64 = 16;

impl ModelConfig {
    /// Requests without an attempt of a provider after which `auto` re-probes it:
    /// twice [`ModelConfig::stale_after`] (0: never).
    pub fn reprobe_after(&self) -> u64 {
        self.stale_after.saturating_mul(2)
    }

    /// What a provider's evidence weighs after `unseen` requests without it: 1 up to
    /// `stale_after`, then halving every `stale_after / STALE_AGE_DIVISOR` requests
    /// (`stale_after` = 0: never ages).
    pub fn stale_factor(&self, unseen: u64) -> f64 {
        if self.stale_after == 0 || unseen <= self.stale_after {
            return 1.0;
        }
        let half = (self.stale_after as f64 / STALE_AGE_DIVISOR as f64).max(1.0);
        2f64.powf(-((unseen - self.stale_after) as f64) / half)
    }
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig { half_life: 64.0, slow_quantile: 0.8, cutover_poll_s: 2.5, stale_after: default_stale_after() }
    }
}

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
    /// Slow threshold (the slow quantile of `latency`) as of the last observation.
    pub slow_threshold_s: Option<f64>,
    /// Attempts observed, censored ones included.
    #[serde(default)]
    pub attempts: u64,
    /// [`Model::requests`] when an attempt of this provider was last observed (0: never).
    #[serde(default)]
    pub last_request: u64,
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
    fn new(name: &str, rate_usd_per_s: f64, idle_s: f64, hl: f64) -> ProviderModel {
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
    /// [`Model::observe_request`]). Each rate reads as its weak prior once its evidence
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

    fn observe(&mut self, o: &Observation, cfg: &ModelConfig) {
        self.attempts += 1;
        // Warmth is reported with results only, so a cancelled attempt's is unknown; file
        // it by the likelier state for its idle gap, or the warm/cold sketches would only
        // ever see the attempts that finished (biased fast).
        let label = o.warm.or_else(|| o.idle_gap_s.and_then(|g| self.p_warm(g)).map(|w| w >= 0.5));
        match o.outcome {
            Outcome::Valid { latency_s } => {
                self.latency.insert(latency_s);
                self.latency_long.insert(latency_s);
                match label {
                    Some(true) => self.latency_warm.insert(latency_s),
                    Some(false) => self.latency_cold.insert(latency_s),
                    None => {}
                }
                if o.queue_s.is_some_and(|q| q <= cfg.cutover_poll_s) {
                    self.latency_started.insert(latency_s);
                }
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
                if let Some(p) = self.p_failed_if_running(after_s) {
                    self.failed.record_share(p);
                }
                let shape = self.latency_queued.clone();
                self.latency.insert_censored_like(after_s, &shape);
                self.latency_long.insert_censored_like(after_s, &shape);
                if label == Some(false) {
                    self.latency_cold.insert_censored_like(after_s, &shape);
                }
            }
            Outcome::Censored { after_s } => {
                if let Some(p) = self.p_failed_if_running(after_s) {
                    self.failed.record_share(p);
                }
                self.latency.insert_censored(after_s);
                self.latency_long.insert_censored(after_s);
                match label {
                    Some(true) => self.latency_warm.insert_censored(after_s),
                    Some(false) => self.latency_cold.insert_censored(after_s),
                    None => {}
                }
                if o.queue_s.is_some_and(|q| q <= cfg.cutover_poll_s) {
                    self.latency_started.insert_censored(after_s);
                }
            }
        }
        if let Some(q) = o.queue_s {
            self.queue.insert(q);
            self.queued_at_poll.record(q > cfg.cutover_poll_s);
        }
        if let (Some(gap), Some(w)) = (o.idle_gap_s, o.warm) {
            let k = gap_bucket(gap).min(self.warm_by_gap.len() - 1);
            self.warm_by_gap[k].record(w);
        }
    }
}

/// The learned model of every provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Model {
    /// Always [`MODEL_FORMAT`].
    pub format: String,
    /// [`MODEL_VERSION`] at saving time.
    pub version: u32,
    /// Learning settings.
    pub config: ModelConfig,
    /// Per provider, in configuration order.
    pub providers: Vec<ProviderModel>,
    /// Per unordered pair (a < b).
    pub pairs: Vec<PairStat>,
    /// Observations fed so far (all providers).
    pub updates: u64,
    /// Requests (or paired rounds) fed so far with at least one attempt: the clock the
    /// staleness of a provider's evidence is measured on. Absent in files saved before it
    /// existed.
    #[serde(default)]
    pub requests: u64,
}

/// Why a model could not be loaded or saved.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a model this version understands.
    #[error("{path}: {message}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

impl Model {
    /// An empty model over providers `(name, rate $/s, idle window s)`.
    pub fn new(providers: &[(String, f64, f64)], config: ModelConfig) -> Model {
        let hl = config.half_life;
        let ps: Vec<ProviderModel> = providers.iter().map(|(n, r, i)| ProviderModel::new(n, *r, *i, hl)).collect();
        let mut pairs = Vec::new();
        for a in 0..ps.len() {
            for b in a + 1..ps.len() {
                pairs.push(PairStat {
                    a,
                    b,
                    a_slow: DecayedRate::new(hl),
                    b_slow: DecayedRate::new(hl),
                    both_slow: DecayedRate::new(hl),
                    b_given_a: DecayedRate::new(hl),
                    a_given_b: DecayedRate::new(hl),
                });
            }
        }
        Model { format: MODEL_FORMAT.into(), version: MODEL_VERSION, config, providers: ps, pairs, updates: 0, requests: 0 }
    }

    /// Index of a provider by name.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.providers.iter().position(|p| p.name == name)
    }

    /// The pair statistic of `a` and `b` (either order).
    pub fn pair(&self, a: usize, b: usize) -> Option<&PairStat> {
        let (a, b) = if a < b { (a, b) } else { (b, a) };
        self.pairs.iter().find(|p| p.a == a && p.b == b)
    }

    /// The slow-together lift of `a` and `b` (1 when unknown or the same provider).
    pub fn lift(&self, a: usize, b: usize) -> f64 {
        if a == b {
            return 1.0;
        }
        self.pair(a, b).map_or(1.0, |p| p.lift(1.0 - self.config.slow_quantile))
    }

    /// The dependence weight of `a` and `b` (see [`PairStat::dependence`]; 0 when unknown
    /// or the same provider, whose attempts are taken as independent copies).
    pub fn dependence(&self, a: usize, b: usize) -> f64 {
        if a == b {
            return 0.0;
        }
        self.pair(a, b).map_or(0.0, |p| p.dependence(1.0 - self.config.slow_quantile))
    }

    /// Feeds one attempt.
    pub fn observe(&mut self, o: &Observation) {
        self.observe_request(std::slice::from_ref(o));
    }

    /// Requests fed since an attempt of provider `p` was last observed (0 when never
    /// observed, or unknown).
    pub fn unseen(&self, p: usize) -> u64 {
        match self.providers.get(p) {
            Some(pm) if pm.attempts > 0 => self.requests.saturating_sub(pm.last_request),
            _ => 0,
        }
    }

    /// Feeds every attempt of one request (or paired round), then counts for each pair of
    /// providers with both outcomes known whether both were slow. An attempt with an
    /// unknown provider index is ignored.
    ///
    /// Evidence ages with the stream as well as with the provider's own attempts: a
    /// provider that comes back after more than [`ModelConfig::stale_after`] requests
    /// without an attempt first has everything learned about it aged by
    /// [`ModelConfig::stale_factor`], so what it does now outweighs what it did before
    /// it was last avoided (a provider that failed, was avoided, and recovered is learned
    /// again from its first new attempts, not after as many as it failed).
    pub fn observe_request(&mut self, attempts: &[Observation]) {
        if attempts.iter().any(|o| o.provider < self.providers.len()) {
            self.requests += 1;
        }
        let now = self.requests;
        let cfg = self.config;
        for o in attempts {
            let unseen = self.unseen(o.provider).saturating_sub(1);
            if let Some(p) = self.providers.get_mut(o.provider) {
                if p.last_request != now {
                    p.age(cfg.stale_factor(unseen));
                    p.last_request = now;
                }
            }
        }
        // Slow flags against the thresholds *before* this request, so a request's own
        // values do not move the bar they are judged by.
        let mut slow: Vec<(usize, bool)> = Vec::with_capacity(attempts.len());
        for o in attempts {
            let Some(p) = self.providers.get(o.provider) else { continue };
            if let (Some(v), Some(th)) = (o.slow_value(), p.slow_threshold_s) {
                let known = !matches!(o.outcome, Outcome::Censored { .. }) || v > th;
                if known {
                    slow.push((o.provider, v > th));
                }
            }
        }
        for o in attempts {
            if let Some(p) = self.providers.get_mut(o.provider) {
                p.observe(o, &cfg);
                self.updates += 1;
            }
        }
        for (i, &(a, sa)) in slow.iter().enumerate() {
            for &(b, sb) in &slow[i + 1..] {
                if a == b {
                    continue;
                }
                let ((a, sa), (b, sb)) = if a < b { ((a, sa), (b, sb)) } else { ((b, sb), (a, sa)) };
                if let Some(ps) = self.pairs.iter_mut().find(|p| p.a == a && p.b == b) {
                    ps.a_slow.record(sa);
                    ps.b_slow.record(sb);
                    ps.both_slow.record(sa && sb);
                    if sa {
                        ps.b_given_a.record(sb);
                    }
                    if sb {
                        ps.a_given_b.record(sa);
                    }
                }
            }
        }
        for o in attempts {
            if let Some(p) = self.providers.get_mut(o.provider) {
                p.slow_threshold_s = p.latency.quantile(cfg.slow_quantile);
            }
        }
    }

    /// Writes the model as pretty JSON.
    pub fn save(&self, path: &Path) -> Result<(), ModelError> {
        let io = |source| ModelError::Io { path: path.display().to_string(), source };
        let text = serde_json::to_string(self).map_err(|e| io(std::io::Error::other(e)))?;
        std::fs::write(path, text).map_err(io)
    }

    /// Reads a model saved by [`Model::save`], checking its format and version.
    pub fn load(path: &Path) -> Result<Model, ModelError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ModelError::Io { path: p.clone(), source })?;
        Model::from_json(&text).map_err(|message| ModelError::Format { path: p, message })
    }

    /// Parses a saved model.
    pub fn from_json(text: &str) -> Result<Model, String> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        match v.get("format").and_then(|f| f.as_str()) {
            Some(MODEL_FORMAT) => {}
            other => return Err(format!("expected \"format\": \"{MODEL_FORMAT}\", found {other:?}")),
        }
        match v.get("version").and_then(|f| f.as_u64()) {
            Some(x) if x == u64::from(MODEL_VERSION) => {}
            other => return Err(format!("unsupported model version {other:?} (this build reads version {MODEL_VERSION})")),
        }
        let m: Model = serde_json::from_value(v).map_err(|e| format!("bad model: {e}"))?;
        let n = m.providers.len();
        if m.pairs.iter().any(|p| p.a >= p.b || p.b >= n) {
            return Err("bad model: a pair names a provider index out of range".into());
        }
        if m.providers.iter().any(|p| p.warm_by_gap.len() != GAP_EDGES_S.len() + 1) {
            return Err(format!("bad model: warm_by_gap must have {} buckets", GAP_EDGES_S.len() + 1));
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests;
