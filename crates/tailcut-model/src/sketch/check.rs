//! Range checks of a loaded sketch or rate, as a config's numbers are checked: every
//! number finite and within what the code can produce, so nothing read from a file can
//! overflow into an infinity (which JSON saves as `null`, and the next load refuses).

use super::{DecayedRate, DecayedSketch, MAX_S};
use crate::field::{within, FieldError, FieldPath};

/// The largest weight a sketch or rate can hold: each insert adds its scale (at most
/// [`SCALE_MAX`]), over at most a few billion half-lives' worth of inserts before the
/// decay makes old ones vanish. Products of two weights stay finite.
pub(crate) const WEIGHT_MAX: f64 = 1e120;
/// The largest scale: renormalised back to 1 once it passes 1e100.
pub(crate) const SCALE_MAX: f64 = 1e101;
/// The longest half-life, in observations.
pub(crate) const HALF_LIFE_MAX: f64 = 1e9;

/// A half-life: at least 1 observation (what [`DecayedSketch::new`] makes), finite.
fn half_life(field: &FieldPath, x: f64) -> Result<(), FieldError> {
    within(|| field.key("half_life"), x, 1.0, HALF_LIFE_MAX)
}

fn scale(field: &FieldPath, x: f64) -> Result<(), FieldError> {
    if x > 0.0 {
        within(|| field.key("scale"), x, 0.0, SCALE_MAX)
    } else {
        Err(FieldError::NotPositive { field: field.key("scale"), found: x })
    }
}

/// Every value of a bucket vector within `[0, hi]` (the field named only on an error).
fn each(field: &FieldPath, name: &'static str, v: &[f64], hi: f64) -> Result<(), FieldError> {
    match v.iter().position(|x| !(x.is_finite() && (0.0..=hi).contains(x))) {
        Some(k) => within(|| field.key(name).index(k), v[k], 0.0, hi),
        None => Ok(()),
    }
}

impl DecayedSketch {
    /// Checks a loaded sketch; `field` names it in the error.
    pub(crate) fn check(&self, field: &FieldPath) -> Result<(), FieldError> {
        half_life(field, self.half_life)?;
        scale(field, self.scale)?;
        within(|| field.key("total"), self.total, 0.0, WEIGHT_MAX)?;
        within(|| field.key("censored_total"), self.censored_total, 0.0, WEIGHT_MAX)?;
        let n = super::bucket_count();
        for (name, v, hi, may_be_empty) in [
            ("buckets", &self.buckets, WEIGHT_MAX, false),
            ("censored", &self.censored, WEIGHT_MAX, false),
            ("sums", &self.sums, WEIGHT_MAX * MAX_S, true),
            ("maxes", &self.maxes, MAX_S, true),
        ] {
            if v.len() != n && !(may_be_empty && v.is_empty()) {
                return Err(FieldError::BucketCount { field: field.key(name), expected: n, found: v.len() });
            }
            each(field, name, v, hi)?;
        }
        Ok(())
    }
}

impl DecayedRate {
    /// Checks a loaded rate; `field` names it in the error.
    pub(crate) fn check(&self, field: &FieldPath) -> Result<(), FieldError> {
        let (hl, sc, hits, trials) = self.parts();
        half_life(field, hl)?;
        scale(field, sc)?;
        within(|| field.key("trials"), trials, 0.0, WEIGHT_MAX)?;
        within(|| field.key("hits"), hits, 0.0, trials * (1.0 + 1e-9))
    }
}
