//! JSON escapes, decoded the way a tenant's JSON parser will read them, for matching
//! only: each decoded byte knows the raw bytes it came from, so a secret an upstream
//! wrote with escapes (`\/`, `\uXXXX` in either hex case, surrogate pairs, any mix of
//! them with plain characters) is found and its raw bytes replaced. A reply is decoded
//! again while what came out still holds escapes that matter, up to [`MAX_DEPTH`] levels:
//! JSON inside a JSON string (a tool call's `arguments`, an `output` that is JSON text)
//! is read by a second parse.
//!
//! Escapes are decoded wherever they occur, inside a JSON string or not: outside strings
//! JSON has no backslashes, and text that merely decodes to a secret is one a reader
//! could decode as well.

use std::ops::Range;

/// Levels of escapes decoded: a reply, a JSON string in it, and one more.
pub(super) const MAX_DEPTH: usize = 3;

/// What makes a text worth decoding: the escapes that could be part of a secret. An
/// escape that decodes to a byte no needle has cannot be, so a reply whose escapes are
/// all like that (the `\n` and `\"` of ordinary text, when no secret holds a newline or
/// a quote) is matched as it is. The triggers:
///
/// - `\u` (any character);
/// - `\c` for each one-character escape that decodes to a byte of some needle;
/// - `\\\`, an escaped backslash before another escape (one level down; `\\u` and
///   `\\c` hold the triggers above).
///
/// A buffer that ends in a backslash (an escape cut short) is worth decoding too.
pub(super) fn trigger_patterns(needles: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut has = [false; 256];
    for &b in needles.iter().flatten() {
        has[usize::from(b)] = true;
    }
    let mut out: Vec<Vec<u8>> = vec![b"\\u".to_vec(), b"\\\\\\".to_vec()];
    for c in *b"\"\\/bfnrt" {
        if simple(c).is_some_and(|d| has[usize::from(d)]) {
            out.push(vec![b'\\', c]);
        }
    }
    out
}

/// A finder of the triggers: the packed (SIMD) searcher where the processor has one,
/// which skips the `\n` and `\"` of ordinary text without stopping at each backslash.
#[derive(Debug, Clone)]
pub(super) struct Triggers {
    packed: Option<aho_corasick::packed::Searcher>,
    any: aho_corasick::AhoCorasick,
}

impl Triggers {
    /// A finder of `trigger_patterns(needles)`.
    pub(super) fn new(needles: &[Vec<u8>]) -> Option<Triggers> {
        let patterns = trigger_patterns(needles);
        let packed = aho_corasick::packed::Config::new().builder().extend(&patterns).build();
        let any = aho_corasick::AhoCorasick::new(&patterns).ok()?;
        Some(Triggers { packed, any })
    }

    /// Whether `b` is worth decoding.
    pub(super) fn worth_decoding(&self, b: &[u8]) -> bool {
        // Most replies have no backslash at all: one memchr says so.
        let Some(first) = memchr::memchr(b'\\', b) else { return false };
        let b = &b[first..];
        if b.last() == Some(&b'\\') {
            return true;
        }
        match &self.packed {
            Some(p) => p.find(b).is_some(),
            None => self.any.is_match(b),
        }
    }
}

/// A buffer's text with its escapes decoded one level more than the view before it.
/// Five bytes per decoded byte: the byte, and where its source starts in the raw buffer
/// (sources are contiguous, so where one ends is where the next begins).
#[derive(Debug)]
pub(super) struct View {
    /// The decoded bytes.
    pub bytes: Vec<u8>,
    /// For each decoded byte, where in the raw buffer its source starts.
    start: Vec<u32>,
    /// Where in the raw buffer the decoded text's source ends.
    covered: usize,
    /// Where in the raw buffer an escape cut short by the buffer's end starts (a stream
    /// holds it back until the next chunk completes it).
    pub cut: Option<usize>,
}

impl View {
    /// Where in the raw buffer decoded byte `i`'s source starts.
    pub(super) fn start(&self, i: usize) -> usize {
        self.start[i] as usize
    }

    /// How many decoded bytes come from raw bytes before `raw`.
    pub(super) fn before(&self, raw: usize) -> usize {
        self.start.partition_point(|&s| (s as usize) < raw)
    }

    /// The raw bytes that decoded bytes `r` (not empty) came from: whole escapes only.
    pub(super) fn raw(&self, r: Range<usize>) -> Range<usize> {
        let last = self.start[r.end - 1];
        let next = self.start[r.end - 1..].partition_point(|&s| s == last) + r.end - 1;
        self.start(r.start)..self.start.get(next).map_or(self.covered, |&s| s as usize)
    }
}

/// The decoded views of `raw`, one per level, while a level still holds an escape that
/// could be part of a secret (none at all for most replies: then matching the raw bytes
/// is enough).
pub(super) fn views(raw: &[u8], triggers: &Triggers) -> Vec<View> {
    let mut out: Vec<View> = Vec::new();
    // (Offsets are `u32`: no reply body comes near 4 GiB; one that did is matched raw.)
    while out.len() < MAX_DEPTH && u32::try_from(raw.len()).is_ok() {
        let input: &[u8] = out.last().map_or(raw, |v| &v.bytes);
        if !triggers.worth_decoding(input) {
            break;
        }
        let next = decode(input, out.last());
        out.push(next);
    }
    out
}

/// What a one-character escape (`\n`, `\/`, ...) decodes to.
fn simple(c: u8) -> Option<u8> {
    Some(match c {
        b'"' => b'"',
        b'\\' => b'\\',
        b'/' => b'/',
        b'b' => 0x08,
        b'f' => 0x0c,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        _ => return None,
    })
}

/// One escape at `b[i]` (a backslash), as its reader would take it.
enum Escape {
    /// Decodes to these bytes (UTF-8, 1 to 4 of them), from `len` raw bytes.
    To([u8; 4], usize, usize),
    /// The buffer ends inside it.
    Cut,
    /// Not an escape: the backslash stands for itself.
    Invalid,
}

fn hex4(b: &[u8], at: usize) -> Option<u32> {
    let h = b.get(at..at + 4)?;
    if !h.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    h.iter().try_fold(0u32, |acc, &d| Some(acc * 16 + char::from(d).to_digit(16)?))
}

/// Whether `b` ends in what could still become `n` hex digits from `at`.
fn hex_cut_short(b: &[u8], at: usize, n: usize) -> bool {
    b.len() < at + n && b.get(at..).is_some_and(|rest| rest.iter().all(u8::is_ascii_hexdigit))
}

fn utf8(c: char, len: usize) -> Escape {
    let mut out = [0u8; 4];
    let n = c.encode_utf8(&mut out).len();
    Escape::To(out, n, len)
}

fn escape(b: &[u8], i: usize) -> Escape {
    let Some(&c) = b.get(i + 1) else { return Escape::Cut };
    if let Some(d) = simple(c) {
        return Escape::To([d, 0, 0, 0], 1, 2);
    }
    if c != b'u' {
        return Escape::Invalid;
    }
    let Some(code) = hex4(b, i + 2) else {
        return if hex_cut_short(b, i + 2, 4) { Escape::Cut } else { Escape::Invalid };
    };
    match code {
        0xD800..=0xDBFF => {
            // A high surrogate: the character is whole only with the low one after it.
            let j = i + 6;
            match (b.get(j), b.get(j + 1)) {
                (None, _) | (Some(b'\\'), None) => Escape::Cut,
                (Some(b'\\'), Some(b'u')) => match hex4(b, j + 2) {
                    Some(low @ 0xDC00..=0xDFFF) => {
                        let c = char::from_u32(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)).unwrap_or('\u{FFFD}');
                        utf8(c, 12)
                    }
                    None if hex_cut_short(b, j + 2, 4) => Escape::Cut,
                    _ => utf8('\u{FFFD}', 6),
                },
                _ => utf8('\u{FFFD}', 6),
            }
        }
        code => utf8(char::from_u32(code).unwrap_or('\u{FFFD}'), 6),
    }
}

/// `input` (the raw buffer, or the view `prev`) with its escapes decoded once.
fn decode(input: &[u8], prev: Option<&View>) -> View {
    // (`views` checked that every raw offset fits a u32.)
    let raw_start = |i: usize| prev.map_or(i as u32, |p| p.start[i]);
    let mut v = View {
        bytes: Vec::with_capacity(input.len()),
        start: Vec::with_capacity(input.len()),
        covered: prev.map_or(input.len(), |p| p.covered),
        cut: None,
    };
    let mut i = 0;
    while i < input.len() {
        let run_end = memchr::memchr(b'\\', &input[i..]).map_or(input.len(), |off| i + off);
        v.bytes.extend_from_slice(&input[i..run_end]);
        match prev {
            None => v.start.extend(i as u32..run_end as u32),
            Some(p) => v.start.extend_from_slice(&p.start[i..run_end]),
        }
        i = run_end;
        if i == input.len() {
            break;
        }
        match escape(input, i) {
            Escape::To(bytes, n, len) => {
                v.bytes.extend_from_slice(&bytes[..n]);
                v.start.extend(std::iter::repeat_n(raw_start(i), n));
                i += len;
            }
            Escape::Cut => {
                let at = raw_start(i) as usize;
                (v.cut, v.covered) = (Some(at), at);
                break;
            }
            Escape::Invalid => {
                v.bytes.push(b'\\');
                v.start.push(raw_start(i));
                i += 1;
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Triggers {
        Triggers::new(&[(0..=255).collect()]).unwrap()
    }

    #[test]
    fn escapes_decode_as_a_json_parser_reads_them_and_map_back_to_their_raw_bytes() {
        let raw = br#"a\/b\u0041\u00e9\uD83D\uDE00\n\q"#;
        let v = views(raw, &all());
        assert_eq!(v.len(), 1);
        assert_eq!(String::from_utf8_lossy(&v[0].bytes), "a/bAé😀\n\\q");
        assert_eq!(v[0].raw(1..2), 1..3, "`/` came from `\\/`");
        assert_eq!(v[0].raw(3..4), 4..10, "`A` from `\\u0041`");
        assert_eq!(v[0].raw(4..6), 10..16, "both bytes of `é` from one escape");
        assert_eq!(v[0].raw(6..10), 16..28, "a surrogate pair is one character");
        // What a JSON parser reads (the invalid `\q` aside).
        let parsed: String = serde_json::from_slice(&[b"\"", &raw[..raw.len() - 2], b"\""].concat()).unwrap();
        assert_eq!(parsed.as_bytes(), &v[0].bytes[..v[0].bytes.len() - 2]);
    }

    #[test]
    fn an_escape_cut_short_by_the_end_is_marked_and_nested_strings_decode_again() {
        for tail in [r"\", r"\u", r"\u00", r"\uD83D", r"\uD83D\", r"\uD83D\uDE"] {
            let raw = format!("ab{tail}");
            let v = views(raw.as_bytes(), &all());
            assert_eq!(v[0].cut, Some(2), "{raw}");
            assert_eq!(v[0].bytes, b"ab", "{raw}");
        }
        // `\\u0041` is a string holding `\u0041`: a second parse reads `A`.
        let v = views(br"x\\u0041\\\/", &all());
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].bytes, b"xA/");
        assert_eq!(v[1].raw(1..2), 1..8);
        assert_eq!(v[1].raw(2..3), 8..12);
    }

    #[test]
    fn escapes_no_needle_could_hold_leave_the_text_as_it_is() {
        let letters = Triggers::new(&[b"abcdefgh".to_vec()]).unwrap();
        assert!(views(br#"line\nline \"quoted\" \\n"#, &letters).is_empty());
        assert!(!views(br"\u0061", &letters).is_empty());
        assert!(!views(br"end\", &letters).is_empty(), "a backslash at the end may start anything");
        assert!(!views(br"\\u0061", &letters).is_empty(), "one level down");
        assert!(!views(br#"a\/b"#, &Triggers::new(&[b"a/b".to_vec()]).unwrap()).is_empty());
    }
}
