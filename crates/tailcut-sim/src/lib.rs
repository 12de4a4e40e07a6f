//! # tailcut-sim
//!
//! An in-process simulated serverless GPU provider implementing the core
//! [`ProviderApi`](tailcut_core::ProviderApi) contract. It is seeded and deterministic: every
//! submission `n` draws from its own RNG stream seeded by `(seed, n)`, so the same seed
//! gives the same draws whatever the timing. Run it on tokio's paused clock and
//! simulated minutes take microseconds.
//!
//! The model ([`SimProfile`]): a worker pool of bounded size; workers scale to zero
//! after an idle window; a request finds a warm worker (short dispatch + warm run), or
//! starts a cold one — a bimodal cold start (snapshot-restore fast path with a short
//! queue delay, or a full cold start with a long queue delay and model load) — or
//! queues behind a busy worker when the pool is full. Results can fail or be
//! malformed. Queued cancels cost nothing; running cancels are confirmed after a delay;
//! an optional leak probability makes a cancel acknowledged but ineffective. Billing is
//! per second from worker start, plus the idle window.

#![warn(missing_docs)]
// Unit tests spawn and read the wall clock freely (clippy.toml).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

mod job;
mod pool;
mod profile;
mod provider;

pub use profile::{ProfileError, SimOutput, SimProfile, MAX_SECONDS, MAX_WORKERS};
pub use provider::{SimBilling, SimProvider};

#[cfg(test)]
mod tests;
