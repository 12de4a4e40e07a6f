//! What either client (reqwest for TLS, tailcut-http's plain client) gives back when a
//! reply body streams: the chunks ([`ByteStream`]) and a transport error of either kind
//! ([`HttpError`]), typed, as one line that never names the URL.

/// A streamed reply body, from either client: chunks as they arrive (redacted), or why
/// it broke off.
pub type ByteStream = std::pin::Pin<Box<dyn futures::Stream<Item = Result<bytes::Bytes, HttpError>> + Send>>;

/// A transport error from either client, as one line that never names the URL.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The lean plain-HTTP client's (its own text).
    #[error(transparent)]
    Plain(#[from] tailcut_http::ClientError),
    /// reqwest's, with the URL removed, shown with its causes (see [`crate::client::describe`]).
    #[error("{}", tailcut_http::cause::cause_chain(.source))]
    Tls {
        /// reqwest's error, without its URL.
        #[source]
        source: reqwest::Error,
    },
}

impl From<reqwest::Error> for HttpError {
    fn from(e: reqwest::Error) -> HttpError {
        HttpError::Tls { source: e.without_url() }
    }
}
