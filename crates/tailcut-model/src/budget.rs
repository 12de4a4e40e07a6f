//! The extra-load budget every learned policy spends its extra attempts from.

/// A token bucket over requests: each request adds `rate` tokens (up to `burst`), each
/// extra attempt takes one. The bucket starts empty, so a burst is spent only from
/// tokens earned by earlier requests: over the first `n` requests at most `rate·n` extra
/// attempts launch (the realised rate of a run never exceeds the cap), and over any
/// window of `w` requests at most `burst + rate·w`.
#[derive(Debug, Clone, PartialEq)]
pub struct HedgeBudget {
    rate: f64,
    burst: f64,
    tokens: f64,
}

impl HedgeBudget {
    /// An empty bucket.
    pub fn new(rate: f64, burst: f64) -> HedgeBudget {
        let burst = burst.max(1.0);
        HedgeBudget { rate: rate.max(0.0), burst, tokens: 0.0 }
    }

    /// A full bucket (for judging a plan in the steady state, not for spending).
    pub fn full(rate: f64, burst: f64) -> HedgeBudget {
        let mut b = HedgeBudget::new(rate, burst);
        b.tokens = b.burst;
        b
    }

    /// A request started: earn `rate`.
    pub fn request(&mut self) {
        self.tokens = (self.tokens + self.rate).min(self.burst);
    }

    /// Takes a token for one extra attempt, if there is one.
    pub fn try_take(&mut self) -> bool {
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Tokens left.
    pub fn tokens(&self) -> f64 {
        self.tokens
    }

    /// The per-request rate.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The burst.
    pub fn burst(&self) -> f64 {
        self.burst
    }
}
