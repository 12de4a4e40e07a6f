//! Credentials that never print: `Debug` and `Display` show `***`, and a value that
//! comes back from a provider is redacted ([`crate::redact`]): making a `Secret`
//! registers it there.

use std::fmt;

/// A credential. Its value is only reachable through [`Secret::expose`], used when
/// building an `Authorization` header.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Secret {
        let value = value.into();
        crate::redact::register(&value);
        Secret(value)
    }

    /// Reads the environment variable `name`.
    pub fn from_env(name: &str) -> Option<Secret> {
        std::env::var(name).ok().filter(|v| !v.trim().is_empty()).map(Secret::new)
    }

    /// The value, for an auth header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn never_prints() {
        let s = super::Secret::new("rp_abc123");
        assert_eq!(format!("{s:?} {s}"), "Secret(***) ***");
    }
}
