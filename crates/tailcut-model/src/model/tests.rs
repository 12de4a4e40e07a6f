use super::*;

fn two() -> Model {
    Model::new(&[("a".into(), 0.001, 60.0), ("b".into(), 0.002, 0.0)], ModelConfig { half_life: 1e6, ..ModelConfig::default() })
}

fn valid(p: usize, l: f64) -> Observation {
    Observation { provider: p, outcome: Outcome::Valid { latency_s: l }, queue_s: None, idle_gap_s: None, warm: None }
}

#[test]
fn learns_warmth_against_gap() {
    let mut m = two();
    for i in 0..200 {
        let gap = (i % 20) as f64 * 10.0; // 0..190 s
        let warm = gap < 60.0;
        m.observe(&Observation { idle_gap_s: Some(gap), warm: Some(warm), ..valid(0, if warm { 6.0 } else { 100.0 }) });
    }
    let p = &m.providers[0];
    assert!(p.p_warm(10.0).unwrap() > 0.9);
    assert!(p.p_warm(150.0).unwrap() < 0.1);
    assert!(p.latency_warm.quantile(0.9).unwrap() < 7.0);
    assert!(p.latency_cold.quantile(0.1).unwrap() > 90.0);
    assert!(m.providers[1].p_warm(10.0).is_none());
}

#[test]
fn cancelled_attempts_are_filed_by_their_likelier_warmth() {
    let mut m = two();
    // Learn: short gaps are warm (6 s), long gaps cold (100 s).
    for i in 0..100 {
        let warm = i % 2 == 0;
        m.observe(&Observation {
            idle_gap_s: Some(if warm { 10.0 } else { 500.0 }),
            warm: Some(warm),
            ..valid(0, if warm { 6.0 } else { 100.0 })
        });
    }
    // Cold starts cancelled at 25 s (a hedge won): warmth unknown, gap long.
    for _ in 0..50 {
        m.observe(&Observation {
            provider: 0,
            outcome: Outcome::Censored { after_s: 25.0 },
            queue_s: None,
            idle_gap_s: Some(500.0),
            warm: None,
        });
    }
    let p = &m.providers[0];
    assert_eq!(p.latency_cold.samples(), 100);
    assert_eq!(p.latency_warm.samples(), 50);
    // Their mass went above 25 s, with the cold starts.
    assert!(p.latency_cold.cdf(25.0) < 0.01, "{}", p.latency_cold.cdf(25.0));
}

#[test]
fn a_primary_cancelled_while_queued_counts_with_the_slow_starts() {
    let mut m = two();
    for i in 0..90 {
        let slow = i % 3 == 0;
        m.observe(&Observation { queue_s: Some(if slow { 15.0 } else { 1.2 }), ..valid(0, if slow { 100.0 } else { 6.0 }) });
    }
    // A cutover cancels 60 queued primaries at the 2.5 s poll.
    for _ in 0..60 {
        m.observe(&Observation {
            provider: 0,
            outcome: Outcome::Censored { after_s: 2.5 },
            queue_s: Some(2.501),
            idle_gap_s: None,
            warm: None,
        });
    }
    // 30 + 60 of 150 are slow: 60 %, not the 1/3 a plain censoring step would give.
    let slow = 1.0 - m.providers[0].latency.cdf(50.0);
    assert!((slow - 0.6).abs() < 0.02, "{slow}");
}

#[test]
fn correlated_pairs_have_lift_above_one() {
    let mut m = two();
    for i in 0..400 {
        let slow = i % 5 == 0;
        m.observe_request(&[valid(0, if slow { 100.0 } else { 5.0 + (i % 7) as f64 * 0.1 }), valid(1, if slow { 90.0 } else { 20.0 })]);
    }
    assert!(m.lift(0, 1) > 3.0, "{}", m.lift(0, 1));
    let mut ind = two();
    for i in 0..400 {
        ind.observe_request(&[valid(0, if i % 5 == 0 { 100.0 } else { 5.0 }), valid(1, if i % 4 == 1 { 90.0 } else { 20.0 })]);
    }
    assert!((ind.lift(0, 1) - 1.0).abs() < 0.5, "{}", ind.lift(0, 1));
}

#[test]
fn failure_and_queue_rates() {
    let mut m = two();
    for i in 0..100 {
        let o = if i % 10 == 0 {
            Observation { provider: 0, outcome: Outcome::Failed { wall_s: 3.0 }, queue_s: Some(1.0), idle_gap_s: None, warm: None }
        } else {
            Observation { queue_s: Some(if i % 2 == 0 { 20.0 } else { 1.0 }), ..valid(0, 7.0) }
        };
        m.observe(&o);
    }
    let p = &m.providers[0];
    assert!((p.failed.rate(0.0, 0.0) - 0.1).abs() < 0.01);
    assert!((p.p_bad() - 0.1).abs() < 0.02);
    assert!((p.queued_at_poll.rate(0.0, 0.0) - 0.40).abs() < 0.02);
    assert!(p.has_queue_signal());
}

#[test]
fn save_restore_round_trips_and_checks_version() {
    let mut m = two();
    m.observe_request(&[valid(0, 6.0), valid(1, 19.0)]);
    let dir = std::env::temp_dir().join(format!("tailcut-model-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.json");
    m.save(&path).unwrap();
    let back = Model::load(&path).unwrap();
    assert_eq!(back, m);
    let text = std::fs::read_to_string(&path).unwrap().replace("\"version\":1", "\"version\":99");
    let err = Model::from_json(&text).unwrap_err();
    assert!(matches!(err, ModelFormatError::UnsupportedVersion { found: Some(99) }), "{err}");
    assert_eq!(err.to_string(), "unsupported model version Some(99) (this build reads version 1)");
    let wrong = Model::from_json("{\"format\":\"x\"}").unwrap_err();
    assert!(matches!(&wrong, ModelFormatError::WrongFormat { found: Some(f) } if f == "x"), "{wrong}");
    assert_eq!(wrong.to_string(), "expected \"format\": \"tailcut-model\", found Some(\"x\")");
    std::fs::remove_dir_all(&dir).ok();
}

fn failed(p: usize) -> Observation {
    Observation { provider: p, outcome: Outcome::Failed { wall_s: 1.0 }, queue_s: None, idle_gap_s: None, warm: None }
}

#[test]
fn stale_evidence_ages_with_the_requests_a_provider_missed() {
    let mut m = Model::new(&[("a".into(), 0.001, 0.0), ("b".into(), 0.001, 0.0)], ModelConfig::default());
    let cfg = m.config;
    for _ in 0..200 {
        m.observe_request(&[valid(0, 5.0), failed(1)]);
    }
    assert!(m.providers[1].p_bad() > 0.9);
    // b unseen for fewer than stale_after requests: one success barely moves it.
    let mut fresh = m.clone();
    for _ in 0..cfg.stale_after - 1 {
        fresh.observe_request(&[valid(0, 5.0)]);
    }
    assert_eq!(fresh.unseen(1), cfg.stale_after - 1);
    fresh.observe_request(&[valid(1, 5.0)]);
    assert!(fresh.providers[1].p_bad() > 0.9, "{}", fresh.providers[1].p_bad());
    // Unseen for the re-probe interval: its failures have aged away, the first success
    // decides; its latency shape is kept.
    for _ in 0..cfg.reprobe_after() {
        m.observe_request(&[valid(0, 5.0)]);
    }
    assert_eq!(m.unseen(1), cfg.reprobe_after());
    m.observe_request(&[valid(1, 5.0)]);
    assert!(m.providers[1].p_bad() < 0.02, "{}", m.providers[1].p_bad());
    assert_eq!(m.unseen(1), 0);
    assert!((cfg.stale_factor(cfg.reprobe_after()) - 2f64.powi(-16)).abs() < 1e-12);
    assert_eq!(cfg.stale_factor(cfg.stale_after), 1.0);
    // The always-seen provider never aged.
    assert!(m.providers[0].latency.effective() > 80.0);
}

#[test]
fn a_cancelled_attempt_past_when_failures_show_counts_as_not_failed() {
    let mut m = Model::new(&[("a".into(), 0.001, 0.0), ("b".into(), 0.001, 0.0)], ModelConfig::default());
    for _ in 0..100 {
        m.observe_request(&[valid(1, 20.0)]);
    }
    for _ in 0..100 {
        m.observe_request(&[failed(1)]);
    }
    let before = m.providers[1].p_bad();
    assert!(before > 0.6, "{before}");
    // Cancelled at 10 s: failures show at 1 s, so it had not failed.
    let censored = Observation { provider: 1, outcome: Outcome::Censored { after_s: 10.0 }, queue_s: None, idle_gap_s: None, warm: None };
    assert!(m.providers[1].p_failed_if_running(10.0).unwrap() < 1e-6);
    for _ in 0..64 {
        m.observe_request(&[censored]);
    }
    assert!(m.providers[1].p_bad() < before / 2.0 + 0.01, "{} vs {before}", m.providers[1].p_bad());
    // Cancelled at 0.5 s, before a failure would show: it says little either way.
    let early = m.providers[1].p_failed_if_running(0.5).unwrap();
    let pf = m.providers[1].failed.rate(0.01, 1.0);
    assert!(early >= pf * 0.99, "{early} vs {pf}");
    // A provider that never failed: no failure timing known, no update.
    assert!(m.providers[0].p_failed_if_running(10.0).is_none());
}
