//! Paired-round traces: a streaming, parallel reader into a compact column store.
//!
//! One round is one request sent to every provider at once. Per round and provider the
//! replay needs three numbers: latency `L` (the wall time when the arm was valid, +∞
//! otherwise), billed seconds `B` (the wall time, valid or not) and the queue delay `Q`
//! when the provider reported one (`metrics["{name}_delay_ms"]` in the reference format,
//! `queue_delay_ms` in tailcut's). Lines are parsed straight into these columns with
//! serde visitors — no JSON value tree is ever built — by worker threads over blocks of
//! the file, so memory stays at ~80 bytes per round whatever the line length.

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// Why traces could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The file could not be opened or read.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A line is not a valid record.
    #[error("{file}:{line}: malformed record: {message}")]
    Malformed {
        /// The file.
        file: String,
        /// 1-based line number.
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// A line is longer than the reader's cap.
    #[error("{file}:{line}: line longer than {limit} bytes (the reader's cap on one record); is this a trace file?")]
    LineTooLong {
        /// The file.
        file: String,
        /// 1-based line number.
        line: u64,
        /// The cap, bytes.
        limit: usize,
    },
    /// A round whose `round_id` was already read.
    #[error("{file}:{line}: duplicate round_id {round_id} (first at {first}); a repeated round would count twice")]
    DuplicateRound {
        /// The file.
        file: String,
        /// 1-based line number of the repeat.
        line: u64,
        /// The id.
        round_id: i64,
        /// `file:line` of the first occurrence.
        first: String,
    },
    /// A round names a provider with no rate in the configuration.
    #[error("{file}:{line}: provider `{provider}` has no rate in the configuration (add [providers.{provider}] with rate_usd_per_s and idle_window_s)")]
    UnknownProvider {
        /// The file.
        file: String,
        /// 1-based line number.
        line: u64,
        /// The provider key.
        provider: String,
    },
}

/// Rounds in column form. Provider columns are interleaved per round: index
/// `round * providers.len() + provider`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoundSet {
    /// Provider keys, in configuration order.
    pub providers: Vec<String>,
    /// `round_id` of each round, in file order.
    pub round_ids: Vec<i64>,
    /// `block` of each round (0 when absent).
    pub blocks: Vec<i64>,
    /// Latency: wall seconds when valid, +∞ otherwise (and when absent).
    pub latency: Vec<f64>,
    /// Billed seconds: the wall time, valid or not; NaN when the provider is absent.
    pub billed: Vec<f64>,
    /// Queue delay in seconds; NaN when not reported.
    pub queue: Vec<f64>,
}

impl RoundSet {
    /// An empty set over these providers.
    pub fn new(providers: Vec<String>) -> RoundSet {
        RoundSet { providers, ..RoundSet::default() }
    }

    /// Number of rounds.
    pub fn len(&self) -> usize {
        self.round_ids.len()
    }

    /// Whether there are no rounds.
    pub fn is_empty(&self) -> bool {
        self.round_ids.is_empty()
    }

    /// Number of providers.
    pub fn width(&self) -> usize {
        self.providers.len()
    }

    /// Latency of provider `p` in round `r`.
    pub fn lat(&self, r: usize, p: usize) -> f64 {
        self.latency[r * self.width() + p]
    }

    /// Whether any round carries a queue delay for provider `p`.
    pub fn has_queue_signal(&self, p: usize) -> bool {
        let w = self.width();
        (0..self.len()).any(|r| !self.queue[r * w + p].is_nan())
    }

    /// The rounds whose id satisfies `keep`, in order.
    pub fn filter(&self, keep: impl Fn(i64) -> bool) -> RoundSet {
        let w = self.width();
        let mut out = RoundSet::new(self.providers.clone());
        for r in 0..self.len() {
            if keep(self.round_ids[r]) {
                out.round_ids.push(self.round_ids[r]);
                out.blocks.push(self.blocks[r]);
                out.latency.extend_from_slice(&self.latency[r * w..(r + 1) * w]);
                out.billed.extend_from_slice(&self.billed[r * w..(r + 1) * w]);
                out.queue.extend_from_slice(&self.queue[r * w..(r + 1) * w]);
            }
        }
        out
    }

    /// The rounds whose `keep` entry is true, in order.
    fn retain_rows(&self, keep: &[bool]) -> RoundSet {
        let w = self.width();
        let mut out = RoundSet::new(self.providers.clone());
        for (r, _) in keep.iter().enumerate().filter(|(_, k)| **k) {
            out.round_ids.push(self.round_ids[r]);
            out.blocks.push(self.blocks[r]);
            out.latency.extend_from_slice(&self.latency[r * w..(r + 1) * w]);
            out.billed.extend_from_slice(&self.billed[r * w..(r + 1) * w]);
            out.queue.extend_from_slice(&self.queue[r * w..(r + 1) * w]);
        }
        out
    }

    fn append(&mut self, mut other: RoundSet) {
        self.round_ids.append(&mut other.round_ids);
        self.blocks.append(&mut other.blocks);
        self.latency.append(&mut other.latency);
        self.billed.append(&mut other.billed);
        self.queue.append(&mut other.queue);
    }
}

/// Reader options.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadOptions {
    /// Skip malformed lines (counting them) instead of failing.
    pub skip_bad_lines: bool,
    /// Worker threads (0 = one per core, at most 8).
    pub threads: usize,
    /// Longest line accepted, bytes (0 = [`DEFAULT_MAX_LINE_BYTES`]).
    pub max_line_bytes: usize,
}

impl LoadOptions {
    fn max_line(self) -> usize {
        if self.max_line_bytes == 0 {
            DEFAULT_MAX_LINE_BYTES
        } else {
            self.max_line_bytes
        }
    }
}

/// What was read.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// The rounds.
    pub rounds: RoundSet,
    /// Non-blank lines read.
    pub lines: u64,
    /// Lines that were not rounds (other record kinds).
    pub other_records: u64,
    /// Malformed lines skipped under `skip_bad_lines`, with the first few locations.
    pub skipped: u64,
    /// `file:line: message` of the first skipped lines.
    pub skipped_examples: Vec<String>,
}

// === Line parsing ===

#[derive(Clone, Copy, Debug, Default)]
struct ArmRaw {
    present: bool,
    wall: Option<f64>,
    valid: bool,
    /// `metrics["{name}_delay_ms"]` (reference format).
    metrics_queue_ms: Option<f64>,
    /// `queue_delay_ms` (tailcut's format; wins over the metric).
    queue_delay_ms: Option<f64>,
}

struct ProviderIndex {
    names: Vec<String>,
    delay_keys: Vec<String>,
}

struct LineState<'a> {
    index: &'a ProviderIndex,
    arms: Vec<ArmRaw>,
    unknown: Option<String>,
}

#[derive(Default)]
struct LineHead {
    is_round: bool,
    round_id: Option<i64>,
    block: Option<i64>,
}

enum TopKey {
    Kind,
    RoundId,
    Block,
    Providers,
    Other,
}

struct TopKeyVisitor;

impl Visitor<'_> for TopKeyVisitor {
    type Value = TopKey;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<TopKey, E> {
        Ok(match v {
            "kind" => TopKey::Kind,
            "round_id" => TopKey::RoundId,
            "block" => TopKey::Block,
            "providers" => TopKey::Providers,
            _ => TopKey::Other,
        })
    }
}

impl<'de> serde::Deserialize<'de> for TopKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<TopKey, D::Error> {
        d.deserialize_identifier(TopKeyVisitor)
    }
}

struct KindSeed;

impl<'de> DeserializeSeed<'de> for KindSeed {
    type Value = bool;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(IsRoundVisitor)
    }
}

struct IsRoundVisitor;

impl Visitor<'_> for IsRoundVisitor {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a record kind")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<bool, E> {
        Ok(v == "round" || v == "tailcut_round")
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
}

/// An integer id; integral floats are accepted. The field name goes into type errors.
struct IntSeed(&'static str);

impl<'de> DeserializeSeed<'de> for IntSeed {
    type Value = Option<i64>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<i64>, D::Error> {
        struct V(&'static str);
        impl Visitor<'_> for V {
            type Value = Option<i64>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "an integer for `{}`", self.0)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Option<i64>, E> {
                Ok(Some(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Option<i64>, E> {
                i64::try_from(v).map(Some).map_err(|_| E::custom("integer out of range"))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Option<i64>, E> {
                if v.fract() == 0.0 && v.abs() < 9e15 {
                    Ok(Some(v as i64))
                } else {
                    Err(E::custom(format!("`{}`: expected an integer, got {v}", self.0)))
                }
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Option<i64>, E> {
                Ok(None)
            }
        }
        d.deserialize_any(V(self.0))
    }
}

/// A number or null; the field name goes into type errors.
struct NumSeed(&'static str);

impl<'de> DeserializeSeed<'de> for NumSeed {
    type Value = Option<f64>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<f64>, D::Error> {
        struct V(&'static str);
        impl Visitor<'_> for V {
            type Value = Option<f64>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a number or null for `{}`", self.0)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Option<f64>, E> {
                Ok(Some(v as f64))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Option<f64>, E> {
                Ok(Some(v as f64))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Option<f64>, E> {
                Ok(Some(v))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Option<f64>, E> {
                Ok(None)
            }
        }
        d.deserialize_any(V(self.0))
    }
}

/// `valid`: JSON truthiness, as the reference reads it with `bool(...)`.
struct TruthySeed;

impl<'de> DeserializeSeed<'de> for TruthySeed {
    type Value = bool;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = bool;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a boolean")
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<bool, E> {
                Ok(v)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<bool, E> {
                Ok(v != 0)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<bool, E> {
                Ok(v != 0)
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<bool, E> {
                Ok(v != 0.0)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<bool, E> {
                Ok(!v.is_empty())
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<bool, E> {
                Ok(false)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
                let mut any = false;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    any = true;
                }
                Ok(any)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
                let mut any = false;
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
                    any = true;
                }
                Ok(any)
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> DeserializeSeed<'de> for &mut LineState<'_> {
    type Value = LineHead;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<LineHead, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for &mut LineState<'_> {
    type Value = LineHead;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LineHead, A::Error> {
        let mut head = LineHead::default();
        while let Some(key) = map.next_key::<TopKey>()? {
            match key {
                TopKey::Kind => head.is_round = map.next_value_seed(KindSeed)?,
                TopKey::RoundId => head.round_id = map.next_value_seed(IntSeed("round_id"))?,
                TopKey::Block => head.block = map.next_value_seed(IntSeed("block"))?,
                TopKey::Providers => map.next_value_seed(ProvidersSeed(&mut *self))?,
                TopKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(head)
    }
}

struct ProvidersSeed<'s, 'a>(&'s mut LineState<'a>);

impl<'de> DeserializeSeed<'de> for ProvidersSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ProvidersSeed<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of provider arms")
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let state = self.0;
        while let Some(key) = map.next_key_seed(ProviderKey(state.index))? {
            match key {
                Ok(p) => {
                    let delay_key = state.index.delay_keys[p].as_str();
                    let arm = map.next_value_seed(ArmSeed { delay_key })?;
                    state.arms[p] = arm;
                }
                Err(name) => {
                    if state.unknown.is_none() {
                        state.unknown = Some(name);
                    }
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

struct ProviderKey<'a>(&'a ProviderIndex);

impl<'de> DeserializeSeed<'de> for ProviderKey<'_> {
    type Value = Result<usize, String>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for ProviderKey<'_> {
    type Value = Result<usize, String>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a provider key")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(self.0.names.iter().position(|n| n == v).ok_or_else(|| v.to_string()))
    }
}

struct ArmSeed<'k> {
    delay_key: &'k str,
}

enum ArmKey {
    Wall,
    Valid,
    Metrics,
    QueueDelayMs,
    Other,
}

impl<'de> serde::Deserialize<'de> for ArmKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ArmKey, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ArmKey;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ArmKey, E> {
                Ok(match v {
                    "wall_s" => ArmKey::Wall,
                    "valid" => ArmKey::Valid,
                    "metrics" => ArmKey::Metrics,
                    "queue_delay_ms" => ArmKey::QueueDelayMs,
                    _ => ArmKey::Other,
                })
            }
        }
        d.deserialize_identifier(V)
    }
}

impl<'de> DeserializeSeed<'de> for ArmSeed<'_> {
    type Value = ArmRaw;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<ArmRaw, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ArmSeed<'_> {
    type Value = ArmRaw;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a provider arm object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ArmRaw, A::Error> {
        let mut arm = ArmRaw { present: true, ..ArmRaw::default() };
        while let Some(key) = map.next_key::<ArmKey>()? {
            match key {
                ArmKey::Wall => arm.wall = map.next_value_seed(NumSeed("wall_s"))?,
                ArmKey::Valid => arm.valid = map.next_value_seed(TruthySeed)?,
                ArmKey::Metrics => arm.metrics_queue_ms = map.next_value_seed(MetricsSeed { delay_key: self.delay_key })?,
                ArmKey::QueueDelayMs => arm.queue_delay_ms = map.next_value_seed(NumSeed("queue_delay_ms"))?,
                ArmKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(arm)
    }
}

struct MetricsSeed<'k> {
    delay_key: &'k str,
}

impl<'de> DeserializeSeed<'de> for MetricsSeed<'_> {
    type Value = Option<f64>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<f64>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MetricsSeed<'_> {
    type Value = Option<f64>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a metrics object")
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Option<f64>, E> {
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<f64>, A::Error> {
        struct KeyIs<'k>(&'k str);
        impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
            type Value = bool;
            fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
                d.deserialize_str(self)
            }
        }
        impl Visitor<'_> for KeyIs<'_> {
            type Value = bool;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a metric name")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<bool, E> {
                Ok(v == self.0)
            }
        }
        let mut found = None;
        while let Some(is_delay) = map.next_key_seed(KeyIs(self.delay_key))? {
            if is_delay {
                found = map.next_value_seed(NumSeed("metrics.<provider>_delay_ms"))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// Largest `wall_s` accepted, seconds (11.6 days: no GPU request runs longer; the
/// bound keeps costs and quantiles finite).
pub const MAX_WALL_S: f64 = 1e6;
/// Largest queue delay accepted, milliseconds (the same 11.6 days).
pub const MAX_QUEUE_MS: f64 = 1e9;
/// Largest `round_id` / `block` accepted (2^53: every id is exact as a JSON number).
pub const MAX_ID: i64 = 1 << 53;
/// Default cap on one line's length, bytes: far above any real record (the largest
/// rounds are a few kB), low enough that a corrupt file cannot exhaust memory.
pub const DEFAULT_MAX_LINE_BYTES: usize = 256 << 20;

/// serde_json's message for a one-line document, its position given as a column
/// (its own "line 1" would contradict the file line the caller reports).
pub(crate) fn json_message(e: &serde_json::Error) -> String {
    let full = e.to_string();
    let position = format!(" at line {} column {}", e.line(), e.column());
    match full.strip_suffix(&position) {
        Some(message) if e.line() == 1 => format!("{message} (column {})", e.column()),
        Some(message) => format!("{message} (line {} column {} of the record)", e.line(), e.column()),
        None => full,
    }
}

/// Why `bytes` is not UTF-8, or `None` when it is.
pub(crate) fn utf8_problem(bytes: &[u8]) -> Option<String> {
    std::str::from_utf8(bytes).err().map(|e| format!("not valid UTF-8 (invalid byte at column {})", e.valid_up_to() + 1))
}

/// A number as written in a message: plain when short, in exponent form when huge or tiny.
pub(crate) fn show(v: f64) -> String {
    if v != 0.0 && v.is_finite() && !(1e-4..1e9).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

fn check_seconds(what: &str, v: f64, max: f64, unit: &str) -> Result<(), String> {
    if v.is_finite() && (0.0..=max).contains(&v) {
        Ok(())
    } else {
        Err(format!("`{what}` is {}: expected {unit} between 0 and {}", show(v), show(max)))
    }
}

/// The range checks a round passes before it enters the column store.
fn check_round(head: &LineHead, arms: &[ArmRaw], names: &[String]) -> Result<(), String> {
    for (what, id) in [("round_id", head.round_id), ("block", head.block)] {
        if let Some(id) = id {
            if !(0..=MAX_ID).contains(&id) {
                return Err(format!("`{what}` is {id}: expected an integer between 0 and {MAX_ID}"));
            }
        }
    }
    for (arm, name) in arms.iter().zip(names) {
        if let Some(w) = arm.wall {
            check_seconds(&format!("providers.{name}.wall_s"), w, MAX_WALL_S, "seconds")?;
        }
        if let Some(q) = arm.metrics_queue_ms {
            check_seconds(&format!("providers.{name}.metrics.{name}_delay_ms"), q, MAX_QUEUE_MS, "milliseconds")?;
        }
        if let Some(q) = arm.queue_delay_ms {
            check_seconds(&format!("providers.{name}.queue_delay_ms"), q, MAX_QUEUE_MS, "milliseconds")?;
        }
    }
    Ok(())
}

struct Chunk {
    rounds: RoundSet,
    /// File line of each round.
    line_of: Vec<u64>,
    lines: u64,
    other: u64,
    skipped: u64,
    examples: Vec<String>,
}

impl Chunk {
    /// A bad line: an error, or counted and skipped under `skip_bad_lines`.
    fn reject(&mut self, opts: LoadOptions, err: ReplayError) -> Result<(), ReplayError> {
        if !opts.skip_bad_lines {
            return Err(err);
        }
        self.skipped += 1;
        if self.examples.len() < 5 {
            self.examples.push(err.to_string());
        }
        Ok(())
    }
}

fn parse_chunk(bytes: &[u8], first_line: u64, file: &str, index: &ProviderIndex, opts: LoadOptions) -> Result<Chunk, ReplayError> {
    let width = index.names.len();
    let mut chunk = Chunk { rounds: RoundSet::new(Vec::new()), line_of: Vec::new(), lines: 0, other: 0, skipped: 0, examples: Vec::new() };
    let mut state = LineState { index, arms: vec![ArmRaw::default(); width], unknown: None };
    let max_line = opts.max_line();
    let mut start = 0usize;
    let ends = memchr::memchr_iter(b'\n', bytes).chain(std::iter::once(bytes.len()));
    for (line_no, end) in (first_line + 1..).zip(ends) {
        if start > bytes.len() {
            break;
        }
        let line = &bytes[start..end.min(bytes.len())];
        start = end + 1;
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        chunk.lines += 1;
        let bad = |message: String| ReplayError::Malformed { file: file.to_string(), line: line_no, message };
        if line.len() > max_line {
            chunk.reject(opts, ReplayError::LineTooLong { file: file.to_string(), line: line_no, limit: max_line })?;
            continue;
        }
        if let Some(problem) = utf8_problem(line) {
            chunk.reject(opts, bad(problem))?;
            continue;
        }
        state.arms.iter_mut().for_each(|a| *a = ArmRaw::default());
        state.unknown = None;
        let parsed = {
            let mut de = serde_json::Deserializer::from_slice(line);
            DeserializeSeed::deserialize(&mut state, &mut de).and_then(|h| de.end().map(|()| h))
        };
        let head = match parsed {
            Ok(h) => h,
            Err(e) => {
                chunk.reject(opts, bad(json_message(&e)))?;
                continue;
            }
        };
        if !head.is_round {
            chunk.other += 1;
            continue;
        }
        if let Some(provider) = state.unknown.take() {
            return Err(ReplayError::UnknownProvider { file: file.to_string(), line: line_no, provider });
        }
        let Some(round_id) = head.round_id else {
            chunk.reject(opts, bad("a round record needs an integer `round_id`".into()))?;
            continue;
        };
        if let Err(message) = check_round(&head, &state.arms, &index.names) {
            chunk.reject(opts, bad(message))?;
            continue;
        }
        let r = &mut chunk.rounds;
        r.round_ids.push(round_id);
        r.blocks.push(head.block.unwrap_or(0));
        chunk.line_of.push(line_no);
        for arm in &state.arms {
            if arm.present {
                let wall = arm.wall.unwrap_or(f64::INFINITY);
                r.latency.push(if arm.valid { wall } else { f64::INFINITY });
                r.billed.push(wall);
            } else {
                r.latency.push(f64::INFINITY);
                r.billed.push(f64::NAN);
            }
            r.queue.push(arm.queue_delay_ms.or(arm.metrics_queue_ms).map_or(f64::NAN, |ms| ms / 1000.0));
        }
    }
    Ok(chunk)
}

// === Parallel reader ===

struct Block {
    seq: usize,
    file: Arc<str>,
    file_index: usize,
    first_line: u64,
    bytes: Vec<u8>,
}

const BLOCK_BYTES: usize = 4 << 20;

/// Lines the block reader itself skipped (over-long lines under `skip_bad_lines`).
#[derive(Default)]
struct ReaderSkips {
    count: u64,
    examples: Vec<String>,
}

/// Reads rounds from `paths` (in order) for the given providers (configuration order).
/// `progress` is called with the number of bytes read so far.
///
/// Every rejected line is named by file and line: malformed JSON, invalid UTF-8, a value
/// of the wrong type or out of range, a line over the length cap, and a `round_id` seen
/// before (in any of the files). Under `skip_bad_lines` they are counted instead.
pub fn load(paths: &[PathBuf], providers: &[String], opts: LoadOptions, progress: &(dyn Fn(u64) + Sync)) -> Result<Loaded, ReplayError> {
    let index = ProviderIndex { names: providers.to_vec(), delay_keys: providers.iter().map(|p| format!("{p}_delay_ms")).collect() };
    let threads = if opts.threads == 0 { std::thread::available_parallelism().map_or(2, |n| n.get()).min(8) } else { opts.threads };
    let max_line = opts.max_line();
    let (block_tx, block_rx) = mpsc::sync_channel::<Block>(threads * 2);
    let block_rx = Mutex::new(block_rx);
    let (result_tx, result_rx) = mpsc::channel::<(usize, usize, Result<Chunk, ReplayError>)>();
    let stop = AtomicBool::new(false);
    let mut read_error = None;
    let mut reader_skips = ReaderSkips::default();
    let mut blocks = 0usize;
    let names: Vec<Arc<str>> = paths.iter().map(|p| Arc::from(p.display().to_string())).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let (block_rx, result_tx, index, stop) = (&block_rx, result_tx.clone(), &index, &stop);
            scope.spawn(move || loop {
                let next = match block_rx.lock() {
                    Ok(rx) => rx.recv(),
                    Err(_) => return,
                };
                let Ok(block) = next else { return };
                let parsed = parse_chunk(&block.bytes, block.first_line, &block.file, index, opts);
                if parsed.is_err() {
                    stop.store(true, Ordering::Relaxed);
                }
                if result_tx.send((block.seq, block.file_index, parsed)).is_err() {
                    return;
                }
            });
        }
        drop(result_tx);
        let mut read_bytes = 0u64;
        'files: for (file_index, path) in paths.iter().enumerate() {
            let name = names[file_index].clone();
            let mut file = match File::open(path) {
                Ok(f) => f,
                Err(source) => {
                    read_error = Some(ReplayError::Io { file: name.to_string(), source });
                    break;
                }
            };
            // Bytes after the last newline handed off: the start of the next line.
            let mut carry: Vec<u8> = Vec::new();
            // Newlines handed off (or skipped) so far.
            let mut line = 0u64;
            // Reading past the rest of an over-long line that is being skipped.
            let mut discarding = false;
            loop {
                if stop.load(Ordering::Relaxed) {
                    break 'files;
                }
                // A full block is read after the carried-over bytes, so a line longer than
                // a block keeps growing until its newline (or the cap). `read_to_end`
                // fills only what it reads (no 4 MiB zeroing for a small file).
                let mut buf = std::mem::take(&mut carry);
                let filled_from = buf.len();
                let eof = match (&mut file).take(BLOCK_BYTES as u64).read_to_end(&mut buf) {
                    Ok(n) => n < BLOCK_BYTES,
                    Err(source) => {
                        read_error = Some(ReplayError::Io { file: name.to_string(), source });
                        break 'files;
                    }
                };
                let filled = buf.len();
                read_bytes += (filled - filled_from) as u64;
                progress(read_bytes);
                if discarding {
                    match memchr::memchr(b'\n', &buf) {
                        Some(i) => {
                            buf.drain(..=i);
                            line += 1;
                            discarding = false;
                        }
                        None if eof => break,
                        None => continue,
                    }
                }
                // The carried-over bytes hold no newline: only the new ones are searched, so
                // a long line costs one pass, not one per block.
                let fresh = filled_from.min(buf.len());
                let cut = if eof { buf.len() } else { memchr::memrchr(b'\n', &buf[fresh..]).map_or(0, |i| fresh + i + 1) };
                let lines_here = memchr::memchr_iter(b'\n', &buf[..cut]).count() as u64;
                if buf.len() - cut > max_line {
                    // The line starting at `cut` is over the cap: stop reading it.
                    let err = ReplayError::LineTooLong { file: name.to_string(), line: line + lines_here + 1, limit: max_line };
                    if !opts.skip_bad_lines {
                        read_error = Some(err);
                        break 'files;
                    }
                    reader_skips.count += 1;
                    if reader_skips.examples.len() < 5 {
                        reader_skips.examples.push(err.to_string());
                    }
                    buf.truncate(cut);
                    discarding = true;
                } else if cut == 0 && !eof {
                    // No complete line yet: keep all of it (moved, not copied).
                    carry = buf;
                    continue;
                } else {
                    carry = buf[cut..].to_vec();
                    buf.truncate(cut);
                }
                if !buf.is_empty() {
                    let block = Block { seq: blocks, file: name.clone(), file_index, first_line: line, bytes: buf };
                    blocks += 1;
                    if block_tx.send(block).is_err() {
                        break 'files;
                    }
                }
                line += lines_here;
                if eof {
                    break;
                }
            }
        }
        drop(block_tx);
    });
    let mut chunks: Vec<Option<(usize, Result<Chunk, ReplayError>)>> = (0..blocks).map(|_| None).collect();
    for (seq, file_index, chunk) in result_rx {
        if let Some(slot) = chunks.get_mut(seq) {
            *slot = Some((file_index, chunk));
        }
    }
    // The first problem in reading order wins: every block handed off precedes the
    // point where the reader stopped.
    let mut parsed = Vec::with_capacity(chunks.len());
    for (file_index, chunk) in chunks.into_iter().flatten() {
        parsed.push((file_index, chunk?));
    }
    if let Some(e) = read_error {
        return Err(e);
    }
    let mut loaded = Loaded { rounds: RoundSet::new(providers.to_vec()), ..Loaded::default() };
    let mut origin: Vec<(usize, u64)> = Vec::new();
    for (file_index, mut chunk) in parsed {
        loaded.lines += chunk.lines;
        loaded.other_records += chunk.other;
        loaded.skipped += chunk.skipped;
        for e in chunk.examples {
            if loaded.skipped_examples.len() < 5 {
                loaded.skipped_examples.push(e);
            }
        }
        origin.extend(chunk.line_of.drain(..).map(|l| (file_index, l)));
        loaded.rounds.append(chunk.rounds);
    }
    loaded.lines += reader_skips.count;
    loaded.skipped += reader_skips.count;
    for e in reader_skips.examples {
        if loaded.skipped_examples.len() < 5 {
            loaded.skipped_examples.push(e);
        }
    }
    drop_duplicate_rounds(&mut loaded, &origin, &names, opts)?;
    Ok(loaded)
}

/// A `round_id` seen earlier (in any file) is an error naming both places, or under
/// `skip_bad_lines` the later round is skipped: a repeated round would count twice.
fn drop_duplicate_rounds(loaded: &mut Loaded, origin: &[(usize, u64)], names: &[Arc<str>], opts: LoadOptions) -> Result<(), ReplayError> {
    let ids = &loaded.rounds.round_ids;
    if ids.windows(2).all(|w| w[0] < w[1]) {
        return Ok(());
    }
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_unstable_by_key(|&i| (ids[i], i));
    let mut repeats: Vec<(usize, usize)> = Vec::new();
    for pair in order.windows(2) {
        if ids[pair[0]] == ids[pair[1]] {
            let first = repeats.iter().rev().find(|(_, later)| *later == pair[0]).map_or(pair[0], |(first, _)| *first);
            repeats.push((first, pair[1]));
        }
    }
    if repeats.is_empty() {
        return Ok(());
    }
    repeats.sort_unstable_by_key(|&(_, later)| later);
    let error = |(first, later): (usize, usize)| ReplayError::DuplicateRound {
        file: names[origin[later].0].to_string(),
        line: origin[later].1,
        round_id: ids[later],
        first: format!("{}:{}", names[origin[first].0], origin[first].1),
    };
    if !opts.skip_bad_lines {
        return Err(error(repeats[0]));
    }
    for &pair in &repeats {
        if loaded.skipped_examples.len() < 5 {
            loaded.skipped_examples.push(error(pair).to_string());
        }
    }
    loaded.skipped += repeats.len() as u64;
    let mut keep = vec![true; ids.len()];
    for &(_, later) in &repeats {
        keep[later] = false;
    }
    loaded.rounds = loaded.rounds.retain_rows(&keep);
    Ok(())
}

/// Reads one file with default options and no progress reporting.
pub fn load_file(path: &Path, providers: &[String]) -> Result<Loaded, ReplayError> {
    load(&[path.to_path_buf()], providers, LoadOptions::default(), &|_| {})
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn providers() -> Vec<String> {
        vec!["runpod".into(), "modal".into(), "cerebrium".into()]
    }

    fn write(lines: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(lines.as_bytes()).unwrap();
        f
    }

    #[test]
    fn reads_latency_billed_and_queue() {
        let f = write(concat!(
            r#"{"kind":"round","round_id":1,"providers":{"runpod":{"wall_s":6.5,"valid":true,"metrics":{"x":1,"runpod_delay_ms":1200}},"modal":{"wall_s":300.0,"valid":false}}}"#,
            "\n\n",
            r#"{"kind":"charge","providers":{"aws":{}}}"#,
            "\n",
            r#"{"kind":"tailcut_round","round_id":2,"block":1,"providers":{"cerebrium":{"wall_s":19.0,"valid":true,"queue_delay_ms":500}}}"#,
            "\n"
        ));
        let l = load_file(f.path(), &providers()).unwrap();
        let r = &l.rounds;
        assert_eq!(r.round_ids, vec![1, 2]);
        assert_eq!(l.other_records, 1);
        assert_eq!(r.lat(0, 0), 6.5);
        assert_eq!(r.queue[0], 1.2);
        assert_eq!(r.lat(0, 1), f64::INFINITY);
        assert_eq!(r.billed[1], 300.0);
        assert!(r.billed[2].is_nan(), "absent provider");
        assert_eq!(r.lat(1, 2), 19.0);
        assert_eq!(r.queue[5], 0.5);
        assert_eq!(r.blocks, vec![0, 1]);
        assert!(r.has_queue_signal(0) && !r.has_queue_signal(1));
    }

    #[test]
    fn malformed_line_names_file_and_line() {
        let f = write("{\"kind\":\"round\",\"round_id\":1,\"providers\":{}}\n\n{\"kind\": oops}\n");
        let e = load_file(f.path(), &providers()).unwrap_err().to_string();
        assert!(e.contains(&format!("{}:3: malformed record", f.path().display())), "{e}");
        let l = load(
            &[f.path().to_path_buf()],
            &providers(),
            LoadOptions { skip_bad_lines: true, threads: 1, ..LoadOptions::default() },
            &|_| {},
        )
        .unwrap();
        assert_eq!(l.skipped, 1);
        assert_eq!(l.rounds.len(), 1);
    }

    #[test]
    fn unknown_provider_is_an_error_naming_it() {
        let f = write("{\"kind\":\"round\",\"round_id\":1,\"providers\":{\"fal\":{\"wall_s\":1,\"valid\":true}}}\n");
        let e = load_file(f.path(), &providers()).unwrap_err().to_string();
        assert!(e.contains("provider `fal` has no rate"), "{e}");
    }

    #[test]
    fn missing_round_id_is_malformed() {
        let f = write("{\"kind\":\"round\",\"providers\":{}}\n");
        assert!(load_file(f.path(), &providers()).unwrap_err().to_string().contains("round_id"));
    }

    #[test]
    fn many_blocks_keep_order_and_line_numbers() {
        let mut text = String::new();
        for i in 1..=60_000 {
            text.push_str(&format!(
                "{{\"kind\":\"round\",\"round_id\":{i},\"providers\":{{\"runpod\":{{\"wall_s\":{i}.5,\"valid\":true}}}}}}\n"
            ));
        }
        text.push_str("not json\n");
        let f = write(&text);
        let e = load(
            &[f.path().to_path_buf()],
            &providers(),
            LoadOptions { skip_bad_lines: false, threads: 3, ..LoadOptions::default() },
            &|_| {},
        )
        .unwrap_err();
        assert!(e.to_string().contains(":60001: malformed"), "{e}");
        let l = load(
            &[f.path().to_path_buf()],
            &providers(),
            LoadOptions { skip_bad_lines: true, threads: 3, ..LoadOptions::default() },
            &|_| {},
        )
        .unwrap();
        assert_eq!(l.rounds.len(), 60_000);
        assert!(l.rounds.round_ids.windows(2).all(|w| w[1] == w[0] + 1));
        assert_eq!(l.rounds.lat(59_999, 0), 60_000.5);
    }

    /// Runs `load` on a thread and fails (instead of hanging) when it takes over `secs`.
    fn load_within(secs: u64, paths: Vec<PathBuf>, opts: LoadOptions) -> Result<Loaded, ReplayError> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(load(&paths, &providers(), opts, &|_| {}));
        });
        rx.recv_timeout(std::time::Duration::from_secs(secs)).expect("the reader did not finish in time")
    }

    fn round_line(id: i64, pad: usize) -> String {
        format!(
            "{{\"kind\":\"round\",\"round_id\":{id},\"pad\":\"{}\",\"providers\":{{\"runpod\":{{\"wall_s\":{id}.5,\"valid\":true}}}}}}\n",
            "x".repeat(pad)
        )
    }

    #[test]
    fn lines_longer_than_a_block_are_read() {
        // 5 MiB and 9 MiB lines: longer than one 4 MiB block, and than two.
        let text = [round_line(1, 10), round_line(2, 5 << 20), round_line(3, 9 << 20), round_line(4, 10), "oops\n".to_string()].concat();
        let f = write(&text);
        let opts = LoadOptions { skip_bad_lines: false, threads: 2, ..LoadOptions::default() };
        let e = load_within(60, vec![f.path().to_path_buf()], opts).unwrap_err().to_string();
        assert!(e.contains(":5: malformed"), "line numbers after the long lines: {e}");
        let l = load_within(60, vec![f.path().to_path_buf()], LoadOptions { skip_bad_lines: true, ..opts }).unwrap();
        assert_eq!(l.rounds.round_ids, vec![1, 2, 3, 4]);
        assert_eq!(l.rounds.lat(2, 0), 3.5);
    }

    #[test]
    fn a_line_over_the_cap_is_an_error_naming_it_or_skipped() {
        let text = [round_line(1, 10), round_line(2, 6 << 20), round_line(3, 10), "oops\n".to_string(), round_line(4, 3 << 20)].concat();
        let f = write(&text);
        let opts = LoadOptions { skip_bad_lines: false, threads: 2, max_line_bytes: 1 << 20 };
        let e = load_within(60, vec![f.path().to_path_buf()], opts).unwrap_err().to_string();
        assert!(e.contains(":2: line longer than 1048576 bytes"), "{e}");
        let l = load_within(60, vec![f.path().to_path_buf()], LoadOptions { skip_bad_lines: true, ..opts }).unwrap();
        assert_eq!(l.rounds.round_ids, vec![1, 3]);
        assert_eq!(l.skipped, 3, "{:?}", l.skipped_examples);
        let examples = l.skipped_examples.join("\n");
        assert!(examples.contains(":4: malformed") && examples.contains(":5: line longer"), "{examples}");
        // The last line, without a newline and over the cap.
        let f = write(&round_line(1, 10).to_string().add(&"y".repeat(3 << 20)));
        let e = load_within(60, vec![f.path().to_path_buf()], opts).unwrap_err().to_string();
        assert!(e.contains(":2: line longer"), "{e}");
    }

    trait Add {
        fn add(self, s: &str) -> String;
    }
    impl Add for String {
        fn add(mut self, s: &str) -> String {
            self.push_str(s);
            self
        }
    }

    #[test]
    fn values_are_range_checked_naming_line_and_key() {
        let cases = [
            (r#""runpod":{"wall_s":-5,"valid":true}"#, "`providers.runpod.wall_s` is -5"),
            (r#""runpod":{"wall_s":1e308,"valid":true}"#, "`providers.runpod.wall_s` is 1e308"),
            (r#""runpod":{"wall_s":"6.5","valid":true}"#, "invalid type: string \"6.5\", expected a number or null for `wall_s`"),
            (r#""modal":{"wall_s":6,"valid":true,"queue_delay_ms":-1}"#, "`providers.modal.queue_delay_ms` is -1"),
            (r#""modal":{"wall_s":6,"valid":true,"metrics":{"modal_delay_ms":-1e308}}"#, "`providers.modal.metrics.modal_delay_ms`"),
        ];
        for (arm, expected) in cases {
            let f = write(&format!("{}{{\"kind\":\"round\",\"round_id\":2,\"providers\":{{{arm}}}}}\n", round_line(1, 0)));
            let e = load_file(f.path(), &providers()).unwrap_err().to_string();
            assert!(e.contains(&format!("{}:2: malformed record: ", f.path().display())) && e.contains(expected), "{arm}: {e}");
            assert!(!e.contains("line 1 column"), "serde's own line number would contradict the file's: {e}");
        }
        let f = write("{\"kind\":\"round\",\"round_id\":-3,\"providers\":{}}\n");
        assert!(load_file(f.path(), &providers()).unwrap_err().to_string().contains(":1: malformed record: `round_id` is -3"));
    }

    #[test]
    fn a_repeated_round_id_is_an_error_naming_both_places() {
        let a = write(&[round_line(1, 0), round_line(2, 0)].concat());
        let b = write(&[round_line(3, 0), round_line(2, 0), round_line(2, 0), round_line(1, 0)].concat());
        let paths = vec![a.path().to_path_buf(), b.path().to_path_buf()];
        let e = load(&paths, &providers(), LoadOptions::default(), &|_| {}).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{}:2: duplicate round_id 2 (first at {}:2); a repeated round would count twice",
                b.path().display(),
                a.path().display()
            )
        );
        let l = load(&paths, &providers(), LoadOptions { skip_bad_lines: true, ..LoadOptions::default() }, &|_| {}).unwrap();
        assert_eq!(l.rounds.round_ids, vec![1, 2, 3]);
        assert_eq!(l.skipped, 3);
        assert_eq!(l.rounds.latency.len(), 9);
    }

    #[test]
    fn non_utf8_lines_name_the_line_and_can_be_skipped() {
        let mut bytes = round_line(1, 0).into_bytes();
        bytes.extend_from_slice(b"{\"kind\":\"round\",\"round_id\":2,\"note\":\"\xff\xfe\",\"providers\":{}}\n");
        bytes.extend_from_slice(round_line(3, 0).as_bytes());
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&bytes).unwrap();
        let e = load_file(f.path(), &providers()).unwrap_err().to_string();
        assert!(e.contains(":2: malformed record: not valid UTF-8 (invalid byte at column 38)"), "{e}");
        let l =
            load(&[f.path().to_path_buf()], &providers(), LoadOptions { skip_bad_lines: true, ..LoadOptions::default() }, &|_| {}).unwrap();
        assert_eq!((l.rounds.round_ids.clone(), l.skipped), (vec![1, 3], 1));
    }
}
