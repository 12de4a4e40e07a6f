//! What the fuzz-style tests share: a case run on its own thread under a time bound (a
//! panic or a hang becomes a failure that says which), and byte-level damage of valid
//! inputs (truncation, flipped bytes, inserted JSON punctuation and invalid UTF-8,
//! spliced copies, deep nesting).

use proptest::prelude::*;
use std::time::Duration;

/// Why a [`bounded`] case gave no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unfinished {
    /// No answer within the limit: a hang.
    #[error("no answer within {limit:?} (a hang)")]
    Hung {
        /// The limit the case was given.
        limit: Duration,
    },
    /// The case panicked.
    #[error("panicked: {message}")]
    Panicked {
        /// The panic's message (empty when it was not text).
        message: String,
    },
}

/// A proptest failure that says why the case did not finish.
impl From<Unfinished> for proptest::test_runner::Reason {
    fn from(e: Unfinished) -> Self {
        e.to_string().into()
    }
}

/// Runs `f` on its own thread: its value, or why not (it panicked, or gave no answer
/// within `limit`, a hang).
pub fn bounded<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> Result<T, Unfinished> {
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => {
            let _ = worker.join();
            Ok(v)
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(Unfinished::Hung { limit }),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            let why = worker
                .join()
                .err()
                .and_then(|p| p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())));
            Err(Unfinished::Panicked { message: why.unwrap_or_default() })
        }
    }
}

/// One edit of a byte string.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Cut at this position (modulo the length).
    Truncate(usize),
    /// XOR the byte at this position with this (never zero) value.
    Flip(usize, u8),
    /// Insert these bytes here.
    Insert(usize, Vec<u8>),
    /// Append a copy of the bytes between two positions.
    Splice(usize, usize),
    /// Wrap everything in this many `[`.
    Nest(usize),
}

/// An edit: the punctuation of JSON, `\0`, an invalid UTF-8 byte and a lone UTF-8 lead
/// byte are the inserted bytes.
pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), prop::collection::vec(prop::sample::select(b"{}[]\",:\\0e-.\xff\xc3 ".to_vec()), 1..6))
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::Splice(a, b)),
        (1usize..4000).prop_map(Mutation::Nest),
    ]
}

/// `bytes` with `mutations` applied in turn.
pub fn mutate(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        let len = bytes.len().max(1);
        match m {
            Mutation::Truncate(i) => bytes.truncate(i % len),
            Mutation::Flip(i, b) => {
                if let Some(x) = bytes.get_mut(i % len) {
                    *x ^= b | 1;
                }
            }
            Mutation::Insert(i, b) => {
                let at = (i % len).min(bytes.len());
                bytes.splice(at..at, b.iter().copied());
            }
            Mutation::Splice(a, b) => {
                let (a, b) = (a % len, b % len);
                let (lo, hi) = (a.min(b).min(bytes.len()), a.max(b).min(bytes.len()));
                let piece = bytes[lo..hi].to_vec();
                bytes.extend_from_slice(&piece);
            }
            Mutation::Nest(n) => {
                let mut nested = vec![b'['; *n];
                nested.extend_from_slice(&bytes);
                bytes = nested;
            }
        }
    }
    bytes
}

/// One of `seeds` with one to five mutations.
pub fn damaged(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    (proptest::sample::select(seeds), prop::collection::vec(mutation(), 1..6)).prop_map(|(seed, m)| mutate(seed, &m))
}

/// The three fuzz-style tests of a checker of byte strings, bounded for CI:
/// `seed_corpus` (every seed `$seeds()` returns passes as it is), `arbitrary_bytes`
/// (`$cases` strings of up to 600 random bytes) and `damaged_seeds` (`$cases` of the seeds
/// under 4 KiB, each [`damaged`]). `$check` takes the bytes and returns
/// `Result<(), TestCaseError>`; the crate that calls this depends on `proptest`.
#[macro_export]
macro_rules! fuzz_tests {
    (seeds: $seeds:path, check: $check:path, cases: $cases:expr) => {
        #[test]
        fn seed_corpus() {
            for seed in $seeds() {
                $check(&seed).unwrap();
            }
        }

        ::proptest::proptest! {
            #![proptest_config(::proptest::prelude::ProptestConfig {
                cases: $cases,
                failure_persistence: None,
                ..::proptest::prelude::ProptestConfig::default()
            })]

            #[test]
            fn arbitrary_bytes(bytes in ::proptest::collection::vec(::proptest::prelude::any::<u8>(), 0..600)) {
                $check(&bytes)?;
            }

            #[test]
            fn damaged_seeds(bytes in $crate::fuzz::damaged($seeds().into_iter().filter(|s| s.len() < 4096).collect())) {
                $check(&bytes)?;
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bounded_case_reports_its_value_its_panic_or_its_hang() {
        assert_eq!(bounded(Duration::from_secs(5), || 7), Ok(7));
        let panicked = bounded(Duration::from_secs(5), || -> u8 { panic!("boom") }).unwrap_err();
        assert_eq!(panicked, Unfinished::Panicked { message: "boom".into() });
        assert_eq!(panicked.to_string(), "panicked: boom");
        let hang = bounded(Duration::from_millis(50), || std::thread::sleep(Duration::from_secs(2)));
        assert_eq!(hang.unwrap_err().to_string(), "no answer within 50ms (a hang)");
    }

    #[test]
    fn mutations_edit_as_named() {
        let doc = b"{\"a\":1}".to_vec();
        assert_eq!(mutate(doc.clone(), &[Mutation::Truncate(3)]), b"{\"a");
        assert_eq!(mutate(doc.clone(), &[Mutation::Nest(2)]), b"[[{\"a\":1}");
        assert_eq!(mutate(doc.clone(), &[Mutation::Insert(0, b"x".to_vec())]), b"x{\"a\":1}");
        assert_ne!(mutate(doc.clone(), &[Mutation::Flip(0, 0)]), doc);
    }
}
