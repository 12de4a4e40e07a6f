//! The provider model: what tailcut has learned about each provider from per-attempt
//! records, and how pairs of providers are slow together.
//!
//! Fed one [`Observation`] per attempt (the fields a trace's attempt holds: provider,
//! outcome and wall time, queue delay, the idle gap before it and, when known, whether
//! it found a warm worker), grouped per request or paired round so that pairs can be
//! counted. Every statistic decays with the provider's own observation count
//! (half-life [`ModelConfig::half_life`]), so a changed tail is learned again within a
//! few half-lives; a provider's rates also age with the requests it misses
//! ([`ModelConfig::stale_after`]), so one that was avoided is learned again from its
//! next attempts. [`ProviderModel`] lives in `model/provider.rs`. Saved and restored as
//! versioned JSON.

use crate::field::{within, FieldPath};
pub use crate::pair::{joint_survival, PairStat, PAIR_PRIOR};
use crate::sketch::DecayedRate;
pub use error::{ModelCheckError, ModelError, ModelFormatError};
pub use provider::{ProviderModel, TAIL_MEMORY};
use serde::{Deserialize, Serialize};
pub use shift::{Kept, ShiftDetector, SHIFT_LLR_CROSS, SHIFT_MIN_ATTEMPTS, SHIFT_THRESHOLD_LIVE};
use std::path::Path;

/// Format tag of a saved model.
pub const MODEL_FORMAT: &str = "tailcut-model";
/// Current version of the saved format.
pub const MODEL_VERSION: u32 = 1;

/// The largest model file read: 32 MiB. A provider whose every sketch has every bucket
/// filled saves to about 370 KB, so this holds [`MAX_PROVIDERS`] of them with room to
/// spare; real models are far smaller (their buckets are sparse). Parsed without an
/// intermediate JSON tree, a file at the bound needs well under 100 MB.
pub const MAX_MODEL_BYTES: usize = 32 << 20;

/// The most providers a model may hold. Each is built with dense sketches (about 120 KB
/// in memory) whatever its file says, so the count, not the file size, bounds the
/// memory a small file could claim; no route has this many providers.
pub const MAX_PROVIDERS: usize = 64;

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

/// Attempts of a provider up to which its slow threshold (the slow quantile of its
/// latency) is re-read after every observation; beyond, every [`THRESHOLD_EVERY`]-th. A
/// quantile read walks the sketch (~900 instructions, half the cost of an update) and
/// one observation among more than this many moves a decayed quantile by little.
pub const THRESHOLD_EXACT_UNTIL: u64 = 64;

/// How often a well-sampled provider's slow threshold is re-read (see
/// [`THRESHOLD_EXACT_UNTIL`]).
pub const THRESHOLD_EVERY: u64 = 8;

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
    /// The threshold of each provider's shift detector ([`ShiftDetector`], a CUSUM in
    /// log-likelihood units; 0: off). When a provider's attempts cross its own p95 (or
    /// p05) often enough to reach it, its short-memory shapes restart from the attempts
    /// since the change. Off by default and in files saved before it existed; the live
    /// policies set [`SHIFT_THRESHOLD_LIVE`] ([`ModelConfig::live`]).
    #[serde(default)]
    pub shift_threshold: f64,
}

fn default_stale_after() -> u64 {
    128
}

/// How fast stale evidence ages: its half-life is `stale_after / STALE_AGE_DIVISOR`
/// requests (8 with the default 128), so after `2 · stale_after` requests without a
/// provider its old evidence weighs 2^-16 of one new observation.
pub const STALE_AGE_DIVISOR: u64 = 16;

impl ModelConfig {
    /// The settings of the live policies (`tailcut run`, the gateway): the defaults with
    /// the shift detector on ([`SHIFT_THRESHOLD_LIVE`]).
    pub fn live() -> ModelConfig {
        ModelConfig { shift_threshold: SHIFT_THRESHOLD_LIVE, ..ModelConfig::default() }
    }

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
        ModelConfig { half_life: 64.0, slow_quantile: 0.8, cutover_poll_s: 2.5, stale_after: default_stale_after(), shift_threshold: 0.0 }
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
    /// Shifts detected over all providers ([`ShiftDetector`]): a policy rebuilds its
    /// tables when this moves. Absent in files saved before it existed.
    #[serde(default)]
    pub shifts: u64,
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
        Model { format: MODEL_FORMAT.into(), version: MODEL_VERSION, config, providers: ps, pairs, updates: 0, requests: 0, shifts: 0 }
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
                if p.observe(o, &cfg) {
                    self.shifts += 1;
                }
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
                if p.slow_threshold_s.is_none() || p.attempts <= THRESHOLD_EXACT_UNTIL || p.attempts.is_multiple_of(THRESHOLD_EVERY) {
                    p.slow_threshold_s = p.latency.quantile(cfg.slow_quantile);
                    if cfg.shift_threshold > 0.0 {
                        let [lo, hi] = p.latency.quantiles_reached([0.05, 0.95]);
                        p.shift.set_bars(lo, hi);
                    }
                }
            }
        }
    }

    /// Writes the model as JSON. A model that would not load back (a number out of
    /// range: an infinity would be written as `null`) is refused, and nothing is written.
    pub fn save(&self, path: &Path) -> Result<(), ModelError> {
        let p = path.display().to_string();
        self.check().map_err(|source| ModelError::NotSaved { path: p.clone(), source })?;
        let text = serde_json::to_string(self).map_err(|e| ModelError::Io { path: p.clone(), source: std::io::Error::other(e) })?;
        std::fs::write(path, text).map_err(|source| ModelError::Io { path: p, source })
    }

    /// Reads a model saved by [`Model::save`], checking its size, format, version and
    /// every number (see [`Model::from_json`]). A file past [`MAX_MODEL_BYTES`] is
    /// refused before it is read.
    pub fn load(path: &Path) -> Result<Model, ModelError> {
        let p = path.display().to_string();
        let io = |source| ModelError::Io { path: p.clone(), source };
        let len = std::fs::metadata(path).map_err(io)?.len();
        if len > MAX_MODEL_BYTES as u64 {
            return Err(ModelError::Format { path: p, source: ModelFormatError::TooBig { len } });
        }
        let text = std::fs::read_to_string(path).map_err(io)?;
        Model::from_json(&text).map_err(|source| ModelError::Format { path: p, source })
    }

    /// Parses a saved model: at most [`MAX_MODEL_BYTES`] and [`MAX_PROVIDERS`] (both
    /// checked before any provider is built), its format and version, then every
    /// number range-checked ([`Model::check`]), the error naming the field.
    pub fn from_json(text: &str) -> Result<Model, ModelFormatError> {
        if text.len() > MAX_MODEL_BYTES {
            return Err(ModelFormatError::TooBig { len: text.len() as u64 });
        }
        /// What is read first: the rest is skipped, not built.
        #[derive(Deserialize)]
        struct Head {
            format: Option<serde_json::Value>,
            version: Option<serde_json::Value>,
            #[serde(default)]
            providers: Vec<serde::de::IgnoredAny>,
        }
        let head: Head = serde_json::from_str(text).map_err(|source| ModelFormatError::NotAModel { source })?;
        match head.format.as_ref().and_then(|f| f.as_str()) {
            Some(MODEL_FORMAT) => {}
            other => return Err(ModelFormatError::WrongFormat { found: other.map(str::to_string) }),
        }
        match head.version.as_ref().and_then(|f| f.as_u64()) {
            Some(x) if x == u64::from(MODEL_VERSION) => {}
            other => return Err(ModelFormatError::UnsupportedVersion { found: other }),
        }
        if head.providers.len() > MAX_PROVIDERS {
            return Err(ModelCheckError::TooManyProviders { count: head.providers.len() }.into());
        }
        let m: Model = serde_json::from_str(text).map_err(|source| ModelFormatError::Unreadable { source })?;
        m.check()?;
        Ok(m)
    }

    /// Range-checks every number, as a config's are: the learning settings, each
    /// provider's rate, idle window and statistics, each pair's. The error names the
    /// field (`providers[0].latency.half_life must be ...`).
    pub fn check(&self) -> Result<(), ModelCheckError> {
        let c = &self.config;
        let config = FieldPath::root("config");
        within(|| config.key("half_life"), c.half_life, 0.0, 1e9)?;
        if c.half_life == 0.0 {
            return Err(ModelCheckError::ZeroHalfLife);
        }
        within(|| config.key("slow_quantile"), c.slow_quantile, 0.0, 1.0)?;
        within(|| config.key("cutover_poll_s"), c.cutover_poll_s, 0.0, 1e6)?;
        if self.providers.len() > MAX_PROVIDERS {
            return Err(ModelCheckError::TooManyProviders { count: self.providers.len() });
        }
        let n = self.providers.len();
        let pairs = FieldPath::root("pairs");
        for (i, p) in self.pairs.iter().enumerate() {
            if p.a >= p.b || p.b >= n {
                return Err(ModelCheckError::PairOutOfRange { pair: i });
            }
            let at = pairs.index(i);
            for (name, r) in [
                ("a_slow", &p.a_slow),
                ("b_slow", &p.b_slow),
                ("both_slow", &p.both_slow),
                ("b_given_a", &p.b_given_a),
                ("a_given_b", &p.a_given_b),
            ] {
                r.check(&at.key(name))?;
            }
        }
        let providers = FieldPath::root("providers");
        for (i, p) in self.providers.iter().enumerate() {
            if let Some(t) = p.last_served_unix_s.filter(|t| !(t.is_finite() && *t >= 0.0)) {
                return Err(ModelCheckError::NotATime { provider: i, found: t });
            }
            if p.warm_by_gap.len() != GAP_EDGES_S.len() + 1 {
                return Err(ModelCheckError::WarmByGap { provider: i, expected: GAP_EDGES_S.len() + 1 });
            }
            p.check(&providers.index(i))?;
        }
        Ok(())
    }
}

mod error;
mod provider;
mod shift;

#[cfg(test)]
mod tests;
