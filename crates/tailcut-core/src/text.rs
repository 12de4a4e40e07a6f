//! Text from files (provider and policy names in traces, models, configs) made safe to
//! print on a terminal: [`escaped`] writes control characters as escapes, so a name
//! cannot move the cursor, recolour the screen, or forge a line of output. Every text
//! output that prints a name read from a file goes through it.

use std::borrow::Cow;
use std::fmt::Write;

/// `s` with every control character (C0, DEL, C1, and the bidirectional overrides and
/// isolates that reorder what a terminal shows) written as a Rust-style escape: `\n`,
/// `\t`, `\r`, `\u{1b}`, ... and a backslash as `\\` only when something was escaped,
/// so a plain name comes back borrowed and unchanged.
pub fn escaped(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\\' => out.push_str("\\\\"),
            c if needs_escape(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}')
}

#[cfg(test)]
mod tests {
    use super::escaped;

    #[test]
    fn control_characters_come_out_escaped_and_plain_names_untouched() {
        assert!(matches!(escaped("runpod-eu"), std::borrow::Cow::Borrowed("runpod-eu")));
        assert_eq!(escaped("café ☕"), "café ☕");
        assert_eq!(escaped("a\x1b[31mred\x1b[0m"), "a\\u{1b}[31mred\\u{1b}[0m");
        assert_eq!(escaped("x\ny\r\tz\u{7f}\u{9b}"), "x\\ny\\r\\tz\\u{7f}\\u{9b}");
        assert_eq!(escaped("evil\u{202e}txt.exe"), "evil\\u{202e}txt.exe");
        // A backslash is doubled only when there is an escape to tell it from.
        assert_eq!(escaped("a\\b"), "a\\b");
        assert_eq!(escaped("a\\b\n"), "a\\\\b\\n");
    }
}
