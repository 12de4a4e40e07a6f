//! The one error of configuration: a file that cannot be read, is not TOML, or has a
//! key with a bad value.

/// A configuration problem, naming the file, the key and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{file}: cannot read: {source}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML.
    #[error("{file}: invalid TOML: {message}")]
    Syntax {
        /// The file.
        file: String,
        /// The parser's message (with line and column).
        message: String,
    },
    /// A key is missing, unknown, or has a bad value.
    #[error("{file}: key `{key}`: {expected}")]
    Invalid {
        /// The file.
        file: String,
        /// Dotted key path.
        key: String,
        /// What was expected.
        expected: String,
    },
}

impl ConfigError {
    pub(crate) fn invalid(file: &str, key: impl Into<String>, expected: impl Into<String>) -> ConfigError {
        ConfigError::Invalid { file: file.to_string(), key: key.into(), expected: expected.into() }
    }
}
