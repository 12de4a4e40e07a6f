//! How a sketch's per-bucket vectors are saved: sparse (`[[index, weight], ...]` for the
//! non-empty buckets, so a saved model stays small), range-checked when read, and the
//! defaults for fields that files saved before them lack.

pub(super) fn zero_buckets() -> Vec<f64> {
    vec![0.0; crate::sketch::bucket_count()]
}

pub(super) fn all_zero(v: &[f64]) -> bool {
    v.iter().all(|w| *w == 0.0)
}

pub(super) fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

pub(super) mod sparse_opt {
    //! The value sums, sparse like the weights; an absent field stays empty.
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
        super::sparse::serialize(v, s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        super::sparse::deserialize(d)
    }
}

pub(super) mod sparse {
    //! Buckets are written as `[[index, weight], ...]` for the non-empty ones, so a saved
    //! model stays small.
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
        let pairs: Vec<(usize, f64)> = v.iter().copied().enumerate().filter(|(_, w)| *w > 0.0).collect();
        pairs.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        let pairs: Vec<(usize, f64)> = Vec::deserialize(d)?;
        let mut v = vec![0.0; crate::sketch::bucket_count()];
        for (k, w) in pairs {
            let slot = v.get_mut(k).ok_or_else(|| serde::de::Error::custom(format!("bucket index {k} out of range")))?;
            if !(w.is_finite() && w >= 0.0) {
                return Err(serde::de::Error::custom(format!("bucket {k}: weight {w} is not a finite non-negative number")));
            }
            *slot = w;
        }
        Ok(v)
    }
}
