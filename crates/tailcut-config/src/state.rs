//! `[state]`: where the gateway keeps what replicas must share — the ledger, per-key
//! spend, jobs with their attempts and receipts — embedded in SQLite (the default) or on
//! PostgreSQL for several replicas.

use crate::bounds::{Lo, MAX_USD};
use crate::context::Ctx;
use crate::error::ConfigError;
use crate::raw::RawState;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;
use tailcut_core::MicroUsd;

/// A connection URL, which may carry a password: never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretUrl(String);

impl SecretUrl {
    /// The URL itself (to connect with; never log it).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("postgres://[redacted]")
    }
}

/// Where the shared state lives.
#[derive(Debug, Clone, PartialEq)]
pub enum StateBackend {
    /// SQLite files on this machine (`budget.ledger`, `gateway.store`), or memory.
    Embedded,
    /// PostgreSQL, shared by every replica.
    Postgres {
        /// The connection URL.
        url: SecretUrl,
    },
}

/// `[state]` settings.
#[derive(Debug, Clone, PartialEq)]
pub struct StateConfig {
    /// SQLite (embedded) or PostgreSQL.
    pub backend: StateBackend,
    /// PostgreSQL connections per replica.
    pub pool_size: usize,
    /// How long a replica's budget leases and jobs outlive its last heartbeat before a
    /// survivor reclaims them.
    pub lease_ttl: Duration,
    /// The largest slice of a budget one replica leases at a time.
    pub lease_slice: MicroUsd,
}

impl Default for StateConfig {
    fn default() -> StateConfig {
        StateConfig {
            backend: StateBackend::Embedded,
            pool_size: 16,
            lease_ttl: Duration::from_secs(15),
            lease_slice: MicroUsd::from_usd(1.0),
        }
    }
}

/// What `[state] url = "sqlite:PATH"` sets: the ledger and the job store both in PATH
/// (`None`: in memory, for `sqlite::memory:`).
pub(crate) type SqlitePath = Option<Option<PathBuf>>;

/// Reads `[state]`. Returns it, and for a `sqlite:` URL the file the ledger and the job
/// store share.
pub(crate) fn state(cx: &Ctx<'_>, raw: Option<RawState>) -> Result<(StateConfig, SqlitePath), ConfigError> {
    let Some(raw) = raw else { return Ok((StateConfig::default(), None)) };
    let d = StateConfig::default();
    let url = match (raw.url, raw.url_env) {
        (Some(_), Some(_)) => return Err(cx.err("state.url", "either state.url or state.url_env, not both")),
        (Some(u), None) => Some(u),
        (None, Some(var)) => Some(std::env::var(&var).map_err(|_| {
            cx.err(
                "state.url_env",
                format!("the environment variable `{var}` (named by state.url_env) to hold a postgres:// URL; it is not set"),
            )
        })?),
        (None, None) => None,
    };
    let key = "state.url";
    let (backend, sqlite) = match url.as_deref() {
        None => (StateBackend::Embedded, None),
        Some("sqlite::memory:") => (StateBackend::Embedded, Some(None)),
        Some(u) if u.starts_with("sqlite:") => {
            let path = &u["sqlite:".len()..];
            if path.is_empty() {
                return Err(cx.err(key, "a file after `sqlite:` (\"sqlite:.tailcut/state.sqlite\"), or \"sqlite::memory:\""));
            }
            (StateBackend::Embedded, Some(Some(PathBuf::from(path))))
        }
        Some(u) if u.starts_with("postgres://") || u.starts_with("postgresql://") => {
            let rest = u.split_once("://").map_or("", |(_, r)| r);
            if rest.is_empty() || rest.starts_with('/') {
                return Err(cx.err(key, "a host in the postgres:// URL (postgres://USER:PASSWORD@HOST:5432/DATABASE)"));
            }
            (StateBackend::Postgres { url: SecretUrl(u.to_string()) }, None)
        }
        Some(_) => return Err(cx.err(key, "\"sqlite:PATH\", \"sqlite::memory:\" or a \"postgres://USER:PASSWORD@HOST:5432/DATABASE\" URL")),
    };
    let pool_size = cx.int("state.pool_size", raw.pool_size, d.pool_size as i64, 2, 512, "connections")? as usize;
    let lease_ttl = cx.seconds("state.lease_ttl_s", raw.lease_ttl_s, d.lease_ttl.as_secs_f64(), Lo::Incl(1.0), 3600.0)?;
    let slice = cx.float("state.lease_slice_usd", raw.lease_slice_usd, d.lease_slice.as_usd(), Lo::Excl(0.0), MAX_USD, "dollars")?;
    Ok((StateConfig { backend, pool_size, lease_ttl, lease_slice: MicroUsd::from_usd(slice) }, sqlite))
}
