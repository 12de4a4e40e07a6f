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
//! <key>`, `Api-Key <key>`), its percent-encoded form (upper- and lower-case hex) and
//! its JSON-escaped form where they differ, and its base64 form at each of the three
//! byte alignments, so `Basic base64(user:key)` is caught whatever the user part is.
//!
//! **Where**: at the one place provider bytes enter tailcut — the functions that read a
//! reply off the wire ([`crate::client`] for reqwest, [`crate::plain`] for the plain
//! client), whole bodies and streams alike — before any provider module parses them. Errors,
//! receipts' notes, validator reasons, traces, job rows, logs and the bodies the gateway
//! returns are all built from what comes out of there.
//!
//! **Redacted to**: [`REDACTED`], which keeps a JSON string a JSON string.

use aho_corasick::{AhoCorasick, MatchKind};
use base64::Engine;
use bytes::{Bytes, BytesMut};
use std::cell::RefCell;
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
    if let Ok(json) = serde_json::to_string(secret) {
        add(json.as_bytes()[1..json.len() - 1].to_vec());
    }
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
        Redactor { matcher, needles: all }
    }

    /// Whether there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.matcher.is_none()
    }

    /// `bytes` with every secret replaced; the same buffer (no copy) when none occurs.
    pub fn bytes(&self, bytes: Bytes) -> Bytes {
        let Some(m) = &self.matcher else { return bytes };
        if m.find(&bytes[..]).is_none() {
            return bytes;
        }
        let mut out = Vec::with_capacity(bytes.len());
        m.replace_all_with_bytes(&bytes, &mut out, |_, _, dst| {
            dst.extend_from_slice(REDACTED.as_bytes());
            true
        });
        out.into()
    }

    /// `text` with every secret replaced.
    pub fn text(&self, text: String) -> String {
        let Some(m) = &self.matcher else { return text };
        if m.find(&text).is_none() {
            return text;
        }
        m.replace_all(&text, &[REDACTED].repeat(self.needles.len()))
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
    /// be sent now (redacted) and what to hold back for the next chunk.
    fn stream_chunk(&self, held: &mut BytesMut, chunk: Bytes) -> Bytes {
        let Some(m) = &self.matcher else { return chunk };
        let buf = if held.is_empty() {
            chunk
        } else {
            held.extend_from_slice(&chunk);
            held.split().freeze()
        };
        // Only the part after the last complete secret can hold the start of another.
        let after = m.find_iter(&buf[..]).last().map_or(0, |x| x.end());
        let hold = self.pending_prefix(&buf[after..]);
        let send = buf.slice(..buf.len() - hold);
        held.extend_from_slice(&buf[buf.len() - hold..]);
        self.bytes(send)
    }
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
                    if name.ends_with("tailcut-providers/src/client.rs") || name.ends_with("tailcut-providers/src/redact.rs") || name.ends_with("/tests.rs") {
                        continue;
                    }
                    let text = std::fs::read_to_string(&path).unwrap();
                    for needle in [".bytes().await", "bytes_stream()", ".text().await", ".json().await", ".chunk().await"] {
                        if text.contains(needle) {
                            offenders.push(format!("{name}: {needle}"));
                        }
                    }
                }
            }
        }
        assert!(offenders.is_empty(), "provider replies read around the redaction point: {offenders:?}");
        let plain = std::fs::read_to_string(root.join("tailcut-providers/src/plain/mod.rs")).unwrap();
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
}
