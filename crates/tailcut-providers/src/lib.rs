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

/// The one list of provider kinds: each line a `ProviderKind` variant, its config spelling
/// (`adapter = "..."`) and its provider module (`src/<module>.rs`). It calls `$callback!`
/// with the list: this crate declares the modules from it and generates [`ProviderKind`],
/// [`KindConfig`] and [`KindSettings`] (`kind.rs`); the mock servers of
/// `tailcut-mockproviders` declare their route modules and their router from it. Adding a
/// kind is one line here plus its module (`docs/adding-a-provider.md`).
#[macro_export]
macro_rules! for_each_provider_kind {
    ($callback:ident) => {
        $callback! {
            /// RunPod serverless queue API.
            RunPod = "runpod" => runpod,
            /// Replicate predictions.
            Replicate = "replicate" => replicate,
            /// fal queue API.
            Fal = "fal" => fal,
            /// Baseten async predict.
            Baseten = "baseten" => baseten,
            /// The Modal web-endpoint pattern.
            Modal = "modal" => modal,
            /// Cerebrium REST inference.
            Cerebrium = "cerebrium" => cerebrium,
            /// An OpenAI-compatible server.
            OpenAi = "openai" => openai,
            /// Vast.ai serverless: route, then call the worker.
            Vast = "vast" => vast,
            /// A JSON job API described in the config (`[providers.NAME.http]`).
            Generic = "http" => generic,
        }
    };
}

/// Declares each kind's provider module.
macro_rules! provider_modules {
    ($($(#[doc = $doc:literal])* $kind:ident = $name:literal => $module:ident,)*) => {
        $(pub mod $module;)*
    };
}
for_each_provider_kind!(provider_modules);

pub mod bounds;
pub mod channel;
pub mod client;
pub mod config;
mod invalid;
pub mod kind;
pub mod plain;
pub mod polling;
pub mod redact;
pub mod secret;
pub mod transport;

pub use client::HttpClient;
pub use config::{CheckError, Invalid, ProviderModule};
pub use kind::{HttpConfig, KindConfig, KindSeed, KindSettings, ProviderKind};
pub use polling::{PollSettings, PollingProvider};
pub use secret::Secret;
