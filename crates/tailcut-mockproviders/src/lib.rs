//! # tailcut-mockproviders
//!
//! Local mock servers (axum, on `127.0.0.1:0`) that speak each provider's documented API,
//! quirks included, one per provider kind ([`ProviderKind::HTTP`]), for provider-module tests: RunPod's queue API, Replicate predictions, fal's
//! queue (no cancelled state), Baseten async (cancel only while queued, outputs only via
//! webhook — the mock doubles as the webhook collector), a Modal web-endpoint wrapper,
//! Cerebrium's synchronous REST call, OpenAI-compatible chat/completions (streaming too),
//! Vast.ai serverless (route, then a signed worker call) and a generic JSON job API.
//!
//! Every server shares one job engine whose [`Behaviour`] sets queue and run times,
//! failures, malformed bodies, status-call 5xx and 429 (with `Retry-After`), hangs,
//! result expiry, and whether running cancels are honoured. [`MockServer::vanish`]
//! drops the server mid-job. [`MockServer::max_live`] is the most jobs it had queued or
//! running at once. [`EchoServer`] is a server that echoes the credentials it was sent
//! back, plainly or JSON-escaped ([`Escape`]), for redaction tests.

#![warn(missing_docs)]
// clippy.toml's disallowed methods (bare `tokio::spawn`, `std::time::Instant::now`) are
// allowed here: mock provider servers for tests and demos: their own tasks and wall-clock
// timings, not the gateway's.
#![allow(clippy::disallowed_methods)]

mod echo;
mod engine;
mod routes;
mod server;

pub use echo::{Echo, EchoServer, Escape};
pub use engine::{Behaviour, Flavor, JobView, Phase};
pub use server::MockServer;
pub use tailcut_providers::ProviderKind;
