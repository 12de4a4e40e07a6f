//! Cerebrium REST inference: one synchronous `POST /v4/{project}/{app}/{function}`.
//! There is no run-status or run-cancel API, so this adapter never looks runs up in a
//! list: each job is its own request, correlated by an id this client sends
//! (`X-Request-Id`), and cancelling closes that request — safe under any concurrency,
//! and honest that nothing stronger than a closed channel can be proven.

use crate::channel::{correlation_id, ChannelJob};
use crate::client::{HttpClient, Reply};
use crate::secret::Secret;
use async_trait::async_trait;
use futures::FutureExt;
use serde_json::{json, Value};
use std::sync::Arc;
use tailcut_core::receipt::Evidence;
use tailcut_core::{Capabilities, Job, JobRequest, JobResult, JobState, Payload, ProviderApi, ProviderError};
use tokio::time::Instant;

/// The Cerebrium adapter.
#[derive(Debug, Clone)]
pub struct Cerebrium {
    /// Provider key.
    pub name: String,
    /// Function URL, e.g. `https://api.aws.us-east-1.cerebrium.ai/v4/p-xxxx/app/predict`.
    pub url: String,
    /// JWT.
    pub token: Secret,
    /// Shared client.
    pub http: HttpClient,
}

/// Reads the synchronous call's reply for provider `name`: the job's result.
pub fn read_reply(reply: &Reply, name: &str) -> JobResult {
    if !reply.ok() {
        return JobResult::bare(JobState::Failed, Some(reply.rejected().to_string()));
    }
    let v = match reply.json() {
        Err(e) => return JobResult::bare(JobState::Failed, Some(e.to_string())),
        Ok(v) => v,
    };
    let Some(result) = v.get("result") else {
        return JobResult::bare(JobState::Failed, Some("response without `result`".into()));
    };
    let mut r = JobResult::bare(JobState::Completed, None);
    r.payload = Some(Payload { bytes: serde_json::to_vec(result).unwrap_or_default().into(), content_type: "application/json".into() });
    if let Some(ms) = v.get("run_time_ms") {
        r.metrics.insert(format!("{name}_run_time_ms"), ms.clone());
    }
    if let Some(run) = v.get("run_id").and_then(Value::as_str) {
        r.metrics.insert(format!("{name}_run_id"), json!(run));
    }
    r
}

#[async_trait]
impl ProviderApi for Cerebrium {
    fn capabilities(&self) -> Capabilities {
        Capabilities { reports_queued: false, cancel_evidence: Evidence::RequestChannelClosed, reports_billed_time: true }
    }

    async fn submit(&self, request: &JobRequest) -> Result<Arc<dyn Job>, ProviderError> {
        let id = correlation_id(&self.name);
        let (http, url, token, name, body, rid) =
            (self.http.clone(), self.url.clone(), self.token.clone(), self.name.clone(), request.input().clone(), id.clone());
        let fut = async move {
            let reply = http.once(|c| c.post(&url).bearer_auth(token.expose()).header("X-Request-Id", &rid).json(&body)).await;
            let finished = Instant::now();
            let mut r = match reply {
                Err(e) => JobResult::bare(JobState::Failed, Some(e.to_string())),
                Ok(reply) => read_reply(&reply, &name),
            };
            r.finished = finished;
            r
        };
        Ok(Arc::new(ChannelJob::start(
            &self.name,
            id,
            fut.boxed(),
            "request closed; Cerebrium has no run-cancel or status API, so whether the container stopped cannot be confirmed",
        )))
    }
}
