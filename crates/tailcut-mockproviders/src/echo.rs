//! A server that echoes the credentials it was sent, as careless or hostile servers
//! do: in a 401 body, in a 200 reply's error field or stream event, or in the output
//! itself. It answers any path in the shapes tailcut's provider modules read (RunPod's queue
//! API, the job APIs' submit/status/cancel, OpenAI-compatible completions, streamed or
//! not), so a test can check that the credential is found nowhere tailcut writes.

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
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let app = Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| async move {
            answer(mode, &method, &uri, &headers, &body)
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

fn answer(mode: Echo, method: &Method, uri: &Uri, headers: &HeaderMap, body: &Bytes) -> Response {
    let echo = echoed(headers);
    if mode == Echo::Unauthorized {
        return (StatusCode::UNAUTHORIZED, Json(json!({"error": "invalid credentials", "you_sent": echo}))).into_response();
    }
    let path = uri.path();
    if path.ends_with("/completions") {
        let stream = serde_json::from_slice::<Value>(body).ok().and_then(|v| v["stream"].as_bool()).unwrap_or(false);
        let (whole, event) = match mode {
            Echo::InOutput => (
                json!({"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": echo}, "finish_reason": "stop"}]}),
                json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": echo}, "finish_reason": null}]}),
            ),
            _ => (json!({"error": {"message": echo, "type": "auth"}}), json!({"error": {"message": echo, "type": "auth"}})),
        };
        if !stream {
            return Json(whole).into_response();
        }
        // The echo cut into small chunks, so a credential arrives in pieces.
        let text = format!("data: {event}\n\ndata: [DONE]\n\n");
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
        Echo::InOutput => {
            Json(json!({"id": id, "status": "COMPLETED", "output": {"echo": echo}, "executionTime": 5, "delayTime": 1})).into_response()
        }
        _ => Json(json!({"id": id, "status": "FAILED", "error": format!("worker saw {echo}")})).into_response(),
    }
}
