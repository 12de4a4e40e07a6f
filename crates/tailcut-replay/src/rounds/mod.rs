//! Paired-round traces: a streaming, parallel reader into a compact column store.
//!
//! One round is one request sent to every provider at once. Per round and provider the
//! replay needs three numbers: latency `L` (the wall time when the arm was valid, +∞
//! otherwise), billed seconds `B` (the wall time, valid or not) and the queue delay `Q`
//! when the provider reported one (`metrics["{name}_delay_ms"]` in the reference format,
//! `queue_delay_ms` in tailcut's). Lines are parsed straight into these columns with
//! serde visitors — no JSON value tree is ever built — by worker threads over blocks of
//! the file, so memory stays at ~80 bytes per round whatever the line length.
//!
//! The parts, leaves first (what can go wrong, and the wording of messages, is the
//! crate's `error`): `set` (the column store and reader options), `fields` (serde visitors for one line),
//! `chunk` (one block of lines into columns, with range checks) and `reader` (the file
//! reader handing blocks to worker threads, and the duplicate-round check).

mod chunk;
mod fields;
mod reader;
mod set;

pub use crate::error::ReplayError;
pub use reader::{load, load_file};
pub use set::{LoadOptions, Loaded, RoundSet, DEFAULT_MAX_LINE_BYTES, MAX_ID, MAX_QUEUE_MS, MAX_WALL_S};

#[cfg(test)]
mod tests;
