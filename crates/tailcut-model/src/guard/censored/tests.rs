use super::*;
use proptest::prelude::*;

/// SplitMix64 in [0, 1).
fn uniform(state: &mut u64) -> f64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

fn exp(state: &mut u64, mean: f64) -> f64 {
    -mean * (1.0 - uniform(state)).ln()
}

/// What a live trace shows: each attempt either finishes (exact) or is cancelled first
/// (right-censored at its cancel), never both.
fn censored_sample(seed: u64, n: usize, mean_l: f64, mean_c: f64) -> Vec<Sample> {
    let mut st = seed;
    (0..n)
        .map(|_| {
            let (l, c) = (exp(&mut st, mean_l), exp(&mut st, mean_c));
            if l <= c {
                Sample { value_s: l, censored: false }
            } else {
                Sample { value_s: c, censored: true }
            }
        })
        .collect()
}

/// "Cancelled = fast": every cancel read as a result at its cancel time.
fn as_fast(v: &[Sample]) -> Vec<Sample> {
    v.iter().map(|s| Sample { censored: false, ..*s }).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    /// Latency ~ Exp(1), independent cancels ~ Exp(μ_c) with μ_c in [1, 2], read at
    /// t in [0.3, 1.0]: Kaplan–Meier is within 0.04 of the true P(L > t) = e^(−t);
    /// "cancelled = fast" (which sees min(L, C) as the latency) is off by more than 0.05.
    #[test]
    fn kaplan_meier_reads_cancels_right_and_cancelled_as_fast_does_not(
        seed in any::<u64>(),
        mean_c in 1.0f64..2.0,
        t in 0.3f64..1.0,
    ) {
        let v = censored_sample(seed, 4000, 1.0, mean_c);
        let truth = (-t).exp();
        let km = kaplan_meier(&v, t);
        let naive = kaplan_meier(&as_fast(&v), t);
        prop_assert!((km.survival - truth).abs() <= 0.04, "KM {} against the truth {truth}", km.survival);
        prop_assert!((naive.survival - truth).abs() > 0.05, "cancelled = fast {} against the truth {truth}", naive.survival);
        // Greenwood's error is of the size the error is.
        prop_assert!(km.variance > 0.0 && km.variance.sqrt() < 0.02, "sd {}", km.variance.sqrt());
        // The upper bound sits above the estimate and, at 4,000 attempts, near it.
        let up = km.upper(1.645);
        prop_assert!(up >= km.survival && up - km.survival < 0.05, "upper {up} of {}", km.survival);
    }
}

#[test]
fn without_censoring_it_is_the_empirical_share_and_its_binomial_size() {
    let v: Vec<Sample> = (0..100).map(|i| Sample { value_s: f64::from(i) / 100.0, censored: false }).collect();
    let e = kaplan_meier(&v, 0.895);
    assert!((e.survival - 0.10).abs() < 1e-12, "{e:?}");
    // Greenwood without censoring is the binomial variance: n_eff = n.
    assert!((e.n_eff - 100.0).abs() < 1e-6, "{e:?}");
    // Nothing finished by t: every attempt is past it.
    let e = kaplan_meier(&v, -1.0);
    assert_eq!((e.survival, e.n_eff), (1.0, 100.0));
    // A failure never delivers: it is past every deadline.
    let e = kaplan_meier(&[Sample { value_s: f64::INFINITY, censored: false }, Sample { value_s: 0.1, censored: false }], 10.0);
    assert!((e.survival - 0.5).abs() < 1e-12);
}

#[test]
fn cancels_before_t_say_nothing_and_shrink_the_sample() {
    // 60 answers at 2 ms, 4 cancelled at 1 ms (before a 250 ms deadline): the 4 say
    // nothing about the deadline, so the estimate is the 60's, and so is its size.
    let mut v: Vec<Sample> = (0..60).map(|_| Sample { value_s: 0.002, censored: false }).collect();
    v.extend((0..4).map(|_| Sample { value_s: 0.001, censored: true }));
    let e = kaplan_meier(&v, 0.25);
    assert_eq!(e.survival, 0.0);
    assert_eq!(e.n_eff, 60.0);
    // Cancelled at 10 ms, after every answer: still at risk, so they keep their share
    // (4/64) instead of being read as fast; Greenwood's size is capped at the 60 known.
    let mut late: Vec<Sample> = (0..60).map(|_| Sample { value_s: 0.002, censored: false }).collect();
    late.extend((0..4).map(|_| Sample { value_s: 0.010, censored: true }));
    let e = kaplan_meier(&late, 0.25);
    assert!((e.survival - 4.0 / 64.0).abs() < 1e-12, "{e:?}");
    assert_eq!(e.n_eff, 60.0);
    // Cancelled past the deadline: known to miss it.
    let mut w = v.clone();
    w.extend((0..6).map(|_| Sample { value_s: 0.3, censored: true }));
    let e = kaplan_meier(&w, 0.25);
    assert!((e.survival - 6.0 / 66.0).abs() < 1e-9, "{e:?}");
}

#[test]
fn the_blend_is_the_model_where_history_is_thin_and_history_where_not() {
    let thin = Censored { history: KmEstimate { survival: 0.5, variance: 0.25, n_eff: 1.0 }, n: 1.0 };
    assert!((thin.blended(0.01) - (32.0 * 0.01 + 0.5) / 33.0).abs() < 1e-12);
    let thick = Censored { history: KmEstimate { survival: 0.2, variance: 0.0025, n_eff: 64.0 }, n: 64.0 };
    assert!((thick.blended(0.0) - 64.0 * 0.2 / 96.0).abs() < 1e-12);
    // 0 misses in 64 attempts: the bound is Wilson's, under a 5 % target once blended.
    let clean = Censored { history: KmEstimate { survival: 0.0, variance: 0.0, n_eff: 64.0 }, n: 64.0 };
    assert!(clean.upper(0.0, 1.645) < 0.03, "{}", clean.upper(0.0, 1.645));
    // 4 in 64 (6 %): over 5 % whatever the model says.
    let four = kaplan_meier(&(0..64).map(|i| Sample { value_s: if i < 4 { 0.4 } else { 0.1 }, censored: false }).collect::<Vec<_>>(), 0.25);
    let c = Censored { history: four, n: four.n_eff };
    assert!(c.upper(0.0, 1.645) > 0.05, "{}", c.upper(0.0, 1.645));
}

#[test]
fn a_detected_shift_clears_the_providers_history() {
    use crate::model::{Model, ModelConfig, Observation, Outcome};
    let providers = [("a".to_string(), 0.001, 0.0)];
    let mut model = Model::new(&providers, ModelConfig::live());
    let mut set = CensoredSet::new(1);
    let obs = |x: f64| Observation { provider: 0, outcome: Outcome::Valid { latency_s: x }, queue_s: None, idle_gap_s: None, warm: None };
    for _ in 0..200 {
        let o = [obs(0.12)];
        model.observe_request(&o);
        set.observe(&model, &o);
    }
    assert_eq!(set.provider(0).unwrap().len(), HISTORY_LEN);
    let mut cleared_at = None;
    for i in 0..10 {
        let o = [obs(0.4)];
        model.observe_request(&o);
        set.observe(&model, &o);
        if cleared_at.is_none() && set.provider(0).unwrap().len() < HISTORY_LEN {
            cleared_at = Some(i);
        }
    }
    // The detector fires on the third slow attempt; the history restarts from it.
    assert_eq!(cleared_at, Some(2), "shifts {}", model.shifts);
    assert_eq!(set.provider(0).unwrap().len(), 8);
    let e = set.at(0.25)[0].unwrap();
    assert_eq!(e.history.survival, 1.0);
}

proptest! {
    /// The history's incrementally sorted copy gives exactly the estimate of sorting its
    /// ring afresh: over pushes that overflow [`HISTORY_LEN`], ties between exact and
    /// censored samples, never-delivered (+∞) and NaN values, and clears.
    #[test]
    fn the_history_reads_as_sorting_its_attempts_afresh(
        steps in proptest::collection::vec((0u8..12, any::<bool>(), 0u8..40), 1..400),
        t in 0.0f64..12.0,
    ) {
        let mut h = CensoredHistory::default();
        let mut kept: std::collections::VecDeque<Sample> = Default::default();
        for (value, censored, op) in steps {
            if op == 0 {
                h.clear();
                kept.clear();
                continue;
            }
            let value_s = match value {
                10 => f64::INFINITY,
                11 => f64::NAN,
                v => f64::from(v) * 0.5,
            };
            let s = Sample { value_s, censored };
            h.push(s);
            kept.push_back(s);
            if kept.len() > HISTORY_LEN {
                kept.pop_front();
            }
            let afresh = kaplan_meier(&kept.iter().copied().collect::<Vec<_>>(), t);
            let read = h.at(t);
            prop_assert_eq!(read.survival.to_bits(), afresh.survival.to_bits());
            prop_assert_eq!(read.variance.to_bits(), afresh.variance.to_bits());
            prop_assert_eq!(read.n_eff.to_bits(), afresh.n_eff.to_bits());
        }
    }
}
