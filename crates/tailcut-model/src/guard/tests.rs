use super::*;
use proptest::prelude::*;

/// SplitMix64 in [0, 1).
fn rng(seed: u64) -> impl FnMut() -> f64 {
    let mut x = seed;
    move || {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A misspecified planner: `plans` predicted miss rates (sorted from the most aggressive
/// down) and true miss rates drawn afresh in every regime, unrelated to the predictions
/// except that the plan predicted to miss least truly misses at most half the target (a
/// feasible world). The planner takes the first plan predicted within the level, else
/// the last. Returns the realized miss rate over `t` requests.
fn misspecified_stream(seed: u64, t: usize, controller: &mut MissController) -> f64 {
    let mut u = rng(seed);
    let target = controller.target();
    let n = 6;
    let predicted: Vec<f64> = (0..n).map(|i| target * (1.6 - 0.3 * i as f64)).collect();
    let mut truth = vec![0.0; n];
    let mut misses = 0usize;
    for k in 0..t {
        if k % 400 == 0 {
            // A new regime: the model is wrong by a random factor of 0.2–10 per plan.
            for (i, q) in truth.iter_mut().enumerate() {
                *q = if i == n - 1 { target * 0.5 * u() } else { (predicted[i] * (0.2 + 9.8 * u())).min(1.0) };
            }
        }
        let level = controller.level();
        let i = predicted.iter().position(|p| *p <= level).unwrap_or(n - 1);
        let missed = u() < truth[i];
        misses += usize::from(missed);
        controller.record(missed);
    }
    misses as f64 / t as f64
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    /// A deliberately wrong model in shifting regimes: with the controller on, the
    /// realized miss rate ends within Gibbs and Candès' bound of the target.
    #[test]
    fn the_controller_holds_the_miss_target_on_a_misspecified_stream(seed in 0u64..u64::MAX, t in 2000usize..6000) {
        let mut c = MissController::new(0.05, CONTROLLER_GAMMA);
        let rate = misspecified_stream(seed, t, &mut c);
        prop_assert!(rate <= 0.05 + c.aci_bound(t as u64), "miss rate {rate} over {t} (bound {})", c.aci_bound(t as u64));
        // The inequality behind it (an identity until the cap at the target binds).
        prop_assert!(rate <= c.realized_bound(0.05, t as u64) + 1e-9, "{rate} vs {}", c.realized_bound(0.05, t as u64));
    }

    /// Random loss streams (i.i.d., drifting, and adversarial to the leader): Hedge's
    /// weighted loss stays within the stated regret bound of the best expert.
    #[test]
    fn hedge_is_never_far_behind_the_best_fixed_expert(seed in 0u64..u64::MAX, n in 2usize..16, t in 300usize..3000, kind in 0u8..3) {
        let (mixed, best, bound) = hedge_stream(seed, n, t, kind, Experts::new(n));
        prop_assert!(mixed <= best + bound, "mixed {mixed} best {best} bound {bound}");
    }
}

/// Runs Hedge over a random stream: (weighted loss, best expert's loss, bound).
fn hedge_stream(seed: u64, n: usize, t: usize, kind: u8, mut ex: Experts) -> (f64, f64, f64) {
    let mut u = rng(seed);
    let mut mean: Vec<f64> = (0..n).map(|_| 0.3 + 0.6 * u()).collect();
    // One expert clearly better, so that a learner that does not learn is caught.
    let good = (u() * n as f64) as usize % n;
    mean[good] = 0.05 + 0.1 * u();
    let mut mixed = 0.0;
    let mut losses = vec![0.0; n];
    for k in 0..t {
        for i in 0..n {
            losses[i] = match kind {
                0 => f64::from(u8::from(u() < mean[i])),
                1 => (mean[i] + 0.2 * (k as f64 / t as f64) * (u() - 0.5)).clamp(0.0, 1.0),
                _ => {
                    // Adversarial to the leader: the most-weighted expert loses 1.
                    if i == ex.leader() && i != good {
                        1.0
                    } else {
                        f64::from(u8::from(u() < mean[i]))
                    }
                }
            };
        }
        mixed += ex.record(&losses);
    }
    let best = ex.cumulative().iter().copied().fold(f64::INFINITY, f64::min);
    (mixed, best, Experts::regret_bound(t as u64, n))
}

/// The property tests above must be able to fail: with the controller switched off the
/// misspecified stream misses far above the target, and with the weighting switched off
/// (uniform weights) the loss is far behind the best expert.
#[test]
fn the_guarantees_fail_with_their_mechanism_switched_off() {
    let mut over = 0;
    for seed in 0..20 {
        let mut off = MissController::new(0.05, CONTROLLER_GAMMA).disabled();
        let rate = misspecified_stream(seed, 4000, &mut off);
        over += usize::from(rate > 0.05 + off.aci_bound(4000));
    }
    assert!(over >= 15, "controller off: only {over}/20 streams broke the bound");
    let mut behind = 0;
    for seed in 0..20 {
        let (mixed, best, bound) = hedge_stream(seed, 8, 2000, (seed % 3) as u8, Experts::new(8).disabled());
        behind += usize::from(mixed > best + bound);
    }
    assert!(behind >= 15, "weighting off: only {behind}/20 streams broke the bound");
}

#[test]
fn wilson_upper_bounds_behave() {
    assert_eq!(wilson_upper(0.0, 0.0, QUALIFY_Z), 1.0);
    // 0 misses in 18 rounds is not yet evidence of a 5 % rate; in 60 it is.
    assert!(wilson_upper(0.0, 18.0, QUALIFY_Z) > 0.05);
    assert!(wilson_upper(0.0, 60.0, QUALIFY_Z) < 0.05);
    assert!(wilson_upper(5.0, 100.0, QUALIFY_Z) > 0.05);
    let mut t = Tally::default();
    for k in 0..100 {
        t.add(k % 10 == 0, 0.01, 1.0);
    }
    assert!((t.blended(0.0, 100.0) - 0.05).abs() < 1e-9);
    assert!((t.mean_cost() - 0.01).abs() < 1e-12);
}

#[test]
fn the_loss_is_in_the_unit_interval_and_weighs_a_miss_by_its_price() {
    assert_eq!(loss(false, 0.0, 1.0, 1.0), 0.0);
    assert_eq!(loss(true, 5.0, 1.0, 1.0), 1.0);
    assert!((loss(true, 0.0, 1.0, 3.0) - 0.75).abs() < 1e-12);
    assert!(miss_price(1.0, 0.05, 0.0) > 9.99 && miss_price(1.0, 0.05, 0.0) < 10.01);
    assert!((miss_price(1.0, 0.05, 0.05) - 1.0).abs() < 1e-12);
}

proptest! {
    /// The bound's terms computed once per `n` give the bits of the direct formula.
    #[test]
    fn wilson_at_gives_the_direct_formulas_bits(n in 0.0f64..5000.0, share in 0.0f64..1.2) {
        let k = n * share;
        let direct = if n <= 0.0 {
            1.0
        } else {
            let p = (k / n).clamp(0.0, 1.0);
            let z = QUALIFY_Z;
            let z2 = z * z;
            let centre = p + z2 / (2.0 * n);
            let spread = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
            ((centre + spread) / (1.0 + z2 / n)).min(1.0)
        };
        prop_assert_eq!(WilsonAt::new(n, QUALIFY_Z).upper(k).to_bits(), direct.to_bits());
        prop_assert_eq!(wilson_upper(k, n, QUALIFY_Z).to_bits(), direct.to_bits());
    }
}
