//! The `Date` response header, remade once a second per thread (shared by the fast
//! path's replies and the rewritten protocol-error replies of hyper's path).

use std::cell::RefCell;
use std::time::SystemTime;

thread_local! {
    /// The `Date` header's value for the current second.
    static DATE: RefCell<(u64, String)> = const { RefCell::new((0, String::new())) };
}

/// Appends the `Date` header (RFC 9110's IMF-fixdate, remade once a second per thread).
pub fn http_date(out: &mut Vec<u8>) {
    let now = SystemTime::now();
    let second = now.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    DATE.with(|date| {
        let mut date = date.borrow_mut();
        if date.0 != second || date.1.is_empty() {
            *date = (second, httpdate::fmt_http_date(now));
        }
        out.extend_from_slice(b"date: ");
        out.extend_from_slice(date.1.as_bytes());
        out.extend_from_slice(b"\r\n");
    });
}
