//! # tailcut-providers
//!
//! One provider module per provider kind (`runpod`, `replicate`, `fal`, `baseten`,
//! `modal`, `cerebrium`, `openai`, `vast`, `generic`), each behind the core provider contract
//! and each owning its configuration: its keys (`Config`), their checks and defaults
//! (`Settings`), its factory and its read-only credential check ([`ProviderModule`]).
//! [`kind`] holds the one list of kinds ([`ProviderKind`]) that configuration, the
//! gateway and the mock servers dispatch on; [`config`] what the modules share.
//!
//! They share one connection-pooled client
//! ([`client::HttpClient`]) with timeouts and bounded retry — backoff on 5xx and on 429
//! honouring `Retry-After` — for idempotent calls only (status polls, result fetches),
//! never for submits.
//!
//! Job-queue providers (RunPod, Replicate, fal, Baseten, the Modal web-endpoint pattern,
//! and any JSON job API described in config) are one [`polling::PollingProvider`] over a
//! small per-provider [`polling::PollingApi`]; request-channel providers (Cerebrium,
//! OpenAI-compatible servers, Vast.ai's worker call after its route) run the request in a task and cancel by closing it
//! ([`channel`]). Receipts record exactly what was observed: a cancel is confirmed only
//! by a terminal state polled afterwards. Every reply is read off the wire through
//! [`redact`], which removes every configured credential before anything parses it.

#![warn(missing_docs)]
// Unit tests spawn and read the wall clock freely (clippy.toml).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod baseten;
pub mod bounds;
pub mod cerebrium;
pub mod channel;
pub mod client;
pub mod config;
pub mod fal;
pub mod generic;
mod invalid;
pub mod kind;
pub mod modal;
pub mod openai;
pub mod plain;
pub mod polling;
pub mod redact;
pub mod replicate;
pub mod runpod;
pub mod secret;
pub mod transport;
pub mod vast;

pub use client::HttpClient;
pub use config::{CheckError, Invalid, ProviderModule};
pub use kind::{HttpConfig, KindConfig, KindSeed, KindSettings, ProviderKind};
pub use polling::{PollSettings, PollingProvider};
pub use secret::Secret;
