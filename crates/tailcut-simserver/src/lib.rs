//! # tailcut-simserver
//!
//! `tailcut sim-provider`: a real HTTP server that behaves like a serverless GPU
//! provider — the core simulator's model (scale to zero, bimodal cold starts, queue
//! delay, per-second billing with idle windows) in real time, compressed by a time
//! scale (0.01 makes a 100 s cold start take 1 s). It speaks
//!
//! - RunPod's queue API under `/v2/{endpoint}`: `run`, `status/{id}`, `cancel/{id}`,
//!   `health`, `purge-queue` (queued vs running is always visible, as on RunPod);
//! - the OpenAI-compatible API: `/v1/chat/completions` (streaming too; closing the
//!   connection cancels the job), `/v1/completions`, `/v1/models`;
//! - `/metrics`: Prometheus text of jobs, cold starts and what it billed (in
//!   simulated-time dollars).

#![warn(missing_docs)]
// clippy.toml's disallowed methods (bare `tokio::spawn`, `std::time::Instant::now`) are
// allowed here: the simulated provider's own server (`tailcut sim-provider`): its tasks and timings
// are not the gateway's.
#![allow(clippy::disallowed_methods)]

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tailcut_core::{CancelContext, Job, JobRequest, JobResult, JobState, ProviderApi};
use tailcut_sim::{SimProfile, SimProvider};
use tokio::time::Instant;

/// Server settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Provider name used in job ids and metric labels.
    pub name: String,
    /// Behaviour (unscaled, in simulated seconds).
    pub profile: SimProfile,
    /// Real seconds per simulated second.
    pub time_scale: f64,
    /// Seed.
    pub seed: u64,
}

struct Entry {
    job: Arc<dyn Job>,
    /// The job's end, stored by the first status read that finds the job terminal.
    /// A status is terminal only together with this (output, metrics, error), and every
    /// later read shows the same end.
    settled: Settled,
}

/// Where a job's end is stored once seen (see [`observe`]).
type Settled = Arc<std::sync::OnceLock<JobResult>>;

struct Shared {
    settings: Settings,
    sim: SimProvider,
    jobs: Mutex<HashMap<String, Entry>>,
    counter: AtomicU64,
    cancels: AtomicU64,
    disconnects: AtomicU64,
}

type St = State<Arc<Shared>>;

/// Builds the router.
pub fn router(settings: Settings) -> Router {
    let mut profile = settings.profile.scaled(settings.time_scale);
    // The server always knows whether a job is queued or running, as RunPod reports it.
    profile.reports_queued = true;
    let sim = SimProvider::new(&settings.name, profile, settings.seed);
    let shared = Arc::new(Shared {
        settings,
        sim,
        jobs: Mutex::new(HashMap::new()),
        counter: AtomicU64::new(0),
        cancels: AtomicU64::new(0),
        disconnects: AtomicU64::new(0),
    });
    Router::new()
        .route("/v2/{ep}/run", post(run))
        .route("/v2/{ep}/status/{id}", get(status))
        .route("/v2/{ep}/cancel/{id}", post(cancel))
        .route("/v2/{ep}/health", get(health))
        .route("/v2/{ep}/purge-queue", post(|| async { Json(json!({"removed": 0, "status": "completed"})) }))
        .route("/v1/chat/completions", post(chat))
        .route("/v2/{ep}/openai/v1/chat/completions", post(chat_ep))
        .route("/v1/models", get(models))
        .route("/metrics", get(metrics))
        .with_state(shared)
}

fn err(status: StatusCode, msg: &str) -> Response {
    (status, Json(json!({"error": msg}))).into_response()
}

async fn submit(st: &Arc<Shared>, input: Value) -> Result<String, Response> {
    let req = JobRequest::new("sim", input);
    let job = st.sim.submit(&req).await.map_err(|e| err(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()))?;
    let n = st.counter.fetch_add(1, Ordering::SeqCst) + 1;
    let id = format!("{}-{n:08}-u1", st.settings.name);
    if let Ok(mut jobs) = st.jobs.lock() {
        jobs.insert(id.clone(), Entry { job, settled: Arc::default() });
    }
    Ok(id)
}

async fn run(State(st): St, Json(body): Json<Value>) -> Response {
    let Some(input) = body.get("input").cloned() else {
        return err(StatusCode::BAD_REQUEST, "input is required");
    };
    match submit(&st, input).await {
        Ok(id) => Json(json!({"id": id, "status": "IN_QUEUE"})).into_response(),
        Err(r) => r,
    }
}

fn lookup(st: &Shared, id: &str) -> Option<(Arc<dyn Job>, Settled)> {
    let jobs = st.jobs.lock().ok()?;
    let e = jobs.get(id)?;
    Some((e.job.clone(), e.settled.clone()))
}

/// What a status read reports: a terminal state with its result (one value, stored
/// once), or a state that is not terminal.
enum Seen {
    Ended(JobResult),
    Open(JobState),
}

/// Reads a job's state and, when it has ended, its result, as one observation. The
/// result is computed from the job's clock in the same read that finds it terminal (a
/// wait with a deadline of now returns at once), never filled in later by another task,
/// so no reader can see a terminal state whose output is not there yet.
async fn observe(job: &dyn Job, settled: &std::sync::OnceLock<JobResult>) -> Seen {
    for _ in 0..3 {
        if let Some(r) = settled.get() {
            return Seen::Ended(r.clone());
        }
        let r = job.result(Instant::now()).await;
        if r.state.is_terminal() && r.state != JobState::TimedOut {
            return Seen::Ended(settled.get_or_init(|| r).clone());
        }
        let state = job.status().await.unwrap_or(JobState::Unknown);
        if !state.is_terminal() {
            return Seen::Open(state);
        }
        // It ended between the two reads: read its result again.
    }
    Seen::Open(JobState::Running)
}

fn wire(s: JobState) -> &'static str {
    match s {
        JobState::Queued => "IN_QUEUE",
        JobState::Running | JobState::Pending => "IN_PROGRESS",
        JobState::Completed => "COMPLETED",
        JobState::Failed | JobState::TimedOut => "FAILED",
        JobState::Cancelled => "CANCELLED",
        JobState::Unknown => "IN_PROGRESS",
    }
}

async fn status(State(st): St, Path((_ep, id)): Path<(String, String)>) -> Response {
    let Some((job, settled)) = lookup(&st, &id) else {
        return err(StatusCode::NOT_FOUND, "job not found");
    };
    let name = &st.settings.name;
    let r = match observe(job.as_ref(), &settled).await {
        Seen::Open(state) => return Json(json!({"id": id, "status": wire(state)})).into_response(),
        Seen::Ended(r) => r,
    };
    let mut out = json!({"id": id, "status": wire(r.state)});
    if let Some(d) = r.metrics.get(&format!("{name}_delay_ms")) {
        out["delayTime"] = d.clone();
    }
    if let Some(e) = r.metrics.get(&format!("{name}_execution_ms")) {
        out["executionTime"] = e.clone();
    }
    match r.state {
        JobState::Completed => {
            out["output"] = r.payload.and_then(|p| serde_json::from_slice(&p.bytes).ok()).unwrap_or(Value::Null);
        }
        JobState::Failed => out["error"] = json!(r.error.unwrap_or_else(|| "failed".into())),
        _ => {}
    }
    Json(out).into_response()
}

async fn cancel(State(st): St, Path((_ep, id)): Path<(String, String)>) -> Response {
    let Some((job, _)) = lookup(&st, &id) else {
        return err(StatusCode::NOT_FOUND, "job not found");
    };
    st.cancels.fetch_add(1, Ordering::SeqCst);
    let before = job.status().await.ok();
    tokio::spawn(async move {
        let now = Instant::now();
        let _ = job.cancel(CancelContext { reason: "api cancel".into(), epoch: now, sent_at: now, state_before: before }).await;
    });
    Json(json!({"id": id, "status": "CANCELLED"})).into_response()
}

async fn health(State(st): St) -> Response {
    let b = st.sim.billing();
    Json(json!({"jobs": {"completed": b.jobs, "failed": 0, "inProgress": 0, "inQueue": 0, "retried": 0}, "workers": {"idle": 0, "running": 0}})).into_response()
}

async fn models(State(st): St) -> Response {
    Json(json!({"object": "list", "data": [{"id": format!("{}-sim", st.settings.name), "object": "model", "owned_by": "tailcut-sim"}]}))
        .into_response()
}

async fn metrics(State(st): St) -> Response {
    let b = st.sim.billing();
    let scale = st.settings.time_scale.max(1e-12);
    let name = &st.settings.name;
    let text = format!(
        "# HELP tailcut_sim_jobs_total Jobs submitted.\n# TYPE tailcut_sim_jobs_total counter\ntailcut_sim_jobs_total{{provider=\"{name}\"}} {}\n\
         # HELP tailcut_sim_cold_starts_total Workers started.\n# TYPE tailcut_sim_cold_starts_total counter\ntailcut_sim_cold_starts_total{{provider=\"{name}\"}} {}\n\
         # HELP tailcut_sim_cancels_total Cancel calls received.\n# TYPE tailcut_sim_cancels_total counter\ntailcut_sim_cancels_total{{provider=\"{name}\"}} {}\n\
         # HELP tailcut_sim_disconnects_total OpenAI requests closed by the client before completion.\n# TYPE tailcut_sim_disconnects_total counter\ntailcut_sim_disconnects_total{{provider=\"{name}\"}} {}\n\
         # HELP tailcut_sim_active_usd_total Execution seconds x rate, in simulated-time dollars.\n# TYPE tailcut_sim_active_usd_total counter\ntailcut_sim_active_usd_total{{provider=\"{name}\"}} {:.6}\n\
         # HELP tailcut_sim_billed_usd_total Worker sessions plus idle windows, per-second, in simulated-time dollars.\n# TYPE tailcut_sim_billed_usd_total counter\ntailcut_sim_billed_usd_total{{provider=\"{name}\"}} {:.6}\n",
        b.jobs,
        b.cold_starts,
        st.cancels.load(Ordering::SeqCst),
        st.disconnects.load(Ordering::SeqCst),
        b.active.as_usd() / scale,
        b.billed.as_usd() / scale,
    );
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// Cancels the job if the client goes away first.
struct CancelOnDrop {
    job: Option<Arc<dyn Job>>,
    shared: Arc<Shared>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(job) = self.job.take() {
            self.shared.disconnects.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let now = Instant::now();
                let _ = job
                    .cancel(CancelContext { reason: "client closed the request".into(), epoch: now, sent_at: now, state_before: None })
                    .await;
            });
        }
    }
}

async fn chat_ep(st: St, Path(_ep): Path<String>, body: Json<Value>) -> Response {
    chat(st, body).await
}

async fn chat(State(st): St, Json(body): Json<Value>) -> Response {
    if body.get("messages").and_then(Value::as_array).is_none() {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": {"message": "messages is required", "type": "BadRequestError", "param": null, "code": 400}})),
        )
            .into_response();
    }
    let id = match submit(&st, body.clone()).await {
        Ok(id) => id,
        Err(r) => return r,
    };
    let Some((job, _)) = lookup(&st, &id) else {
        return err(StatusCode::INTERNAL_SERVER_ERROR, "lost job");
    };
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let model = body.get("model").cloned().unwrap_or(json!("sim"));
    let mut guard = CancelOnDrop { job: Some(job.clone()), shared: st.clone() };
    if !stream {
        let r = job.result(Instant::now() + Duration::from_secs(86_400)).await;
        guard.job = None;
        if r.state != JobState::Completed {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(json!({"error": {"message": r.error.unwrap_or_default(), "type": "InternalServerError", "param": null, "code": 500}})),
            )
                .into_response();
        }
        return Json(json!({"id": format!("chatcmpl-{id}"), "object": "chat.completion", "created": 1_700_000_000, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "simulated answer"}, "logprobs": null, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 8, "completion_tokens": 2, "total_tokens": 10}}))
        .into_response();
    }
    let cid = format!("chatcmpl-{id}");
    let chunk = move |delta: Value, finish: Option<&str>| {
        format!(
            "data: {}\n\n",
            json!({"id": cid, "object": "chat.completion.chunk", "created": 1_700_000_000, "model": model, "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
        )
    };
    let s = futures::stream::unfold((0u8, Some(guard), job), move |(step, mut guard, job)| {
        let chunk = chunk.clone();
        async move {
            let out = match step {
                0 => chunk(json!({"role": "assistant", "content": ""}), None),
                1 => {
                    // The first token arrives when the simulated job finishes.
                    let r = job.result(Instant::now() + Duration::from_secs(86_400)).await;
                    if r.state != JobState::Completed {
                        if let Some(g) = guard.as_mut() {
                            g.job = None;
                        }
                        format!("data: {}\n\ndata: [DONE]\n\n", json!({"error": {"message": r.error.unwrap_or_default(), "code": 500}}))
                    } else {
                        chunk(json!({"content": "simulated "}), None)
                    }
                }
                2 => chunk(json!({"content": "answer"}), None),
                3 => chunk(json!({}), Some("stop")),
                4 => {
                    if let Some(g) = guard.as_mut() {
                        g.job = None;
                    }
                    "data: [DONE]\n\n".to_string()
                }
                _ => return None,
            };
            let next = if out.contains("[DONE]") { 5 } else { step + 1 };
            Some((Ok::<_, std::io::Error>(bytes::Bytes::from(out)), (next, guard, job)))
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(s))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// Serves until the future resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    settings: Settings,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(settings)).with_graceful_shutdown(shutdown).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runpod_api_round_trip_and_metrics() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let settings = Settings { name: "runpod".into(), profile: SimProfile::runpod(), time_scale: 0.005, seed: 3 };
        tokio::spawn(serve(listener, settings, futures::future::pending()));
        let c = reqwest::Client::new();
        let base = format!("http://{addr}/v2/sim");
        let v: Value = c.post(format!("{base}/run")).json(&json!({"input": {"text": "hi"}})).send().await.unwrap().json().await.unwrap();
        let id = v["id"].as_str().unwrap().to_string();
        assert_eq!(v["status"], "IN_QUEUE");
        let mut last = String::new();
        for _ in 0..400 {
            let s: Value = c.get(format!("{base}/status/{id}")).send().await.unwrap().json().await.unwrap();
            last = s["status"].as_str().unwrap().to_string();
            if last == "COMPLETED" || last == "FAILED" {
                assert!(s["executionTime"].is_number() && s["delayTime"].is_number(), "{s}");
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(last == "COMPLETED" || last == "FAILED", "{last}");
        let m = c.get(format!("http://{addr}/metrics")).send().await.unwrap().text().await.unwrap();
        assert!(m.contains("tailcut_sim_jobs_total{provider=\"runpod\"} 1"), "{m}");
        assert!(m.contains("tailcut_sim_billed_usd_total"));
    }

    async fn start(profile: SimProfile, time_scale: f64) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let settings = Settings { name: "runpod".into(), profile, time_scale, seed: 11 };
        tokio::spawn(serve(listener, settings, futures::future::pending()));
        format!("http://{addr}")
    }

    fn metric(text: &str, name: &str) -> f64 {
        text.lines().find(|l| l.starts_with(name)).and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
    }

    /// A job cancelled while `IN_QUEUE` never ran: its status reports no execution and
    /// the server bills nothing for it.
    #[tokio::test]
    async fn a_job_cancelled_in_the_queue_reports_no_execution_and_bills_nothing() {
        // Cold starts only, with a queue delay of 100-120 simulated seconds (1-1.2 s real).
        let profile = SimProfile {
            cold_fast_p: 0.0,
            cold_slow_queue_s: (100.0, 120.0),
            submit_latency_s: (0.0, 0.0),
            failure_p: 0.0,
            ..SimProfile::runpod()
        };
        let url = start(profile, 0.01).await;
        let c = reqwest::Client::new();
        let base = format!("{url}/v2/sim");
        let mut ids = Vec::new();
        for _ in 0..3 {
            let v: Value = c.post(format!("{base}/run")).json(&json!({"input": {}})).send().await.unwrap().json().await.unwrap();
            ids.push(v["id"].as_str().unwrap().to_string());
        }
        for id in &ids {
            let s: Value = c.get(format!("{base}/status/{id}")).send().await.unwrap().json().await.unwrap();
            assert_eq!(s["status"], "IN_QUEUE", "{s}");
            c.post(format!("{base}/cancel/{id}")).send().await.unwrap();
        }
        for id in &ids {
            let mut last = Value::Null;
            for _ in 0..300 {
                last = c.get(format!("{base}/status/{id}")).send().await.unwrap().json().await.unwrap();
                if last["status"] == "CANCELLED" {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            assert_eq!(last["status"], "CANCELLED", "{last}");
            assert_eq!(last["executionTime"], json!(0), "a job cancelled in the queue never executed: {last}");
        }
        let m = c.get(format!("{url}/metrics")).send().await.unwrap().text().await.unwrap();
        assert_eq!(metric(&m, "tailcut_sim_billed_usd_total"), 0.0, "{m}");
        assert_eq!(metric(&m, "tailcut_sim_active_usd_total"), 0.0, "{m}");
        assert_eq!(metric(&m, "tailcut_sim_cold_starts_total"), 0.0, "{m}");
    }

    /// The status never says `COMPLETED` (or any terminal state) without what goes with
    /// it: many short jobs at once, each polled as fast as the client can.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_terminal_status_always_carries_its_output_and_metrics() {
        let profile = SimProfile {
            submit_latency_s: (0.0, 0.0),
            max_workers: 64,
            failure_p: 0.0,
            malformed_p: 0.0,
            cold_fast_p: 1.0,
            ..SimProfile::runpod()
        };
        // Jobs of 6-8 simulated seconds take 3-4 ms.
        let url = start(profile, 0.0005).await;
        let c = reqwest::Client::new();
        let base = format!("{url}/v2/sim");
        let mut pollers = Vec::new();
        for _ in 0..100 {
            let (c, base) = (c.clone(), base.clone());
            pollers.push(tokio::spawn(async move {
                let v: Value = c.post(format!("{base}/run")).json(&json!({"input": {}})).send().await.unwrap().json().await.unwrap();
                let id = v["id"].as_str().unwrap().to_string();
                for _ in 0..5000 {
                    let s: Value = c.get(format!("{base}/status/{id}")).send().await.unwrap().json().await.unwrap();
                    if s["status"] == "COMPLETED" {
                        return Ok(s);
                    }
                    if s["status"] != "IN_QUEUE" && s["status"] != "IN_PROGRESS" {
                        return Err(format!("unexpected status {s}"));
                    }
                }
                Err("never completed".into())
            }));
        }
        let mut bad = Vec::new();
        for p in pollers {
            match p.await.unwrap() {
                Ok(s) if !s["output"].is_object() || !s["executionTime"].is_number() || !s["delayTime"].is_number() => {
                    bad.push(s.to_string())
                }
                Ok(_) => {}
                Err(e) => bad.push(e),
            }
        }
        assert!(bad.is_empty(), "{} of 100 terminal statuses came without output or metrics: {:?}", bad.len(), &bad[..bad.len().min(3)]);
    }
}
