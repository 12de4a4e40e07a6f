//! Live trace files into [`LiveTraces`]: lines checked and normalised, requests joined
//! to their `validation_index` records by request id, bad lines rejected (or counted)
//! naming file and line.

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, Read};
use std::path::PathBuf;

use super::check::check_record;
use super::record::{live_row, receipt_facts, AuditRow, LiveRow};
use crate::error::{LineError, ReplayError};
use crate::rounds::DEFAULT_MAX_LINE_BYTES;

/// Everything read from live traces.
#[derive(Debug, Clone, Default)]
pub struct LiveTraces {
    /// Requests, in file order (joined to validation arms when present).
    pub rows: Vec<LiveRow>,
    /// Cancel-audit records.
    pub audits: Vec<AuditRow>,
    /// Malformed lines skipped.
    pub skipped: u64,
    /// `file:line: message` of the first skipped lines.
    pub skipped_examples: Vec<String>,
}

impl LiveTraces {
    fn reject(&mut self, skip_bad_lines: bool, err: ReplayError) -> Result<(), ReplayError> {
        if !skip_bad_lines {
            return Err(err);
        }
        self.skipped += 1;
        if self.skipped_examples.len() < 5 {
            self.skipped_examples.push(err.to_string());
        }
        Ok(())
    }
}

/// Options of [`read_live_with`].
#[derive(Debug, Clone, Copy, Default)]
pub struct LiveOptions {
    /// Skip bad lines (counting them) instead of failing.
    pub skip_bad_lines: bool,
    /// Longest line accepted, bytes (0 = [`DEFAULT_MAX_LINE_BYTES`]).
    pub max_line_bytes: usize,
}

/// Reads live traces. Bad lines are errors naming file and line unless `skip_bad_lines`.
pub fn read_live(paths: &[PathBuf], skip_bad_lines: bool) -> Result<LiveTraces, ReplayError> {
    read_live_with(paths, LiveOptions { skip_bad_lines, ..LiveOptions::default() })
}

/// A record and where it was read.
struct Located {
    rec: Value,
    file: std::sync::Arc<str>,
    line: u64,
}

impl Located {
    fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }

    fn error(&self, problem: LineError) -> ReplayError {
        ReplayError::malformed(&*self.file, self.line, problem)
    }
}

/// Reads live traces with explicit options.
pub fn read_live_with(paths: &[PathBuf], opts: LiveOptions) -> Result<LiveTraces, ReplayError> {
    let max_line = if opts.max_line_bytes == 0 { DEFAULT_MAX_LINE_BYTES } else { opts.max_line_bytes };
    let mut engine: Vec<Located> = Vec::new();
    let mut index: Vec<Located> = Vec::new();
    let mut out = LiveTraces::default();
    let mut buf: Vec<u8> = Vec::new();
    for path in paths {
        let file = path.display().to_string();
        let shared: std::sync::Arc<str> = std::sync::Arc::from(file.as_str());
        let io = |source| ReplayError::Io { file: file.clone(), source };
        let mut reader = std::io::BufReader::with_capacity(1 << 16, std::fs::File::open(path).map_err(io)?);
        let mut line = 0u64;
        loop {
            buf.clear();
            let n = (&mut reader).take(max_line as u64 + 1).read_until(b'\n', &mut buf).map_err(io)?;
            if n == 0 {
                break;
            }
            line += 1;
            let bad = |problem: LineError| ReplayError::malformed(file.as_str(), line, problem);
            if buf.last() != Some(&b'\n') && buf.len() > max_line {
                out.reject(opts.skip_bad_lines, ReplayError::LineTooLong { file: file.clone(), line, limit: max_line })?;
                // Read past the rest of the line.
                loop {
                    let (done, used) = {
                        let rest = reader.fill_buf().map_err(io)?;
                        match memchr::memchr(b'\n', rest) {
                            Some(i) => (true, i + 1),
                            None => (rest.is_empty(), rest.len()),
                        }
                    };
                    reader.consume(used);
                    if done {
                        break;
                    }
                }
                continue;
            }
            if buf.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if let Some(problem) = LineError::utf8(&buf) {
                out.reject(opts.skip_bad_lines, bad(problem))?;
                continue;
            }
            let rec: Value = match serde_json::from_slice(&buf) {
                Ok(v) => v,
                Err(e) => {
                    out.reject(opts.skip_bad_lines, bad(LineError::from(e)))?;
                    continue;
                }
            };
            if let Err(problem) = check_record(&rec) {
                out.reject(opts.skip_bad_lines, bad(LineError::from(problem)))?;
                continue;
            }
            let located = |rec| Located { rec, file: shared.clone(), line };
            match rec.get("kind").and_then(Value::as_str) {
                Some("validation_index") => index.push(located(rec)),
                Some("forced_cancel") => {
                    let receipt = rec.get("receipt").cloned().unwrap_or(Value::Null);
                    out.audits.push(AuditRow {
                        provider: rec.get("provider").and_then(Value::as_str).unwrap_or("?").to_string(),
                        phase: rec.get("phase").and_then(Value::as_str).unwrap_or("?").to_string(),
                        has_terminal_status: receipt.get("terminal_status").is_some_and(|s| !s.is_null()),
                        receipt: receipt_facts(&receipt),
                    });
                }
                _ => engine.push(located(rec)),
            }
        }
    }
    if index.is_empty() {
        for l in &engine {
            match live_row(&l.rec) {
                Ok(row) => out.rows.extend(row),
                Err(problem) => out.reject(opts.skip_bad_lines, l.error(LineError::from(problem)))?,
            }
        }
        return Ok(out);
    }
    // Joined by request id: an id seen twice on either side cannot be joined, and would
    // count a request twice.
    let mut by_id: BTreeMap<String, Located> = BTreeMap::new();
    for l in engine {
        let Some(id) = l.rec.get("request_id").map(Value::to_string) else { continue };
        if let Some(first) = by_id.get(&id) {
            let problem = LineError::DuplicateRequest { first: first.at(), id };
            out.reject(opts.skip_bad_lines, l.error(problem))?;
            continue;
        }
        by_id.insert(id, l);
    }
    let mut indexed: BTreeMap<String, String> = BTreeMap::new();
    for idx in index {
        let id = idx.rec.get("request_id").map(|v| v.to_string()).unwrap_or_default();
        if let Some(first) = indexed.get(&id) {
            let problem = LineError::DuplicateIndex { id, first: first.clone() };
            out.reject(opts.skip_bad_lines, idx.error(problem))?;
            continue;
        }
        indexed.insert(id.clone(), idx.at());
        let mut merged = by_id.get(&id).map_or(Value::Null, |l| l.rec.clone());
        if let (Value::Object(m), Value::Object(ix)) = (&mut merged, &idx.rec) {
            for (k, v) in ix {
                if k != "kind" {
                    m.insert(k.clone(), v.clone());
                }
            }
        }
        let row = match live_row(&merged) {
            Ok(row) => row,
            Err(problem) => {
                out.reject(opts.skip_bad_lines, idx.error(LineError::from(problem)))?;
                continue;
            }
        };
        if let Some(mut row) = row {
            if let Some(arm) = idx.rec.get("arm").and_then(Value::as_str) {
                row.arm = arm.to_string();
            }
            out.rows.push(row);
        }
    }
    Ok(out)
}
