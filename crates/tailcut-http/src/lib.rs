//! # tailcut-http
//!
//! What tailcut does over HTTP by hand, next to hyper: the server's fast path for
//! proxied calls and what both server paths share, and the lean client that calls
//! plain-`http://` upstreams.
//!
//! - [`limits`]: [`ServerLimits`], the one limits-and-timeouts type that both server
//!   paths (the fast path and hyper's) read, and the head checks hyper's path applies.
//! - [`fast`]: the hand-written HTTP/1.1 for whole POSTs to a service's fast routes
//!   ([`FastService`]); anything else is handed to hyper with the bytes already read.
//! - [`server`]: one connection, on the fast path and then hyper's (or hyper's alone),
//!   under the same limits, drain and shedding.
//! - [`conn`]: per-connection state, the head timeout and hyper's protocol-error
//!   replies ([`GuardedStream`]), and the connection cap ([`Connections`]).
//! - [`hangup`]: a client hanging up while its request is served ([`Hangup`]).
//! - [`heartbeat`]: a serving runtime's timer heartbeat.
//! - [`date`]: the `Date` header.
//! - [`client`]: the lean HTTP/1.1 client for plain-`http://` upstreams ([`PlainHttp`]),
//!   next to reqwest; its errors are typed ([`ClientError`]).
//! - [`cause`]: an error and its causes as one line.

#![warn(missing_docs)]
// Unit tests spawn and read the wall clock freely (clippy.toml).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod cause;
pub mod client;
pub mod conn;
pub mod date;
pub mod fast;
pub mod hangup;
pub mod heartbeat;
pub mod limits;
pub mod server;

pub use client::{ClientError, PlainHttp};
pub use conn::{raise_fd_limit, Admission, ConnState, Connections, GuardedStream};
pub use fast::{FastService, Refusal};
pub use hangup::{HangUpOnDrop, Hangup};
pub use heartbeat::Heartbeat;
pub use limits::{HeadRefusal, ServerLimits};
pub use server::{serve_connection, ConnSignals};
