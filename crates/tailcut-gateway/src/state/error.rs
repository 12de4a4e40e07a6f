//! Why the gateway could not build its state from a configuration, or reload it:
//! [`SetupError`], each variant naming the route, provider or key at fault.

use tailcut_config::ConfigError;

/// Why [`super::AppState::new`] or [`super::AppState::reload`] failed.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The configuration cannot be read or cannot be served.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// `[state] url` names PostgreSQL in a build without it.
    #[error("state.url: this build has no PostgreSQL support (cargo feature `postgres` of tailcut-gateway)")]
    NoPostgres,
    /// `state.url_env` gave no URL.
    #[error("{0}")]
    UrlEnv(#[from] tailcut_config::UrlEnvError),
    /// PostgreSQL could not be reached or migrated.
    #[cfg(feature = "postgres")]
    #[error("state.url: {0}")]
    Postgres(#[from] tailcut_state::pg::PgError),
    /// The ledger file could not be opened.
    #[error("{0}")]
    Ledger(#[from] tailcut_core::ledger::LedgerError),
    /// The trace file could not be opened.
    #[error("{0}")]
    Trace(#[from] tailcut_core::trace::TraceError),
    /// The job store could not be opened.
    #[error("job store: {0}")]
    JobStore(#[from] tailcut_state::jobs::StoreError),
    /// The learned-model store could not be opened.
    #[error("{0}")]
    ModelStore(#[from] tailcut_state::learned::StoreError),
    /// The learned-model store's lock was poisoned.
    #[error("model store lock poisoned")]
    ModelStoreLock,
    /// An HTTP client could not be built.
    #[error("{0}")]
    Tls(#[from] reqwest::Error),
    /// A provider's HTTP client could not be built.
    #[error("{0}")]
    Client(#[from] tailcut_core::ProviderError),
    /// A route names a policy that is not configured.
    #[error("route {route}: no policy {policy}")]
    NoPolicy {
        /// The route.
        route: String,
        /// The policy it names.
        policy: String,
    },
    /// A policy names a provider that is not configured.
    #[error("no provider {name}")]
    NoProvider {
        /// The provider.
        name: String,
    },
    /// An `openai` route over a provider of another adapter.
    #[error("provider {name} is not an OpenAI-compatible provider (adapter = \"openai\")")]
    NotOpenAi {
        /// The provider.
        name: String,
    },
    /// A route's policy could not be built over its providers.
    #[error("{0}")]
    Policy(#[from] tailcut_core::policy::PolicyError),
    /// The validator could not be built.
    #[error("{0}")]
    Validator(#[from] tailcut_core::validate::ValidatorError),
    /// A reload of a state built without a file.
    #[error("no config file to reload")]
    NoConfigFile,
    /// A reload that moves the state between backends.
    #[error("state.url cannot move between SQLite and PostgreSQL on a reload: restart the gateway")]
    BackendMoved,
}
