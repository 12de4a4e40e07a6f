//! The file reader: blocks of whole lines handed to worker threads, their chunks put
//! back in reading order, and a `round_id` seen twice rejected (or skipped).

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use super::chunk::{parse_chunk, Chunk};
use super::fields::ProviderIndex;
use super::set::{LoadOptions, Loaded, RoundSet};
use crate::error::ReplayError;

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
