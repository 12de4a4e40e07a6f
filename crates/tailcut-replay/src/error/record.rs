//! What is wrong with a live trace record: a field of the wrong type or out of range, a
//! receipt's time before its cancel, a policy label or kind that cannot be read. A field
//! is named as written in the record (`receipts[0].cancel_sent_ms`), and the offending
//! value is kept and quoted (long values cut).

use serde_json::{Number, Value};
use std::fmt;

use super::show;

/// The object of a record a field sits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The record itself.
    Top,
    /// Its `receipt` (a cancel audit's).
    Receipt,
    /// Its `cancellation`.
    Cancellation,
    /// An element of one of its receipt arrays.
    InList {
        /// `receipts` or `cancellations`.
        list: &'static str,
        /// The element's index.
        index: usize,
    },
    /// Its `learned` object.
    Learned,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Top => Ok(()),
            Place::Receipt => f.write_str("receipt"),
            Place::Cancellation => f.write_str("cancellation"),
            Place::InList { list, index } => write!(f, "{list}[{index}]"),
            Place::Learned => f.write_str("learned"),
        }
    }
}

/// A field of a record: its place and key (no key: the place itself, a receipt).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Where it sits.
    pub place: Place,
    /// Its key there.
    pub key: Option<&'static str>,
}

impl Field {
    /// The field `key` of the record itself.
    pub fn top(key: &'static str) -> Field {
        Field { place: Place::Top, key: Some(key) }
    }

    /// The field `key` of `place`.
    pub fn at(place: Place, key: &'static str) -> Field {
        Field { place, key: Some(key) }
    }

    /// `place` itself.
    pub fn whole(place: Place) -> Field {
        Field { place, key: None }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.place, self.key) {
            (Place::Top, Some(key)) => f.write_str(key),
            (place, Some(key)) => write!(f, "{place}.{key}"),
            (place, None) => write!(f, "{place}"),
        }
    }
}

/// What a field should hold, as a message says it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Expected {
    /// Milliseconds in `[0, max]`.
    Millis {
        /// The largest accepted.
        max: f64,
    },
    /// A number of milliseconds, or null.
    MillisOrNull,
    /// A string.
    Str,
    /// A boolean or null.
    BoolOrNull,
    /// A non-negative integer.
    Count,
    /// A receipt object.
    Receipt,
    /// An array of receipts.
    Receipts,
    /// An array.
    Array,
    /// A probability.
    Probability,
    /// Dollars in `[0, 1e6]`.
    Dollars,
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expected::Millis { max } => write!(f, "milliseconds between 0 and {}", show(*max)),
            Expected::MillisOrNull => f.write_str("a number of milliseconds or null"),
            Expected::Str => f.write_str("a string"),
            Expected::BoolOrNull => f.write_str("true, false or null"),
            Expected::Count => f.write_str("a count (a non-negative integer)"),
            Expected::Receipt => f.write_str("a receipt object"),
            Expected::Receipts => f.write_str("an array of receipts"),
            Expected::Array => f.write_str("an array"),
            Expected::Probability => f.write_str("a probability between 0 and 1"),
            Expected::Dollars => f.write_str("dollars between 0 and 1000000"),
        }
    }
}

/// The policy-label forms the reference tool writes, by record kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelForm {
    /// `single_request`.
    Single,
    /// `hedged_request`.
    Hedge,
    /// `state_aware_request`.
    Cutover,
}

impl fmt::Display for LabelForm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LabelForm::Single => "single:PROVIDER",
            LabelForm::Hedge => "PRIMARY->HEDGE@DELAYs",
            LabelForm::Cutover => "cutover:PRIMARY->HEDGE@q..s+s..s",
        })
    }
}

/// Why a live record is refused.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// A number out of range.
    #[error("`{field}` is {}: expected {expected}", number(.value))]
    OutOfRange {
        /// The field.
        field: Field,
        /// The value read.
        value: Number,
        /// What it should be.
        expected: Expected,
    },
    /// A value of the wrong type.
    #[error("`{field}` is {}: expected {expected}", brief(.found))]
    WrongType {
        /// The field.
        field: Field,
        /// The value read.
        found: Value,
        /// What it should be.
        expected: Expected,
    },
    /// A receipt's ack or terminal time before its cancel was sent.
    #[error("`{field}` ({}) is before `{}` ({})", show(*.at), Field::at(.field.place, "cancel_sent_ms"), show(*.sent))]
    BeforeCancel {
        /// `cancel_ack_ms` or `terminal_ms` of a receipt.
        field: Field,
        /// Its time, ms.
        at: f64,
        /// `cancel_sent_ms`.
        sent: f64,
    },
    /// A record that is not a JSON object.
    #[error("expected a JSON object, found {}", brief(.found))]
    NotAnObject {
        /// What the line holds.
        found: Value,
    },
    /// A legacy label launching an attempt at an offset out of range.
    #[error("policy label `{label}` launches at {}s: expected seconds between 0 and {}", show(*.seconds), show(*.max))]
    LaunchOutOfRange {
        /// The label.
        label: String,
        /// The offset read, s.
        seconds: f64,
        /// The largest offset accepted, s.
        max: f64,
    },
    /// A `policy_kind` that is not a kind.
    #[error("policy_kind: {source}")]
    PolicyKind {
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// A `learned` field that is not an object.
    #[error("`learned` is not an object: expected the learned decision's object")]
    LearnedNotAnObject,
    /// A reference record whose label does not have its kind's form.
    #[error("`policy` is \"{policy}\": expected {expected}")]
    BadLabel {
        /// The label.
        policy: String,
        /// The form its kind writes.
        expected: LabelForm,
    },
}

/// A number as quoted: as [`show`] writes it.
fn number(n: &Number) -> String {
    n.as_f64().map_or(n.to_string(), show)
}

/// A value as quoted in a message: short values whole, long ones cut.
fn brief(v: &Value) -> String {
    match v {
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
        other => {
            let text = other.to_string();
            if text.chars().count() > 40 {
                format!("{}…", text.chars().take(40).collect::<String>())
            } else {
                text
            }
        }
    }
}
