//! Range checks of loaded numbers and their error: a field's path in a saved model
//! (`providers[0].latency.half_life`), built from static key names and indexes, and why
//! its value was refused. Sketches, rates, providers and the model share it, so an error
//! names the field whatever part checked it.

use std::fmt;

/// One step of a [`FieldPath`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Key(&'static str),
    Index(usize),
}

/// Where a field sits in a saved model: keys and indexes from the top.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldPath(Vec<Step>);

impl FieldPath {
    /// A top-level key.
    pub fn root(key: &'static str) -> FieldPath {
        FieldPath(vec![Step::Key(key)])
    }

    /// This path's member `key`.
    pub fn key(&self, key: &'static str) -> FieldPath {
        self.then(Step::Key(key))
    }

    /// This path's element `i`.
    pub fn index(&self, i: usize) -> FieldPath {
        self.then(Step::Index(i))
    }

    fn then(&self, step: Step) -> FieldPath {
        let mut steps = Vec::with_capacity(self.0.len() + 1);
        steps.extend_from_slice(&self.0);
        steps.push(step);
        FieldPath(steps)
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, step) in self.0.iter().enumerate() {
            match step {
                Step::Key(key) if k == 0 => f.write_str(key)?,
                Step::Key(key) => write!(f, ".{key}")?,
                Step::Index(i) => write!(f, "[{i}]")?,
            }
        }
        Ok(())
    }
}

/// Why a field's value was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FieldError {
    /// Not finite, or outside `[lo, hi]`.
    #[error("{field} must be a number from {lo} to {hi} (found {found})")]
    OutOfRange {
        /// The field.
        field: FieldPath,
        /// Smallest value allowed.
        lo: f64,
        /// Largest value allowed.
        hi: f64,
        /// The value read.
        found: f64,
    },
    /// Zero or negative where only a positive number makes sense.
    #[error("{field} must be a positive number (found {found})")]
    NotPositive {
        /// The field.
        field: FieldPath,
        /// The value read.
        found: f64,
    },
    /// A bucket vector of the wrong length.
    #[error("{field} must have {expected} buckets (found {found})")]
    BucketCount {
        /// The field.
        field: FieldPath,
        /// Buckets expected.
        expected: usize,
        /// Buckets read.
        found: usize,
    },
}

/// `x` within `[lo, hi]` (and finite), else an error naming `field`.
pub(crate) fn within(field: impl FnOnce() -> FieldPath, x: f64, lo: f64, hi: f64) -> Result<(), FieldError> {
    if x.is_finite() && (lo..=hi).contains(&x) {
        Ok(())
    } else {
        Err(FieldError::OutOfRange { field: field(), lo, hi, found: x })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_prints_as_written_in_the_file() {
        let p = FieldPath::root("providers").index(3).key("warm_by_gap").index(0).key("hits");
        assert_eq!(p.to_string(), "providers[3].warm_by_gap[0].hits");
        let e = within(|| FieldPath::root("config").key("half_life"), -1.0, 0.0, 1e9).unwrap_err();
        assert_eq!(e.to_string(), "config.half_life must be a number from 0 to 1000000000 (found -1)");
        assert!(within(|| unreachable!(), 5.0, 0.0, 10.0).is_ok());
    }
}
