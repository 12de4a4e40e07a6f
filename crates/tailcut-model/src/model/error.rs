//! Why a model could not be loaded, saved or trusted: a file's I/O, a text that is not a
//! model this build reads ([`ModelFormatError`]), and a number out of range
//! ([`ModelCheckError`], naming the field).

use super::{MAX_MODEL_BYTES, MAX_PROVIDERS, MODEL_FORMAT, MODEL_VERSION};
use crate::field::FieldError;

/// Why a model could not be loaded or saved.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a model this version understands.
    #[error("{path}: {source}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong.
        #[source]
        source: ModelFormatError,
    },
    /// The model would not load back, so nothing was written.
    #[error("{path}: not saved: {source}")]
    NotSaved {
        /// The file.
        path: String,
        /// The number out of range.
        #[source]
        source: ModelCheckError,
    },
}

/// Why a text is not a model this build reads ([`Model::from_json`](super::Model::from_json)).
#[derive(Debug, thiserror::Error)]
pub enum ModelFormatError {
    /// Past [`MAX_MODEL_BYTES`].
    #[error("{len} bytes: expected at most {MAX_MODEL_BYTES} (32 MiB) for a model")]
    TooBig {
        /// Its size, bytes.
        len: u64,
    },
    /// Not a JSON object with the model's head.
    #[error("not a model: {source}")]
    NotAModel {
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// A `format` other than [`MODEL_FORMAT`].
    #[error("expected \"format\": \"{MODEL_FORMAT}\", found {found:?}")]
    WrongFormat {
        /// The format named (`None`: none, or not a string).
        found: Option<String>,
    },
    /// A `version` this build does not read.
    #[error("unsupported model version {found:?} (this build reads version {MODEL_VERSION})")]
    UnsupportedVersion {
        /// The version named (`None`: none, or not a whole number).
        found: Option<u64>,
    },
    /// The right head, but a body that does not parse as a model.
    #[error("bad model: {source}")]
    Unreadable {
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// A model whose numbers are refused.
    #[error("bad model: {source}")]
    Invalid {
        /// The number out of range.
        #[from]
        source: ModelCheckError,
    },
}

/// Why a model's numbers are refused ([`Model::check`](super::Model::check)).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelCheckError {
    /// A sketch's, rate's, provider's or setting's field out of range.
    #[error(transparent)]
    Field(#[from] FieldError),
    /// `config.half_life` is 0.
    #[error("config.half_life must be a positive number of observations (found 0)")]
    ZeroHalfLife,
    /// More providers than [`MAX_PROVIDERS`].
    #[error("providers: {count} of them, expected at most {MAX_PROVIDERS}")]
    TooManyProviders {
        /// Providers in the model.
        count: usize,
    },
    /// A pair naming a provider that is not there (or itself).
    #[error("pairs[{pair}] names a provider index out of range")]
    PairOutOfRange {
        /// The pair's index.
        pair: usize,
    },
    /// A provider's `last_served_unix_s` that is not a time.
    #[error("providers[{provider}].last_served_unix_s must be a time in seconds since 1970 (found {found})")]
    NotATime {
        /// The provider's index.
        provider: usize,
        /// The value read.
        found: f64,
    },
    /// A provider's `warm_by_gap` with the wrong number of buckets.
    #[error("providers[{provider}].warm_by_gap must have {expected} buckets")]
    WarmByGap {
        /// The provider's index.
        provider: usize,
        /// Buckets expected.
        expected: usize,
    },
}
