//! A one-pass syntax check of a JSON object that reports which of some top-level keys
//! it holds with a non-null value, without building a document or allocating: the
//! check every OpenAI-style reply gets before it may win a race.
//!
//! It accepts exactly what `serde_json` accepts when it reads an object's keys as
//! strings and skips its values (a property test holds it to that). What it does not
//! handle itself (a document that is not an object, a top-level key with escapes, more
//! than 64 keys asked for) it leaves to the caller as [`Scan::Unsure`].

use std::fmt;

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

/// The text of the first element of a JSON array: `None` when `bytes` (one JSON value,
/// already checked) is not an array or is empty, or when the element is not JSON.
pub fn first_element(bytes: &[u8]) -> Option<&[u8]> {
    let mut c = Cursor { b: bytes, i: 0 };
    if c.ws()? != b'[' {
        return None;
    }
    c.i += 1;
    if c.ws()? == b']' {
        return None;
    }
    let start = c.i;
    c.value().ok()?;
    Some(&bytes[start..c.i])
}

/// Which of `keys` a JSON object has with a non-null value, found by `serde_json` in one
/// pass over the text without building a document: the exact answer where
/// [`top_level_keys`] is [`Scan::Unsure`], and the oracle it is tested against (the common case: required top-level fields such
/// as an OpenAI completion's `choices`). `Err` when the text is not JSON; `Ok(None)`
/// when it is JSON but not an object.
pub fn top_level_present(bytes: &[u8], keys: &[String]) -> Result<Option<Vec<bool>>, serde_json::Error> {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
    struct Keys<'k>(&'k [String]);
    impl<'de> Visitor<'de> for Keys<'_> {
        type Value = Option<Vec<bool>>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON value")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut seen = vec![false; self.0.len()];
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                let present = map.next_value::<Option<IgnoredAny>>()?.is_some();
                if let Some(i) = self.0.iter().position(|k| *k == key) {
                    seen[i] = present; // the last duplicate wins, as in a parsed document
                }
            }
            Ok(Some(seen))
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let out = (&mut de).deserialize_any(Keys(keys))?;
    de.end()?;
    Ok(out)
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
mod tests;
