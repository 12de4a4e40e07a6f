//! OpenAI-compatible `/v1/chat/completions`, `/v1/completions`, `/v1/models`.

use super::shared::*;

pub(super) fn router() -> Router<Arc<State>> {
    Router::new().route("/v1/chat/completions", post(openai_chat)).route("/v1/completions", post(openai_completions)).route(
        "/v1/models",
        get(|| async { Json(json!({"object": "list", "data": [{"id": "mock-model", "object": "model", "owned_by": "mock"}]})) }),
    )
}

fn chat_chunk(id: &str, delta: Value, finish: Option<&str>) -> String {
    let v = json!({"id": id, "object": "chat.completion.chunk", "created": 1_700_000_000, "model": "mock-model",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]});
    format!("data: {v}\n\n")
}

async fn openai_chat(S(st): St, Json(req): Json<Value>) -> Response {
    if req.get("messages").and_then(Value::as_array).is_none() {
        return body(
            StatusCode::BAD_REQUEST,
            json!({"error": {"message": "messages is required", "type": "BadRequestError", "param": null, "code": 400}}),
        );
    }
    if let Some(r) = interfere(&st).await {
        return r;
    }
    let id = st.create(req.clone());
    let b = st.behaviour();
    let stream = req.get("stream").and_then(Value::as_bool).unwrap_or(false);
    if !stream {
        let mut guard = DisconnectGuard { state: st.clone(), id: id.clone(), done: false };
        if let Some(r) = work(&st, b.queue + b.run).await {
            return r;
        }
        guard.done = true;
        if b.malformed {
            return raw(StatusCode::OK, "{\"id\": \"chatcmpl-x\", \"choices\": [");
        }
        let text: Vec<String> = (0..b.tokens).map(|i| format!("tok{i}")).collect();
        return body(
            StatusCode::OK,
            json!({"id": format!("chatcmpl-{id}"), "object": "chat.completion", "created": 1_700_000_000, "model": "mock-model",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text.join(" ")}, "logprobs": null, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": b.tokens, "total_tokens": 5 + b.tokens}}),
        );
    }
    let include_usage = req.pointer("/stream_options/include_usage").and_then(Value::as_bool).unwrap_or(false);
    let st2 = st.clone();
    let s = async_stream(st2, id, b, include_usage);
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(s))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

fn async_stream(
    st: Arc<State>,
    id: String,
    b: crate::engine::Behaviour,
    include_usage: bool,
) -> impl futures::Stream<Item = Result<bytes::Bytes, std::io::Error>> {
    let cid = format!("chatcmpl-{id}");
    let guard = DisconnectGuard { state: st, id, done: false };
    futures::stream::unfold((0usize, guard), move |(step, mut guard)| {
        let cid = cid.clone();
        let b = b.clone();
        async move {
            let n = b.tokens;
            let per_token = if b.run.is_zero() { b.token_interval } else { b.run / n.max(1) as u32 };
            if guard.state.vanished.load(Ordering::SeqCst) {
                return Some((Err(std::io::Error::other("server vanished")), (usize::MAX, guard)));
            }
            if step == usize::MAX {
                return None;
            }
            let out = if step == 0 {
                tokio::time::sleep(b.queue).await;
                chat_chunk(&cid, json!({"role": "assistant", "content": ""}), None)
            } else if step <= n {
                tokio::select! {
                    () = tokio::time::sleep(per_token) => {}
                    () = guard.state.vanishing() => return Some((Err(std::io::Error::other("server vanished")), (usize::MAX, guard))),
                }
                if b.malformed {
                    "data: {\"choices\": [{\"delta\": \n\n".to_string()
                } else {
                    chat_chunk(&cid, json!({"content": format!("tok{} ", step - 1)}), None)
                }
            } else if step == n + 1 {
                chat_chunk(&cid, json!({}), Some("stop"))
            } else if step == n + 2 && include_usage {
                let v = json!({"id": cid, "object": "chat.completion.chunk", "created": 1_700_000_000, "model": "mock-model", "choices": [],
                    "usage": {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": 5 + n}});
                format!("data: {v}\n\n")
            } else if step <= n + 3 {
                guard.done = true;
                "data: [DONE]\n\n".to_string()
            } else {
                return None;
            };
            let next = if step == n + 1 && !include_usage { n + 3 } else { step + 1 };
            Some((Ok(bytes::Bytes::from(out)), (next, guard)))
        }
    })
}

async fn openai_completions(S(st): St, Json(req): Json<Value>) -> Response {
    let id = st.create(req.clone());
    let b = st.behaviour();
    let mut guard = DisconnectGuard { state: st.clone(), id: id.clone(), done: false };
    if let Some(r) = work(&st, b.queue + b.run).await {
        return r;
    }
    guard.done = true;
    body(
        StatusCode::OK,
        json!({"id": format!("cmpl-{id}"), "object": "text_completion", "created": 1_700_000_000, "model": "mock-model",
            "choices": [{"index": 0, "text": "tok0 tok1", "logprobs": null, "finish_reason": "stop"}], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}),
    )
}
