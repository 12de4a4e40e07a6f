//! Whether a stored model may be trusted: [`check_model`] and why it refuses one
//! ([`BadModel`], naming the number and where it is).

use serde_json::Value;
use tailcut_model::Model;

/// Why a stored model was refused (the policy then starts cold).
#[derive(Debug, thiserror::Error)]
pub enum BadModel {
    /// The text is not a model of this format.
    #[error(transparent)]
    Format(#[from] tailcut_model::ModelFormatError),
    /// The model covers other providers, or the same in another order.
    #[error("covers providers {have:?}, the policy has {want:?}")]
    Providers {
        /// The model's providers.
        have: Vec<String>,
        /// The policy's.
        want: Vec<String>,
    },
    /// `half_life` below 1 (or not finite).
    #[error("half_life {0} is not a number of at least 1")]
    HalfLife(f64),
    /// `slow_quantile` outside (0, 1).
    #[error("slow_quantile {0} is not in (0, 1)")]
    SlowQuantile(f64),
    /// A number of the saved form that is negative, not finite or absurd.
    #[error("{at} = {value} is out of range (expected a finite number from 0 to 1e200)")]
    OutOfRange {
        /// Its path in the saved form (`model.providers[0].updates`).
        at: String,
        /// The number.
        value: serde_json::Number,
    },
    /// A provider's failure or invalid rate outside [0, 1].
    #[error("{provider}: {what} {value} is not in [0, 1]")]
    Rate {
        /// The provider.
        provider: String,
        /// `failure rate` or `invalid rate`.
        what: &'static str,
        /// The rate.
        value: f64,
    },
    /// A provider's latency quantile that is negative or not finite.
    #[error("{provider}: latency quantile {q} is not a finite, non-negative number")]
    Quantile {
        /// The provider.
        provider: String,
        /// The quantile (0.5 or 0.99).
        q: f64,
    },
    /// The model could not be written as JSON to be checked.
    #[error("{0}")]
    Encode(#[from] serde_json::Error),
}

/// Reads a stored model and checks it (see [`check_model`]).
pub fn load_model(text: &str, names: &[String]) -> Result<Model, BadModel> {
    let m = Model::from_json(text)?;
    check_model(&m, names)?;
    Ok(m)
}

/// Checks a loaded model before a policy trusts it: the providers this policy covers, in
/// its order, and every number in range (finite, not negative; rates and shares within
/// [0, 1] where they are shares). `Model::from_json` has already checked the format.
pub fn check_model(m: &Model, names: &[String]) -> Result<(), BadModel> {
    if !m.providers.iter().map(|p| p.name.as_str()).eq(names.iter().map(String::as_str)) {
        return Err(BadModel::Providers { have: m.providers.iter().map(|p| p.name.clone()).collect(), want: names.to_vec() });
    }
    if !(m.config.half_life.is_finite() && m.config.half_life >= 1.0) {
        return Err(BadModel::HalfLife(m.config.half_life));
    }
    if !(m.config.slow_quantile > 0.0 && m.config.slow_quantile < 1.0) {
        return Err(BadModel::SlowQuantile(m.config.slow_quantile));
    }
    // Every number of the saved form: finite and not negative (JSON has no NaN, but a
    // hand-edited or corrupt row may hold 1e999 or a negative count).
    fn walk(v: &Value, at: &str) -> Result<(), BadModel> {
        match v {
            Value::Number(n) => match n.as_f64() {
                Some(x) if x.is_finite() && (0.0..=1e200).contains(&x) => Ok(()),
                _ => Err(BadModel::OutOfRange { at: at.to_string(), value: n.clone() }),
            },
            Value::Array(a) => a.iter().enumerate().try_for_each(|(i, x)| walk(x, &format!("{at}[{i}]"))),
            Value::Object(o) => o.iter().try_for_each(|(k, x)| walk(x, &format!("{at}.{k}"))),
            _ => Ok(()),
        }
    }
    walk(&serde_json::to_value(m)?, "model")?;
    for p in &m.providers {
        for (what, value) in [("failure rate", p.failed.rate(0.0, 0.0)), ("invalid rate", p.invalid.rate(0.0, 0.0))] {
            if !(0.0..=1.0).contains(&value) {
                return Err(BadModel::Rate { provider: p.name.clone(), what, value });
            }
        }
        for q in [0.5, 0.99] {
            if p.latency.quantile(q).is_some_and(|x| !x.is_finite() || x < 0.0) {
                return Err(BadModel::Quantile { provider: p.name.clone(), q });
            }
        }
    }
    Ok(())
}
