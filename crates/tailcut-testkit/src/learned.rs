//! Driving a learned policy in tests: requests run one after another on the paused
//! clock, each settled trace fed back to the policy as the gateway and `tailcut run` do.

use std::time::Duration;
use tailcut_core::policy::learned::LearnedPolicy;
use tailcut_core::trace::RequestTrace;
use tailcut_core::{Hedger, JobRequest};
use tokio::time::Instant;

/// Runs `n` requests (`r0`, `r1`, …, input `{}`) one after another, `gap` apart, feeding
/// each settled trace back to `policy`; returns the traces in order. Panics when a run
/// fails: a test's engine never refuses its own requests.
pub async fn drive(h: &Hedger, policy: &LearnedPolicy, n: usize, gap: Duration) -> Vec<RequestTrace> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let t0 = Instant::now();
        let outcome = h.run(policy, JobRequest::new(format!("r{i}"), serde_json::json!({}))).await.expect("the race runs");
        let trace = outcome.settled.wait().await.expect("the race settles");
        policy.observe_trace(&trace, t0);
        out.push(trace);
        tokio::time::sleep(gap).await;
    }
    out
}
