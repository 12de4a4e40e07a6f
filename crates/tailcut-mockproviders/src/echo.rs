//! A server that echoes the credentials it was sent, as careless or hostile servers
//! do: in a 401 body, in a 200 reply's error field or stream event, or in the output
//! itself. It answers any path in the shapes tailcut's provider modules read (RunPod's queue
//! API, the job APIs' submit/status/cancel, OpenAI-compatible completions, streamed or
//! not), so a test can check that the credential is found nowhere tailcut writes.
//!
//! The echo can come JSON-escaped ([`Escape`]) the ways real encoders write strings:
//! `/` as `\/` (PHP's default), every character as `\uXXXX` in lower- or upper-case
//! hex, or a seeded mix of all of them, so a test can check that what a tenant's JSON
//! parser decodes holds no credential either.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::net::SocketAddr;

/// Where the echo goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Echo {
    /// Every call is refused: `401` with the request's headers in the body.
    Unauthorized,
    /// Calls succeed (`200`), and the headers come back in an error: a job's `FAILED`
    /// status `error`, a completion's `error` object, a stream's error event.
    InError,
    /// Calls succeed and the headers are the output: a completed job's `output`, a
    /// completion's content, a streamed delta.
    InOutput,
}

/// How the echoed text is written inside the JSON strings of a reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Escape {
    /// As serde_json writes it: only what JSON requires is escaped.
    Plain,
    /// `/` as `\/`, as PHP's `json_encode` does by default.
    Solidus,
    /// Every character as `\uXXXX` (surrogate pairs beyond the BMP), lower-case hex.
    UnicodeLower,
    /// Every character as `\uXXXX`, upper-case hex.
    UnicodeUpper,
    /// Each character, by a generator seeded with this, as itself, `\/` for `/`, or
    /// `\uXXXX` in either case.
    Mixed(u64),
}

impl Escape {
    /// Every form, with one seed for the mix.
    pub const ALL: [Escape; 5] = [Escape::Plain, Escape::Solidus, Escape::UnicodeLower, Escape::UnicodeUpper, Escape::Mixed(7)];

    /// `text` as the content of a JSON string (no quotes), written this way.
    pub fn json_string(self, text: &str) -> String {
        use std::fmt::Write;
        let mut seed = match self {
            Escape::Mixed(s) => s | 1,
            _ => 0,
        };
        let mut out = String::with_capacity(text.len() * 2);
        for c in text.chars() {
            // xorshift64: a different form for each character of the mix.
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let form = match self {
                Escape::Plain => 0,
                Escape::Solidus => 1,
                Escape::UnicodeLower => 2,
                Escape::UnicodeUpper => 3,
                Escape::Mixed(_) => seed % 4,
            };
            match (c, form) {
                ('"' | '\\' | '\u{0}'..='\u{1f}', 0 | 1) => {
                    let quoted = serde_json::to_string(&c.to_string()).unwrap_or_default();
                    out.push_str(&quoted[1..quoted.len() - 1]);
                }
                ('/', 1) => out.push_str("\\/"),
                (c, 0 | 1) => out.push(c),
                (c, form) => {
                    for unit in c.encode_utf16(&mut [0u16; 2]) {
                        let _ = if form == 2 { write!(out, "\\u{unit:04x}") } else { write!(out, "\\u{unit:04X}") };
                    }
                }
            }
        }
        out
    }
}

/// A running echo server.
#[derive(Debug)]
pub struct EchoServer {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl EchoServer {
    /// Starts on `127.0.0.1:0`.
    pub async fn start(mode: Echo) -> std::io::Result<EchoServer> {
        EchoServer::start_escaped(mode, Escape::Plain).await
    }

    /// Starts on `127.0.0.1:0`, writing the echo escaped as `escape` says.
    pub async fn start_escaped(mode: Echo, escape: Escape) -> std::io::Result<EchoServer> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let app = Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| async move {
            answer(mode, escape, &method, &uri, &headers, &body)
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(EchoServer { addr, task })
    }

    /// `http://127.0.0.1:port`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// Every request header as `name: value` lines.
fn echoed(headers: &HeaderMap) -> String {
    headers.iter().map(|(k, v)| format!("{k}: {}", String::from_utf8_lossy(v.as_bytes()))).collect::<Vec<_>>().join("\n")
}

/// Where the echo goes in a reply before it is written: replaced by [`Escape::json_string`].
const ECHO: &str = "\u{1}ECHO\u{1}";

/// `v` as JSON text, with the echo (at [`ECHO`] in its strings) written as `escape` says.
fn written(v: &Value, echo: &str, escape: Escape) -> String {
    v.to_string().replace(r"\u0001ECHO\u0001", &escape.json_string(echo))
}

/// A JSON reply of `v`, the echo written as `escape` says.
fn reply(status: StatusCode, v: &Value, echo: &str, escape: Escape) -> Response {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(written(v, echo, escape)))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

fn answer(mode: Echo, escape: Escape, method: &Method, uri: &Uri, headers: &HeaderMap, body: &Bytes) -> Response {
    let echo = echoed(headers);
    if mode == Echo::Unauthorized {
        return reply(StatusCode::UNAUTHORIZED, &json!({"error": "invalid credentials", "you_sent": ECHO}), &echo, escape);
    }
    let path = uri.path();
    if path.ends_with("/completions") {
        let stream = serde_json::from_slice::<Value>(body).ok().and_then(|v| v["stream"].as_bool()).unwrap_or(false);
        let (whole, event) = match mode {
            Echo::InOutput => (
                json!({"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": ECHO}, "finish_reason": "stop"}]}),
                json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": ECHO}, "finish_reason": null}]}),
            ),
            _ => (json!({"error": {"message": ECHO, "type": "auth"}}), json!({"error": {"message": ECHO, "type": "auth"}})),
        };
        if !stream {
            return reply(StatusCode::OK, &whole, &echo, escape);
        }
        // The echo cut into small chunks, so a credential (and its escapes) arrives in pieces.
        let text = format!("data: {}\n\ndata: [DONE]\n\n", written(&event, &echo, escape));
        let chunks: Vec<Result<Bytes, std::io::Error>> = text.as_bytes().chunks(7).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
        return Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from_stream(futures::stream::iter(chunks)))
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response());
    }
    let id = "echo-job-1";
    if path.contains("/cancel") || method == Method::DELETE {
        return Json(json!({"id": id, "status": "CANCELLED", "canceled": true})).into_response();
    }
    if method == Method::POST {
        return Json(json!({"id": id, "status": "IN_QUEUE", "request_id": id, "call_id": id})).into_response();
    }
    match mode {
        Echo::InOutput => reply(
            StatusCode::OK,
            &json!({"id": id, "status": "COMPLETED", "output": {"echo": ECHO}, "executionTime": 5, "delayTime": 1}),
            &echo,
            escape,
        ),
        _ => reply(StatusCode::OK, &json!({"id": id, "status": "FAILED", "error": format!("worker saw {ECHO}")}), &echo, escape),
    }
}
