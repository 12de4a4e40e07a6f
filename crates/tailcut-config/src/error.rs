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

/// A deserializer's message in the words of a configuration file rather than of Rust:
/// `expected i64` becomes `expected an integer`, `expected f64` `expected a number`, and
/// the toml crate's trailing ``in `key` `` line (the key is named already) is dropped.
pub fn plain_message(message: &str) -> String {
    let mut text = message.trim().to_string();
    if let Some(i) = text.rfind("\nin `") {
        text.truncate(i);
    }
    for (rust, words) in [
        ("expected i8", "expected an integer"),
        ("expected i16", "expected an integer"),
        ("expected i32", "expected an integer"),
        ("expected i64", "expected an integer"),
        ("expected u8", "expected a non-negative integer"),
        ("expected u16", "expected a non-negative integer"),
        ("expected u32", "expected a non-negative integer"),
        ("expected u64", "expected a non-negative integer"),
        ("expected usize", "expected a non-negative integer"),
        ("expected f32", "expected a number"),
        ("expected f64", "expected a number"),
    ] {
        // Whole words only: `expected u8` must not rewrite `expected u80…`.
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(at) = rest.find(rust) {
            let after = &rest[at + rust.len()..];
            out.push_str(&rest[..at]);
            if after.chars().next().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                out.push_str(rust);
            } else {
                out.push_str(words);
            }
            rest = after;
        }
        out.push_str(rest);
        text = out;
    }
    text
}

#[cfg(test)]
mod tests {
    use super::plain_message;

    #[test]
    fn rust_type_names_become_words_and_the_repeated_key_goes() {
        assert_eq!(
            plain_message("invalid type: string \"two\", expected i64\nin `race.max_live`\n"),
            "invalid type: string \"two\", expected an integer"
        );
        assert_eq!(plain_message("invalid type: string \"big\", expected f64"), "invalid type: string \"big\", expected a number");
        assert_eq!(
            plain_message("invalid value: integer `-1`, expected u32"),
            "invalid value: integer `-1`, expected a non-negative integer"
        );
        assert_eq!(plain_message("expected u8x"), "expected u8x");
        assert_eq!(plain_message("unknown field `x`, expected `y`"), "unknown field `x`, expected `y`");
    }
}
