//! Serde visitors for one trace line: the top-level keys of a record, its provider arms
//! and their metrics, read straight into an [`ArmRaw`] per provider with no JSON value
//! tree.

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use std::fmt;

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ArmRaw {
    pub(super) present: bool,
    pub(super) wall: Option<f64>,
    pub(super) valid: bool,
    /// `metrics["{name}_delay_ms"]` (reference format).
    pub(super) metrics_queue_ms: Option<f64>,
    /// `queue_delay_ms` (tailcut's format; wins over the metric).
    pub(super) queue_delay_ms: Option<f64>,
}

pub(super) struct ProviderIndex {
    pub(super) names: Vec<String>,
    pub(super) delay_keys: Vec<String>,
}

pub(super) struct LineState<'a> {
    pub(super) index: &'a ProviderIndex,
    pub(super) arms: Vec<ArmRaw>,
    pub(super) unknown: Option<String>,
}

#[derive(Default)]
pub(super) struct LineHead {
    pub(super) is_round: bool,
    pub(super) round_id: Option<i64>,
    pub(super) block: Option<i64>,
}

enum TopKey {
    Kind,
    RoundId,
    Block,
    Providers,
    Other,
}

struct TopKeyVisitor;

impl Visitor<'_> for TopKeyVisitor {
    type Value = TopKey;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<TopKey, E> {
        Ok(match v {
            "kind" => TopKey::Kind,
            "round_id" => TopKey::RoundId,
            "block" => TopKey::Block,
            "providers" => TopKey::Providers,
            _ => TopKey::Other,
        })
    }
}

impl<'de> serde::Deserialize<'de> for TopKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<TopKey, D::Error> {
        d.deserialize_identifier(TopKeyVisitor)
    }
}

struct KindSeed;

impl<'de> DeserializeSeed<'de> for KindSeed {
    type Value = bool;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(IsRoundVisitor)
    }
}

struct IsRoundVisitor;

impl Visitor<'_> for IsRoundVisitor {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a record kind")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<bool, E> {
        Ok(v == "round" || v == "tailcut_round")
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
}

/// A JSON number or null read as a `T`; the field name goes into type errors.
struct NumberSeed<T>(&'static str, std::marker::PhantomData<T>);

/// Why a JSON number is not an integer id (serde's custom error carries its text).
#[derive(Debug, thiserror::Error)]
enum IdError {
    /// Past `i64::MAX`.
    #[error("integer out of range")]
    TooLarge,
    /// A float with a fraction, or past 2^53.
    #[error("`{field}`: expected an integer, got {value}")]
    NotAnInteger { field: &'static str, value: f64 },
}

/// A number type a [`NumberSeed`] reads: how it is described in type errors and how each
/// JSON number form converts (or why it does not).
trait FromJsonNumber: Sized {
    /// What the field holds, before "for `field`" in a type error.
    const EXPECTING: &'static str;
    /// Why a number does not convert.
    type Error: fmt::Display;
    fn from_i64(v: i64) -> Result<Self, Self::Error>;
    fn from_u64(v: u64) -> Result<Self, Self::Error>;
    fn from_f64(field: &'static str, v: f64) -> Result<Self, Self::Error>;
}

/// An integer id; integral floats are accepted.
impl FromJsonNumber for i64 {
    const EXPECTING: &'static str = "an integer";
    type Error = IdError;
    fn from_i64(v: i64) -> Result<i64, IdError> {
        Ok(v)
    }
    fn from_u64(v: u64) -> Result<i64, IdError> {
        i64::try_from(v).map_err(|_| IdError::TooLarge)
    }
    fn from_f64(field: &'static str, v: f64) -> Result<i64, IdError> {
        if v.fract() == 0.0 && v.abs() < 9e15 {
            Ok(v as i64)
        } else {
            Err(IdError::NotAnInteger { field, value: v })
        }
    }
}

/// Any number.
impl FromJsonNumber for f64 {
    const EXPECTING: &'static str = "a number or null";
    type Error = std::convert::Infallible;
    fn from_i64(v: i64) -> Result<f64, Self::Error> {
        Ok(v as f64)
    }
    fn from_u64(v: u64) -> Result<f64, Self::Error> {
        Ok(v as f64)
    }
    fn from_f64(_: &'static str, v: f64) -> Result<f64, Self::Error> {
        Ok(v)
    }
}

type IntSeed = NumberSeed<i64>;
type NumSeed = NumberSeed<f64>;

impl<T> NumberSeed<T> {
    fn named(field: &'static str) -> NumberSeed<T> {
        NumberSeed(field, std::marker::PhantomData)
    }
}

impl<'de, T: FromJsonNumber> DeserializeSeed<'de> for NumberSeed<T> {
    type Value = Option<T>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<T: FromJsonNumber> Visitor<'_> for NumberSeed<T> {
    type Value = Option<T>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} for `{}`", T::EXPECTING, self.0)
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Option<T>, E> {
        T::from_i64(v).map(Some).map_err(E::custom)
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Option<T>, E> {
        T::from_u64(v).map(Some).map_err(E::custom)
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Option<T>, E> {
        T::from_f64(self.0, v).map(Some).map_err(E::custom)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }
}

/// `valid`: JSON truthiness, as the reference reads it with `bool(...)`.
struct TruthySeed;

impl<'de> DeserializeSeed<'de> for TruthySeed {
    type Value = bool;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = bool;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a boolean")
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<bool, E> {
                Ok(v)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<bool, E> {
                Ok(v != 0)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<bool, E> {
                Ok(v != 0)
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<bool, E> {
                Ok(v != 0.0)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<bool, E> {
                Ok(!v.is_empty())
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<bool, E> {
                Ok(false)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
                let mut any = false;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    any = true;
                }
                Ok(any)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
                let mut any = false;
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
                    any = true;
                }
                Ok(any)
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> DeserializeSeed<'de> for &mut LineState<'_> {
    type Value = LineHead;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<LineHead, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for &mut LineState<'_> {
    type Value = LineHead;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LineHead, A::Error> {
        let mut head = LineHead::default();
        while let Some(key) = map.next_key::<TopKey>()? {
            match key {
                TopKey::Kind => head.is_round = map.next_value_seed(KindSeed)?,
                TopKey::RoundId => head.round_id = map.next_value_seed(IntSeed::named("round_id"))?,
                TopKey::Block => head.block = map.next_value_seed(IntSeed::named("block"))?,
                TopKey::Providers => map.next_value_seed(ProvidersSeed(&mut *self))?,
                TopKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(head)
    }
}

struct ProvidersSeed<'s, 'a>(&'s mut LineState<'a>);

impl<'de> DeserializeSeed<'de> for ProvidersSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ProvidersSeed<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of provider arms")
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let state = self.0;
        while let Some(key) = map.next_key_seed(ProviderKey(state.index))? {
            match key {
                ProviderSlot::Known(p) => {
                    let delay_key = state.index.delay_keys[p].as_str();
                    let arm = map.next_value_seed(ArmSeed { delay_key })?;
                    state.arms[p] = arm;
                }
                ProviderSlot::Unknown { name } => {
                    if state.unknown.is_none() {
                        state.unknown = Some(name);
                    }
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

struct ProviderKey<'a>(&'a ProviderIndex);

/// A provider key of a round: its column, or a name with no column.
enum ProviderSlot {
    Known(usize),
    Unknown { name: String },
}

impl<'de> DeserializeSeed<'de> for ProviderKey<'_> {
    type Value = ProviderSlot;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for ProviderKey<'_> {
    type Value = ProviderSlot;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a provider key")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(match self.0.names.iter().position(|n| n == v) {
            Some(p) => ProviderSlot::Known(p),
            None => ProviderSlot::Unknown { name: v.to_string() },
        })
    }
}

struct ArmSeed<'k> {
    delay_key: &'k str,
}

enum ArmKey {
    Wall,
    Valid,
    Metrics,
    QueueDelayMs,
    Other,
}

impl<'de> serde::Deserialize<'de> for ArmKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ArmKey, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ArmKey;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ArmKey, E> {
                Ok(match v {
                    "wall_s" => ArmKey::Wall,
                    "valid" => ArmKey::Valid,
                    "metrics" => ArmKey::Metrics,
                    "queue_delay_ms" => ArmKey::QueueDelayMs,
                    _ => ArmKey::Other,
                })
            }
        }
        d.deserialize_identifier(V)
    }
}

impl<'de> DeserializeSeed<'de> for ArmSeed<'_> {
    type Value = ArmRaw;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<ArmRaw, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ArmSeed<'_> {
    type Value = ArmRaw;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a provider arm object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ArmRaw, A::Error> {
        let mut arm = ArmRaw { present: true, ..ArmRaw::default() };
        while let Some(key) = map.next_key::<ArmKey>()? {
            match key {
                ArmKey::Wall => arm.wall = map.next_value_seed(NumSeed::named("wall_s"))?,
                ArmKey::Valid => arm.valid = map.next_value_seed(TruthySeed)?,
                ArmKey::Metrics => arm.metrics_queue_ms = map.next_value_seed(MetricsSeed { delay_key: self.delay_key })?,
                ArmKey::QueueDelayMs => arm.queue_delay_ms = map.next_value_seed(NumSeed::named("queue_delay_ms"))?,
                ArmKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(arm)
    }
}

struct MetricsSeed<'k> {
    delay_key: &'k str,
}

impl<'de> DeserializeSeed<'de> for MetricsSeed<'_> {
    type Value = Option<f64>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<f64>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MetricsSeed<'_> {
    type Value = Option<f64>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a metrics object")
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Option<f64>, E> {
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<f64>, A::Error> {
        struct KeyIs<'k>(&'k str);
        impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
            type Value = bool;
            fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
                d.deserialize_str(self)
            }
        }
        impl Visitor<'_> for KeyIs<'_> {
            type Value = bool;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a metric name")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<bool, E> {
                Ok(v == self.0)
            }
        }
        let mut found = None;
        while let Some(is_delay) = map.next_key_seed(KeyIs(self.delay_key))? {
            if is_delay {
                found = map.next_value_seed(NumSeed::named("metrics.<provider>_delay_ms"))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}
