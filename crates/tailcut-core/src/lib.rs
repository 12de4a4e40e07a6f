//! # tailcut-core
//!
//! The hedging engine at the heart of tailcut, with no HTTP and no config-file
//! knowledge. It owns:
//!
//! - [`provider`]: the contract every GPU job service implements (submit, status,
//!   result with a deadline, cancel with a receipt) and what each one can prove;
//! - [`receipt`]: cancellation receipts whose evidence can only be earned, never assumed;
//! - [`engine`]: the race itself (launch, first *valid* result wins, cancel losers in the
//!   background, live-attempt cap) and the [`engine::Hedger`] that runs a policy;
//! - [`policy`]: the built-in policies (single, race, fixed hedge, queue cutover,
//!   cascade, deadline tier) behind one small trait;
//! - [`validate`]: result validators looked up by name;
//! - [`ledger`]: the budget-gate contract and the in-memory ledger, in integer micro-USD
//!   (the durable ledgers are in `tailcut-state`);
//! - [`handover`]: a streamed reply's events and the slot the winner's stream is handed
//!   over in;
//! - [`stream`]: streams as races (a stream job's result is its first content event; the
//!   winner's stream is handed over intact), driven by any policy, such as
//!   [`policy::first_token`], the first-token hedge chain;
//! - [`trace`]: the JSONL request-trace record and an append-only writer;
//! - [`money`]: integer money types.
//!
//! ## Features
//!
//! All off by default, so that the engine alone pulls no parser or codec (and no
//! database at all: persistence is `tailcut-state`'s):
//!
//! - `json`: the `json` validator and `json_scan`, the one-pass check of a reply's
//!   top-level fields;
//! - `json-schema`: the `json-schema` validator (jsonschema);
//! - `wav`: the `wav` validator and `validate::sine_wav` (hound).

#![warn(missing_docs)]
// Unit tests spawn and read the wall clock freely (clippy.toml).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod engine;
pub mod handover;
pub mod job;
#[cfg(feature = "json")]
pub mod json_scan;
pub mod ledger;
pub mod log;
pub mod money;
pub mod policy;
pub mod policy_kind;
pub mod provider;
pub mod receipt;
pub mod stream;
pub mod text;
pub mod trace;
pub mod validate;

pub use engine::{Hedger, Outcome, Race, RaceError, RaceSettings, RunScope};
pub use job::{JobRequest, JobResult, JobState, JobTag, Payload};
pub use money::{MicroUsd, Pricing, RateNanoUsdPerSec};
pub use policy_kind::PolicyKind;
pub use provider::{CancelContext, Capabilities, Job, Provider, ProviderApi, ProviderError};
pub use receipt::{CancelScope, Evidence, Receipt};
