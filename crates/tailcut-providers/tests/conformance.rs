//! One conformance suite, run against every provider module and its faithful mock server:
//! submit→result, state transitions, cancel while queued / while running / after finish,
//! 5xx, 429 with Retry-After, malformed bodies, the server vanishing mid-job, and
//! timeouts — each asserting the result state and the receipt's evidence and leak flag.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use std::sync::Arc;
use std::time::Duration;
use tailcut_core::receipt::Evidence;
use tailcut_core::{CancelContext, Job, JobRequest, JobState, ProviderApi, RateNanoUsdPerSec, Receipt};
use tailcut_mockproviders::{Behaviour, MockServer};
use tailcut_providers::baseten::Baseten;
use tailcut_providers::cerebrium::Cerebrium;
use tailcut_providers::client::{HttpClient, RetryPolicy};
use tailcut_providers::fal::Fal;
use tailcut_providers::generic::{Generic, GenericSpec};
use tailcut_providers::modal::Modal;
use tailcut_providers::openai::{Endpoint, OpenAi};
use tailcut_providers::replicate::{Replicate, Target};
use tailcut_providers::runpod::RunPod;
use tailcut_providers::vast::Vast;
use tailcut_providers::{PollSettings, PollingProvider, ProviderKind, Secret};
use tokio::time::Instant;

/// Request-channel kinds: the job is the request, cancelled by closing it.
fn is_channel(kind: ProviderKind) -> bool {
    matches!(kind, ProviderKind::Cerebrium | ProviderKind::OpenAi | ProviderKind::Vast)
}

fn http() -> HttpClient {
    HttpClient::new(
        Duration::from_secs(5),
        RetryPolicy { attempts: 4, base_backoff: Duration::from_millis(20), max_backoff: Duration::from_secs(3) },
    )
    .unwrap()
}

fn poll() -> PollSettings {
    PollSettings { interval: Duration::from_millis(25), cancel_window: Duration::from_secs(2), max_poll_failures: 3 }
}

const RATE: RateNanoUsdPerSec = RateNanoUsdPerSec(306_000);

async fn setup(kind: ProviderKind, b: Behaviour) -> (MockServer, Arc<dyn ProviderApi>) {
    let mock = MockServer::start(kind, b).await.unwrap();
    let url = mock.url();
    let key = Secret::new("test-key-123");
    let api: Arc<dyn ProviderApi> = match kind {
        ProviderKind::RunPod => {
            Arc::new(PollingProvider::new(RunPod { name: "runpod".into(), base: format!("{url}/v2/ep1"), key }, http(), poll(), RATE))
        }
        ProviderKind::Replicate => Arc::new(PollingProvider::new(
            Replicate {
                name: "replicate".into(),
                base: format!("{url}/v1"),
                token: key,
                target: Target::Version { version: "mock/model:v1".into() },
                prefer_wait_s: None,
            },
            http(),
            poll(),
            RATE,
        )),
        ProviderKind::Fal => Arc::new(PollingProvider::new(
            Fal { name: "fal".into(), base: url.clone(), model: "fal-ai/mock-app".into(), key },
            http(),
            poll(),
            RATE,
        )),
        ProviderKind::Baseten => Arc::new(PollingProvider::new(
            Baseten {
                name: "baseten".into(),
                base: url.clone(),
                environment: "production".into(),
                key,
                webhook: Some(format!("{url}/collector")),
                result_url: Some(format!("{url}/collector/{{request_id}}")),
            },
            http(),
            poll(),
            RATE,
        )),
        ProviderKind::Modal => {
            Arc::new(PollingProvider::new(Modal { name: "modal".into(), base: url.clone(), proxy_auth: None }, http(), poll(), RATE))
        }
        ProviderKind::Cerebrium => {
            Arc::new(Cerebrium { name: "cerebrium".into(), url: format!("{url}/v4/p-1/app/predict"), token: key, http: http() })
        }
        ProviderKind::OpenAi => Arc::new(OpenAi {
            name: "vllm".into(),
            base: format!("{url}/v1"),
            model: Some("mock-model".into()),
            key: Some(key),
            endpoint: Endpoint::Chat,
            stream: true,
            check_json: true,
            http: http(),
            prepared: Default::default(),
        }),
        ProviderKind::Vast => Arc::new(Vast {
            name: "vast".into(),
            route_url: format!("{url}/route/"),
            endpoint: "mock-endpoint".into(),
            worker_path: "/generate".into(),
            cost: 100.0,
            key,
            poll: poll().interval,
            http: http(),
        }),
        ProviderKind::Generic => {
            let spec: GenericSpec = serde_json::from_value(serde_json::json!({
                "headers": {"Authorization": "Bearer test-key-123"},
                "submit": {"url": format!("{url}/jobs"), "body": {"input": "{request}"}},
                "id_path": "job.id",
                "status": {"url": format!("{url}/jobs/{{job_id}}")},
                "state_path": "state",
                "state_map": {"waiting": "QUEUED", "working": "IN_PROGRESS", "done": "COMPLETED", "error": "FAILED", "cancelled": "CANCELLED"},
                "result_path": "result",
                "metrics_path": "timing",
                "cancel": {"method": "DELETE", "url": format!("{url}/jobs/{{job_id}}")}
            }))
            .unwrap();
            Arc::new(PollingProvider::new(Generic { name: "generic".into(), spec }, http(), poll(), RATE))
        }
        ProviderKind::Sim => unreachable!("MockServer::start refuses the simulator"),
    };
    (mock, api)
}

fn request(kind: ProviderKind) -> JobRequest {
    if kind == ProviderKind::OpenAi {
        JobRequest::new("r1", serde_json::json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}))
    } else {
        JobRequest::new("r1", serde_json::json!({"text": "hello", "voice_id": "v1"}))
    }
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(20)
}

async fn cancel(job: &Arc<dyn Job>) -> Result<Receipt, tailcut_core::ProviderError> {
    let state_before = job.status().await.ok();
    let now = Instant::now();
    job.cancel(CancelContext { reason: "test".into(), epoch: now, sent_at: now, state_before }).await
}

fn fast() -> Behaviour {
    Behaviour { queue: Duration::from_millis(80), run: Duration::from_millis(120), ..Behaviour::default() }
}

async fn submit_then_result(kind: ProviderKind) {
    let (_mock, api) = setup(kind, fast()).await;
    let job = api.submit(&request(kind)).await.unwrap();
    let t = Instant::now();
    let r = job.result(far()).await;
    assert_eq!(r.state, JobState::Completed, "{kind:?}: {:?}", r.error);
    let payload = r.payload.expect("payload");
    let v: serde_json::Value = serde_json::from_slice(&payload.bytes).expect("JSON payload");
    assert!(v.is_object(), "{kind:?}: {v}");
    assert!(t.elapsed() >= Duration::from_millis(150), "{kind:?} returned before the job could finish");
    assert!(job.job_id().is_some());
}

async fn state_transitions(kind: ProviderKind) {
    let b = Behaviour { queue: Duration::from_millis(250), run: Duration::from_millis(250), ..Behaviour::default() };
    let (_mock, api) = setup(kind, b).await;
    let job = api.submit(&request(kind)).await.unwrap();
    let mut seen: Vec<JobState> = Vec::new();
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        let s = job.status().await.unwrap();
        if seen.last() != Some(&s) {
            seen.push(s);
        }
        if s.is_terminal() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let expected: &[JobState] = match kind {
        ProviderKind::RunPod | ProviderKind::Fal | ProviderKind::Baseten | ProviderKind::Generic => {
            &[JobState::Queued, JobState::Running, JobState::Completed]
        }
        ProviderKind::Replicate => &[JobState::Pending, JobState::Running, JobState::Completed],
        ProviderKind::Modal | ProviderKind::Cerebrium | ProviderKind::OpenAi => &[JobState::Pending, JobState::Completed],
        // Routing while no worker is ready, then the worker call.
        ProviderKind::Vast => &[JobState::Queued, JobState::Pending, JobState::Completed],
        ProviderKind::Sim => unreachable!("no mock server speaks the simulator"),
    };
    assert_eq!(seen, expected, "{kind:?}");
}

async fn cancel_while_queued(kind: ProviderKind) {
    let b = Behaviour { queue: Duration::from_millis(800), run: Duration::from_millis(300), ..Behaviour::default() };
    let (mock, api) = setup(kind, b).await;
    let job = api.submit(&request(kind)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(60)).await;
    let r = cancel(&job).await.unwrap();
    assert!(!r.leaked, "{kind:?}: {r:?}");
    if kind == ProviderKind::Vast {
        // Still routing (no ready worker): nothing reached a worker.
        assert_eq!(r.evidence, Evidence::RequestChannelClosed, "{r:?}");
        assert_eq!(r.cancel_scope, tailcut_core::CancelScope::QueuedJob);
        assert!(!r.was_running && r.note.contains("nothing reached a worker"), "{r:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!((mock.submits(), mock.disconnects()), (0, 0), "no worker call was made");
    } else if is_channel(kind) {
        assert_eq!(r.evidence, Evidence::RequestChannelClosed, "{kind:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(mock.disconnects(), 1, "{kind:?}: the server saw the request closed");
    } else {
        assert_eq!(r.evidence, Evidence::ConfirmedTerminal, "{kind:?}: {r:?}");
        assert!(r.confirmed_terminal && r.terminal_status.is_some());
        assert!(!r.was_running, "{kind:?}");
        if matches!(kind, ProviderKind::RunPod | ProviderKind::Fal | ProviderKind::Baseten | ProviderKind::Generic) {
            assert_eq!(r.cancel_scope, tailcut_core::CancelScope::QueuedJob, "{kind:?}");
        }
    }
    let res = job.result(far()).await;
    assert_ne!(res.state, JobState::Completed, "{kind:?}: a cancelled job must not complete");
}

async fn cancel_while_running(kind: ProviderKind) {
    let b = Behaviour { queue: Duration::from_millis(50), run: Duration::from_millis(1500), ..Behaviour::default() };
    let (mock, api) = setup(kind, b).await;
    let job = api.submit(&request(kind)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = cancel(&job).await.unwrap();
    match kind {
        ProviderKind::Baseten => {
            // Baseten cannot cancel an IN_PROGRESS async request: nothing was stopped.
            assert_eq!(r.evidence, Evidence::NoEvidence, "{r:?}");
            assert!(r.leaked);
            assert!(r.was_running);
            assert!(r.note.contains("IN_PROGRESS"), "{}", r.note);
        }
        k if is_channel(k) => {
            assert_eq!(r.evidence, Evidence::RequestChannelClosed);
            assert!(!r.leaked);
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert_eq!(mock.disconnects(), 1);
        }
        ProviderKind::Fal => {
            // fal has no cancelled state: all that can be observed is a terminal COMPLETED.
            assert_eq!(r.evidence, Evidence::ConfirmedTerminal, "{r:?}");
            assert!(!r.leaked);
            assert!(r.note.contains("no cancelled state"), "{}", r.note);
        }
        _ => {
            assert_eq!(r.evidence, Evidence::ConfirmedTerminal, "{kind:?}: {r:?}");
            assert_eq!(r.terminal_status, Some(JobState::Cancelled), "{kind:?}");
            assert!(!r.leaked);
        }
    }
    if matches!(kind, ProviderKind::RunPod | ProviderKind::Replicate | ProviderKind::Fal | ProviderKind::Generic | ProviderKind::Baseten) {
        assert!(r.was_running, "{kind:?}");
    }
}

async fn cancel_after_finish(kind: ProviderKind) {
    let (_mock, api) = setup(kind, fast()).await;
    let job = api.submit(&request(kind)).await.unwrap();
    let res = job.result(far()).await;
    assert_eq!(res.state, JobState::Completed, "{kind:?}");
    let r = cancel(&job).await.unwrap();
    assert!(!r.leaked, "{kind:?}: a finished job is not a leak: {r:?}");
    if is_channel(kind) {
        assert_eq!(r.evidence, Evidence::RequestChannelClosed);
        assert!(r.note.contains("already ended"), "{}", r.note);
    } else {
        assert_eq!(r.evidence, Evidence::ConfirmedTerminal, "{kind:?}: {r:?}");
        assert_eq!(r.terminal_status, Some(JobState::Completed), "{kind:?}");
    }
}

async fn status_5xx(kind: ProviderKind) {
    let b = Behaviour { status_503: 2, ..fast() };
    let (mock, api) = setup(kind, b).await;
    let job = api.submit(&request(kind)).await.unwrap();
    let r = job.result(far()).await;
    if is_channel(kind) && kind != ProviderKind::Vast {
        // The request itself got a 503: not retried (not idempotent), recorded as failed.
        // (Vast.ai's 503 comes from its route call, which starts no work: retried.)
        assert_eq!(r.state, JobState::Failed, "{kind:?}");
        assert!(r.error.unwrap_or_default().contains("503"));
    } else {
        assert_eq!(r.state, JobState::Completed, "{kind:?}: 5xx on polls is retried: {:?}", r.error);
        assert!(mock.status_calls() >= 3);
    }
}

async fn status_429(kind: ProviderKind) {
    let b = Behaviour { status_429: 1, retry_after_s: 1, ..fast() };
    let (_mock, api) = setup(kind, b).await;
    let t = Instant::now();
    let job = api.submit(&request(kind)).await.unwrap();
    let r = job.result(far()).await;
    if is_channel(kind) && kind != ProviderKind::Vast {
        assert_eq!(r.state, JobState::Failed, "{kind:?}");
        assert!(r.error.unwrap_or_default().contains("429"));
    } else {
        assert_eq!(r.state, JobState::Completed, "{kind:?}: {:?}", r.error);
        assert!(t.elapsed() >= Duration::from_secs(1), "{kind:?}: Retry-After was honoured");
    }
}

async fn malformed(kind: ProviderKind) {
    let b = Behaviour { malformed: true, ..fast() };
    let (_mock, api) = setup(kind, b).await;
    let job = api.submit(&request(kind)).await.unwrap();
    let r = job.result(far()).await;
    assert_eq!(r.state, JobState::Failed, "{kind:?}");
    let e = r.error.unwrap_or_default().to_lowercase();
    assert!(e.contains("malformed") || e.contains("json") || e.contains("eof"), "{kind:?}: {e}");
}

async fn server_vanishes(kind: ProviderKind) {
    let b = Behaviour { queue: Duration::from_millis(100), run: Duration::from_millis(3000), ..Behaviour::default() };
    let (mock, api) = setup(kind, b).await;
    let job = api.submit(&request(kind)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    mock.vanish();
    let t = Instant::now();
    let r = job.result(far()).await;
    assert_eq!(r.state, JobState::Failed, "{kind:?}: {:?}", r);
    assert!(t.elapsed() < Duration::from_secs(10), "{kind:?}: gave up in bounded time");
    match cancel(&job).await {
        Err(_) => {}
        Ok(receipt) => {
            assert!(receipt.evidence != Evidence::ConfirmedTerminal || receipt.terminal_status.is_some(), "{kind:?}: {receipt:?}")
        }
    }
}

async fn timeout(kind: ProviderKind) {
    let b = Behaviour { queue: Duration::from_millis(50), run: Duration::from_millis(3000), ..Behaviour::default() };
    let (_mock, api) = setup(kind, b).await;
    let job = api.submit(&request(kind)).await.unwrap();
    let t = Instant::now();
    let r = job.result(Instant::now() + Duration::from_millis(400)).await;
    assert_eq!(r.state, JobState::TimedOut, "{kind:?}");
    assert!(t.elapsed() < Duration::from_millis(900), "{kind:?}: right-censored at the deadline");
}

/// One suite per kind, from the one list of kinds (`for_each_provider_kind!`).
macro_rules! conformance {
    ($($(#[doc = $doc:literal])* $kind_variant:ident = $name:literal => $module:ident,)*) => {$(
        mod $module {
            use super::*;
            const KIND: ProviderKind = ProviderKind::$kind_variant;
            #[tokio::test] async fn submit_then_result() { super::submit_then_result(KIND).await }
            #[tokio::test] async fn state_transitions() { super::state_transitions(KIND).await }
            #[tokio::test] async fn cancel_while_queued() { super::cancel_while_queued(KIND).await }
            #[tokio::test] async fn cancel_while_running() { super::cancel_while_running(KIND).await }
            #[tokio::test] async fn cancel_after_finish() { super::cancel_after_finish(KIND).await }
            #[tokio::test] async fn status_5xx() { super::status_5xx(KIND).await }
            #[tokio::test] async fn status_429_retry_after() { super::status_429(KIND).await }
            #[tokio::test] async fn malformed_body() { super::malformed(KIND).await }
            #[tokio::test] async fn server_vanishes() { super::server_vanishes(KIND).await }
            #[tokio::test] async fn timeout() { super::timeout(KIND).await }
        }
    )*};
}

tailcut_providers::for_each_provider_kind!(conformance);

#[tokio::test]
async fn runpod_stream_health_and_purge() {
    let mock = MockServer::start(ProviderKind::RunPod, fast()).await.unwrap();
    let rp = RunPod { name: "runpod".into(), base: format!("{}/v2/ep1", mock.url()), key: Secret::new("k") };
    let api = PollingProvider::new(rp.clone(), http(), poll(), RATE);
    let job = api.submit(&request(ProviderKind::RunPod)).await.unwrap();
    let id = job.job_id().unwrap();
    let (state, items) = rp.stream(&http(), &id).await.unwrap();
    assert!(matches!(state, JobState::Queued | JobState::Running) && items.is_empty());
    job.result(far()).await;
    let (state, items) = rp.stream(&http(), &id).await.unwrap();
    assert_eq!(state, JobState::Completed);
    assert_eq!(items.len(), 1);
    assert!(rp.health(&http()).await.unwrap()["workers"].is_object());
    rp.purge_queue(&http()).await.unwrap();
}

#[tokio::test]
async fn expired_results_and_hung_status_are_reported_not_hung() {
    let b = Behaviour { result_ttl: Some(Duration::from_millis(10)), ..fast() };
    let (_mock, api) = setup(ProviderKind::RunPod, b).await;
    let job = api.submit(&request(ProviderKind::RunPod)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let r = job.result(far()).await;
    assert_eq!(r.state, JobState::Failed);
    assert!(r.error.unwrap_or_default().contains("expired"), "404 after the retention window");
    let b = Behaviour { hang_status: true, ..fast() };
    let (_mock, api) = setup(ProviderKind::RunPod, b).await;
    let job = api.submit(&request(ProviderKind::RunPod)).await.unwrap();
    let r = job.result(Instant::now() + Duration::from_millis(500)).await;
    assert_eq!(r.state, JobState::TimedOut, "a hung status poll is cut at the deadline");
}

#[tokio::test]
async fn vast_route_reply_fields_and_the_signed_worker_call() {
    // The mock's route follows the documented fields: `status` while no worker is ready,
    // then `url`, `reqnum`, `signature`, `endpoint` and `cost`; its worker refuses
    // `auth_data` the route did not sign.
    let mock =
        MockServer::start(ProviderKind::Vast, Behaviour::timed(Duration::from_millis(300), Duration::from_millis(50))).await.unwrap();
    let c = reqwest::Client::new();
    let route = || c.post(format!("{}/route/", mock.url())).bearer_auth("k").json(&serde_json::json!({"endpoint": "ep", "cost": 242.0}));
    let queued: serde_json::Value = route().send().await.unwrap().json().await.unwrap();
    assert!(queued["status"].is_object() && queued.get("url").is_none(), "{queued}");
    tokio::time::sleep(Duration::from_millis(350)).await;
    let worker: serde_json::Value = route().send().await.unwrap().json().await.unwrap();
    for key in ["url", "reqnum", "signature", "endpoint", "cost"] {
        assert!(worker.get(key).is_some(), "{key} missing: {worker}");
    }
    assert_eq!((worker["endpoint"].as_str(), worker["cost"].as_f64()), (Some("ep"), Some(242.0)));
    let call = |auth: serde_json::Value| {
        c.post(format!("{}/generate", mock.url())).json(&serde_json::json!({"auth_data": auth, "payload": {"x": 1}}))
    };
    let mut forged = worker.clone();
    forged["cost"] = serde_json::json!(1.0);
    assert_eq!(call(forged).send().await.unwrap().status(), 401, "a changed cost breaks the signature");
    assert_eq!(call(worker).send().await.unwrap().status(), 200);
    assert_eq!(
        c.post(format!("{}/route/", mock.url())).json(&serde_json::json!({"endpoint": "ep", "cost": 1})).send().await.unwrap().status(),
        401
    );

    // Through the provider module: the job reports QUEUED while the route has no worker.
    let (mock, api) = setup(ProviderKind::Vast, Behaviour::timed(Duration::from_millis(300), Duration::from_millis(50))).await;
    let job = api.submit(&request(ProviderKind::Vast)).await.unwrap();
    assert!(api.capabilities().reports_queued, "a cutover may use Vast.ai as its primary");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(job.status().await.unwrap(), JobState::Queued);
    let r = job.result(far()).await;
    assert_eq!(r.state, JobState::Completed, "{:?}", r.error);
    assert!(r.metrics.contains_key("vast_reqnum") && r.metrics["vast_no_ready_worker_routes"].as_u64() >= Some(1), "{:?}", r.metrics);
    assert!(mock.status_calls() >= 2, "the route was asked again while no worker was ready");
}
