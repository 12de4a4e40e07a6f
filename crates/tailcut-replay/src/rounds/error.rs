//! Why a trace could not be read, and the wording shared by every reader's messages
//! (serde_json positions as columns, UTF-8 problems, numbers as written).

use tailcut_core::text::escaped;

/// Why traces could not be read. Text from the file (a record's names, in the
/// messages) is printed with control characters escaped.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The file could not be opened or read.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A line is not a valid record.
    #[error("{file}:{line}: malformed record: {}", escaped(.message))]
    Malformed {
        /// The file.
        file: String,
        /// 1-based line number.
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// A line is longer than the reader's cap.
    #[error("{file}:{line}: line longer than {limit} bytes (the reader's cap on one record); is this a trace file?")]
    LineTooLong {
        /// The file.
        file: String,
        /// 1-based line number.
        line: u64,
        /// The cap, bytes.
        limit: usize,
    },
    /// A round whose `round_id` was already read.
    #[error("{file}:{line}: duplicate round_id {round_id} (first at {first}); a repeated round would count twice")]
    DuplicateRound {
        /// The file.
        file: String,
        /// 1-based line number of the repeat.
        line: u64,
        /// The id.
        round_id: i64,
        /// `file:line` of the first occurrence.
        first: String,
    },
    /// A round names a provider with no rate in the configuration.
    #[error("{file}:{line}: provider `{}` has no rate in the configuration (add [providers.{}] with rate_usd_per_s and idle_window_s)", escaped(.provider), escaped(.provider))]
    UnknownProvider {
        /// The file.
        file: String,
        /// 1-based line number.
        line: u64,
        /// The provider key.
        provider: String,
    },
}

/// serde_json's message for a one-line document, its position given as a column
/// (its own "line 1" would contradict the file line the caller reports).
pub(crate) fn json_message(e: &serde_json::Error) -> String {
    let full = e.to_string();
    let position = format!(" at line {} column {}", e.line(), e.column());
    match full.strip_suffix(&position) {
        Some(message) if e.line() == 1 => format!("{message} (column {})", e.column()),
        Some(message) => format!("{message} (line {} column {} of the record)", e.line(), e.column()),
        None => full,
    }
}

/// Why `bytes` is not UTF-8, or `None` when it is.
pub(crate) fn utf8_problem(bytes: &[u8]) -> Option<String> {
    std::str::from_utf8(bytes).err().map(|e| format!("not valid UTF-8 (invalid byte at column {})", e.valid_up_to() + 1))
}

/// A number as written in a message: plain when short, in exponent form when huge or tiny.
pub(crate) fn show(v: f64) -> String {
    if v != 0.0 && v.is_finite() && !(1e-4..1e9).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}
