//! A streamed completion put back together into one whole reply (`tailcut run` with
//! `stream = true`): one consumer of the reader ([`super::sse`]), keeping the content
//! deltas, the finish reason, the usage chunk and the time to the first content token.

use super::sse::{events, Event, Failure};
use super::Endpoint;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde_json::{json, Value};
use tailcut_core::{JobResult, JobState, Payload};
use tokio::time::Instant;

/// What the events of a stream have added up to so far.
#[derive(Debug)]
pub struct StreamAssembly {
    content: String,
    ttft: Option<std::time::Duration>,
    usage: Value,
    finish_reason: Value,
    started: Instant,
}

impl StreamAssembly {
    /// An empty assembly for a request that started at `started`.
    pub fn new(started: Instant) -> StreamAssembly {
        StreamAssembly { content: String::new(), ttft: None, usage: Value::Null, finish_reason: Value::Null, started }
    }

    /// Adds one content or preamble event's payload.
    pub fn add(&mut self, data: &str) -> Result<(), Failure> {
        let v = serde_json::from_str::<Value>(data).map_err(|_| Failure::Malformed)?;
        let piece = super::event::chunk_text(&v).and_then(Value::as_str).unwrap_or("");
        if !piece.is_empty() && self.ttft.is_none() {
            self.ttft = Some(self.started.elapsed());
        }
        self.content.push_str(piece);
        if let Some(f) = super::event::first_choice(&v).and_then(|c| c.get("finish_reason")).filter(|f| !f.is_null()) {
            self.finish_reason = f.clone();
        }
        if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
            self.usage = u.clone();
        }
        Ok(())
    }

    /// The completion (chat or text, by `endpoint`) of a stream that reached `[DONE]`.
    /// `name` prefixes the time-to-first-token metric.
    pub fn finish(self, endpoint: Endpoint, name: &str) -> JobResult {
        let (content, finish_reason, usage) = (self.content, self.finish_reason, self.usage);
        let assembled = match endpoint {
            Endpoint::Chat => {
                json!({"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish_reason}], "usage": usage})
            }
            Endpoint::Completions | Endpoint::Embeddings => {
                json!({"object": "text_completion", "choices": [{"index": 0, "text": content, "finish_reason": finish_reason}], "usage": usage})
            }
        };
        let mut r = JobResult::bare(JobState::Completed, None);
        r.payload =
            Some(Payload { bytes: serde_json::to_vec(&assembled).unwrap_or_default().into(), content_type: "application/json".into() });
        if let Some(t) = self.ttft {
            r.metrics.insert(format!("{name}_ttft_ms"), json!(t.as_secs_f64() * 1000.0));
        }
        r
    }
}

/// Reads `body` to its `[DONE]` and assembles the completion for `endpoint`, or fails
/// with the reader's reason. What follows `[DONE]` is left in `body`.
pub async fn assemble<S, E>(body: &mut S, started: Instant, endpoint: Endpoint, name: &str) -> JobResult
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let mut assembly = StreamAssembly::new(started);
    let mut events = events(body);
    while let Some(event) = events.next().await {
        let added = match event {
            Ok(Event::Content { data } | Event::Preamble { data }) => assembly.add(&data),
            Ok(Event::Done) => return assembly.finish(endpoint, name),
            Err(failure) => Err(failure),
        };
        if let Err(failure) = added {
            return JobResult::bare(JobState::Failed, Some(failure.to_string()));
        }
    }
    JobResult::bare(JobState::Failed, Some(Failure::EndedWithoutDone.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    fn assembled(text: &str, endpoint: Endpoint) -> JobResult {
        let mut body = futures::stream::iter(vec![Ok::<_, String>(Bytes::copy_from_slice(text.as_bytes()))]);
        assemble(&mut body, Instant::now(), endpoint, "up").now_or_never().expect("a ready body never waits")
    }

    #[test]
    fn a_stream_becomes_one_completion_with_its_finish_reason_usage_and_ttft() {
        let text = concat!(
            "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"he\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"llo\"},\"finish_reason\":\"stop\"}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"total_tokens\":3}}\n\n",
            "data: [DONE]\n\n"
        );
        let r = assembled(text, Endpoint::Chat);
        assert_eq!(r.state, JobState::Completed, "{:?}", r.error);
        let v: Value = serde_json::from_slice(&r.payload.unwrap().bytes).unwrap();
        assert_eq!(v["choices"][0]["message"]["content"], "hello");
        assert_eq!(v["choices"][0]["finish_reason"], "stop");
        assert_eq!(v["usage"]["total_tokens"], 3);
        assert!(r.metrics.contains_key("up_ttft_ms"));
    }

    #[test]
    fn a_stream_that_fails_or_stops_early_is_a_failure_with_the_readers_reason() {
        let cut = assembled("data: {\"choices\":[{\"text\":\"x\"}]}\n\n", Endpoint::Completions);
        assert_eq!((cut.state, cut.error.as_deref()), (JobState::Failed, Some("stream ended without [DONE]")));
        let error = assembled("data: {\"error\":\"busy\"}\n\n", Endpoint::Chat);
        assert_eq!(error.error.as_deref(), Some("upstream error: \"busy\""));
    }
}
