//! The column store of rounds ([`RoundSet`]), what a load returns ([`Loaded`]), the
//! reader's options and the bounds a round's values must respect.

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
        let rows: Vec<bool> = self.round_ids.iter().map(|&id| keep(id)).collect();
        self.retain_rows(&rows)
    }

    /// The rounds whose `keep` entry is true, in order.
    pub(super) fn retain_rows(&self, keep: &[bool]) -> RoundSet {
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

    pub(super) fn append(&mut self, mut other: RoundSet) {
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
    pub(super) fn max_line(self) -> usize {
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
