//! The one reader of OpenAI-style server-sent events: a reply body's bytes in, its
//! events out, each classified ([`super::event::classify`]), ending at `[DONE]` or at the
//! first failure. Every consumer reads streams through it: the whole-reply assembler
//! ([`super::assemble`]), the gateway's streaming provider ([`super::stream`]) and the
//! contention agent's HTTP load (`tailcut-contend`).
//!
//! The SSE framing itself (fields, line endings, chunk boundaries, a UTF-8 character cut
//! across two chunks) is `sse-stream`'s, not ours. `benches/sse.rs` compares them in one
//! run (a 200-token stream, each event classified): an earlier run measured the
//! hand-written splitter at 84.9 µs and `sse-stream` at 61.3 µs; a later one, without
//! LTO on a loaded machine, 84.2 µs and 92.6 µs (this reader also owns each payload).
//! Either way about 0.05 µs per event, no reason to keep a parser of our own.

use super::event::{classify, EventKind};
use bytes::Bytes;
use futures::stream::{MapErr, Stream, TryStreamExt};
use sse_stream::SseByteStream;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

/// One event of a stream, as its `data:` payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// It adds text (the first content token is the first such event).
    Content {
        /// The event's `data:` payload (JSON).
        data: String,
    },
    /// Anything else the stream carries (role, empty deltas, usage, finish reasons).
    Preamble {
        /// The event's `data:` payload (JSON).
        data: String,
    },
    /// `[DONE]`: the stream is whole.
    Done,
}

/// Why a stream ended without `[DONE]`. Its text is what a reply or receipt shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// An event that is not JSON (or not UTF-8).
    #[error("malformed stream event")]
    Malformed,
    /// The upstream reported an error in the stream.
    #[error("upstream error: {error}")]
    Upstream {
        /// Its `error` member as JSON text, bounded ([`crate::polling::error_text`]).
        error: String,
    },
    /// The body broke off.
    #[error("stream broke: {cause}")]
    Broke {
        /// The transport's error, as one line (the body's error type is the caller's).
        cause: String,
    },
    /// The body ended before `[DONE]`.
    #[error("stream ended without [DONE]")]
    EndedWithoutDone,
}

/// A body's error as the SSE decoder wants it (an [`std::error::Error`]).
#[derive(Debug, thiserror::Error)]
#[error("{cause}")]
pub struct BodyError {
    /// The body's error, as one line.
    cause: String,
}

/// A body with its errors made [`BodyError`]s.
type Body<S, E> = MapErr<S, fn(E) -> BodyError>;

fn body_error<E: std::fmt::Display>(e: E) -> BodyError {
    BodyError { cause: e.to_string() }
}

/// The events of a stream of body chunks ([`events`]): a [`Stream`] of
/// `Result<Event, Failure>` that ends after [`Event::Done`] or the first [`Failure`].
pub struct Events<S, E>
where
    S: Stream<Item = Result<Bytes, E>>,
{
    sse: SseByteStream<Body<S, E>>,
    ended: bool,
}

/// Reads `body` (chunks as they arrive) as OpenAI-style events. Pass `&mut body` to read
/// what follows `[DONE]` afterwards (a chunked body's terminator, so that its connection
/// can be reused).
pub fn events<S, E>(body: S) -> Events<S, E>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    Events { sse: SseByteStream::new(body.map_err(body_error::<E> as fn(E) -> BodyError)), ended: false }
}

impl<S, E> std::fmt::Debug for Events<S, E>
where
    S: Stream<Item = Result<Bytes, E>>,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events").field("ended", &self.ended).finish_non_exhaustive()
    }
}

impl<S, E> Stream for Events<S, E>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    type Item = Result<Event, Failure>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        loop {
            let item = match ready!(Pin::new(&mut self.sse).poll_next(cx)) {
                // Blocks without data (comments, `event:`/`id:`/`retry:` only) are skipped.
                Some(Ok(sse)) => match sse.data {
                    Some(data) => read_event(data),
                    None => continue,
                },
                Some(Err(sse_stream::Error::Body(e))) => Err(Failure::Broke { cause: e.to_string() }),
                Some(Err(_)) => Err(Failure::Malformed),
                None => Err(Failure::EndedWithoutDone),
            };
            self.ended = !matches!(item, Ok(Event::Content { .. } | Event::Preamble { .. }));
            return Poll::Ready(Some(item));
        }
    }
}

/// One `data:` payload as an event.
fn read_event(data: String) -> Result<Event, Failure> {
    if data.trim_ascii() == "[DONE]" {
        return Ok(Event::Done);
    }
    match classify(&data) {
        EventKind::Content => Ok(Event::Content { data }),
        EventKind::Preamble => Ok(Event::Preamble { data }),
        EventKind::Malformed => Err(Failure::Malformed),
        EventKind::Error => {
            let error = serde_json::from_str::<serde_json::Value>(&data).map(|v| v["error"].clone()).unwrap_or_default();
            Err(Failure::Upstream { error: crate::polling::error_text(&error.to_string()) })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::{FutureExt, StreamExt};

    /// Every item of a body that is always ready (never pending).
    fn all<S: Stream + Unpin>(s: S) -> Vec<S::Item> {
        s.collect::<Vec<_>>().now_or_never().expect("a ready body never waits")
    }

    /// Every item `chunks` read as one body makes.
    fn read(chunks: &[&[u8]]) -> Vec<Result<Event, Failure>> {
        all(events(futures::stream::iter(chunks.iter().map(|c| Ok::<_, String>(Bytes::copy_from_slice(c))).collect::<Vec<_>>())))
    }

    const HI: &str = r#"{"choices":[{"delta":{"content":"hi"}}]}"#;

    #[test]
    fn yields_classified_events_across_chunk_boundaries_and_ends_at_done() {
        let role = r#"{"choices":[{"delta":{"role":"assistant"}}]}"#;
        let text = format!(": comment\nevent: x\n\ndata: {role}\r\n\r\ndata: {HI}\n\ndata:[DONE]\n\ndata: {HI}\n\n");
        let bytes = text.as_bytes();
        for cut in 0..bytes.len() {
            assert_eq!(
                read(&[&bytes[..cut], &bytes[cut..]]),
                vec![Ok(Event::Preamble { data: role.into() }), Ok(Event::Content { data: HI.into() }), Ok(Event::Done)],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn a_character_split_between_chunks_stays_whole() {
        let text = "data: {\"choices\":[{\"text\":\"h\u{e9}\u{1F600}\"}]}\n\n".as_bytes();
        let cut = text.iter().position(|b| *b >= 0x80).unwrap() + 1; // inside a multi-byte char
        let got = read(&[&text[..cut], &text[cut..]]);
        assert_eq!(got[0], Ok(Event::Content { data: "{\"choices\":[{\"text\":\"h\u{e9}\u{1F600}\"}]}".into() }));
    }

    #[test]
    fn failures_end_the_stream_with_their_reason() {
        assert_eq!(read(&[b"data: {not json\n\ndata: [DONE]\n\n"]), vec![Err(Failure::Malformed)]);
        assert_eq!(read(&[b"data: a\xff\n\n"]), vec![Err(Failure::Malformed)], "not UTF-8");
        let upstream = read(&[b"data: {\"error\":{\"message\":\"overloaded\"}}\n\n"]);
        assert_eq!(upstream, vec![Err(Failure::Upstream { error: r#"{"message":"overloaded"}"#.into() })]);
        assert_eq!(upstream[0].as_ref().unwrap_err().to_string(), r#"upstream error: {"message":"overloaded"}"#);
        let ended = read(&[format!("data: {HI}\n\n").as_bytes()]);
        assert_eq!(ended, vec![Ok(Event::Content { data: HI.into() }), Err(Failure::EndedWithoutDone)]);
        let broke = futures::stream::iter(vec![Ok(Bytes::from(format!("data: {HI}\n\n"))), Err("reset".to_string())]);
        let got = all(events(broke));
        assert_eq!(got, vec![Ok(Event::Content { data: HI.into() }), Err(Failure::Broke { cause: "reset".into() })]);
        assert_eq!(got[1].as_ref().unwrap_err().to_string(), "stream broke: reset");
    }

    #[test]
    fn the_body_is_left_to_its_owner_after_done() {
        let mut body =
            futures::stream::iter(vec![Ok::<_, String>(Bytes::from_static(b"data: [DONE]\n\n")), Ok(Bytes::from_static(b"0\r\n"))]);
        let first = all(events(&mut body));
        assert_eq!(first, vec![Ok(Event::Done)]);
        assert_eq!(body.next().now_or_never().flatten(), Some(Ok(Bytes::from_static(b"0\r\n"))));
    }
}
