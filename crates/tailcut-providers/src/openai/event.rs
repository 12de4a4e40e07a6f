//! What one OpenAI-style stream event (a `data:` payload other than `[DONE]`) carries:
//! [`classify`] (content, preamble, upstream error, malformed) by the one-pass JSON
//! scan, and [`chunk_text`], the text a chunk adds. The reader ([`super::sse`]) classifies
//! every event it yields here.

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
