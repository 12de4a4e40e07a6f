use super::*;

#[test]
fn quantiles_are_within_relative_accuracy() {
    let mut s = DecayedSketch::new(1e9);
    for i in 1..=1000 {
        s.insert(i as f64 * 0.1);
    }
    for (q, want) in [(0.5, 50.0), (0.9, 90.0), (0.99, 99.0)] {
        let got = s.quantile(q).unwrap();
        assert!((got / want - 1.0).abs() < 0.03, "q{q}: {got} vs {want}");
    }
    assert!((s.cdf(50.0) - 0.5).abs() < 0.03);
    let grid = [10.0, 50.0, 90.0];
    let mut out = [0.0; 3];
    s.cdf_on(&grid, &mut out);
    for (g, o) in grid.iter().zip(out) {
        assert!((o - s.cdf(*g)).abs() < 1e-12);
    }
}

#[test]
fn decay_forgets_old_regime() {
    let mut s = DecayedSketch::new(20.0);
    for _ in 0..200 {
        s.insert(100.0);
    }
    for _ in 0..100 {
        s.insert(5.0);
    }
    // The old regime weighs 2^-5 of a fresh one: well under 5 %.
    assert!(s.cdf(10.0) > 0.95, "{}", s.cdf(10.0));
    assert!(s.effective() < 40.0 && s.effective() > 20.0, "{}", s.effective());
}

#[test]
fn renormalisation_keeps_the_distribution() {
    let mut s = DecayedSketch::new(1.0);
    for i in 0..2000 {
        s.insert(if i % 2 == 0 { 1.0 } else { 2.0 });
    }
    // Half-life of one insert: the last value dominates.
    assert!(s.cdf(1.5) < 0.4);
    assert!(s.total.is_finite() && s.scale <= 1e100);
}

#[test]
fn serde_round_trip_is_sparse() {
    let mut s = DecayedSketch::new(50.0);
    s.insert(6.0);
    s.insert(120.0);
    let j = serde_json::to_string(&s).unwrap();
    assert!(j.len() < 200, "{j}");
    let back: DecayedSketch = serde_json::from_str(&j).unwrap();
    assert_eq!(back, s);
}

#[test]
fn censored_weight_goes_to_the_right() {
    let mut s = DecayedSketch::new(1e9);
    for _ in 0..50 {
        s.insert(1.0);
    }
    for _ in 0..50 {
        s.insert(10.0);
    }
    for _ in 0..100 {
        s.insert_censored(5.0);
    }
    // Every censored sample is above 5 s, so 3/4 of the mass is at 10 s.
    assert!((s.cdf(5.0) - 0.25).abs() < 0.01, "{}", s.cdf(5.0));
}

#[test]
fn a_mode_ending_inside_a_bucket_ends_where_its_values_do() {
    // Uniform on [0.8, 1.2] and 2 % at 10-20x: the fast mode ends at 1.2 s, inside the
    // bucket [1.165, 1.211].
    let mut s = DecayedSketch::new(1e9);
    for i in 0..4900 {
        s.insert(0.8 + 0.4 * (f64::from(i) + 0.5) / 4900.0);
    }
    for i in 0..100 {
        s.insert(12.0 + 0.1 * f64::from(i));
    }
    let t = CdfTable::new(&s).unwrap();
    let edge = t.hedge_point(0.99);
    assert!((edge - 1.2).abs() < 0.002, "{edge}");
    for q in [0.5, 0.9, 0.97] {
        let want = 0.8 + 0.4 * q / 0.98;
        assert!((t.quantile(q) - want).abs() < 0.004, "q{q}: {} vs {want}", t.quantile(q));
    }
    assert!((t.cdf(1.2) - 0.98).abs() < 1e-3 && (t.cdf(1.205) - 0.98).abs() < 1e-6, "{}", t.cdf(1.205));
}

#[test]
fn a_mode_ends_at_its_largest_value_seen_not_at_an_estimate_from_the_mean() {
    // A decayed fast mode uniform on [0.8, 1.2] with 2 % stragglers: the mean of the
    // recent values in the top bucket is noisy, and `2·mean − lower edge` read the mode's
    // end a few milliseconds off either way (a hedge there fires for fast requests, or
    // rescues stragglers later than a fixed hedge at 1.2 s). The largest value seen is
    // where the mode ends.
    let mut s = DecayedSketch::new(64.0 * 16.0);
    let mut x: u64 = 0x1234_5678;
    let mut top: f64 = 0.0;
    for i in 0..3000 {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        let u = (x >> 11) as f64 / (1u64 << 53) as f64;
        let v = if i % 50 == 7 { 10.0 + 10.0 * u } else { 0.8 + 0.4 * u };
        if v < 2.0 {
            top = top.max(v);
        }
        s.insert(v);
    }
    let t = CdfTable::new(&s).unwrap();
    assert_eq!(t.hedge_point(0.99), top);
    assert!((t.cdf(top) - t.cdf(5.0)).abs() < 1e-12 && t.cdf(top - 1e-3) < t.cdf(top));
    // Saved and restored, the maxima come back.
    let back: DecayedSketch = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
    assert_eq!(back, s);
    assert_eq!(CdfTable::new(&back).unwrap().hedge_point(0.99), top);
}

#[test]
fn a_sketch_saved_without_value_sums_reads_bucket_middles() {
    let mut s = DecayedSketch::new(50.0);
    s.insert(6.0);
    let j = serde_json::to_string(&s).unwrap().replace(&format!(",\"sums\":[[{},6.0]]", bucket_of(6.0)), "");
    assert!(!j.contains("sums"), "{j}");
    let mut back: DecayedSketch = serde_json::from_str(&j).unwrap();
    let mid = CdfTable::new(&back).unwrap().quantile(0.5);
    assert!((mid / 6.0 - 1.0).abs() < 0.03, "{mid}");
    back.insert(6.0);
    assert!(back.quantile(0.5).is_some());
}

#[test]
fn early_cancels_do_not_weigh_the_first_values_more() {
    // A hedge target cancelled within 40 ms in 5 requests of 6 and finishing in
    // 0.8-1.2 s in the sixth: the cancels say nothing about its latency, which stays
    // uniform (S(1.0 s) = 0.5). Spreading each cancel over the values seen so far gave
    // the first values a compounded share (S(1.0 s) read 0.23).
    let mut s = DecayedSketch::new(1024.0);
    let mut x: u64 = 7;
    let mut u = || {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 11) as f64 / (1u64 << 53) as f64
    };
    for i in 0..3000 {
        if i % 6 == 0 {
            s.insert(0.8 + 0.4 * u());
        } else {
            s.insert_censored(0.04 * u());
        }
    }
    let t = CdfTable::new(&s).unwrap();
    for (v, want) in [(0.9, 0.75), (1.0, 0.5), (1.1, 0.25)] {
        assert!((1.0 - t.cdf(v) - want).abs() < 0.06, "S({v}) = {}", 1.0 - t.cdf(v));
        // The sketch's own cdf counts the whole bucket of `v` (up to 4 % above it).
        assert!((1.0 - s.cdf(v) - want).abs() < 0.12, "sketch S({v}) = {}", 1.0 - s.cdf(v));
    }
}

#[test]
fn rate_shrinks_to_prior() {
    let mut r = DecayedRate::new(100.0);
    assert_eq!(r.rate(0.1, 2.0), 0.1);
    for _ in 0..98 {
        r.record(false);
    }
    r.record(true);
    r.record(true);
    assert!((r.rate(0.0, 0.0) - 0.02).abs() < 0.01);
}

#[test]
fn a_quantile_beyond_every_observation_is_unknown_in_reports() {
    // Seen once at 10 ms, then cancelled at 20-30 ms in every later race: its p50 lies
    // somewhere beyond 30 ms, not at the largest value seen.
    let mut s = DecayedSketch::new(1024.0);
    s.insert(0.010);
    for i in 0..20 {
        s.insert_censored(0.020 + 0.0005 * f64::from(i));
    }
    assert!(s.quantile_reached(0.01).is_some_and(|x| (x - 0.010).abs() < 0.001));
    assert_eq!(s.quantile_reached(0.5), None, "p50 is beyond every observation");
    assert!(s.quantile(0.5).is_some(), "planning still gets its lower bound");
    // Fully observed: the two agree.
    let mut t = DecayedSketch::new(1024.0);
    (1..=100).for_each(|i| t.insert(f64::from(i) * 0.01));
    for q in [0.5, 0.95, 0.99] {
        assert_eq!(t.quantile_reached(q), t.quantile(q));
    }
}

/// One walk for several quantiles gives what one walk per quantile gives, censored or not
/// (a quantile the mass never reaches stays unknown in both).
#[test]
fn quantiles_in_one_walk_equal_one_walk_each() {
    let mut s = DecayedSketch::new(64.0);
    let mut x = 0.013_f64;
    for i in 0..500 {
        x = (x * 7.31 + 0.017).fract();
        if i % 5 == 0 {
            s.insert_censored(0.002 + x * 0.5);
        } else {
            s.insert(0.001 + x * x * 3.0);
        }
        let qs = [0.01, 0.5, 0.95, 0.99, 1.0];
        assert_eq!(s.quantiles_reached(qs), qs.map(|q| s.quantile_reached(q)), "after {i} inserts");
    }
    assert_eq!(DecayedSketch::new(64.0).quantiles_reached([0.5]), [None]);
}

/// Ten finished at 1 s and five cancelled at `cancel_s`, interleaved.
fn ten_finished_five_cancelled_at(cancel_s: f64) -> DecayedSketch {
    let mut s = DecayedSketch::new(1e9);
    for i in 0..15 {
        if i % 3 == 0 {
            s.insert_censored(cancel_s);
        } else {
            s.insert(1.0);
        }
    }
    s
}

#[test]
fn planning_leaves_only_far_cancellations_unplaced() {
    // Cancelled at 3 s, past 2x the largest finished: the third beyond is unknown, left
    // unplaced.
    let (m, unplaced) = ten_finished_five_cancelled_at(3.0).masses_known();
    assert!((unplaced - 1.0 / 3.0).abs() < 1e-9, "{unplaced}");
    assert!((m.iter().sum::<f64>() - 2.0 / 3.0).abs() < 1e-9);
    // Cancelled at 1.5 s (a loser cancelled just as a partner won): placed as `masses`
    // places it.
    let near = ten_finished_five_cancelled_at(1.5);
    let (m, unplaced) = near.masses_known();
    assert_eq!(unplaced, 0.0);
    assert_eq!(m, near.masses());
}
