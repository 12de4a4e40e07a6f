//! One block of lines into columns: each line parsed by the [`fields`](super::fields)
//! visitors, range-checked and appended, or rejected naming its file and line.

use serde::de::DeserializeSeed;

use super::fields::{ArmRaw, LineHead, LineState, ProviderIndex};
use super::set::{LoadOptions, RoundSet, MAX_ID, MAX_QUEUE_MS, MAX_WALL_S};
use crate::error::{ArmField, LineError, ReplayError};

/// The range checks a round passes before it enters the column store.
fn check_round(head: &LineHead, arms: &[ArmRaw], names: &[String]) -> Result<(), LineError> {
    for (field, id) in [("round_id", head.round_id), ("block", head.block)] {
        if let Some(id) = id {
            if !(0..=MAX_ID).contains(&id) {
                return Err(LineError::IdOutOfRange { field, id, max: MAX_ID });
            }
        }
    }
    for (arm, name) in arms.iter().zip(names) {
        for (field, value, max) in [
            (ArmField::WallS, arm.wall, MAX_WALL_S),
            (ArmField::MetricsDelayMs, arm.metrics_queue_ms, MAX_QUEUE_MS),
            (ArmField::QueueDelayMs, arm.queue_delay_ms, MAX_QUEUE_MS),
        ] {
            if let Some(value) = value.filter(|v| !(v.is_finite() && (0.0..=max).contains(v))) {
                return Err(LineError::ArmOutOfRange { provider: name.clone(), field, value, max });
            }
        }
    }
    Ok(())
}

pub(super) struct Chunk {
    pub(super) rounds: RoundSet,
    /// File line of each round.
    pub(super) line_of: Vec<u64>,
    pub(super) lines: u64,
    pub(super) other: u64,
    pub(super) skipped: u64,
    pub(super) examples: Vec<String>,
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

pub(super) fn parse_chunk(
    bytes: &[u8],
    first_line: u64,
    file: &str,
    index: &ProviderIndex,
    opts: LoadOptions,
) -> Result<Chunk, ReplayError> {
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
        let bad = |problem: LineError| ReplayError::malformed(file, line_no, problem);
        if line.len() > max_line {
            chunk.reject(opts, ReplayError::LineTooLong { file: file.to_string(), line: line_no, limit: max_line })?;
            continue;
        }
        if let Some(problem) = LineError::utf8(line) {
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
                chunk.reject(opts, bad(e.into()))?;
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
            chunk.reject(opts, bad(LineError::NoRoundId))?;
            continue;
        };
        if let Err(problem) = check_round(&head, &state.arms, &index.names) {
            chunk.reject(opts, bad(problem))?;
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
