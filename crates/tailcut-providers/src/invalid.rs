//! The error of a provider's configuration: one key and what was expected.

/// A bad value for one key of a provider's table: the key (relative to the table,
/// e.g. `endpoint_id`, `http.submit.url`; empty for the table itself) and what was
/// expected. `tailcut-config` adds the file and the `providers.NAME.` prefix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("key `{key}`: {expected}")]
pub struct Invalid {
    /// The key.
    pub key: String,
    /// What was expected.
    pub expected: String,
}

impl Invalid {
    /// An error for `key`.
    pub fn new(key: impl Into<String>, expected: impl Into<String>) -> Invalid {
        Invalid { key: key.into(), expected: expected.into() }
    }
}
