//! Redaction cost: what scanning a provider's reply for the registered secrets adds to
//! every whole reply and every streamed chunk (`tailcut_providers::redact`).
//!
//! Run: `cargo bench -p tailcut-providers --bench redact`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tailcut_providers::redact::{self, Redactor};

/// Three provider keys, as a gateway with three upstreams holds.
const KEYS: [&str; 3] =
    ["sk-proj-Bench/7f3+a9=Z_0123456789abcdef", "rpa_BENCHKEY0123456789ABCDEFGHIJ", "r8_benchtoken_0123456789abcdefghij"];

/// A chat completion of about `len` bytes whose content has no JSON escapes.
fn plain_reply(len: usize) -> Bytes {
    let words = "the quick brown fox jumps over the lazy dog ".repeat(len / 44 + 1);
    Bytes::from(format!(
        r#"{{"id":"chatcmpl-1","object":"chat.completion","choices":[{{"index":0,"message":{{"role":"assistant","content":"{}"}},"finish_reason":"stop"}}]}}"#,
        &words[..len]
    ))
}

/// The same with the escapes an LLM's text carries: newlines and quotes.
fn escaped_reply(len: usize) -> Bytes {
    let words = r#"line one\n\"quoted\" words, then more text\n"#.repeat(len / 44 + 1);
    Bytes::from(format!(
        r#"{{"id":"chatcmpl-1","object":"chat.completion","choices":[{{"index":0,"message":{{"role":"assistant","content":"{}"}},"finish_reason":"stop"}}]}}"#,
        &words[..len]
    ))
}

/// The same as PHP writes it: every `/` escaped (`\/`), which a key holding `/` makes
/// worth decoding: the reply takes the decoding path.
fn solidus_reply(len: usize) -> Bytes {
    let words = r#"see https:\/\/example.com\/a\/b for more text "#.repeat(len / 40 + 1);
    Bytes::from(format!(
        r#"{{"id":"chatcmpl-1","object":"chat.completion","choices":[{{"index":0,"message":{{"role":"assistant","content":"{}"}},"finish_reason":"stop"}}]}}"#,
        &words[..len]
    ))
}

/// A streamed completion: `n` events of one token each (with an escaped newline now and
/// then, or with `escaped_slash` an escaped `/`, which takes the decoding path).
fn sse_chunks(n: usize, escaped_slash: bool) -> Vec<Bytes> {
    (0..n)
        .map(|i| {
            let token = match (i % 8, escaped_slash) {
                (7, false) => "\\n",
                (7, true) => "a\\/b",
                _ => "token ",
            };
            Bytes::from(format!(
                "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{token}\"}},\"finish_reason\":null}}]}}\n\n"
            ))
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let r = Redactor::new(KEYS);
    for k in KEYS {
        redact::register(k);
    }
    let mut g = c.benchmark_group("redact");
    for (name, body) in [
        ("whole_4k_plain", plain_reply(4096)),
        ("whole_4k_escaped", escaped_reply(4096)),
        ("whole_4k_solidus_escaped", solidus_reply(4096)),
        ("whole_4k_echo", Bytes::from(format!("{}{}", String::from_utf8_lossy(&plain_reply(4000)), KEYS[0]))),
    ] {
        g.throughput(Throughput::Bytes(body.len() as u64));
        g.bench_function(name, |b| b.iter(|| r.bytes(std::hint::black_box(body.clone()))));
    }
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap_or_else(|e| panic!("runtime: {e}"));
    for (name, escaped_slash) in [("stream_64_events", false), ("stream_64_events_solidus_escaped", true)] {
        let chunks = sse_chunks(64, escaped_slash);
        g.throughput(Throughput::Bytes(chunks.iter().map(|c| c.len() as u64).sum()));
        g.bench_function(name, |b| {
            b.iter(|| {
                let items: Vec<Result<Bytes, ()>> = chunks.iter().cloned().map(Ok).collect();
                let s = redact::stream(Box::pin(futures::stream::iter(items)));
                rt.block_on(futures::StreamExt::fold(s, 0usize, |n, c| async move { n + c.map_or(0, |c| c.len()) }))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
