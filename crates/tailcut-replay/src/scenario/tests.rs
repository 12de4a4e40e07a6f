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
    let none = row(String::new(), tailcut_core::PolicyKind::Single, &sc.run_fixed(&Family::Single { p: 0 }), 2000..4000, 5.0);
    let k = LearnedKind::Adaptive(AdaptiveSettings {
        primary: 0,
        hedge: 1,
        quantile: 0.95,
        min_samples: 10,
        min_delay_s: 0.0,
        max_delay_s: 300.0,
        budget: 0.05,
    });
    let ad = row(String::new(), tailcut_core::PolicyKind::Adaptive, &sc.run_learned(k, 1), 2000..4000, 5.0);
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

#[test]
fn evaluate_runs_auto_with_paired_information_by_default() {
    let sc = Scenario::new("degrade", 2, 600).unwrap();
    let res = sc.evaluate();
    assert_eq!(res.auto, worlds::AutoMode::Paired);
    let auto = res.rows.iter().find(|r| r.kind == tailcut_core::PolicyKind::Auto).unwrap();
    let kind = LearnedKind::Auto(worlds::auto_settings(&sc));
    let own: Vec<StreamRun> = sc.fixed_defs().iter().map(|d| sc.run_fixed(&d.family)).collect();
    let paired = row(String::new(), tailcut_core::PolicyKind::Auto, &sc.run_learned_paired(kind, sc.seed, &own), 300..600, sc.deadline_s);
    let model = row(String::new(), tailcut_core::PolicyKind::Auto, &sc.run_learned(kind, sc.seed), 300..600, sc.deadline_s);
    let stats = |r: &ScenarioRow| (r.p95_s, r.miss_rate, r.active_usd_per_req, r.extra_per_req);
    assert_eq!(stats(auto), stats(&paired));
    // The model-only rows stay available, and differ here (else the check above says nothing).
    assert_ne!(stats(&paired), stats(&model));
    let old = sc.evaluate_with(worlds::AutoMode::Model);
    let old_auto = old.rows.iter().find(|r| r.kind == tailcut_core::PolicyKind::Auto).unwrap();
    assert_eq!(stats(old_auto), stats(&model));
}

#[test]
fn rows_carry_their_policy_kind() {
    let res = Scenario::new("outage", 1, 200).unwrap().evaluate();
    let tuned: Vec<&ScenarioRow> = res.rows.iter().filter(|r| r.tuned).collect();
    assert_eq!(tuned.len(), 1);
    let (_, repeated) = tuned[0].policy.split_once(':').unwrap();
    let fixed = res.rows.iter().find(|r| r.policy == repeated).unwrap();
    assert_eq!((tuned[0].kind, fixed.tuned), (fixed.kind, false));
    for r in res.rows.iter().filter(|r| !r.tuned) {
        // The labels name the kind as traces' legacy labels do.
        assert_eq!(tailcut_core::PolicyKind::from_legacy_label(&r.policy), Some(r.kind), "{}", r.policy);
    }
    let learned = res.rows.iter().filter(|r| r.kind.is_learned()).count();
    assert_eq!(learned, 1 + 2 * 6, "auto, and adaptive and singler per ordered pair of three providers");
    assert!(res.rows.iter().any(|r| r.kind == tailcut_core::PolicyKind::Cascade));
}

/// `outage`: the model-only `auto` follows the outage and the fixed plans do not; with
/// the model-only `auto` as a playable expert (priced on its own run), the paired `auto`
/// inherits that: it meets the 5 % target and beats `tuned:` on cost by ≥ 15 % at no
/// more than 5 % worse p95 (before: 5.0 % missed, p95 +14 %, cost −17 %).
#[test]
fn paired_auto_inherits_the_model_only_auto_in_a_shifting_world() {
    let res = Scenario::new("outage", 1, 2000).unwrap().evaluate();
    let auto = res.rows.iter().find(|r| r.kind == tailcut_core::PolicyKind::Auto).unwrap();
    let tuned = res.rows.iter().find(|r| r.tuned).unwrap();
    let (ap, tp) = (auto.p95_s.unwrap(), tuned.p95_s.unwrap());
    assert!(auto.miss_rate <= 0.05, "auto missed {}", auto.miss_rate);
    assert!(ap <= 1.05 * tp, "auto p95 {ap} against tuned {tp}");
    assert!(
        auto.active_usd_per_req <= 0.85 * tuned.active_usd_per_req,
        "auto ${} against tuned ${}",
        auto.active_usd_per_req,
        tuned.active_usd_per_req
    );
}
