//! The HTTP agent: an OpenAI-compatible endpoint driven at a fixed request rate,
//! recording each request's latency, time to first token and time per output token (for
//! vLLM pods sharing a GPU). Requests follow an open-loop schedule and latency is measured from each
//! request's *scheduled* send time, so a slow server cannot hide its queueing
//! (no coordinated omission).

use crate::agent::{sleep_until_unix_ms, AgentError, AgentSpec, BadAgent, Window};
use bytes::Bytes;
use futures::{FutureExt, StreamExt};
use std::io::Read;
use std::time::{Duration, Instant};
use tailcut_providers::openai::sse::{events, Event, Failure};

/// What the HTTP agent measured.
#[derive(Debug, Clone, Default)]
pub struct HttpSamples {
    /// End-to-end latency per successful request, ns.
    pub latency_ns: Vec<u64>,
    /// Time to the first content token per successful request, ns.
    pub ttft_ns: Vec<u64>,
    /// Time per output token per successful request with at least two content chunks, ns:
    /// (latency − TTFT) / (chunks − 1), each streamed content chunk counted as a token.
    pub tpot_ns: Vec<u64>,
    /// Window covered, ns.
    pub window_ns: u64,
    /// Failed requests.
    pub errors: u64,
}

/// The body's chunks as the one SSE reader takes them. The reads block, so the stream
/// is never pending: each `next()` is ready at once ([`next_now`]).
fn chunks(mut body: impl Read) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Unpin {
    futures::stream::iter(std::iter::from_fn(move || {
        let mut buf = vec![0u8; 8192];
        match body.read(&mut buf) {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some(Ok(Bytes::from(buf)))
            }
            Err(e) => Some(Err(e)),
        }
    }))
}

/// The next item of a stream over blocking reads (never pending).
fn next_now<S: futures::Stream + Unpin>(s: &mut S) -> Option<S::Item> {
    s.next().now_or_never().flatten()
}

/// Why one request of the http agent counts as an error.
#[derive(Debug, thiserror::Error)]
enum RequestError {
    /// The request failed or the server answered with an error status.
    #[error("{0}")]
    Send(Box<ureq::Error>),
    /// The stream broke or carried an error.
    #[error("{0}")]
    Stream(Failure),
}

/// One streamed chat completion: (latency, ttft) from `scheduled`, and the number of
/// content chunks.
fn one(agent: &ureq::Agent, url: &str, model: &str, scheduled: Instant) -> Result<(Duration, Duration, u64), RequestError> {
    let body = serde_json::json!({
        "model": model,
        "messages": [{"role": "user", "content": "Reply with one short sentence."}],
        "max_tokens": 32,
        "stream": true,
    });
    let resp = agent
        .post(url)
        .set("content-type", "application/json")
        .send_string(&body.to_string())
        .map_err(|e| RequestError::Send(Box::new(e)))?;
    let mut ttft = None;
    let mut chunks = 0u64;
    let mut events = events(self::chunks(resp.into_reader()));
    loop {
        match next_now(&mut events) {
            Some(Ok(Event::Content { .. })) => {
                chunks += 1;
                if ttft.is_none() {
                    ttft = Some(scheduled.elapsed());
                }
            }
            Some(Ok(Event::Preamble { .. })) => {}
            // A server that closes without `[DONE]` still answered.
            Some(Ok(Event::Done) | Err(Failure::EndedWithoutDone)) | None => break,
            Some(Err(e)) => return Err(RequestError::Stream(e)),
        }
    }
    let total = scheduled.elapsed();
    Ok((total, ttft.unwrap_or(total), chunks))
}

/// Drives the endpoint for the window.
pub fn run(spec: &AgentSpec, window: &Window) -> Result<HttpSamples, AgentError> {
    let base = spec.url.as_deref().ok_or_else(|| AgentError::from(BadAgent::NoUrl))?;
    if !(spec.rate_per_s > 0.0 && spec.rate_per_s.is_finite()) {
        return Err(BadAgent::Rate.into());
    }
    let url = format!("{}/v1/chat/completions", base.trim_end_matches('/'));
    let model = spec.model.clone().unwrap_or_else(|| "default".into());
    let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(120)).build();
    sleep_until_unix_ms(window.start_at_unix_ms);
    let interval = Duration::from_secs_f64(1.0 / spec.rate_per_s);
    let warm_end = Instant::now() + window.warmup;
    let mut next = Instant::now();
    while next < warm_end {
        let _ = one(&agent, &url, &model, next);
        next += interval;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    let start = Instant::now();
    let end = start + window.duration;
    let mut out = HttpSamples::default();
    let mut scheduled = start;
    let cap = window.max_iterations.unwrap_or(u64::MAX);
    let mut sent = 0u64;
    while scheduled < end && sent < cap {
        sent += 1;
        if let Some(wait) = scheduled.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        match one(&agent, &url, &model, scheduled) {
            Ok((total, ttft, chunks)) => {
                out.latency_ns.push(total.as_nanos() as u64);
                out.ttft_ns.push(ttft.as_nanos() as u64);
                if chunks >= 2 {
                    out.tpot_ns.push((total - ttft).as_nanos() as u64 / (chunks - 1));
                }
            }
            Err(_) => out.errors += 1,
        }
        scheduled += interval;
    }
    out.window_ns = start.elapsed().as_nanos() as u64;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// Reads one whole request (head and `content-length` body): a server that closes
    /// with request bytes unread resets the connection, and the client sees an error.
    fn read_request(s: &mut std::net::TcpStream) {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
                let body_len =
                    head.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|v| v.trim().parse::<usize>().ok()).unwrap_or(0);
                if got.len() >= end + 4 + body_len {
                    return;
                }
            }
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    }

    /// A tiny OpenAI-compatible streaming server on 127.0.0.1 that pauses before its
    /// first token.
    fn serve(first_token_delay: Duration) -> String {
        serve_tokens(first_token_delay, 1, Duration::ZERO)
    }

    /// The same server streaming `tokens` content chunks, `gap` apart.
    fn serve_tokens(first_token_delay: Duration, tokens: usize, gap: Duration) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { continue };
                read_request(&mut s);
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n");
                let _ = s.write_all(b"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n");
                let _ = s.flush();
                std::thread::sleep(first_token_delay);
                for t in 0..tokens {
                    if t > 0 {
                        std::thread::sleep(gap);
                    }
                    let _ = s.write_all(b"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n");
                    let _ = s.flush();
                }
                let _ = s.write_all(b"data: [DONE]\n\n");
            }
        });
        format!("http://{addr}")
    }

    #[test]
    fn measures_ttft_after_the_role_chunk() {
        let url = serve(Duration::from_millis(30));
        let spec = AgentSpec { url: Some(url), rate_per_s: 20.0, ..AgentSpec::new(crate::agent::AgentKind::Http) };
        let w = Window { start_at_unix_ms: 0, warmup: Duration::ZERO, duration: Duration::from_millis(300), max_iterations: None };
        let r = run(&spec, &w).unwrap();
        assert!(r.latency_ns.len() >= 3, "{r:?}");
        assert_eq!(r.errors, 0);
        assert!(r.ttft_ns.iter().all(|&t| t >= 30_000_000), "{:?}", r.ttft_ns);
    }

    #[test]
    fn measures_time_per_output_token() {
        let url = serve_tokens(Duration::from_millis(5), 5, Duration::from_millis(10));
        let spec = AgentSpec { url: Some(url), rate_per_s: 10.0, ..AgentSpec::new(crate::agent::AgentKind::Http) };
        let w = Window { start_at_unix_ms: 0, warmup: Duration::ZERO, duration: Duration::from_secs(60), max_iterations: Some(3) };
        let r = run(&spec, &w).unwrap();
        assert_eq!(r.tpot_ns.len(), 3, "{r:?}");
        // Four 10 ms gaps between five tokens: at least 10 ms per output token.
        assert!(r.tpot_ns.iter().all(|&t| t >= 10_000_000), "{:?}", r.tpot_ns);
        let single = serve(Duration::from_millis(1));
        let spec = AgentSpec { url: Some(single), rate_per_s: 10.0, ..AgentSpec::new(crate::agent::AgentKind::Http) };
        assert!(run(&spec, &w).unwrap().tpot_ns.is_empty(), "one token has no time per output token");
    }

    #[test]
    fn missing_url_is_an_error() {
        let spec = AgentSpec::new(crate::agent::AgentKind::Http);
        let w = Window { start_at_unix_ms: 0, warmup: Duration::ZERO, duration: Duration::from_millis(1), max_iterations: None };
        assert!(run(&spec, &w).unwrap_err().to_string().contains("--url"));
    }
}
