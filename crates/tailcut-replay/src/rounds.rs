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
    queue_s: Option<f64>,
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

/// An integer id; integral floats are accepted.
struct IntSeed;

impl<'de> DeserializeSeed<'de> for IntSeed {
    type Value = Option<i64>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<i64>, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Option<i64>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer")
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
                    Err(E::custom(format!("expected an integer, got {v}")))
                }
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Option<i64>, E> {
                Ok(None)
            }
        }
        d.deserialize_any(V)
    }
}

/// A number or null.
struct NumSeed;

impl<'de> DeserializeSeed<'de> for NumSeed {
    type Value = Option<f64>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<f64>, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Option<f64>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number or null")
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
        d.deserialize_any(V)
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
                TopKey::RoundId => head.round_id = map.next_value_seed(IntSeed)?,
                TopKey::Block => head.block = map.next_value_seed(IntSeed)?,
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
        let mut own_queue = None;
        while let Some(key) = map.next_key::<ArmKey>()? {
            match key {
                ArmKey::Wall => arm.wall = map.next_value_seed(NumSeed)?,
                ArmKey::Valid => arm.valid = map.next_value_seed(TruthySeed)?,
                ArmKey::Metrics => arm.queue_s = map.next_value_seed(MetricsSeed { delay_key: self.delay_key })?,
                ArmKey::QueueDelayMs => own_queue = map.next_value_seed(NumSeed)?,
                ArmKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if let Some(ms) = own_queue {
            arm.queue_s = Some(ms / 1000.0);
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
                found = map.next_value_seed(NumSeed)?.map(|ms| ms / 1000.0);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

struct Chunk {
    rounds: RoundSet,
    lines: u64,
    other: u64,
    skipped: u64,
    examples: Vec<String>,
}

fn parse_chunk(bytes: &[u8], first_line: u64, file: &str, index: &ProviderIndex, opts: LoadOptions) -> Result<Chunk, ReplayError> {
    let width = index.names.len();
    let mut chunk = Chunk { rounds: RoundSet::new(Vec::new()), lines: 0, other: 0, skipped: 0, examples: Vec::new() };
    let mut state = LineState { index, arms: vec![ArmRaw::default(); width], unknown: None };
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
        state.arms.iter_mut().for_each(|a| *a = ArmRaw::default());
        state.unknown = None;
        let parsed = {
            let mut de = serde_json::Deserializer::from_slice(line);
            DeserializeSeed::deserialize(&mut state, &mut de).and_then(|h| de.end().map(|()| h))
        };
        let bad = |message: String| ReplayError::Malformed { file: file.to_string(), line: line_no, message };
        let head = match parsed {
            Ok(h) => h,
            Err(e) => {
                let err = bad(e.to_string());
                if opts.skip_bad_lines {
                    chunk.skipped += 1;
                    if chunk.examples.len() < 5 {
                        chunk.examples.push(err.to_string());
                    }
                    continue;
                }
                return Err(err);
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
            let err = bad("a round record needs an integer `round_id`".into());
            if opts.skip_bad_lines {
                chunk.skipped += 1;
                if chunk.examples.len() < 5 {
                    chunk.examples.push(err.to_string());
                }
                continue;
            }
            return Err(err);
        };
        let r = &mut chunk.rounds;
        r.round_ids.push(round_id);
        r.blocks.push(head.block.unwrap_or(0));
        for arm in &state.arms {
            if arm.present {
                let wall = arm.wall.unwrap_or(f64::INFINITY);
                r.latency.push(if arm.valid { wall } else { f64::INFINITY });
                r.billed.push(wall);
            } else {
                r.latency.push(f64::INFINITY);
                r.billed.push(f64::NAN);
            }
            r.queue.push(arm.queue_s.unwrap_or(f64::NAN));
        }
    }
    Ok(chunk)
}

// === Parallel reader ===

struct Block {
    seq: usize,
    file: Arc<str>,
    first_line: u64,
    bytes: Vec<u8>,
}

const BLOCK_BYTES: usize = 4 << 20;

/// Reads rounds from `paths` (in order) for the given providers (configuration order).
/// `progress` is called with the number of bytes read so far.
pub fn load(paths: &[PathBuf], providers: &[String], opts: LoadOptions, progress: &(dyn Fn(u64) + Sync)) -> Result<Loaded, ReplayError> {
    let index = ProviderIndex { names: providers.to_vec(), delay_keys: providers.iter().map(|p| format!("{p}_delay_ms")).collect() };
    let threads = if opts.threads == 0 { std::thread::available_parallelism().map_or(2, |n| n.get()).min(8) } else { opts.threads };
    let (block_tx, block_rx) = mpsc::sync_channel::<Block>(threads * 2);
    let block_rx = Mutex::new(block_rx);
    let (result_tx, result_rx) = mpsc::channel::<(usize, Result<Chunk, ReplayError>)>();
    let stop = AtomicBool::new(false);
    let mut read_error = None;
    let mut blocks = 0usize;
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
                if result_tx.send((block.seq, parsed)).is_err() {
                    return;
                }
            });
        }
        drop(result_tx);
        let mut read_bytes = 0u64;
        'files: for path in paths {
            let name: Arc<str> = Arc::from(path.display().to_string());
            let mut file = match File::open(path) {
                Ok(f) => f,
                Err(source) => {
                    read_error = Some(ReplayError::Io { file: name.to_string(), source });
                    break;
                }
            };
            let mut carry: Vec<u8> = Vec::new();
            let mut line = 0u64;
            loop {
                if stop.load(Ordering::Relaxed) {
                    break 'files;
                }
                let mut buf = std::mem::take(&mut carry);
                let filled_from = buf.len();
                buf.resize(filled_from.max(BLOCK_BYTES), 0);
                let mut filled = filled_from;
                let mut eof = false;
                while filled < buf.len() {
                    match file.read(&mut buf[filled..]) {
                        Ok(0) => {
                            eof = true;
                            break;
                        }
                        Ok(n) => filled += n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(source) => {
                            read_error = Some(ReplayError::Io { file: name.to_string(), source });
                            break 'files;
                        }
                    }
                }
                buf.truncate(filled);
                read_bytes += (filled - filled_from) as u64;
                progress(read_bytes);
                let cut = if eof {
                    buf.len()
                } else {
                    match memchr::memrchr(b'\n', &buf) {
                        Some(i) => i + 1,
                        None => {
                            // One line longer than a block: keep reading into it.
                            carry = buf;
                            carry.reserve(BLOCK_BYTES);
                            continue;
                        }
                    }
                };
                carry = buf[cut..].to_vec();
                buf.truncate(cut);
                let lines_here = memchr::memchr_iter(b'\n', &buf).count() as u64;
                if !buf.is_empty() {
                    let block = Block { seq: blocks, file: name.clone(), first_line: line, bytes: buf };
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
    if let Some(e) = read_error {
        return Err(e);
    }
    let mut chunks: Vec<Option<Result<Chunk, ReplayError>>> = (0..blocks).map(|_| None).collect();
    for (seq, chunk) in result_rx {
        if let Some(slot) = chunks.get_mut(seq) {
            *slot = Some(chunk);
        }
    }
    let mut loaded = Loaded { rounds: RoundSet::new(providers.to_vec()), ..Loaded::default() };
    for chunk in chunks.into_iter().flatten() {
        let chunk = chunk?;
        loaded.lines += chunk.lines;
        loaded.other_records += chunk.other;
        loaded.skipped += chunk.skipped;
        for e in chunk.examples {
            if loaded.skipped_examples.len() < 5 {
                loaded.skipped_examples.push(e);
            }
        }
        loaded.rounds.append(chunk.rounds);
    }
    Ok(loaded)
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
        let l = load(&[f.path().to_path_buf()], &providers(), LoadOptions { skip_bad_lines: true, threads: 1 }, &|_| {}).unwrap();
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
        let e = load(&[f.path().to_path_buf()], &providers(), LoadOptions { skip_bad_lines: false, threads: 3 }, &|_| {}).unwrap_err();
        assert!(e.to_string().contains(":60001: malformed"), "{e}");
        let l = load(&[f.path().to_path_buf()], &providers(), LoadOptions { skip_bad_lines: true, threads: 3 }, &|_| {}).unwrap();
        assert_eq!(l.rounds.len(), 60_000);
        assert!(l.rounds.round_ids.windows(2).all(|w| w[1] == w[0] + 1));
        assert_eq!(l.rounds.lat(59_999, 0), 60_000.5);
    }
}
