//! The cost of learning per request: one model update (the attempts of a request) plus
//! one `auto` decision, as the live engine and the replay pay it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use tailcut_model::{AutoSettings, LearnedKind, Model, ModelConfig, Observation, Outcome, PolicyState};

fn providers() -> Vec<(String, f64, f64)> {
    vec![("runpod".into(), 0.000306, 60.0), ("modal".into(), 0.000704, 0.0), ("cerebrium".into(), 0.000736, 0.0)]
}

fn round(i: u64) -> [Observation; 3] {
    let slow = i.is_multiple_of(3);
    let o = |p: usize, l: f64, q: Option<f64>, gap: f64, warm: bool| Observation {
        provider: p,
        outcome: Outcome::Valid { latency_s: l },
        queue_s: q,
        idle_gap_s: Some(gap),
        warm: Some(warm),
    };
    let gap = ((i * 37) % 300) as f64;
    [
        o(0, if slow { 100.0 + (i % 20) as f64 } else { 6.0 + (i % 7) as f64 * 0.3 }, Some(if slow { 15.0 } else { 1.2 }), gap, gap < 60.0),
        o(1, 30.0 + (i % 11) as f64, None, gap, gap < 60.0),
        o(2, 19.0 + (i % 5) as f64 * 0.2, None, gap, gap < 60.0),
    ]
}

fn bench(c: &mut Criterion) {
    let mut model = Model::new(&providers(), ModelConfig::default());
    for i in 0..2000 {
        model.observe_request(&round(i));
    }
    let mut state = PolicyState::new(LearnedKind::Auto(AutoSettings::default()), &model, 1);
    let mut i = 2000u64;
    c.bench_function("update (3 attempts) + auto decision", |b| {
        b.iter(|| {
            i += 1;
            let obs = round(i);
            model.observe_request(&obs);
            state.observed(&model, 3);
            let g = ((i * 37) % 300) as f64;
            black_box(state.decide_plan(&[Some(g), Some(g * 0.5), Some(g * 2.0)]))
        })
    });
    let mut one = Model::new(&providers(), ModelConfig::default());
    for i in 0..2000 {
        one.observe_request(&round(i));
    }
    let mut st1 = PolicyState::new(LearnedKind::Auto(AutoSettings::default()), &one, 1);
    let mut j = 0u64;
    c.bench_function("update (1 attempt) + auto decision", |b| {
        b.iter(|| {
            j += 1;
            let obs = round(j);
            one.observe_request(&obs[..1]);
            st1.observed(&one, 1);
            let g = ((j * 37) % 300) as f64;
            black_box(st1.decide_plan(&[Some(g), None, Some(g)]))
        })
    });
    // A policy that cancels its losers: the primary answers, the two others are
    // censored when it does (their distributions are read by Kaplan-Meier).
    let censor = |i: u64| {
        let mut r = round(i);
        let won = match r[0].outcome {
            Outcome::Valid { latency_s } => latency_s,
            _ => 1.0,
        };
        for o in &mut r[1..] {
            o.outcome = Outcome::Censored { after_s: won };
            o.warm = None;
        }
        r
    };
    let mut cm = Model::new(&providers(), ModelConfig::default());
    for i in 0..2000 {
        cm.observe_request(&censor(i));
    }
    let mut cs = PolicyState::new(LearnedKind::Auto(AutoSettings::default()), &cm, 1);
    let mut k = 2000u64;
    c.bench_function("update (3 attempts, 2 censored) + auto decision", |b| {
        b.iter(|| {
            k += 1;
            let obs = censor(k);
            cm.observe_request(&obs);
            cs.observed(&cm, 3);
            let g = ((k * 37) % 300) as f64;
            black_box(cs.decide_plan(&[Some(g), Some(g * 0.5), Some(g * 2.0)]))
        })
    });
    let mut cold = PolicyState::new(LearnedKind::Auto(AutoSettings::default()), &model, 1);
    c.bench_function("auto decision with a table refresh (worst case)", |b| {
        b.iter(|| {
            cold.refresh(&model);
            black_box(cold.decide_plan(&[Some(10.0), Some(500.0), None]))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
