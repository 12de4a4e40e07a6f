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
        self.pending.extend_from_slice(chunk);
        let mut payloads = Vec::new();
        let mut start = 0;
        while let Some(end) = self.pending[start..].iter().position(|b| *b == b'\n').map(|i| start + i) {
            let line = self.pending[start..end].trim_ascii();
            if let Some(data) = line.strip_prefix(b"data:") {
                payloads.push(String::from_utf8_lossy(data.trim_ascii()).into_owned());
            }
            start = end + 1;
        }
        self.pending.drain(..start);
        payloads
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
