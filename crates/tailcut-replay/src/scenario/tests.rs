use super::*;

#[test]
fn every_family_builds_and_is_deterministic() {
    for name in NAMES {
        let a = Scenario::new(name, 3, 200).unwrap();
        let b = Scenario::new(name, 3, 200).unwrap();
        let f = Family::Single { p: 0 };
        assert_eq!(a.run_fixed(&f).lats, b.run_fixed(&f).lats, "{name}");
        assert_ne!(describe(name), "unknown");
    }
    assert!(Scenario::new("nope", 1, 10).is_none());
}

#[test]
fn cadence_mixes_warm_and_cold() {
    let sc = Scenario::new("cadence", 1, 600).unwrap();
    let run = sc.run_fixed(&Family::Single { p: 0 });
    let fast = run.lats.iter().filter(|l| **l < 10.0).count();
    let slow = run.lats.iter().filter(|l| **l > 60.0).count();
    assert!(fast > 200 && slow > 20, "fast {fast} slow {slow}");
}

#[test]
fn outage_fails_cerebrium_in_its_window_only() {
    let sc = Scenario::new("outage", 2, 1000).unwrap();
    let run = sc.run_fixed(&Family::Single { p: 2 });
    let bad = |r: std::ops::Range<usize>| run.lats[r].iter().filter(|l| l.is_infinite()).count();
    assert_eq!(bad(600..800), 200);
    assert!(bad(0..600) < 15);
}

#[test]
fn straggler_learned_hedging_cuts_p99_within_five_percent_extra() {
    let sc = Scenario::new("straggler", 1, 4000).unwrap();
    let none = row(String::new(), &sc.run_fixed(&Family::Single { p: 0 }), 2000..4000, 5.0);
    let k = LearnedKind::Adaptive(AdaptiveSettings {
        primary: 0,
        hedge: 1,
        quantile: 0.95,
        min_samples: 10,
        min_delay_s: 0.0,
        max_delay_s: 300.0,
        budget: 0.05,
    });
    let ad = row(String::new(), &sc.run_learned(k, 1), 2000..4000, 5.0);
    assert!(ad.extra_per_req <= 0.05 + 1e-9, "{ad:?}");
    let cut = 1.0 - ad.p99_s.unwrap() / none.p99_s.unwrap();
    assert!(cut >= 0.8, "p99 {:?} vs {:?}: cut {cut}", ad.p99_s, none.p99_s);
}

#[test]
fn cadence_platforms_keep_idle_workers_for_their_own_windows() {
    // Mean gap 75 s: Cerebrium (300 s window) is warm after ~98 % of gaps when it serves
    // every request; with one 60 s window for all it was warm after ~55 %.
    let sc = Scenario::new("cadence", 1, 2000).unwrap();
    let ce = sc.run_fixed(&Family::Single { p: 2 });
    let warm = ce.lats.iter().filter(|l| **l < 5.0).count() as f64 / 2000.0;
    assert!(warm > 0.9, "cerebrium warm share {warm}");
    // RunPod (5 s idle timeout) is warm only after the few gaps under 5 s.
    let windows: Vec<f64> = sc.providers.iter().map(|p| p.warm_window_s).collect();
    assert_eq!(windows, vec![5.0, 60.0, 300.0]);
}
