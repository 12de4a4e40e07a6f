//! The lean plain-HTTP client ([`tailcut_http::client`]) as the providers use it: every
//! reply body, whole or streamed, comes out with every configured credential redacted
//! ([`crate::redact`]), and a credential becomes an `Authorization` value here
//! ([`bearer`]).

use crate::transport::{ByteStream, HttpError};
use bytes::Bytes;
use futures::TryStreamExt;
use http::{HeaderName, HeaderValue, StatusCode};
use std::time::Duration;
pub use tailcut_http::client::{drain, json_post_headers, split_http_base, ClientError, DRAIN_AT_MOST, DRAIN_WITHIN};

/// Plain-HTTP keep-alive connections to servers, pooled per thread; replies redacted.
#[derive(Clone, Debug)]
pub struct PlainHttp(tailcut_http::PlainHttp);

/// A bearer key as an `Authorization` value, marked sensitive so it never shows in debug
/// output; `None` when the key cannot be a header value.
pub fn bearer(key: &crate::secret::Secret) -> Option<HeaderValue> {
    let mut v = HeaderValue::from_str(&format!("Bearer {}", key.expose())).ok()?;
    v.set_sensitive(true);
    Some(v)
}

impl PlainHttp {
    /// A client whose exchanges (connect, send, read the whole body) end after `timeout`.
    pub fn new(timeout: Duration) -> PlainHttp {
        PlainHttp(tailcut_http::PlainHttp::new(timeout))
    }

    /// The timeout of each exchange.
    pub fn timeout(&self) -> Duration {
        self.0.timeout()
    }

    /// POSTs `body` to `authority` (`host:port`) at the path made of `path`'s pieces, and
    /// reads the whole reply, redacted.
    pub async fn post_parts(
        &self,
        authority: &str,
        path: &[&str],
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<(StatusCode, Bytes), ClientError> {
        let (status, reply) = self.0.post_parts(authority, path, headers, body).await?;
        Ok((status, crate::redact::bytes(reply)))
    }

    /// POSTs `body` and returns at the reply head; the body, redacted as it streams, is
    /// read by the caller (see [`tailcut_http::PlainHttp::post_streaming_parts`]).
    pub async fn post_streaming_parts(
        &self,
        authority: &str,
        path: &[&str],
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<(StatusCode, ByteStream), ClientError> {
        let (status, stream) = self.0.post_streaming_parts(authority, path, headers, body).await?;
        Ok((status, crate::redact::stream(Box::pin(stream.map_err(HttpError::Plain)))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server that answers one request with `reply`, echoing a registered secret.
    async fn server(reply: &'static [u8]) -> String {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut buf = vec![0u8; 65536];
            let _ = s.read(&mut buf).await;
            s.write_all(reply).await.unwrap();
        });
        addr.to_string()
    }

    #[tokio::test]
    async fn whole_and_streamed_replies_are_redacted() {
        let _key = crate::Secret::new("sk-plain-redaction-0123456789"); // registered for redaction
        let authority = server(b"HTTP/1.1 200 OK\r\ncontent-length: 34\r\n\r\nkey sk-plain-redaction-0123456789!").await;
        let c = PlainHttp::new(Duration::from_secs(5));
        let (_, body) = c.post_parts(&authority, &["/x"], &[], Bytes::new()).await.unwrap();
        assert!(!String::from_utf8_lossy(&body).contains("sk-plain-redaction"), "{body:?}");
        let authority =
            server(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n10\r\nkey sk-plain-red\r\n12\r\naction-0123456789!\r\n0\r\n\r\n")
                .await;
        let (_, stream) = c.post_streaming_parts(&authority, &["/x"], &[], Bytes::new()).await.unwrap();
        let chunks: Vec<Bytes> = stream.try_collect().await.unwrap();
        let all: Vec<u8> = chunks.concat();
        assert!(!String::from_utf8_lossy(&all).contains("sk-plain-redaction"), "{all:?}");
    }
}
