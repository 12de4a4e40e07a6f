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

/// A connection URL, which may carry a password: never printed. Either written in the
/// file (`state.url`) or read from an environment variable when the gateway connects
/// (`state.url_env`, e.g. from a Kubernetes Secret), so a file can be checked without it.
#[derive(Clone, PartialEq, Eq)]
pub enum SecretUrl {
    /// `state.url = "postgres://..."`.
    Literal {
        /// The URL.
        url: String,
    },
    /// `state.url_env = "NAME"`: the URL is in `$NAME`.
    Env {
        /// The variable's name.
        var: String,
    },
}

/// Why `state.url_env` gave no URL when the gateway connected.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum UrlEnvError {
    /// The variable holds something other than a PostgreSQL URL (not printed: it may be a secret).
    #[error("state.url_env: expected `{var}` to hold a postgres:// URL; it holds something else")]
    NotPostgres {
        /// The variable's name.
        var: String,
    },
    /// The variable is not set.
    #[error("state.url_env: expected the environment variable `{var}` to hold a postgres:// URL; it is not set")]
    Unset {
        /// The variable's name.
        var: String,
    },
}

impl SecretUrl {
    /// The URL itself (to connect with; never log it), or what is missing, naming the key.
    pub fn resolve(&self) -> Result<String, UrlEnvError> {
        match self {
            SecretUrl::Literal { url } => Ok(url.clone()),
            SecretUrl::Env { var } => match std::env::var(var) {
                Ok(u) if u.starts_with("postgres://") || u.starts_with("postgresql://") => Ok(u),
                Ok(_) => Err(UrlEnvError::NotPostgres { var: var.clone() }),
                Err(_) => Err(UrlEnvError::Unset { var: var.clone() }),
            },
        }
    }
}

impl fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretUrl::Literal { .. } => f.write_str("postgres://[redacted]"),
            SecretUrl::Env { var } => write!(f, "${var}"),
        }
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
    /// When a submission may go out on PostgreSQL: once its charge row is durable
    /// (`durable`, the default) or once the local lease check passed, its row written
    /// behind (`write_behind`).
    pub charge_rows: ChargeRows,
}

/// `state.charge_rows`: whether a submission waits for its ledger row on PostgreSQL.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ChargeRows {
    /// A submission goes out once its charge row has committed (group commit): a
    /// replica's `kill -9` loses no charge row.
    #[default]
    Durable,
    /// A submission goes out once the local, atomic lease check passed; its row is
    /// queued and written behind (a drain writes every queued row before returning the
    /// lease). The lease still bounds spend, but a replica killed with rows queued loses
    /// those rows: their amount is booked as `reclaimed` with the rest of its lease, not
    /// per request.
    WriteBehind,
}

impl Default for StateConfig {
    fn default() -> StateConfig {
        StateConfig {
            backend: StateBackend::Embedded,
            pool_size: 16,
            lease_ttl: Duration::from_secs(15),
            lease_slice: MicroUsd::from_usd(1.0),
            charge_rows: ChargeRows::Durable,
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
    let key = "state.url";
    let (backend, sqlite) = match (raw.url.as_deref(), raw.url_env) {
        (Some(_), Some(_)) => return Err(cx.err(key, "either state.url or state.url_env, not both")),
        (None, Some(var)) => {
            if var.is_empty() || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(cx.err("state.url_env", "the name of an environment variable (letters, digits, _)"));
            }
            (StateBackend::Postgres { url: SecretUrl::Env { var } }, None)
        }
        (None, None) => (StateBackend::Embedded, None),
        (Some("sqlite::memory:"), None) => (StateBackend::Embedded, Some(None)),
        (Some(u), None) if u.starts_with("sqlite:") => {
            let path = &u["sqlite:".len()..];
            if path.is_empty() {
                return Err(cx.err(key, "a file after `sqlite:` (\"sqlite:.tailcut/state.sqlite\"), or \"sqlite::memory:\""));
            }
            (StateBackend::Embedded, Some(Some(PathBuf::from(path))))
        }
        (Some(u), None) if u.starts_with("postgres://") || u.starts_with("postgresql://") => {
            let rest = u.split_once("://").map_or("", |(_, r)| r);
            if rest.is_empty() || rest.starts_with('/') {
                return Err(cx.err(key, "a host in the postgres:// URL (postgres://USER:PASSWORD@HOST:5432/DATABASE)"));
            }
            (StateBackend::Postgres { url: SecretUrl::Literal { url: u.to_string() } }, None)
        }
        (Some(_), None) => {
            return Err(cx.err(key, "\"sqlite:PATH\", \"sqlite::memory:\" or a \"postgres://USER:PASSWORD@HOST:5432/DATABASE\" URL"))
        }
    };
    let pool_size = cx.int("state.pool_size", raw.pool_size, d.pool_size as i64, 2, 512, "connections")? as usize;
    let lease_ttl = cx.seconds("state.lease_ttl_s", raw.lease_ttl_s, d.lease_ttl.as_secs_f64(), Lo::Incl(1.0), 3600.0)?;
    let slice = cx.float("state.lease_slice_usd", raw.lease_slice_usd, d.lease_slice.as_usd(), Lo::Excl(0.0), MAX_USD, "dollars")?;
    let charge_rows = match raw.charge_rows.as_deref() {
        None | Some("durable") => ChargeRows::Durable,
        Some("write_behind") => ChargeRows::WriteBehind,
        Some(other) => return Err(cx.err("state.charge_rows", format!("`{other}`: expected \"durable\" or \"write_behind\""))),
    };
    Ok((StateConfig { backend, pool_size, lease_ttl, lease_slice: MicroUsd::from_usd(slice), charge_rows }, sqlite))
}

#[cfg(test)]
mod tests {
    use crate::{Config, ConfigError, StateBackend};
    use std::path::PathBuf;

    fn parse(extra: &str) -> Result<Config, ConfigError> {
        Config::parse(extra, "t.toml")
    }

    #[test]
    fn without_a_state_section_the_embedded_files_stay_as_configured() {
        let c = parse("[budget]\nledger = \"l.sqlite\"\n[gateway]\nstore = \"j.sqlite\"\n").unwrap();
        assert_eq!(c.state.backend, StateBackend::Embedded);
        assert_eq!(c.budget.ledger, Some(PathBuf::from("l.sqlite")));
        assert_eq!(c.gateway.store, Some(PathBuf::from("j.sqlite")));
    }

    #[test]
    fn a_sqlite_url_puts_the_ledger_and_the_jobs_in_one_file() {
        let c = parse("[state]\nurl = \"sqlite:s/state.sqlite\"\n").unwrap();
        assert_eq!(c.budget.ledger, Some(PathBuf::from("s/state.sqlite")));
        assert_eq!(c.gateway.store, Some(PathBuf::from("s/state.sqlite")));
        let c = parse("[state]\nurl = \"sqlite::memory:\"\n").unwrap();
        assert_eq!((c.budget.ledger, c.gateway.store), (None, None));
        let e = parse("[state]\nurl = \"sqlite:a\"\n[budget]\nledger = \"b\"\n").unwrap_err().to_string();
        assert!(e.contains("state.url") && e.contains("budget.ledger"), "{e}");
    }

    #[test]
    fn a_postgres_url_holds_everything_and_is_never_printed() {
        let c = parse("[state]\nurl = \"postgres://u:hunter2@db:5432/t\"\nlease_ttl_s = 5\n").unwrap();
        assert!(matches!(c.state.backend, StateBackend::Postgres { .. }));
        assert_eq!((c.budget.ledger.clone(), c.gateway.store.clone()), (None, None));
        assert_eq!(c.state.lease_ttl.as_secs(), 5);
        assert_eq!(c.state.charge_rows, crate::ChargeRows::Durable, "the safe one by default");
        let c = parse("[state]\nurl = \"postgres://db/t\"\ncharge_rows = \"write_behind\"\n").unwrap();
        assert_eq!(c.state.charge_rows, crate::ChargeRows::WriteBehind);
        assert!(!format!("{c:?}").contains("hunter2"));
        let e = parse("[state]\nurl = \"postgres://db/t\"\n[gateway]\nstore = \"j.sqlite\"\n").unwrap_err().to_string();
        assert!(e.contains("gateway.store"), "{e}");
    }

    #[test]
    fn bad_state_keys_name_the_key_and_what_was_expected() {
        for (toml, key) in [
            ("[state]\nurl = \"mysql://db\"\n", "state.url"),
            ("[state]\nurl = \"postgres:///x\"\n", "state.url"),
            ("[state]\nurl = \"sqlite:\"\n", "state.url"),
            ("[state]\nurl_env = \"A B\"\n", "state.url_env"),
            ("[state]\nurl = \"postgres://db/t\"\npool_size = 0\n", "state.pool_size"),
            ("[state]\nurl = \"postgres://db/t\"\nlease_ttl_s = 0.1\n", "state.lease_ttl_s"),
            ("[state]\nurl = \"postgres://db/t\"\nlease_slice_usd = -1\n", "state.lease_slice_usd"),
            ("[state]\nurl = \"postgres://db/t\"\nurl_env = \"X\"\n", "state.url"),
            ("[state]\nurl = \"postgres://db/t\"\ncharge_rows = \"later\"\n", "state.charge_rows"),
        ] {
            let e = parse(toml).unwrap_err().to_string();
            assert!(e.contains(key), "{toml}: {e}");
        }
    }

    #[test]
    fn url_env_is_read_when_the_gateway_connects_not_when_the_file_is_checked() {
        let c = parse("[state]\nurl_env = \"TAILCUT_TEST_STATE_URL_UNSET\"\n").unwrap();
        let StateBackend::Postgres { url } = &c.state.backend else { panic!("not postgres") };
        let e = url.resolve().unwrap_err().to_string();
        assert!(e.contains("state.url_env") && e.contains("TAILCUT_TEST_STATE_URL_UNSET"), "{e}");
    }
}
