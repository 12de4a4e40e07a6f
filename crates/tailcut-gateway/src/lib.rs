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
//!   OpenAI-compatible providers. Whole responses and streams are both raced by the core
//!   engine; streams are hedged on the **first content token** (`handlers::stream`).
//! - **Tenancy**: hashed API keys, per-key budgets and rate limits, a per-route
//!   hedge-load cap ([`tenancy`]).
//! - **Operations**: `/metrics`, `/healthz`, `/readyz`, the status page `/ui` (admin
//!   keys), JSON logs with request ids, config reload on SIGHUP, graceful drain on
//!   SIGTERM.
//!
//! Modules by concern: `state` (the runtime built from a configuration, the process
//! state), `handlers` (the paths and their handlers, one table shared with `dispatch`),
//! `fast_routes` (those paths on `tailcut_http`'s fast path for proxied calls) and
//! `dispatch` (hyper's service, for the rest), `admission` (in-flight slots, body reading), `auth` (keys, route
//! permissions), `observe` (logs, race metrics, header names), [`metrics`] (the
//! Prometheus registry), [`error`] (every error as HTTP), `serving` (accept and drain; each
//! connection is served by `tailcut_http::serve_connection` under one
//! `tailcut_http::ServerLimits`), `tasks` (the one
//! task tracker and stop token every spawned task runs under, which the drain waits on), `budgets` (spend against budgets, for
//! `/metrics` and `/ui`), `ui` (the status page and its recent-requests buffer), [`learning`] (learned routes'
//! live models: their store in the ledger's file, `/metrics` gauges, the admin JSON).

#![warn(missing_docs)]
// Unit tests spawn and read the wall clock freely (clippy.toml).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

mod admission;
mod auth;
mod budgets;
mod dispatch;
pub mod error;
mod fast_routes;
mod handlers;
mod hangup;
pub mod learning;
mod logline;
pub mod metrics;
mod observe;
mod probe;
mod recorded;
mod replicas;
mod serving;
mod state;
mod tasks;
pub mod tenancy;
mod ui;
pub mod webhook;

pub use handlers::router;
pub use logline::log_event;
pub use serving::{serve, serve_per_core};
pub use state::{AppState, SetupError};
pub use tailcut_http::raise_fd_limit;
/// The job store (`tailcut_state::jobs`), under the name the gateway's modules use.
pub use tailcut_state::jobs as store;
pub use ui::escape_html;
