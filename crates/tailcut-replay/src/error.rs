//! Why traces could not be read, and the wording every reader's messages share:
//! [`ReplayError`] names the file and line, [`LineError`] says what was wrong with the
//! line, and [`RecordError`] (in `error/record.rs`) what was wrong with a live record's
//! fields. serde_json positions are given as columns, numbers as written. A leaf: the
//! readers (`rounds`, `traces`) build these errors, and nothing here reads traces.

mod record;

pub use record::{Expected, Field, LabelForm, Place, RecordError};

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
    #[error("{file}:{line}: malformed record: {}", escaped(&.problem.to_string()))]
    Malformed {
        /// The file.
        file: String,
        /// 1-based line number.
        line: u64,
        /// What is wrong (its text is escaped in this error's, so it is not a `source`;
        /// boxed, so that a reader's `Result` stays small).
        problem: Box<LineError>,
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

impl ReplayError {
    /// A malformed line: `file:line` and what is wrong with it.
    pub fn malformed(file: impl Into<String>, line: u64, problem: impl Into<LineError>) -> ReplayError {
        ReplayError::Malformed { file: file.into(), line, problem: Box::new(problem.into()) }
    }

    /// What was wrong with the line, when the error is a malformed line.
    pub fn problem(&self) -> Option<&LineError> {
        match self {
            ReplayError::Malformed { problem, .. } => Some(problem),
            _ => None,
        }
    }
}

/// What is wrong with one line of a trace.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    /// Not UTF-8.
    #[error("not valid UTF-8 (invalid byte at column {column})")]
    NotUtf8 {
        /// 1-based column of the first invalid byte.
        column: usize,
    },
    /// Not JSON, or a field of a paired round of the wrong type (serde's message, its
    /// position as a column).
    #[error("{}", json_message(.source))]
    Json {
        /// serde_json's error.
        #[source]
        source: serde_json::Error,
    },
    /// A round record without an integer `round_id`.
    #[error("a round record needs an integer `round_id`")]
    NoRoundId,
    /// A round's `round_id` or `block` out of range.
    #[error("`{field}` is {id}: expected an integer between 0 and {max}")]
    IdOutOfRange {
        /// `round_id` or `block`.
        field: &'static str,
        /// The id read.
        id: i64,
        /// The largest id accepted.
        max: i64,
    },
    /// A provider arm's number out of range.
    #[error("`{}` is {}: expected {} between 0 and {}", .field.path(.provider), show(*.value), .field.unit(), show(*.max))]
    ArmOutOfRange {
        /// The provider key.
        provider: String,
        /// Which number.
        field: ArmField,
        /// The value read.
        value: f64,
        /// The largest value accepted, in the field's unit.
        max: f64,
    },
    /// A live record's field.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// A request id seen twice where a validation index must join it.
    #[error("duplicate request_id {id} (first at {first}); the validation index cannot join it")]
    DuplicateRequest {
        /// The id, as written.
        id: String,
        /// `file:line` of the first occurrence.
        first: String,
    },
    /// A request id indexed twice.
    #[error("duplicate validation_index for request_id {id} (first at {first}); it would count twice")]
    DuplicateIndex {
        /// The id, as written.
        id: String,
        /// `file:line` of the first occurrence.
        first: String,
    },
}

impl LineError {
    /// Why `bytes` is not UTF-8, or `None` when it is.
    pub(crate) fn utf8(bytes: &[u8]) -> Option<LineError> {
        std::str::from_utf8(bytes).err().map(|e| LineError::NotUtf8 { column: e.valid_up_to() + 1 })
    }
}

impl From<serde_json::Error> for LineError {
    fn from(source: serde_json::Error) -> Self {
        LineError::Json { source }
    }
}

/// A number of a paired round's provider arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArmField {
    /// `wall_s`.
    WallS,
    /// `metrics.{name}_delay_ms` (reference format).
    MetricsDelayMs,
    /// `queue_delay_ms` (tailcut's format).
    QueueDelayMs,
}

impl ArmField {
    /// The field's path in the record for provider `name`.
    pub fn path(self, name: &str) -> String {
        match self {
            ArmField::WallS => format!("providers.{name}.wall_s"),
            ArmField::MetricsDelayMs => format!("providers.{name}.metrics.{name}_delay_ms"),
            ArmField::QueueDelayMs => format!("providers.{name}.queue_delay_ms"),
        }
    }

    /// The field's unit, in words.
    pub fn unit(self) -> &'static str {
        match self {
            ArmField::WallS => "seconds",
            ArmField::MetricsDelayMs | ArmField::QueueDelayMs => "milliseconds",
        }
    }
}

/// serde_json's message for a one-line document, its position given as a column
/// (its own "line 1" would contradict the file line the caller reports).
fn json_message(e: &serde_json::Error) -> String {
    let full = e.to_string();
    let position = format!(" at line {} column {}", e.line(), e.column());
    match full.strip_suffix(&position) {
        Some(message) if e.line() == 1 => format!("{message} (column {})", e.column()),
        Some(message) => format!("{message} (line {} column {} of the record)", e.line(), e.column()),
        None => full,
    }
}

/// A number as written in a message: plain when short, in exponent form when huge or tiny.
pub(crate) fn show(v: f64) -> String {
    if v != 0.0 && v.is_finite() && !(1e-4..1e9).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}
