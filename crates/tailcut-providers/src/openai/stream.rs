//! The OpenAI-compatible provider of streamed replies that the gateway races on the first
//! content token: its job is a [`StreamJob`], whose result is the first content event,
//! and the winner's stream is handed over to the response body
//! ([`tailcut_core::stream`]). Events come from the one reader ([`super::sse`]), framed
//! again as the client gets them.

use super::sse::{events, Event};
use super::{request_body, Endpoint, Settings};
use crate::plain::PlainHttp;
use crate::transport::{ByteStream, HttpError};
use crate::{HttpClient, Secret};
use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use std::sync::Arc;
use tailcut_core::receipt::Evidence;
use tailcut_core::stream::{EventSender, StreamEvent, StreamJob};
use tailcut_core::{Capabilities, Job, JobRequest, ProviderApi, ProviderError};

/// Where a provider's streams go and how.
#[derive(Debug)]
struct Target {
    name: String,
    base: String,
    model: Option<String>,
    key: Option<Secret>,
    endpoint: Endpoint,
    /// Plain-HTTP connections for `http://` providers (per-thread pools).
    plain: PlainHttp,
    /// The TLS client, for every other base URL.
    tls: reqwest::Client,
}

/// An OpenAI-compatible provider of streamed replies (chat or text completions).
#[derive(Debug, Clone)]
pub struct OpenAiStream(Arc<Target>);

impl Settings {
    /// The streaming provider `name` for `endpoint`, sharing `http`'s plain-HTTP pools
    /// and the TLS client `tls`.
    pub fn stream_provider(&self, name: &str, endpoint: Endpoint, http: &HttpClient, tls: reqwest::Client) -> OpenAiStream {
        OpenAiStream(Arc::new(Target {
            name: name.into(),
            base: self.base.clone(),
            model: self.model.clone(),
            key: self.key_env.as_deref().and_then(Secret::from_env),
            endpoint,
            plain: http.plain().clone(),
            tls,
        }))
    }
}

#[async_trait]
impl ProviderApi for OpenAiStream {
    fn capabilities(&self) -> Capabilities {
        Capabilities { reports_queued: false, cancel_evidence: Evidence::RequestChannelClosed, reports_billed_time: false }
    }

    /// Starts the stream and returns at once: opening it is part of the attempt. The
    /// client's body is forwarded as sent (its own `stream` and `stream_options`).
    async fn submit(&self, request: &JobRequest) -> Result<Arc<dyn Job>, ProviderError> {
        let body = request_body(request, self.0.model.as_deref(), false)?;
        let target = self.0.clone();
        Ok(Arc::new(StreamJob::start(&self.0.name, request, move |tx| read(target, body, tx))))
    }
}

/// Opens the stream: the lean plain-HTTP client for `http://`, reqwest for TLS.
async fn open(t: &Target, body: Bytes) -> Result<(u16, ByteStream), HttpError> {
    let path = t.endpoint.path();
    if let Some((authority, base_path)) = crate::plain::split_http_base(&t.base) {
        let authorization = t.key.as_ref().and_then(crate::plain::bearer);
        let headers = crate::plain::json_post_headers(None, authorization.as_ref());
        let (status, stream) = t.plain.post_streaming_parts(authority, &[base_path, "/", path], &headers, body).await?;
        return Ok((status.as_u16(), stream));
    }
    let url = format!("{}/{path}", t.base.trim_end_matches('/'));
    let mut req = t.tls.post(url).header("content-type", "application/json").body(body);
    if let Some(k) = &t.key {
        req = req.bearer_auth(k.expose());
    }
    let resp = req.send().await?;
    let status = resp.status().as_u16();
    // Read through the providers' client, which redacts credentials as it reads.
    Ok((status, crate::client::body_stream(resp)))
}

/// One event as the client gets it: `data: {data}` and a blank line.
fn framed(data: &str) -> Bytes {
    let mut b = bytes::BytesMut::with_capacity(data.len() + 8);
    b.extend_from_slice(b"data: ");
    b.extend_from_slice(data.as_bytes());
    b.extend_from_slice(b"\n\n");
    b.freeze()
}

/// Reads one provider stream to its end, sending every event (framed as sent); after
/// `[DONE]`, reads the body's last bytes so that its connection serves the next stream.
async fn read(t: Arc<Target>, body: Bytes, tx: EventSender) {
    let mut stream = match open(&t, body).await {
        Ok((status, _)) if !(200..300).contains(&status) => {
            tx.send(StreamEvent::Failed { reason: format!("HTTP {status}") });
            return;
        }
        Ok((_, stream)) => stream,
        Err(e) => {
            tx.send(StreamEvent::Failed { reason: e.to_string() });
            return;
        }
    };
    let mut reader = events(&mut stream);
    while let Some(event) = reader.next().await {
        let event = match event {
            Ok(Event::Content { data }) => StreamEvent::Content(framed(&data)),
            Ok(Event::Preamble { data }) => StreamEvent::Preamble(framed(&data)),
            Ok(Event::Done) => {
                tx.send(StreamEvent::Done);
                drop(reader);
                crate::plain::drain(stream).await;
                return;
            }
            Err(failure) => StreamEvent::Failed { reason: failure.to_string() },
        };
        if !tx.send(event) {
            return;
        }
    }
}
