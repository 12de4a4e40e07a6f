//! # tailcut-gateway
//!
//! `tailcut serve`: hedging for any language, as an HTTP service.
//!
//! - **Jobs API**: `POST /v1/jobs` (202 with an id, or `?wait=SECONDS`), `GET /v1/jobs/{id}`
//!   (state, result, winner, attempts, receipts, cost), `DELETE /v1/jobs/{id}` (cancels
//!   every live attempt, returns the receipts); optional completion webhook; jobs live in
//!   SQLite for the retention window.
//! - **OpenAI-compatible proxy**: `/v1/chat/completions`, `/v1/completions`,
//!   `/v1/embeddings`, `/v1/models`, routed by model name to a route's policy over
//!   OpenAI-compatible upstreams. Whole responses are hedged by the core engine; streams
//!   are hedged on the **first content token** ([`stream`]).
//! - **Tenancy**: hashed API keys, per-key budgets and rate limits, a per-route
//!   hedge-load cap ([`tenancy`]).
//! - **Operations**: `/metrics`, `/healthz`, `/readyz`, the status page `/ui` (admin
//!   keys), JSON logs with request ids, config reload on SIGHUP, graceful drain on
//!   SIGTERM.

mod auth;
mod budgets;
mod connection;
mod dispatch;
pub mod error;
pub mod limits;
pub mod metrics;
mod probe;
mod runtime;
mod serving;
pub mod store;
mod stream;
pub mod tenancy;
mod ui;
pub mod webhook;

pub use connection::raise_fd_limit;
pub use runtime::{log_event, router, AppState};
pub use serving::{serve, serve_per_core};
