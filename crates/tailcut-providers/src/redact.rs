//! Secret redaction: no configured credential survives in anything a provider sends
//! back. An upstream may echo the `Authorization` header it was sent (in a 401 body, an
//! error field, a stream event); tailcut would then store, log, print or return it.
//!
//! **What counts as a secret**: every [`Secret`](crate::Secret) this process has created
//! (provider keys from the environment or config, the RunPod CLI's config-file key,
//! Modal proxy credentials, the gateway's provider keys) registers its value here when
//! it is made, so no caller has to remember to; so do the `${ENV}` values a generic job
//! API puts into headers (and into URLs, for variables named like a credential). Values
//! shorter than [`MIN_SECRET_LEN`] bytes are not registered: text that short occurs in
//! ordinary output, and such a value is no credential worth the name.
//!
//! **What is matched**: each secret's raw value (which covers `Bearer <key>`, `Key
//! <key>`, `Api-Key <key>`), its percent-encoded form (upper- and lower-case hex), and
//! its base64 form at each of the three byte alignments, so `Basic base64(user:key)` is
//! caught whatever the user part is. Each of these is matched as the tenant will *read*
//! it, too: in the reply's text with its JSON escapes decoded (`redact/escapes.rs`), so every
//! JSON-escaped spelling of a secret (`\/` for `/`, `\uXXXX` for any character in either
//! hex case, surrogate pairs, any mix with plain characters, and the escapes of JSON
//! inside a JSON string) is replaced, raw bytes and all. A reply with no escape that
//! could be part of a secret (most: the `\n` and `\"` of ordinary text decode to bytes
//! no secret holds) is matched as it is, in one pass.
//!
//! **Where**: at the one place provider bytes enter tailcut — the functions that read a
//! reply off the wire ([`crate::client`] for reqwest, [`crate::plain`] for the plain
//! client), whole bodies and streams alike — before any provider module parses them. Errors,
//! receipts' notes, validator reasons, traces, job rows, logs and the bodies the gateway
//! returns are all built from what comes out of there.
//!
//! **Redacted to**: [`REDACTED`], which keeps a JSON string a JSON string.

mod escapes;

use aho_corasick::{AhoCorasick, MatchKind};
use base64::Engine;
use bytes::{Bytes, BytesMut};
use std::cell::RefCell;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Secrets shorter than this (bytes) are not redacted.
pub const MIN_SECRET_LEN: usize = 8;

/// A set of secret values and the encodings of each, matched in one pass.
#[derive(Debug, Default)]
pub struct Redactor {
    matcher: Option<AhoCorasick>,
    needles: Vec<Vec<u8>>,
    /// The escapes that could hide a secret (`escapes::trigger_patterns`).
    triggers: Option<escapes::Triggers>,
}

/// The byte strings that betray `secret`: the forms listed in the module docs.
pub fn needles(secret: &str) -> Vec<Vec<u8>> {
    let raw = secret.as_bytes();
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut add = |n: Vec<u8>| {
        if n.len() >= MIN_SECRET_LEN && !out.contains(&n) {
            out.push(n);
        }
    };
    add(raw.to_vec());
    for upper in [true, false] {
        add(percent_encoded(raw, upper));
    }
    // (JSON-escaped forms are found by matching these in the decoded text: `escapes`.)
    // Base64 of a longer string (`user:key`) contains, for the key's alignment, the
    // encoding of the key's bytes from its first whole 3-byte group on: those groups
    // encode the same whatever surrounds them.
    for skip in 0..3 {
        let Some(rest) = raw.get(skip..) else { break };
        let whole = rest.len() / 3 * 3;
        if whole == 0 {
            continue;
        }
        for engine in [&base64::engine::general_purpose::STANDARD_NO_PAD, &base64::engine::general_purpose::URL_SAFE_NO_PAD] {
            add(engine.encode(&rest[..whole]).into_bytes());
        }
    }
    out
}

fn percent_encoded(raw: &[u8], upper: bool) -> Vec<u8> {
    let hex: &[u8; 16] = if upper { b"0123456789ABCDEF" } else { b"0123456789abcdef" };
    let mut out = Vec::with_capacity(raw.len());
    for &b in raw {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'%', hex[usize::from(b >> 4)], hex[usize::from(b & 15)]]);
        }
    }
    out
}

impl Redactor {
    /// A redactor for `secrets` (values shorter than [`MIN_SECRET_LEN`] are ignored).
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Redactor {
        let mut all: Vec<Vec<u8>> = Vec::new();
        for s in secrets {
            if s.len() < MIN_SECRET_LEN {
                continue;
            }
            for n in needles(s) {
                if !all.contains(&n) {
                    all.push(n);
                }
            }
        }
        if all.is_empty() {
            return Redactor::default();
        }
        // Leftmost-longest: where an encoding contains another (a key inside its own
        // percent-encoded form), the whole of the longer one goes.
        let matcher = AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&all).ok();
        Redactor { matcher, triggers: escapes::Triggers::new(&all), needles: all }
    }

    /// Where in `raw` a secret is, in any of its forms, as written or as a reader decodes
    /// it, and the decoded views it was looked for in (none when no escape could hide one:
    /// then the raw bytes are what a reader reads, and are scanned once).
    fn find(&self, m: &AhoCorasick, raw: &[u8]) -> (Vec<escapes::View>, Vec<Range<usize>>) {
        let views = self.triggers.as_ref().map_or_else(Vec::new, |t| escapes::views(raw, t));
        let spans = spans(m, raw, &views);
        (views, spans)
    }

    /// Whether there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.matcher.is_none()
    }

    /// `bytes` with every secret replaced; the same buffer (no copy) when none occurs.
    pub fn bytes(&self, bytes: Bytes) -> Bytes {
        let Some(m) = &self.matcher else { return bytes };
        let (_, spans) = self.find(m, &bytes);
        if spans.is_empty() {
            return bytes;
        }
        replaced(&bytes, &spans).into()
    }

    /// `text` with every secret replaced.
    pub fn text(&self, text: String) -> String {
        if self.matcher.is_none() {
            return text;
        }
        let out = self.bytes(Bytes::from(text));
        // Spans are whole characters (needles are text, escapes decode to whole ones).
        String::from_utf8(Vec::from(out)).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }

    /// How many bytes at the end of `tail` could be the start of a secret that the next
    /// chunk of a stream completes: they are held back until it arrives.
    fn pending_prefix(&self, tail: &[u8]) -> usize {
        let Some(&last) = tail.last() else { return 0 };
        let mut hold = 0;
        for n in &self.needles {
            let longest = (n.len() - 1).min(tail.len());
            for k in (hold + 1..=longest).rev() {
                if n[k - 1] == last && tail.ends_with(&n[..k]) {
                    hold = k;
                    break;
                }
            }
        }
        hold
    }

    /// One chunk of a stream, given what was held back from the previous one: what can
    /// be sent now (redacted) and what to hold back for the next chunk: the start of a
    /// possible secret, in the raw bytes or in the decoded text, and an escape cut short.
    fn stream_chunk(&self, held: &mut BytesMut, chunk: Bytes) -> Bytes {
        let Some(m) = &self.matcher else { return chunk };
        let buf = if held.is_empty() {
            chunk
        } else {
            held.extend_from_slice(&chunk);
            held.split().freeze()
        };
        let (views, spans) = self.find(m, &buf);
        // Only the part after the last complete secret can hold the start of another.
        let after = spans.last().map_or(0, |s| s.end);
        let mut hold_from = buf.len() - self.pending_prefix(&buf[after..]);
        for v in &views {
            let pending = self.pending_prefix(&v.bytes[v.before(after)..]);
            if pending > 0 {
                hold_from = hold_from.min(v.start(v.bytes.len() - pending));
            }
            if let Some(cut) = v.cut {
                hold_from = hold_from.min(cut.max(after));
            }
        }
        held.extend_from_slice(&buf[hold_from..]);
        if spans.is_empty() {
            return buf.slice(..hold_from);
        }
        replaced(&buf[..hold_from], &spans).into()
    }
}

/// Where in `raw` a secret is, in any of its forms, raw or read through the decoded
/// `views`: sorted, overlaps merged.
fn spans(m: &AhoCorasick, raw: &[u8], views: &[escapes::View]) -> Vec<Range<usize>> {
    let mut spans: Vec<Range<usize>> = m.find_iter(raw).map(|x| x.range()).collect();
    for v in views {
        spans.extend(m.find_iter(&v.bytes[..]).map(|x| v.raw(x.range())));
    }
    if views.is_empty() {
        return spans; // one leftmost-longest pass: sorted, disjoint
    }
    spans.sort_unstable_by_key(|s| (s.start, std::cmp::Reverse(s.end)));
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(spans.len());
    for s in spans {
        match merged.last_mut() {
            Some(last) if s.start < last.end => last.end = last.end.max(s.end),
            _ => merged.push(s),
        }
    }
    merged
}

/// `raw` with each of `spans` (sorted, disjoint, within `raw`) replaced by [`REDACTED`].
fn replaced(raw: &[u8], spans: &[Range<usize>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut at = 0;
    for s in spans {
        out.extend_from_slice(&raw[at..s.start]);
        out.extend_from_slice(REDACTED.as_bytes());
        at = s.end;
    }
    out.extend_from_slice(&raw[at..]);
    out
}

/// The secrets registered so far, and a redactor built from them.
struct Registry {
    secrets: Vec<String>,
    current: Arc<Redactor>,
}

static REGISTRY: RwLock<Option<Registry>> = RwLock::new(None);
/// Bumped on every registration, so a thread's cached redactor is rebuilt only then.
static GENERATION: AtomicU64 = AtomicU64::new(0);
/// Serialises registrations (reads never wait on it).
static REGISTERING: Mutex<()> = Mutex::new(());

thread_local! {
    static CACHED: RefCell<(u64, Arc<Redactor>)> = RefCell::new((0, Arc::default()));
}

/// Registers a secret value for redaction (a no-op for one already registered or
/// shorter than [`MIN_SECRET_LEN`]). [`Secret`](crate::Secret) calls this itself.
pub fn register(secret: &str) {
    if secret.len() < MIN_SECRET_LEN {
        return;
    }
    let _one_at_a_time = REGISTERING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let known =
        REGISTRY.read().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref().is_some_and(|r| r.secrets.iter().any(|s| s == secret));
    if known {
        return;
    }
    let mut secrets =
        REGISTRY.read().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref().map_or_else(Vec::new, |r| r.secrets.clone());
    secrets.push(secret.to_string());
    let current = Arc::new(Redactor::new(secrets.iter().map(String::as_str)));
    *REGISTRY.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Registry { secrets, current });
    GENERATION.fetch_add(1, Ordering::Release);
}

/// The redactor for every secret registered so far (cached per thread; one atomic load
/// when nothing changed).
pub fn current() -> Arc<Redactor> {
    let generation = GENERATION.load(Ordering::Acquire);
    CACHED.with(|c| {
        let mut c = c.borrow_mut();
        if c.0 != generation {
            let latest = REGISTRY.read().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref().map(|r| r.current.clone());
            *c = (generation, latest.unwrap_or_default());
        }
        c.1.clone()
    })
}

/// Whether any secret is registered (nothing to do otherwise).
fn any() -> bool {
    GENERATION.load(Ordering::Relaxed) != 0
}

/// A reply body as read off the wire, with every registered secret replaced.
pub fn bytes(body: Bytes) -> Bytes {
    if !any() {
        return body;
    }
    current().bytes(body)
}

/// Text from a provider with every registered secret replaced.
pub fn text(text: String) -> String {
    if !any() {
        return text;
    }
    current().text(text)
}

/// A reply body streamed off the wire, with every registered secret replaced — also one
/// cut across two chunks (the start of a possible secret at a chunk's end waits for the
/// next chunk; at the end of the stream it is sent as it is, since nothing completed it).
pub fn stream<E: Send + 'static>(
    inner: std::pin::Pin<Box<dyn futures::Stream<Item = Result<Bytes, E>> + Send>>,
) -> std::pin::Pin<Box<dyn futures::Stream<Item = Result<Bytes, E>> + Send>> {
    if !any() {
        return inner;
    }
    let redactor = current();
    let state = (inner, redactor, BytesMut::new(), false);
    Box::pin(futures::stream::unfold(state, |(mut inner, redactor, mut held, mut ended)| async move {
        loop {
            if ended {
                return None;
            }
            match futures::StreamExt::next(&mut inner).await {
                Some(Ok(chunk)) => {
                    let out = redactor.stream_chunk(&mut held, chunk);
                    if !out.is_empty() {
                        return Some((Ok(out), (inner, redactor, held, ended)));
                    }
                }
                Some(Err(e)) => {
                    ended = true;
                    return Some((Err(e), (inner, redactor, held, ended)));
                }
                None => {
                    ended = true;
                    if held.is_empty() {
                        return None;
                    }
                    let rest = redactor.bytes(held.split().freeze());
                    return Some((Ok(rest), (inner, redactor, held, ended)));
                }
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "rk-Canary/7f3+a9=Z_0123456789";

    fn redact(r: &Redactor, s: &str) -> String {
        String::from_utf8(r.bytes(Bytes::copy_from_slice(s.as_bytes())).to_vec()).unwrap()
    }

    #[test]
    fn every_encoding_of_a_secret_is_replaced() {
        let r = Redactor::new([KEY]);
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let cases = [
            format!(r#"{{"error": "bad header Authorization: Bearer {KEY}"}}"#),
            format!("key={}", percent_encoded(KEY.as_bytes(), true).iter().map(|&b| b as char).collect::<String>()),
            format!("key={}", percent_encoded(KEY.as_bytes(), false).iter().map(|&b| b as char).collect::<String>()),
            format!("Basic {}", b64(&format!("user:{KEY}"))),
            format!("Basic {}", b64(&format!("ab:{KEY}"))),
            format!("Basic {}", b64(&format!("{KEY}:"))),
            format!("Basic {}", b64(&format!(":{KEY}"))),
            serde_json::json!({"echo": KEY}).to_string(),
        ];
        for text in cases {
            let out = redact(&r, &text);
            assert!(out.contains(REDACTED), "{text} -> {out}");
            assert!(!out.contains(KEY) && !out.contains("Canary") && !out.contains(&b64(KEY)[4..20]), "{text} -> {out}");
        }
        // JSON stays JSON.
        let v: serde_json::Value = serde_json::from_str(&redact(&r, &format!(r#"{{"e":"Bearer {KEY}"}}"#))).unwrap();
        assert_eq!(v["e"], format!("Bearer {REDACTED}"));
    }

    #[test]
    fn text_without_secrets_is_not_copied_and_short_values_are_not_secrets() {
        let r = Redactor::new([KEY, "short", ""]);
        let body = Bytes::from_static(b"{\"output\": \"a short answer\"}");
        let out = r.bytes(body.clone());
        assert_eq!(out, body);
        assert_eq!(out.as_ptr(), body.as_ptr(), "the same buffer");
        assert!(Redactor::new(["short", ""]).is_empty());
    }

    #[tokio::test]
    async fn a_secret_cut_across_stream_chunks_is_still_replaced() {
        let r = Arc::new(Redactor::new([KEY]));
        let text = format!("data: {{\"error\": \"Bearer {KEY}\"}}\n\ndata: [DONE]\n\n");
        // Every cut point, into two and three chunks.
        for cut in 1..text.len() {
            for second in [cut, (cut + 5).min(text.len())] {
                let pieces = [&text[..cut], &text[cut..second], &text[second..]];
                let mut held = BytesMut::new();
                let mut out = Vec::new();
                for p in pieces {
                    out.extend_from_slice(&r.stream_chunk(&mut held, Bytes::copy_from_slice(p.as_bytes())));
                }
                out.extend_from_slice(&r.bytes(held.split().freeze()));
                let out = String::from_utf8(out).unwrap();
                assert_eq!(out, text.replace(KEY, REDACTED), "cut at {cut}/{second}");
            }
        }
        // An event that ends a chunk is passed on at once (nothing held back).
        let mut held = BytesMut::new();
        let event = Bytes::from_static(b"data: {\"choices\": []}\n\n");
        let out = r.stream_chunk(&mut held, event.clone());
        assert_eq!((out, held.len()), (event, 0));
    }

    /// The redaction point holds only if nothing else reads a provider's reply: no
    /// reqwest body is read outside `client.rs` (here or in the gateway), and the plain
    /// client's bodies leave `plain/` only through `redact`.
    #[test]
    fn provider_replies_are_read_only_where_they_are_redacted() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut offenders = Vec::new();
        for dir in ["tailcut-providers/src", "tailcut-gateway/src", "tailcut-config/src"] {
            let mut stack = vec![root.join(dir)];
            while let Some(d) = stack.pop() {
                for entry in std::fs::read_dir(&d).unwrap() {
                    let path = entry.unwrap().path();
                    if path.is_dir() {
                        stack.push(path);
                        continue;
                    }
                    let name = path.to_string_lossy().replace('\\', "/");
                    // A `tests.rs` file is a `#[cfg(test)] mod tests;`: a test reading a reply
                    // of its own local server is not on the provider path.
                    if name.ends_with("tailcut-providers/src/client.rs")
                        || name.ends_with("tailcut-providers/src/redact.rs")
                        || name.ends_with("/tests.rs")
                    {
                        continue;
                    }
                    let text = std::fs::read_to_string(&path).unwrap();
                    // tailcut-http's plain client reads raw replies: only `plain.rs` wraps it.
                    for raw in ["tailcut_http::PlainHttp", "tailcut_http::client::PlainHttp"] {
                        if !name.ends_with("tailcut-providers/src/plain.rs") && text.contains(raw) {
                            offenders.push(format!("{name}: {raw}"));
                        }
                    }
                    for needle in [".bytes().await", "bytes_stream()", ".text().await", ".json().await", ".chunk().await"] {
                        if text.contains(needle) {
                            offenders.push(format!("{name}: {needle}"));
                        }
                    }
                }
            }
        }
        assert!(offenders.is_empty(), "provider replies read around the redaction point: {offenders:?}");
        let plain = std::fs::read_to_string(root.join("tailcut-providers/src/plain.rs")).unwrap();
        assert_eq!(plain.matches("crate::redact::").count(), 2, "both of the plain client's ways out (whole, streamed) redact");
    }

    #[tokio::test]
    async fn registered_secrets_are_redacted_from_streams_and_bodies() {
        let key = "reg-Canary-5b1e9d0c7a";
        register(key);
        register(key);
        assert_eq!(&bytes(Bytes::from(format!("x {key} y")))[..], format!("x {REDACTED} y").as_bytes());
        assert_eq!(text(format!("Bearer {key}")), format!("Bearer {REDACTED}"));
        let chunks: Vec<Result<Bytes, ()>> = vec![Ok(Bytes::from(format!("a {}", &key[..6]))), Ok(Bytes::from(format!("{} b", &key[6..])))];
        let s = stream(Box::pin(futures::stream::iter(chunks)));
        let got: Vec<Result<Bytes, ()>> = futures::StreamExt::collect(s).await;
        let all: Vec<u8> = got.into_iter().flat_map(|c| c.unwrap().to_vec()).collect();
        assert_eq!(String::from_utf8(all).unwrap(), format!("a {REDACTED} b"));
    }

    /// `secret` written the way a JSON encoder might: each character as itself, `/` as
    /// `\/`, or as `\uXXXX` (surrogate pairs beyond the BMP) in lower- or upper-case hex,
    /// by `forms` (cycled).
    fn escaped(secret: &str, forms: &[u8]) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        for (c, f) in secret.chars().zip(forms.iter().cycle()) {
            match f % 4 {
                1 if c == '/' => out.push_str("\\/"),
                0 | 1 => out.push(c),
                form => {
                    for unit in c.encode_utf16(&mut [0u16; 2]) {
                        let _ = if form == 2 { write!(out, "\\u{unit:04x}") } else { write!(out, "\\u{unit:04X}") };
                    }
                }
            }
        }
        out
    }

    /// Redacts `text` cut at `cuts` as a stream, and whole.
    fn streamed_and_whole(r: &Redactor, text: &str, cuts: &[usize]) -> (String, String) {
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (text.len() + 1)).collect();
        cuts.sort_unstable();
        let (mut held, mut out, mut at) = (BytesMut::new(), Vec::new(), 0);
        for c in cuts.into_iter().chain([text.len()]) {
            out.extend_from_slice(&r.stream_chunk(&mut held, Bytes::copy_from_slice(&text.as_bytes()[at..c])));
            at = c;
        }
        out.extend_from_slice(&r.bytes(held.split().freeze()));
        let whole = r.bytes(Bytes::copy_from_slice(text.as_bytes()));
        (String::from_utf8(out).unwrap(), String::from_utf8(whole.to_vec()).unwrap())
    }

    const WIDE: &str = "sk-ünï/cödé+😀=0123456789";

    #[test]
    fn every_json_escaped_spelling_of_a_secret_is_replaced() {
        let r = Redactor::new([KEY, WIDE]);
        for secret in [KEY, WIDE] {
            for forms in [&[0u8][..], &[1], &[2], &[3], &[0, 1, 2, 3], &[3, 2, 1], &[1, 1, 2, 0, 3, 3]] {
                let spelled = escaped(secret, forms);
                let body = format!(r#"{{"error": {{"message": "bad key Bearer {spelled} sent"}}}}"#);
                let out = redact(&r, &body);
                let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{body} -> {out}: {e}"));
                assert_eq!(v["error"]["message"], format!("bad key Bearer {REDACTED} sent"), "{body} -> {out}");
                // In a string in a string: a tool call's arguments, read by a second parse.
                let inner = format!(r#"{{"key": "{spelled}"}}"#);
                let body = serde_json::json!({"arguments": inner}).to_string();
                let out = redact(&r, &body);
                let v: serde_json::Value = serde_json::from_str(&out).unwrap();
                let args: serde_json::Value = serde_json::from_str(v["arguments"].as_str().unwrap()).unwrap();
                assert_eq!(args["key"], REDACTED, "{body} -> {out}");
            }
        }
        // Escapes no secret could hold leave a reply untouched, and uncopied.
        let plain = Bytes::from_static(b"{\"content\": \"line\\none \\\"two\\\" C:\\\\dir\"}");
        assert_eq!(r.bytes(plain.clone()).as_ptr(), plain.as_ptr());
    }

    #[test]
    fn an_escaped_secret_cut_across_stream_chunks_is_still_replaced() {
        let r = Redactor::new([KEY]);
        let text = format!("data: {{\"error\": \"Bearer {}\"}}\n\ndata: [DONE]\n\n", escaped(KEY, &[0, 1, 2, 3, 2]));
        for cut in 0..=text.len() {
            for second in [cut, (cut + 3).min(text.len()), (cut + 7).min(text.len())] {
                let (streamed, whole) = streamed_and_whole(&r, &text, &[cut, second]);
                assert_eq!(streamed, whole, "cut at {cut}/{second}");
                assert_eq!(whole, format!("data: {{\"error\": \"Bearer {REDACTED}\"}}\n\ndata: [DONE]\n\n"));
            }
        }
        // An escape cut short at a chunk's end waits for the rest, and only it.
        let mut held = BytesMut::new();
        let out = r.stream_chunk(&mut held, Bytes::from_static(b"data: {\"c\": \"x\\u00"));
        assert_eq!((&out[..], &held[..]), (&b"data: {\"c\": \"x"[..], &b"\\u00"[..]));
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(512))]

        /// Any mix of escapes, text around the secret, a string in a string or not, and
        /// any chunking: what a reader decodes never holds the secret, keeps the text
        /// around it, and a stream is redacted exactly as the whole reply.
        #[test]
        fn escaped_secrets_never_survive_any_mix_or_chunking(
            wide in proptest::bool::ANY,
            forms in proptest::collection::vec(0u8..4, 1..40),
            before in "[ a-z.,]{0,12}",
            after in "[ a-z.,]{0,12}",
            nested in proptest::bool::ANY,
            cuts in proptest::collection::vec(0usize..400, 0..6),
        ) {
            let r = Redactor::new([KEY, WIDE]);
            let secret = if wide { WIDE } else { KEY };
            let inner = format!(r#"{{"c": "{before}{}{after}\n"}}"#, escaped(secret, &forms));
            let text = if nested { format!("data: {}\n\n", serde_json::json!({"arguments": inner})) } else { format!("data: {inner}\n\n") };
            let (streamed, whole) = streamed_and_whole(&r, &text, &cuts);
            proptest::prop_assert_eq!(&streamed, &whole);
            let mut v: serde_json::Value = serde_json::from_str(whole.trim_start_matches("data: ").trim_end()).unwrap();
            if nested {
                v = serde_json::from_str(v["arguments"].as_str().unwrap()).unwrap();
            }
            proptest::prop_assert_eq!(v["c"].as_str().unwrap(), format!("{before}{REDACTED}{after}\n"));
        }
    }
}
