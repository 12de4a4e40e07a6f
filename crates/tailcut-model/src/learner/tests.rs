use super::*;
use crate::model::Outcome;

fn providers() -> Vec<(String, f64, f64)> {
    vec![("a".into(), 0.001, 0.0), ("b".into(), 0.001, 0.0)]
}

fn straggly(i: u64) -> f64 {
    if i % 50 == 7 {
        10.0
    } else {
        0.9 + (i % 11) as f64 * 0.02
    }
}

fn feed(l: &mut Learner, n: u64) {
    for i in 0..n {
        l.observe(&[Observation {
            provider: 0,
            outcome: Outcome::Valid { latency_s: straggly(i) },
            queue_s: None,
            idle_gap_s: None,
            warm: None,
        }]);
        l.observe(&[Observation {
            provider: 1,
            outcome: Outcome::Valid { latency_s: straggly(i * 7 + 3) },
            queue_s: None,
            idle_gap_s: None,
            warm: None,
        }]);
    }
}

#[test]
fn budget_bounds_any_window() {
    let mut b = HedgeBudget::new(0.05, 3.0);
    let mut taken = Vec::new();
    for _ in 0..1000 {
        b.request();
        taken.push(b.try_take());
    }
    for w in [1usize, 10, 100, 1000] {
        for s in 0..=1000 - w {
            let k = taken[s..s + w].iter().filter(|t| **t).count() as f64;
            assert!(k <= 3.0 + 0.05 * w as f64 + 1e-9, "window {w} at {s}: {k}");
        }
    }
}

#[test]
fn adaptive_waits_for_samples_then_hedges_at_the_quantile() {
    let a = AdaptiveSettings { primary: 0, hedge: 1, quantile: 0.95, min_samples: 20, min_delay_s: 0.0, max_delay_s: 60.0, budget: 0.05 };
    let mut l = Learner::new(LearnedKind::Adaptive(a), &providers(), None, ModelConfig::default(), 1);
    assert_eq!(l.decide(&[]).plan, Plan::Single { p: 0 });
    feed(&mut l, 200);
    let d = l.decide(&[]);
    match d.plan {
        Plan::Hedge { delay_s, .. } => assert!(delay_s > 1.0 && delay_s < 1.2, "{d:?}"),
        other => panic!("{other:?}"),
    }
    assert!(d.reason.contains("p95"), "{}", d.reason);
}

#[test]
fn singler_fit_respects_the_budget_and_cuts_the_tail() {
    let mut m = Model::new(&providers(), ModelConfig { half_life: 1e6, ..ModelConfig::default() });
    for i in 0..2000 {
        m.observe(&Observation {
            provider: 0,
            outcome: Outcome::Valid { latency_s: straggly(i) },
            queue_s: None,
            idle_gap_s: None,
            warm: None,
        });
    }
    let s = SingleRSettings { primary: 0, hedge: 0, budget: 0.05, level: 0.99, min_samples: 10 };
    let fit = fit_singler(&m, &s).unwrap();
    assert!(fit.extra <= 0.05 + 1e-9, "{fit:?}");
    assert!(fit.tail_s < 3.0, "{fit:?}");
    // A reissue target never launched is assumed to behave like the primary.
    let other = fit_singler(&m, &SingleRSettings { hedge: 1, ..s }).expect("a fit before the target has data");
    assert!(other.q > 0.0 && other.tail_s < 3.0, "{other:?}");
    // Small budget: SingleR reissues early with q < 1.
    let small = fit_singler(&m, &SingleRSettings { budget: 0.01, ..s }).unwrap();
    assert!(small.extra <= 0.01 + 1e-9 && small.q < 1.0, "{small:?}");
}

#[test]
fn an_empty_bucket_never_exceeds_the_rate_from_the_start() {
    // The realised extra load of a run never exceeds the cap: over the first n requests
    // at most rate·n tokens were earned (a bucket that started full let the first
    // requests of a short run all hedge: 5 of the first 5 at a 35 % cap).
    for rate in [0.05, 0.35, 1.0] {
        let mut b = HedgeBudget::new(rate, 5.0);
        let mut taken = 0u32;
        for n in 1..=500u32 {
            b.request();
            if b.try_take() {
                taken += 1;
            }
            assert!(f64::from(taken) <= rate * f64::from(n) + 1e-9, "rate {rate}: {taken} extra in the first {n} requests");
        }
    }
}

#[test]
fn adaptive_hedges_at_the_start_of_a_gap_below_its_quantile() {
    // 97 % fast (0.8–1.2 s), 3 % stragglers at 10 s: the p98 sits among the stragglers,
    // but no attempt answers between 1.2 s and 10 s, so hedging at the fast mode's upper
    // edge launches as often and 9 s sooner.
    let a = AdaptiveSettings { primary: 0, hedge: 1, quantile: 0.98, min_samples: 20, min_delay_s: 0.0, max_delay_s: 60.0, budget: 1.0 };
    let mut l = Learner::new(LearnedKind::Adaptive(a), &providers(), None, ModelConfig { half_life: 1e6, ..ModelConfig::default() }, 1);
    for i in 0..1000u64 {
        let lat = if i % 100 < 3 { 10.0 } else { 0.8 + (i % 41) as f64 * 0.01 };
        l.observe(&[Observation { provider: 0, outcome: Outcome::Valid { latency_s: lat }, queue_s: None, idle_gap_s: None, warm: None }]);
    }
    match l.decide(&[]).plan {
        Plan::Hedge { delay_s, .. } => assert!(delay_s > 1.19 && delay_s < 1.25, "{delay_s}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn singler_reissues_at_the_fast_modes_edge_not_on_a_coarse_grid() {
    // Fast mode 0.8–1.2 s, 2 % stragglers at 10–20×: with a 5 % budget the best reissue
    // fires right at the fast mode's upper edge (the fit's old 400-point grid over 2.5×
    // the p99.9 could only reissue every 0.25 s: at 1.25 s).
    let mut m = Model::new(&providers(), ModelConfig { half_life: 1e6, ..ModelConfig::default() });
    for i in 0..5000u64 {
        let lat = if i % 50 == 7 { 10.0 + (i % 11) as f64 } else { 0.8 + (i % 41) as f64 * 0.01 };
        m.observe(&Observation { provider: 0, outcome: Outcome::Valid { latency_s: lat }, queue_s: None, idle_gap_s: None, warm: None });
    }
    let fit = fit_singler(&m, &SingleRSettings { primary: 0, hedge: 0, budget: 0.05, level: 0.99, min_samples: 10 }).unwrap();
    assert!(fit.delay_s > 1.1 && fit.delay_s < 1.22, "{fit:?}");
    assert!(fit.extra <= 0.05 + 1e-9 && fit.tail_s < 2.5, "{fit:?}");
}

/// A `singler` learner that has seen 3,000 requests: a fast mode at 0.8–1.2 s and 2 %
/// stragglers at 10 s.
fn singler_on_stragglers(s: SingleRSettings) -> Learner {
    let mut l = Learner::new(LearnedKind::Singler(s), &providers(), None, ModelConfig { half_life: 1e6, ..ModelConfig::default() }, 1);
    for i in 0..3000u64 {
        let lat = if i % 50 == 7 { 10.0 } else { 0.8 + (i % 41) as f64 * 0.01 };
        l.observe(&[Observation { provider: 0, outcome: Outcome::Valid { latency_s: lat }, queue_s: None, idle_gap_s: None, warm: None }]);
    }
    l
}

#[test]
fn singler_keeps_its_last_tokens_for_the_tail_mode() {
    // Fast mode 0.8–1.2 s, 2 % stragglers at 10 s, a budget big enough to reissue inside
    // the fast mode: while the bucket holds fewer than SINGLER_RESERVE tokens, the
    // reissue waits for the start of the tail mode, so the last tokens go to stragglers.
    let s = SingleRSettings { primary: 0, hedge: 1, budget: 0.3, level: 0.99, min_samples: 10 };
    let mut l = singler_on_stragglers(s);
    let fit = l.state().singler_fit().unwrap();
    assert!(fit.q == 1.0 && fit.delay_s < 1.15, "{fit:?}");
    assert!(fit.reserve_delay_s > 1.19 && fit.reserve_delay_s < 1.25, "{fit:?}");
    // The bucket starts empty: the first decisions reissue at the tail mode's start.
    let d = l.decide(&[]);
    assert_eq!(d.plan, Plan::Hedge { p: 0, h: 1, delay_s: fit.reserve_delay_s }, "{d:?}");
    assert!(d.reason.contains("budget low"), "{}", d.reason);
    // Once the bucket holds SINGLER_RESERVE tokens, at the fitted delay.
    for _ in 0..10 {
        l.decide(&[]);
    }
    assert!(l.state().budget().tokens() >= SINGLER_RESERVE);
    assert_eq!(l.decide(&[]).plan, Plan::Hedge { p: 0, h: 1, delay_s: fit.delay_s });
}

#[test]
fn singler_spends_a_full_buckets_tokens_on_the_tail_mode() {
    // Fast mode 0.8–1.2 s, 2 % stragglers at 10 s, a budget under the straggler share:
    // the fit reissues with q < 1. When the coin says no but the
    // bucket is full (a token not spent now would be lost), the reissue is still armed at
    // the tail mode's start; when the bucket is not full, the coin's no stands.
    let s = SingleRSettings { primary: 0, hedge: 1, budget: 0.02, level: 0.99, min_samples: 10 };
    let mut l = singler_on_stragglers(s);
    let fit = l.state().singler_fit().unwrap();
    assert!(fit.q > 0.0 && fit.q < 1.0 && (fit.reserve_delay_s - 1.2).abs() < 1e-9, "{fit:?}");
    // Fill the bucket (decisions earn tokens; nothing fires here).
    while l.state().budget().tokens() + 0.02 <= l.state().budget().burst() {
        l.decide(&[]);
    }
    let (mut full_no, mut not_full_no) = (0, 0);
    for i in 0..600 {
        let d = l.decide(&[]);
        // decide() earned this request's tokens and took none.
        let full = l.state().budget().tokens() + 0.02 > l.state().budget().burst();
        if d.reason.starts_with("no reissue") {
            not_full_no += 1;
            assert!(!full, "{d:?}");
            assert_eq!(d.plan, Plan::Single { p: 0 }, "{d:?}");
        } else if d.reason.contains("bucket is full") {
            full_no += 1;
            assert!(full, "{d:?}");
            assert_eq!(d.plan, Plan::Hedge { p: 0, h: 1, delay_s: fit.reserve_delay_s }, "{d:?}");
        }
        // A straggler every 60 requests takes a token: the bucket is full only some of
        // the time.
        if i % 60 == 0 {
            l.state().budget().try_take();
        }
    }
    assert!(full_no > 0 && not_full_no > 0, "{full_no} {not_full_no}");
}

/// A deterministic stream on simulated time (one request every 60 s) over two providers:
/// `a` (20–23 s) and `b` (5–6.2 s, same rate: `auto` prefers it), with `b` failing every
/// attempt after 1 s for requests in `down`. Each request runs `auto`'s plan: a race
/// launches both; a delayed hedge launches its hedge only if the primary has no valid
/// result by the delay and a budget token is there; the loser of a race is cancelled at
/// the winner's time. Returns, per request, whether `b` was launched and whether it was
/// the plan's primary, and the reasons given.
fn outage_stream(requests: u64, down: std::ops::Range<u64>) -> Vec<(bool, bool, String)> {
    let auto = AutoSettings { deadline_s: 60.0, target_miss: 0.05, max_extra: 0.35, ..AutoSettings::default() };
    let mut l = Learner::new(LearnedKind::Auto(auto), &providers(), None, ModelConfig::default(), 3);
    let mut out = Vec::new();
    for i in 0..requests {
        let d = l.decide(&[None, None]);
        // (latency if valid, time it ends) per provider.
        let run = |p: usize| -> (Option<f64>, f64) {
            if p == 1 && down.contains(&i) {
                (None, 1.0)
            } else if p == 1 {
                let t = 5.0 + (i % 5) as f64 * 0.3;
                (Some(t), t)
            } else {
                let t = 20.0 + (i % 7) as f64 * 0.5;
                (Some(t), t)
            }
        };
        let mut launched: Vec<(usize, f64)> = Vec::new();
        match d.plan {
            Plan::Single { p } => launched.push((p, 0.0)),
            Plan::Hedge { p, h, delay_s }
            | Plan::Cutover { p, h, safety_s: delay_s, .. }
            | Plan::Cascade { p, h, safety_s: delay_s, .. } => {
                launched.push((p, 0.0));
                let p_done = run(p).0.is_some_and(|t| t <= delay_s);
                if !p_done && p != h && l.state().budget().try_take() {
                    launched.push((h, delay_s));
                }
            }
        }
        let win = launched.iter().filter_map(|&(p, at)| run(p).0.map(|t| at + t)).fold(f64::INFINITY, f64::min);
        let obs: Vec<Observation> = launched
            .iter()
            .map(|&(p, at)| {
                let (valid, end) = run(p);
                let outcome = if at + end <= win + 1e-9 {
                    match valid {
                        Some(t) => Outcome::Valid { latency_s: t },
                        None => Outcome::Failed { wall_s: end },
                    }
                } else if valid.is_none() && at + end < win {
                    Outcome::Failed { wall_s: end }
                } else {
                    Outcome::Censored { after_s: (win - at).max(0.0) }
                };
                let outcome = match (valid, outcome) {
                    (None, _) if at + end <= win => Outcome::Failed { wall_s: end },
                    (_, o) => o,
                };
                Observation { provider: p, outcome, queue_s: None, idle_gap_s: None, warm: None }
            })
            .collect();
        l.observe(&obs);
        out.push((launched.iter().any(|&(p, _)| p == 1), d.plan.primary() == 1, d.reason));
    }
    out
}

#[test]
fn a_provider_that_failed_and_recovered_is_used_again_within_the_reprobe_interval() {
    let every = ModelConfig::default().reprobe_after();
    assert_eq!(every, 256);
    let (fail, recover, n) = (300u64, 600u64, 1400u64);
    let s = outage_stream(n, fail..recover);
    // Before the outage auto runs b; during it, it stops (after the failures it needs to
    // learn the outage).
    assert!(s[200..300].iter().filter(|r| r.1).count() >= 90, "b should be the primary before the outage");
    let avoided =
        (fail..recover).find(|&i| s[i as usize..recover as usize].iter().all(|r| !r.1)).expect("auto never gave up on b while it was down");
    assert!(avoided < fail + 100, "auto still put b first {} requests into the outage", avoided - fail);
    // Recovered: within one re-probe interval (plus a table refresh) b is the primary again.
    // At one request a minute that is 256 + 32 requests: under 4.8 hours.
    let back = (recover..n).find(|&i| s[i as usize].1).expect("b never came back");
    assert!(back - recover <= every + 32, "b came back {} requests after it recovered", back - recover);
    let probe = (recover..back).rev().find(|&i| s[i as usize].2.starts_with("re-probe: b not launched for "));
    assert!(probe.is_some_and(|i| back - i <= 32), "no re-probe of b shortly before it came back at {back}");
    // And stays: it is the primary in most requests after that.
    let after = &s[back as usize..];
    assert!(after.iter().filter(|r| r.1).count() * 10 >= after.len() * 9);
}

#[test]
fn a_provider_still_down_costs_at_most_one_probe_per_interval() {
    let every = ModelConfig::default().reprobe_after();
    let (fail, n) = (300u64, 3000u64);
    let s = outage_stream(n, fail..n);
    let avoided = (fail..n).find(|&i| s[i as usize..].iter().all(|r| !r.1)).expect("auto never gave up on b");
    let launches = s[avoided as usize..].iter().filter(|r| r.0).count() as u64;
    let bound = (n - avoided).div_ceil(every);
    assert!(launches <= bound, "{launches} launches of a dead provider in {} requests (bound {bound})", n - avoided);
    assert!(launches >= 1, "a provider avoided for {} requests was never re-probed", n - avoided);
    for r in s[avoided as usize..].iter().filter(|r| r.0) {
        assert!(r.2.starts_with("re-probe: "), "{}", r.2);
    }
}
