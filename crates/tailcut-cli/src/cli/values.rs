//! Value parsers for flags: finite numbers in range, with messages naming the range.

/// Largest number of seconds a flag accepts (11.6 days, the trace readers' bound on
/// one request): a larger deadline or delay is a typo, and infinities and NaN would
/// print as `miss>NaNs` or poison every comparison.
pub const MAX_FLAG_SECONDS: f64 = 1e6;

fn finite(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("`{s}` is not a number"))?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(format!("`{s}` is not a finite number"))
    }
}

/// Seconds in (0, [`MAX_FLAG_SECONDS`]]: deadlines.
pub fn positive_seconds(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if v > 0.0 && v <= MAX_FLAG_SECONDS {
        Ok(v)
    } else {
        Err(format!("expected seconds above 0 and at most {MAX_FLAG_SECONDS:e}"))
    }
}

/// Seconds in [0, [`MAX_FLAG_SECONDS`]]: delays.
pub fn seconds(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if (0.0..=MAX_FLAG_SECONDS).contains(&v) {
        Ok(v)
    } else {
        Err(format!("expected seconds between 0 and {MAX_FLAG_SECONDS:e}"))
    }
}

/// A probability in [0, 1].
pub fn probability(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err("expected a probability between 0 and 1".to_string())
    }
}

/// A positive finite factor or rate, at most 1e6.
pub fn positive(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if v > 0.0 && v <= 1e6 {
        Ok(v)
    } else {
        Err("expected a number above 0 and at most 1e6".to_string())
    }
}

/// A non-negative finite fraction, at most 1e6.
pub fn non_negative(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if (0.0..=1e6).contains(&v) {
        Ok(v)
    } else {
        Err("expected a number between 0 and 1e6".to_string())
    }
}

/// Worker threads: 0 (one per core) to 1024.
pub fn threads(s: &str) -> Result<usize, String> {
    let v: usize = s.trim().parse().map_err(|_| format!("`{s}` is not a thread count"))?;
    if v <= 1024 {
        Ok(v)
    } else {
        Err("expected at most 1024 threads".to_string())
    }
}

/// A count of at least 1 (requests, rounds, repeats): 0 would run nothing and print an
/// empty table or nothing at all, with a success status.
pub fn count<T>(s: &str) -> Result<T, String>
where
    T: std::str::FromStr + PartialOrd + From<u8>,
{
    let v: T = s.trim().parse().map_err(|_| format!("`{s}` is not a whole number"))?;
    if v >= T::from(1) {
        Ok(v)
    } else {
        Err("expected at least 1".to_string())
    }
}
