//! Server-sent events from a byte stream: the payloads of `data:` lines, split on bytes
//! so that a UTF-8 character cut across two network chunks arrives whole.

/// Buffers an event stream's bytes and yields its `data:` payloads line by line.
#[derive(Debug, Default)]
pub struct SseData {
    pending: Vec<u8>,
}

impl SseData {
    /// Adds a chunk; returns the trimmed payloads of the `data:` lines it completed (other
    /// lines — comments, `event:`, blank separators — are skipped). An unfinished line
    /// waits for the next chunk.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        let mut payloads = Vec::new();
        self.each(chunk, |data| {
            payloads.push(data.to_string());
            true
        });
        payloads
    }

    /// [`SseData::push`] without collecting: hands each payload to `f` as it is found
    /// (invalid UTF-8 replaced, as `push` does), until `f` returns `false` (the rest of
    /// the chunk is then dropped: the caller is done with the stream).
    pub fn each(&mut self, chunk: &[u8], mut f: impl FnMut(&str) -> bool) {
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

#[cfg(test)]
mod tests {
    use super::SseData;

    #[test]
    fn yields_data_payloads_across_chunk_boundaries() {
        let mut sse = SseData::default();
        assert!(sse.push(b": comment\nevent: x\ndata: {\"a\"").is_empty());
        assert_eq!(sse.push(b":1}\r\n\r\ndata:[DONE]\n"), vec!["{\"a\":1}", "[DONE]"]);
    }

    #[test]
    fn a_character_split_between_chunks_stays_whole() {
        let text = "data: {\"content\":\"h\u{e9}\u{1F600}\"}\n\n".as_bytes();
        let cut = text.iter().position(|b| *b >= 0x80).unwrap() + 1; // inside a multi-byte char
        let mut sse = SseData::default();
        let mut got = sse.push(&text[..cut]);
        got.extend(sse.push(&text[cut..]));
        assert_eq!(got, vec!["{\"content\":\"h\u{e9}\u{1F600}\"}"]);
    }

    #[test]
    fn each_stops_when_told_and_replaces_invalid_utf8() {
        let mut sse = SseData::default();
        let mut seen = Vec::new();
        sse.each(b"data: a\xff\ndata: stop\ndata: never\n", |d| {
            seen.push(d.to_string());
            d != "stop"
        });
        assert_eq!(seen, vec!["a\u{fffd}", "stop"]);
        // What followed the stop is dropped with the rest of that chunk.
        assert_eq!(sse.push(b"data: next\n"), vec!["next"]);
    }
}

/// What one OpenAI-style stream event (a `data:` payload other than `[DONE]`) is to a
/// gateway that forwards it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// It adds text: [`chunk_text`] is a non-empty string (the first content token is the
    /// first such event).
    Content,
    /// Anything else a stream carries (role, empty deltas, usage, finish reasons).
    Preamble,
    /// The upstream reported an error in the stream (an `error` member).
    Error,
    /// Not JSON.
    Malformed,
}

/// Classifies one stream event as parsing it with `serde_json` and reading
/// [`chunk_text`] would, without building a document: every streamed event passes
/// here, and parsing each into a `serde_json::Value` was a fifth of a streamed request's
/// work in the gateway. Events the one-pass scan leaves undecided (keys with escapes, a
/// top level that is not an object) are parsed. Like the scan, it does not check the
/// range of numbers it skips: an event whose only fault is a number too large for a
/// float is forwarded, not failed.
pub fn classify(data: &str) -> EventKind {
    scan_event(data.as_bytes()).unwrap_or_else(|| classify_parsed(data))
}

/// [`classify`] by a full parse (the reference it is tested against).
pub fn classify_parsed(data: &str) -> EventKind {
    match serde_json::from_str::<serde_json::Value>(data) {
        Err(_) => EventKind::Malformed,
        Ok(v) if v.get("error").is_some() => EventKind::Error,
        Ok(v) if chunk_text(&v).and_then(serde_json::Value::as_str).is_some_and(|s| !s.is_empty()) => EventKind::Content,
        Ok(_) => EventKind::Preamble,
    }
}

/// What [`members`] found.
enum Found<'b, const N: usize> {
    /// An object: its members picked by the keys (the last duplicate wins).
    Object([Option<&'b [u8]>; N]),
    /// Some other JSON value.
    NotObject,
    /// Not JSON.
    Invalid,
    /// Not decided by the scan (a key with escapes): parse.
    Undecided,
}

/// The members of a JSON object picked by `keys`.
fn members<'b, const N: usize>(bytes: &'b [u8], keys: [&[u8]; N]) -> Found<'b, N> {
    use tailcut_core::json_scan::{object_members, Members};
    if bytes.trim_ascii_start().first() != Some(&b'{') {
        return Found::NotObject;
    }
    let mut found = [None; N];
    match object_members(bytes, |k| keys.iter().position(|key| *key == k), |slot, v| found[slot] = Some(v)) {
        Members::Object => Found::Object(found),
        Members::Invalid => Found::Invalid,
        Members::Unsure => Found::Undecided,
    }
}

/// [`classify`]'s scan: `None` when it must parse.
fn scan_event(bytes: &[u8]) -> Option<EventKind> {
    let top = match members(bytes, [b"choices", b"error"]) {
        Found::Object(top) => top,
        Found::Invalid => return Some(EventKind::Malformed),
        Found::NotObject | Found::Undecided => return None,
    };
    if top[1].is_some() {
        return Some(EventKind::Error);
    }
    let Some(choice) = top[0].and_then(tailcut_core::json_scan::first_element) else { return Some(EventKind::Preamble) };
    let [delta, text] = match members(choice, [b"delta", b"text"]) {
        Found::Object(m) => m,
        Found::NotObject => return Some(EventKind::Preamble),
        Found::Invalid | Found::Undecided => return None,
    };
    let content = match delta.map(|d| members(d, [b"content"])) {
        Some(Found::Object([content])) => content,
        Some(Found::NotObject) | None => None,
        Some(Found::Invalid | Found::Undecided) => return None,
    };
    // `delta.content` when the delta has one (even null), else `text`; text is a
    // non-empty JSON string (`""` is the only empty one).
    let text = if content.is_some() { content } else { text };
    Some(if text.is_some_and(|v| v.first() == Some(&b'"') && v.len() > 2) { EventKind::Content } else { EventKind::Preamble })
}

/// The first choice of an OpenAI-style stream chunk (`choices[0]`).
pub fn first_choice(chunk: &serde_json::Value) -> Option<&serde_json::Value> {
    chunk.get("choices")?.get(0)
}

/// What an OpenAI-style stream chunk adds to the text: its first choice's
/// `delta.content` (chat) or, where that is absent, its `text` (completions). Indexed
/// directly: a JSON pointer would parse and allocate its path on every chunk.
pub fn chunk_text(chunk: &serde_json::Value) -> Option<&serde_json::Value> {
    let choice = first_choice(chunk)?;
    choice.get("delta").and_then(|d| d.get("content")).or_else(|| choice.get("text"))
}

#[cfg(test)]
mod chunk_tests {
    use super::chunk_text;
    use serde_json::json;

    #[test]
    fn chunk_text_reads_what_the_json_pointers_read() {
        let chunks = [
            json!({"choices": [{"delta": {"content": "hi"}}]}),
            json!({"choices": [{"delta": {"role": "assistant"}}]}),
            json!({"choices": [{"delta": {"content": null}, "text": "x"}]}),
            json!({"choices": [{"text": "completion"}]}),
            json!({"choices": []}),
            json!({"choices": "nope"}),
            json!({"usage": {"total_tokens": 3}}),
            json!({"choices": [{"delta": {"content": ""}}, {"delta": {"content": "second"}}]}),
        ];
        for c in chunks {
            let by_pointer = c.pointer("/choices/0/delta/content").or_else(|| c.pointer("/choices/0/text"));
            assert_eq!(chunk_text(&c), by_pointer, "{c}");
        }
    }
}
