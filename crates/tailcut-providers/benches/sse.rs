//! The SSE reader against the hand-written splitter it replaced, in the same run: one
//! streamed completion (a role chunk, 200 content chunks, a usage chunk, `[DONE]`) cut
//! into TCP-sized pieces, each event classified as the gateway does. `sse-stream` stays
//! the reader unless the hand-written splitter is clearly faster here.
//!
//! Run: `cargo bench -p tailcut-providers --bench sse`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use futures::{FutureExt, StreamExt};
use tailcut_providers::openai::event::{classify, EventKind};
use tailcut_providers::openai::sse::{events, Event};

/// One streamed chat completion, in pieces of at most 1460 bytes.
fn stream() -> Vec<Bytes> {
    let mut text = String::from("data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n");
    for i in 0..200 {
        text.push_str(&format!(
            "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"token{i} \"}},\"finish_reason\":null}}]}}\n\n"
        ));
    }
    text.push_str("data: {\"choices\":[],\"usage\":{\"total_tokens\":210}}\n\ndata: [DONE]\n\n");
    text.as_bytes().chunks(1460).map(Bytes::copy_from_slice).collect()
}

/// The hand-written splitter the reader replaced (`data:` lines split on bytes), kept
/// here only as the benchmark's reference.
#[derive(Default)]
struct HandWritten {
    pending: Vec<u8>,
}

impl HandWritten {
    fn each(&mut self, chunk: &[u8], mut f: impl FnMut(&str) -> bool) {
        self.pending.extend_from_slice(chunk);
        let mut start = 0;
        while let Some(end) = self.pending[start..].iter().position(|b| *b == b'\n').map(|i| start + i) {
            let line = self.pending[start..end].trim_ascii();
            start = end + 1;
            if let Some(data) = line.strip_prefix(b"data:") {
                let data = data.trim_ascii();
                let more = match std::str::from_utf8(data) {
                    Ok(text) => f(text),
                    Err(_) => f(&String::from_utf8_lossy(data)),
                };
                if !more {
                    self.pending.clear();
                    return;
                }
            }
        }
        self.pending.drain(..start);
    }
}

fn hand_written(chunks: &[Bytes]) -> usize {
    let mut sse = HandWritten::default();
    let mut content = 0;
    for c in chunks {
        sse.each(c, |data| {
            if data == "[DONE]" {
                return false;
            }
            content += usize::from(classify(data) == EventKind::Content);
            true
        });
    }
    content
}

fn reader(chunks: &[Bytes]) -> usize {
    let body = futures::stream::iter(chunks.iter().cloned().map(Ok::<_, String>));
    let all = events(body).collect::<Vec<_>>().now_or_never().unwrap_or_default();
    all.iter().filter(|e| matches!(e, Ok(Event::Content { .. }))).count()
}

fn bench(c: &mut Criterion) {
    let chunks = stream();
    assert_eq!(hand_written(&chunks), 200);
    assert_eq!(reader(&chunks), 200);
    let mut g = c.benchmark_group("sse_stream_of_200_tokens");
    g.throughput(Throughput::Bytes(chunks.iter().map(Bytes::len).sum::<usize>() as u64));
    g.bench_function("hand_written", |b| b.iter(|| hand_written(std::hint::black_box(&chunks))));
    g.bench_function("sse_stream_reader", |b| b.iter(|| reader(std::hint::black_box(&chunks))));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
