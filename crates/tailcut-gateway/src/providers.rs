//! The OpenAI-compatible providers behind an `openai` route, as the engine talks to them:
//! [`whole_reply`] builds the provider for whole (non-streamed) replies, and
//! [`OpenAiStream`] is the provider of streamed replies, whose job is a
//! [`StreamJob`]: its result is the first content event, and the winner's stream is
//! handed over to the response body ([`tailcut_core::stream`]).
//!
//! Whole-reply providers come from the provider module's own builder
//! ([`Settings::provider`]); the streamed one shares its settings.

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use serde_json::{json, Value};
use std::sync::Arc;
use tailcut_core::receipt::Evidence;
use tailcut_core::stream::{EventSender, StreamEvent, StreamJob};
use tailcut_core::{Capabilities, Job, JobRequest, ProviderApi, ProviderError};
use tailcut_providers::openai::{Endpoint, OpenAi, Reader, Settings};
use tailcut_providers::plain::{ByteStream, PlainHttp};
use tailcut_providers::sse::{classify, EventKind};
use tailcut_providers::{HttpClient, Secret};

/// An OpenAI-compatible provider for whole replies. Its replies are judged by a JSON
/// validator requiring `choices`/`data`, which also rejects non-JSON, so the provider
/// module's own syntax check would only scan each reply twice.
pub(crate) fn whole_reply(name: &str, a: &Settings, endpoint: Endpoint, http: HttpClient) -> Arc<OpenAi> {
    Arc::new(a.provider(name, endpoint, Reader::Gateway, http))
}

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
pub(crate) struct OpenAiStream(Arc<Target>);

impl OpenAiStream {
    /// The streaming provider `name` for `endpoint`, sharing `http`'s plain-HTTP pools
    /// and the TLS client `tls`.
    pub(crate) fn new(name: &str, a: &Settings, endpoint: Endpoint, http: &HttpClient, tls: reqwest::Client) -> OpenAiStream {
        OpenAiStream(Arc::new(Target {
            name: name.into(),
            base: a.base.clone(),
            model: a.model.clone(),
            key: a.key_env.as_deref().and_then(Secret::from_env),
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

    /// Starts the stream and returns at once: opening it is part of the attempt.
    async fn submit(&self, request: &JobRequest) -> Result<Arc<dyn Job>, ProviderError> {
        let body = body_for(&self.0, request);
        let target = self.0.clone();
        Ok(Arc::new(StreamJob::start(&self.0.name, request, move |tx| read(target, body, tx))))
    }
}

/// The request body a provider gets: the client's bytes as sent, unless the provider
/// names its own model (the body is then rewritten from the client's document).
fn body_for(t: &Target, request: &JobRequest) -> Bytes {
    match (&t.model, request.raw()) {
        (None, Some(raw)) => raw.clone(),
        (model, _) => {
            let mut body = request.input().clone();
            if let Some(m) = model {
                body["model"] = json!(m);
            }
            serde_json::to_vec(&body).unwrap_or_default().into()
        }
    }
}

/// Opens the stream: the lean plain-HTTP client for `http://`, reqwest for TLS.
async fn open(t: &Target, body: Bytes) -> Result<(u16, ByteStream), String> {
    let path = t.endpoint.path();
    if let Some((authority, base_path)) = tailcut_providers::plain::split_http_base(&t.base) {
        let authorization = t.key.as_ref().and_then(tailcut_providers::plain::bearer);
        let headers = tailcut_providers::plain::json_post_headers(None, authorization.as_ref());
        let (status, stream) = t.plain.post_streaming_parts(authority, &[base_path, "/", path], &headers, body).await?;
        return Ok((status.as_u16(), stream));
    }
    let url = format!("{}/{path}", t.base.trim_end_matches('/'));
    let mut req = t.tls.post(url).header("content-type", "application/json").body(body);
    if let Some(k) = &t.key {
        req = req.bearer_auth(k.expose());
    }
    let resp = req.send().await.map_err(tailcut_providers::client::describe)?;
    let status = resp.status().as_u16();
    // Read through the providers' client, which redacts credentials as it reads.
    Ok((status, tailcut_providers::client::body_stream(resp)))
}

/// One event as the client gets it: `data: {data}` and a blank line.
fn framed(data: &str) -> Bytes {
    let mut b = bytes::BytesMut::with_capacity(data.len() + 8);
    b.extend_from_slice(b"data: ");
    b.extend_from_slice(data.as_bytes());
    b.extend_from_slice(b"\n\n");
    b.freeze()
}

/// Reads one provider stream to its end, sending every event (framed as sent).
async fn read(t: Arc<Target>, body: Bytes, tx: EventSender) {
    let mut stream = match open(&t, body).await {
        Ok((status, _)) if !(200..300).contains(&status) => {
            tx.send(StreamEvent::Failed(format!("HTTP {status}")));
            return;
        }
        Ok((_, stream)) => stream,
        Err(e) => {
            tx.send(StreamEvent::Failed(e));
            return;
        }
    };
    let mut sse = tailcut_providers::sse::SseData::default();
    while let Some(chunk) = stream.next().await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                tx.send(StreamEvent::Failed(format!("stream broke: {e}")));
                return;
            }
        };
        let mut done = false;
        let mut stop = false;
        sse.each(&chunk, |data| {
            if data == "[DONE]" {
                tx.send(StreamEvent::Done);
                done = true;
                return false;
            }
            let event = match classify(data) {
                EventKind::Content => StreamEvent::Content(framed(data)),
                EventKind::Preamble => StreamEvent::Preamble(framed(data)),
                EventKind::Malformed => {
                    tx.send(StreamEvent::Failed("malformed stream event".into()));
                    stop = true;
                    return false;
                }
                EventKind::Error => {
                    let error = serde_json::from_str::<Value>(data).map(|v| v["error"].clone()).unwrap_or_default();
                    tx.send(StreamEvent::Failed(tailcut_providers::polling::error_text(&format!("upstream error: {error}"))));
                    stop = true;
                    return false;
                }
            };
            stop = !tx.send(event);
            !stop
        });
        if done {
            tailcut_providers::plain::drain(stream).await;
            return;
        }
        if stop {
            return;
        }
    }
    tx.send(StreamEvent::Failed("stream ended without [DONE]".into()));
}
