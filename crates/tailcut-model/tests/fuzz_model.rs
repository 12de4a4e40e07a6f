//! Fuzz-style tests of the model loader ([`Model::from_json`], what `model show`,
//! `run --model` and the gateway's model store read), bounded for CI: arbitrary bytes
//! and damaged saved models (the testkit's mutations, deep `[` nesting among them).
//!
//! Properties: the loader never panics and decides each case within [`CASE_LIMIT`];
//! a model it accepts passes its own range checks, saves to JSON that loads back equal,
//! and can be asked for its quantiles without a panic.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use proptest::prelude::*;
use std::time::Duration;
use tailcut_model::{Model, ModelConfig, Observation, Outcome};

/// Longest a case may take (debug build on a shared 2-core machine).
const CASE_LIMIT: Duration = Duration::from_secs(5);

fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    let text = String::from_utf8_lossy(bytes).into_owned();
    let loaded = tailcut_testkit::fuzz::bounded(CASE_LIMIT, move || {
        Model::from_json(&text).map(|m| {
            let quantiles: Vec<_> = m.providers.iter().map(|p| p.latency.quantiles_reached([0.5, 0.95, 0.99])).collect();
            (serde_json::to_string(&m).ok(), m.check(), quantiles.len(), m)
        })
    })
    .map_err(|why| TestCaseError::fail(format!("{why} on {} bytes", bytes.len())))?;
    let Ok((saved, checked, _, m)) = loaded else { return Ok(()) };
    prop_assert!(checked.is_ok(), "accepted a model its own check refuses: {:?}", checked);
    let saved = saved.expect("an accepted model serialises");
    let back = Model::from_json(&saved).map_err(|e| TestCaseError::fail(format!("an accepted model does not load back: {e}")))?;
    prop_assert!(back == m, "the model changed through a save");
    Ok(())
}

fn seeds() -> Vec<Vec<u8>> {
    let mut m = Model::new(&[("a".into(), 0.0003, 60.0), ("b".into(), 0.0007, 0.0), ("c".into(), 0.0, 5.0)], ModelConfig::default());
    let obs = |p, outcome| Observation { provider: p, outcome, queue_s: Some(1.5), idle_gap_s: Some(40.0), warm: Some(p == 0) };
    for i in 0..40 {
        let l = 2.0 + f64::from(i % 7);
        m.observe_request(&[
            obs(0, Outcome::Valid { latency_s: l }),
            obs(1, Outcome::Censored { after_s: l }),
            obs(2, if i % 5 == 0 { Outcome::Failed { wall_s: 1.0 } } else { Outcome::Valid { latency_s: 30.0 } }),
        ]);
    }
    let full = serde_json::to_vec(&m).unwrap();
    // A trained model small enough (under 4 KiB) for the damaged-seed cases.
    let mut small = Model::new(&[("x".into(), 0.001, 0.0)], ModelConfig::default());
    small.observe_request(&[obs(0, Outcome::Valid { latency_s: 3.0 })]);
    let small = serde_json::to_vec(&small).unwrap();
    assert!(small.len() < 4096, "{} bytes", small.len());
    let cold = serde_json::to_vec(&Model::new(&[("x".into(), 0.001, 0.0)], ModelConfig::default())).unwrap();
    vec![full, small, cold, br#"{"format":"tailcut-model","version":1}"#.to_vec()]
}

tailcut_testkit::fuzz_tests!(seeds: seeds, check: check, cases: 800);
