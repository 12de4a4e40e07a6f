use super::*;
use std::time::Duration;
use tailcut_core::receipt::Evidence;
use tailcut_core::{CancelContext, CancelScope, JobRequest, JobState, MicroUsd, ProviderApi};
use tokio::time::Instant;

fn req() -> JobRequest {
    JobRequest::new("r", serde_json::json!({}))
}

#[tokio::test(start_paused = true)]
async fn same_seed_same_draws() {
    let a = SimProvider::new("runpod", SimProfile::runpod(), 7);
    let b = SimProvider::new("runpod", SimProfile::runpod(), 7);
    for _ in 0..5 {
        let rq = req();
        let (ja, jb) = tokio::join!(a.submit(&rq), b.submit(&rq));
        let (ja, jb) = (ja.unwrap(), jb.unwrap());
        let deadline = Instant::now() + Duration::from_secs(300);
        let (ra, rb) = tokio::join!(ja.result(deadline), jb.result(deadline));
        assert_eq!(ra.finished, rb.finished);
        assert_eq!(ra.state, rb.state);
        tokio::time::advance(Duration::from_secs(200)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn queued_then_running_then_completed() {
    let p = SimProfile { cold_fast_p: 1.0, submit_latency_s: (0.0, 0.0), failure_p: 0.0, malformed_p: 0.0, ..SimProfile::runpod() };
    let sim = SimProvider::new("runpod", p, 1);
    let job = sim.submit(&req()).await.unwrap();
    assert_eq!(job.status().await.unwrap(), JobState::Queued);
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(job.status().await.unwrap(), JobState::Running);
    let r = job.result(Instant::now() + Duration::from_secs(300)).await;
    assert_eq!(r.state, JobState::Completed);
    assert!(r.metrics.contains_key("runpod_delay_ms"));
    assert_eq!(job.status().await.unwrap(), JobState::Completed);
}

#[tokio::test(start_paused = true)]
async fn coarse_providers_report_pending() {
    let sim = SimProvider::new("modal", SimProfile::modal(), 1);
    let job = sim.submit(&req()).await.unwrap();
    assert_eq!(job.status().await.unwrap(), JobState::Pending);
    assert!(!sim.capabilities().reports_queued);
}

#[tokio::test(start_paused = true)]
async fn queued_cancel_is_free_and_confirmed() {
    let p = SimProfile { cold_fast_p: 0.0, submit_latency_s: (0.0, 0.0), ..SimProfile::runpod() };
    let sim = SimProvider::new("runpod", p, 3);
    let job = sim.submit(&req()).await.unwrap();
    let epoch = Instant::now();
    let ctx = CancelContext { reason: "test".into(), epoch, sent_at: Instant::now(), state_before: Some(JobState::Queued) };
    let (receipt, result) = tokio::join!(job.cancel(ctx), job.result(Instant::now() + Duration::from_secs(300)));
    let receipt = receipt.unwrap();
    assert_eq!(receipt.cancel_scope, CancelScope::QueuedJob);
    assert_eq!(receipt.evidence, Evidence::ConfirmedTerminal);
    assert!(!receipt.leaked);
    assert_eq!(receipt.estimated_cost_micro_usd, Some(MicroUsd::ZERO));
    assert_eq!(result.state, JobState::Cancelled);
    let bill = sim.billing();
    assert_eq!(bill.billed, MicroUsd::ZERO);
    assert_eq!(bill.active, MicroUsd::ZERO);
    // What the provider reports agrees: no execution, queued until the cancel.
    assert_eq!(result.metrics["runpod_execution_ms"], 0);
    let delay = result.metrics["runpod_delay_ms"].as_f64().unwrap();
    assert!((250.0..=310.0).contains(&delay), "queued until the cancel took effect: {delay}");
}

#[tokio::test(start_paused = true)]
async fn running_cancel_bills_until_confirmed_stop() {
    let p = SimProfile { cold_fast_p: 0.0, submit_latency_s: (0.0, 0.0), idle_window_s: 0.0, ..SimProfile::runpod() };
    let sim = SimProvider::new("runpod", p, 3);
    let job = sim.submit(&req()).await.unwrap();
    tokio::time::advance(Duration::from_secs(40)).await;
    let epoch = Instant::now();
    let ctx = CancelContext { reason: "test".into(), epoch, sent_at: Instant::now(), state_before: Some(JobState::Running) };
    let receipt = job.cancel(ctx).await.unwrap();
    assert_eq!(receipt.terminal_status, Some(JobState::Cancelled));
    assert!(receipt.confirmed_terminal && !receipt.leaked && receipt.was_running);
    let ack = receipt.ack_latency_ms().unwrap();
    assert!((250.0..=310.0).contains(&ack), "{ack}");
    let exec = receipt.execution_ms_before_cancel.unwrap();
    assert!(exec > 10_000.0 && exec < 40_000.0, "{exec}");
    assert!(sim.billing().active > MicroUsd::ZERO);
}

#[tokio::test(start_paused = true)]
async fn leaked_cancel_says_so() {
    let p = SimProfile { leak_p: 1.0, submit_latency_s: (0.0, 0.0), cold_fast_p: 1.0, ..SimProfile::runpod() };
    let sim = SimProvider::new("runpod", p, 3);
    let job = sim.submit(&req()).await.unwrap();
    tokio::time::advance(Duration::from_secs(3)).await;
    let epoch = Instant::now();
    let ctx = CancelContext { reason: "t".into(), epoch, sent_at: Instant::now(), state_before: Some(JobState::Running) };
    let receipt = job.cancel(ctx).await.unwrap();
    assert!(receipt.leaked);
    assert_eq!(receipt.evidence, Evidence::ProviderAck);
    // The job keeps running to completion.
    let r = job.result(Instant::now() + Duration::from_secs(300)).await;
    assert_ne!(r.state, JobState::Cancelled);
}

#[tokio::test(start_paused = true)]
async fn warm_worker_is_reused_within_idle_window() {
    let p = SimProfile { submit_latency_s: (0.0, 0.0), failure_p: 0.0, ..SimProfile::runpod() };
    let sim = SimProvider::new("runpod", p, 5);
    let j1 = sim.submit(&req()).await.unwrap();
    j1.result(Instant::now() + Duration::from_secs(300)).await;
    tokio::time::advance(Duration::from_secs(10)).await;
    let j2 = sim.submit(&req()).await.unwrap();
    let r2 = j2.result(Instant::now() + Duration::from_secs(300)).await;
    assert_eq!(r2.metrics["sim_mode"], "warm");
    assert_eq!(sim.billing().cold_starts, 1);
    // After the idle window it scales to zero.
    tokio::time::advance(Duration::from_secs(61)).await;
    let j3 = sim.submit(&req()).await.unwrap();
    let r3 = j3.result(Instant::now() + Duration::from_secs(300)).await;
    assert_ne!(r3.metrics["sim_mode"], "warm");
    assert_eq!(sim.billing().cold_starts, 2);
}

#[tokio::test(start_paused = true)]
async fn cap_right_censors() {
    let p = SimProfile { cold_fast_p: 0.0, submit_latency_s: (0.0, 0.0), ..SimProfile::runpod() };
    let sim = SimProvider::new("runpod", p, 3);
    let job = sim.submit(&req()).await.unwrap();
    let r = job.result(Instant::now() + Duration::from_secs(5)).await;
    assert_eq!(r.state, JobState::TimedOut);
}
