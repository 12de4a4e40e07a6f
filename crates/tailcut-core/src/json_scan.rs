//! A one-pass syntax check of a JSON object that reports which of some top-level keys
//! it holds with a non-null value, without building a document or allocating: the
//! check every OpenAI-style reply gets before it may win a race.
//!
//! It accepts exactly what `serde_json` accepts when it reads an object's keys as
//! strings and skips its values (a property test holds it to that). What it does not
//! handle itself (a document that is not an object, a top-level key with escapes, more
//! than 64 keys asked for) it leaves to the caller as [`Scan::Unsure`].

/// What a scan found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scan {
    /// A JSON object; bit `i` is set when `keys[i]` is present and not null (the last
    /// duplicate wins, as in a parsed document).
    Present(u64),
    /// Not JSON.
    Invalid,
    /// Not decided here: ask a full parser.
    Unsure,
}

/// Scans `bytes` for the top-level `keys`.
pub fn top_level_keys(bytes: &[u8], keys: &[String]) -> Scan {
    if keys.len() > 64 {
        return Scan::Unsure;
    }
    let mut seen = 0u64;
    let found = object_members(
        bytes,
        |key| keys.iter().position(|k| k.as_bytes() == key),
        |slot, value| {
            // A value starting with `n` is `null` (anything else there is not JSON).
            if value.first() == Some(&b'n') {
                seen &= !(1 << slot);
            } else {
                seen |= 1 << slot;
            }
        },
    );
    match found {
        Members::Object => Scan::Present(seen),
        Members::Invalid => Scan::Invalid,
        Members::Unsure => Scan::Unsure,
    }
}

/// What [`object_members`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Members {
    /// A JSON object, every member reported.
    Object,
    /// Not JSON.
    Invalid,
    /// Not decided here (not an object, or a top-level key with escapes): ask a full parser.
    Unsure,
}

/// Checks that `bytes` is one JSON object and hands each top-level member that `find`
/// picks (by its key's raw bytes) to `member`, with the member's slot and the value's
/// text (from its first byte to its last). Values are checked, never decoded.
pub fn object_members<'b>(bytes: &'b [u8], find: impl Fn(&[u8]) -> Option<usize>, mut member: impl FnMut(usize, &'b [u8])) -> Members {
    let mut c = Cursor { b: bytes, i: 0 };
    if c.ws() != Some(b'{') {
        return Members::Unsure;
    }
    c.i += 1;
    match c.ws() {
        Some(b'}') => {
            c.i += 1;
            return c.end();
        }
        Some(b'"') => {}
        _ => return Members::Invalid,
    }
    loop {
        // At a key's opening quote.
        c.i += 1;
        let start = c.i;
        match c.string() {
            Ok(false) => {}
            Ok(true) => return Members::Unsure,
            Err(()) => return Members::Invalid,
        }
        let key = &bytes[start..c.i - 1];
        if !key.is_ascii() && std::str::from_utf8(key).is_err() {
            return Members::Invalid;
        }
        if c.ws() != Some(b':') {
            return Members::Invalid;
        }
        c.i += 1;
        c.ws();
        let value_start = c.i;
        if c.value().is_err() {
            return Members::Invalid;
        }
        if let Some(slot) = find(key) {
            member(slot, &bytes[value_start..c.i]);
        }
        match c.ws() {
            Some(b',') => {
                c.i += 1;
                if c.ws() != Some(b'"') {
                    return Members::Invalid;
                }
            }
            Some(b'}') => {
                c.i += 1;
                return c.end();
            }
            _ => return Members::Invalid,
        }
    }
}

/// Bytes that end a string's plain run: `"`, `\` and control characters.
const fn stops() -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
}
static STOP: [bool; 256] = stops();

/// Open containers: a bit per level (1 = object) for the first 64, a list beyond.
#[derive(Default)]
struct Frames {
    bits: u64,
    depth: usize,
    deep: Vec<bool>,
}

impl Frames {
    #[inline]
    fn push(&mut self, object: bool) {
        if self.depth < 64 {
            self.bits = (self.bits & !(1 << self.depth)) | (u64::from(object) << self.depth);
        } else {
            self.deep.push(object);
        }
        self.depth += 1;
    }

    /// The innermost open container: `Some(true)` for an object.
    #[inline]
    fn top(&self) -> Option<bool> {
        match self.depth {
            0 => None,
            d if d <= 64 => Some(self.bits >> (d - 1) & 1 == 1),
            _ => self.deep.last().copied(),
        }
    }

    #[inline]
    fn pop(&mut self) {
        if self.depth > 64 {
            self.deep.pop();
        }
        self.depth -= 1;
    }
}

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    /// Skips whitespace; the next byte, if any.
    #[inline]
    fn ws(&mut self) -> Option<u8> {
        // Compact JSON has no whitespace between tokens, and every whitespace byte is
        // below `!`: one comparison decides the common case.
        let c = *self.b.get(self.i)?;
        if c > b' ' {
            return Some(c);
        }
        while let Some(&c) = self.b.get(self.i) {
            if !matches!(c, b' ' | b'\n' | b'\t' | b'\r') {
                return Some(c);
            }
            self.i += 1;
        }
        None
    }

    /// Only whitespace may follow the document.
    fn end(&mut self) -> Members {
        if self.ws().is_none() {
            Members::Object
        } else {
            Members::Invalid
        }
    }

    /// A string's rest, from just past its opening quote to just past its closing one.
    /// `Ok(true)` when it holds an escape.
    #[inline(always)]
    fn string(&mut self) -> Result<bool, ()> {
        const ONES: u64 = u64::MAX / 255;
        let mut escaped = false;
        loop {
            // Eight bytes at a time while none can end the run (the lowest flagged
            // byte of a word is exact; the ones above it may not be).
            while let Some(chunk) = self.b.get(self.i..self.i + 8) {
                let w = u64::from_le_bytes(chunk.try_into().map_err(|_| ())?);
                let ctrl = w.wrapping_sub(ONES * 0x20) & !w;
                let q = w ^ (ONES * u64::from(b'"'));
                let q = q.wrapping_sub(ONES) & !q;
                let s = w ^ (ONES * u64::from(b'\\'));
                let s = s.wrapping_sub(ONES) & !s;
                let hit = (ctrl | q | s) & (ONES << 7);
                if hit != 0 {
                    self.i += hit.trailing_zeros() as usize / 8;
                    break;
                }
                self.i += 8;
            }
            while self.b.get(self.i).is_some_and(|&c| !STOP[c as usize]) {
                self.i += 1;
            }
            match self.b.get(self.i) {
                Some(b'"') => {
                    self.i += 1;
                    return Ok(escaped);
                }
                Some(b'\\') => {
                    escaped = true;
                    self.i += 1;
                    self.escape()?;
                }
                _ => return Err(()),
            }
        }
    }

    /// An escape's rest, after its backslash.
    fn escape(&mut self) -> Result<(), ()> {
        let c = *self.b.get(self.i).ok_or(())?;
        self.i += 1;
        match c {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Ok(()),
            b'u' => match self.b.get(self.i..self.i + 4) {
                Some(h) if h.iter().all(u8::is_ascii_hexdigit) => {
                    self.i += 4;
                    Ok(())
                }
                _ => Err(()),
            },
            _ => Err(()),
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        self.i - start
    }

    /// A number, at its `-` or first digit.
    fn number(&mut self) -> Result<(), ()> {
        if self.b.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        match self.b.get(self.i) {
            Some(b'0') => {
                self.i += 1;
                if self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
                    return Err(());
                }
            }
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(()),
        }
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return Err(());
            }
        }
        if matches!(self.b.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.b.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return Err(());
            }
        }
        Ok(())
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), ()> {
        if self.b.get(self.i..).is_some_and(|rest| rest.starts_with(word)) {
            self.i += word.len();
            Ok(())
        } else {
            Err(())
        }
    }

    /// An object member's key and colon, from the whitespace before the key.
    fn key(&mut self) -> Result<(), ()> {
        if self.ws() != Some(b'"') {
            return Err(());
        }
        self.i += 1;
        self.string()?;
        if self.ws() != Some(b':') {
            return Err(());
        }
        self.i += 1;
        Ok(())
    }

    /// One whole value, containers included, from the whitespace before it.
    fn value(&mut self) -> Result<(), ()> {
        let mut frames = Frames::default();
        loop {
            let c = self.ws().ok_or(())?;
            match c {
                b'n' => self.literal(b"null")?,
                b't' => self.literal(b"true")?,
                b'f' => self.literal(b"false")?,
                b'-' | b'0'..=b'9' => self.number()?,
                b'"' => {
                    self.i += 1;
                    self.string()?;
                }
                b'[' | b'{' => {
                    self.i += 1;
                    let object = c == b'{';
                    let close = if object { b'}' } else { b']' };
                    if self.ws() == Some(close) {
                        self.i += 1;
                    } else {
                        frames.push(object);
                        if object {
                            self.key()?;
                        }
                        continue;
                    }
                }
                _ => return Err(()),
            }
            // A value ended: close containers until a comma opens the next value.
            loop {
                let Some(object) = frames.top() else { return Ok(()) };
                match self.ws().ok_or(())? {
                    b',' => {
                        self.i += 1;
                        if object {
                            self.key()?;
                        }
                        break;
                    }
                    b'}' if object => {
                        self.i += 1;
                        frames.pop();
                    }
                    b']' if !object => {
                        self.i += 1;
                        frames.pop();
                    }
                    _ => return Err(()),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{top_level_keys, Scan};
    use crate::validate::top_level_present;
    use proptest::prelude::*;

    /// The scan agrees with serde_json wherever it decides.
    fn agrees(bytes: &[u8], keys: &[String]) -> Result<Scan, TestCaseError> {
        let scan = top_level_keys(bytes, keys);
        let oracle = top_level_present(bytes, keys);
        let text = String::from_utf8_lossy(bytes);
        match scan {
            Scan::Present(mask) => {
                let seen = oracle.map_err(|e| TestCaseError::fail(format!("scan accepted, serde refused ({e}): {text}")))?;
                let seen = seen.ok_or_else(|| TestCaseError::fail(format!("scan found an object, serde did not: {text}")))?;
                for (i, s) in seen.iter().enumerate() {
                    prop_assert_eq!(mask >> i & 1 == 1, *s, "key {} in {}", keys[i], text);
                }
            }
            Scan::Invalid => prop_assert!(oracle.is_err(), "scan refused, serde accepted: {}", text),
            Scan::Unsure => {}
        }
        Ok(scan)
    }

    fn json() -> impl Strategy<Value = String> {
        let ws = prop::sample::select(vec!["", " ", "\n", "\t", "\r\n  "]);
        let leaf = prop_oneof![
            Just("null".to_string()),
            Just("true".to_string()),
            Just("false".to_string()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<f64>().prop_map(|f| serde_json::to_string(&f).unwrap()),
            prop::sample::select(vec!["0", "-0", "1e5", "1E+2", "-3.25e-7", "0.5"]).prop_map(str::to_string),
            ".{0,12}".prop_map(|s| serde_json::to_string(&s).unwrap()),
            prop::sample::select(vec![r#""a\"b""#, r#""\u00e9\n""#, r#""\ud83d\ude00""#, r#""\/\b\f\r\t\\""#]).prop_map(str::to_string),
        ];
        leaf.prop_recursive(5, 48, 6, move |inner| {
            let ws = ws.clone();
            prop_oneof![
                (prop::collection::vec(inner.clone(), 0..5), ws.clone())
                    .prop_map(|(v, w)| format!("[{w}{}{w}]", v.join(&format!("{w},{w}")))),
                (prop::collection::vec(("[a-c]{1,2}", inner), 0..5), ws).prop_map(|(v, w)| {
                    let members: Vec<String> = v.into_iter().map(|(k, x)| format!("\"{k}\"{w}:{w}{x}")).collect();
                    format!("{{{w}{}{w}}}", members.join(","))
                }),
            ]
        })
    }

    fn keys() -> Vec<String> {
        ["a", "b", "choices", "c"].iter().map(|s| s.to_string()).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Objects with plain keys are always decided here, as serde_json decides them.
        #[test]
        fn objects_are_decided_as_serde_json_decides(members in prop::collection::vec(("[a-c]|choices", json()), 0..6), pad in "[ \n]{0,2}") {
            let body: Vec<String> = members.iter().map(|(k, v)| format!("\"{k}\":{pad}{v}")).collect();
            let doc = format!("{pad}{{{pad}{}}}{pad}", body.join(&format!("{pad},")));
            let scan = agrees(doc.as_bytes(), &keys())?;
            prop_assert!(matches!(scan, Scan::Present(_)), "{} -> {:?}", doc, scan);
        }

        /// Damaged documents: refused or accepted exactly as serde_json would.
        #[test]
        fn damaged_documents_agree_with_serde_json(
            members in prop::collection::vec(("[a-c]|choices", json()), 1..5),
            edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, prop::sample::select(b"{}[]\",:\\ .-0e9nu\x01\xff".to_vec())), 1..4),
        ) {
            let body: Vec<String> = members.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
            let mut doc = format!("{{{}}}", body.join(",")).into_bytes();
            for (at, kind, byte) in edits {
                let i = at.index(doc.len() + 1);
                match kind {
                    0 if i < doc.len() => { doc.remove(i); }
                    1 if i < doc.len() => doc[i] = byte,
                    _ => doc.insert(i, byte),
                }
            }
            agrees(&doc, &keys())?;
        }
    }

    #[test]
    fn edge_cases_agree_with_serde_json() {
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(300), "]".repeat(300));
        let mixed = format!("{{\"a\":{}1{}}}", "[{\"k\":".repeat(70), "}]".repeat(70));
        let unbalanced = format!("{{\"a\":{}1{}}}", "[{\"k\":".repeat(70), "]}".repeat(70));
        let deep_objects = format!("{{\"a\":{}1{}}}", "{\"k\":".repeat(200), "}".repeat(200));
        let cases: Vec<&[u8]> = vec![
            b"{}",
            b" { } ",
            b"{\"a\":null}",
            b"{\"a\":1,\"a\":null}",
            b"{\"a\":null,\"a\":[]}",
            b"{\"a\":nul}",
            b"{\"a\":1,}",
            b"{\"a\":[1,]}",
            b"{\"a\":[,1]}",
            b"{\"a\":{\"b\":1,}}",
            b"{\"a\":01}",
            b"{\"a\":-}",
            b"{\"a\":1.}",
            b"{\"a\":1e}",
            b"{\"a\":\"\x01\"}",
            b"{\"a\":\"\\x\"}",
            b"{\"a\":\"\\u12g4\"}",
            b"{\"a\":\"\xff\"}",
            b"{\"\xff\":1}",
            b"{\"a\":1} x",
            b"{\"a\":1}}",
            b"{\"a\" 1}",
            b"{a:1}",
            b"{\"a\":\"12345678\\\"9012345678\"}",
            b"{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"hi\"}}]}",
            deep.as_bytes(),
            deep_objects.as_bytes(),
            mixed.as_bytes(),
            unbalanced.as_bytes(),
        ];
        for c in cases {
            agrees(c, &keys()).unwrap();
        }
        assert_eq!(top_level_keys(b"[1]", &keys()), Scan::Unsure);
        assert_eq!(top_level_keys(b"{\"\\u0061\":1}", &keys()), Scan::Unsure);
        assert_eq!(top_level_keys(b"{\"a\":1,\"a\":null}", &keys()), Scan::Present(0));
        assert_eq!(top_level_keys(b"{\"choices\":[],\"b\":{}}", &keys()), Scan::Present(0b110));
        assert_eq!(top_level_keys(b"{\"a\":1,}", &keys()), Scan::Invalid);
        assert_eq!(top_level_keys(deep.as_bytes(), &keys()), Scan::Present(1));
        assert_eq!(top_level_keys(mixed.as_bytes(), &keys()), Scan::Present(1));
        assert_eq!(top_level_keys(unbalanced.as_bytes(), &keys()), Scan::Invalid);
    }

    #[test]
    fn members_come_with_their_value_text() {
        let doc = br#" { "a" : [1, {"b":2}] ,"skip":{"a":1}, "c":"x\"y", "d":null }  "#;
        let mut got = Vec::new();
        let found = super::object_members(
            doc,
            |k| ["a", "c", "d"].iter().position(|n| n.as_bytes() == k),
            |slot, v| got.push((slot, String::from_utf8_lossy(v).into_owned())),
        );
        assert_eq!(found, super::Members::Object);
        assert_eq!(got, vec![(0, r#"[1, {"b":2}]"#.to_string()), (1, r#""x\"y""#.to_string()), (2, "null".to_string())]);
        assert_eq!(super::object_members(b"[]", |_| None, |_, _| ()), super::Members::Unsure);
        assert_eq!(super::object_members(b"{\"a\":}", |_| Some(0), |_, _| panic!("no value")), super::Members::Invalid);
    }
}
