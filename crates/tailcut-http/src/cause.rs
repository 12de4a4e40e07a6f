//! Errors as one line of text, for replies and receipts: the error and its causes.

/// An error and its sources as one line (`outer: cause: root cause`), skipping a cause
/// whose text the line already ends with.
pub fn cause_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut line = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !line.ends_with(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = c.source();
    }
    line
}
