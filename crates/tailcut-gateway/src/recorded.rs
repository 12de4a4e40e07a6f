//! Providers of jobs routes whose submits are recorded: each job attempt's provider job
//! id is stored in the job store when its submit returns, under the race's job tag
//! ([`tailcut_core::JobRequest::job`]), so a later process (or another replica) can cancel
//! it by id.

use crate::observe::log;
use crate::store::JobStore;
use async_trait::async_trait;
use serde_json::json;
use std::sync::Arc;
use tailcut_core::{Capabilities, Job, JobRequest, Provider, ProviderApi, ProviderError};

/// A jobs route's provider whose submits are recorded in the job store (with the
/// provider's job id) before the race sees them.
#[derive(Debug)]
pub(crate) struct Recorded {
    inner: Arc<dyn ProviderApi>,
    provider: String,
    store: Arc<JobStore>,
}

impl Recorded {
    /// `providers`, each recorded in `store`.
    pub(crate) fn wrap(providers: Vec<Provider>, store: &Arc<JobStore>) -> Vec<Provider> {
        providers
            .into_iter()
            .map(|p| {
                let api: Arc<dyn ProviderApi> = Arc::new(Recorded { inner: p.api.clone(), provider: p.name.clone(), store: store.clone() });
                Provider { api, ..p }
            })
            .collect()
    }
}

#[async_trait]
impl ProviderApi for Recorded {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn submit(&self, request: &JobRequest) -> Result<Arc<dyn Job>, ProviderError> {
        let job = self.inner.submit(request).await?;
        if let Some(tag) = request.job() {
            let seq = tag.next_attempt();
            if let Err(e) = self.store.record_attempt(tag.id(), seq, &self.provider, job.job_id().as_deref()).await {
                log("job_attempt_not_recorded", || json!({"job": tag.id(), "provider": self.provider, "error": e.to_string()}));
            }
        }
        Ok(job)
    }

    fn attach(&self, job_id: &str) -> Option<Arc<dyn Job>> {
        self.inner.attach(job_id)
    }
}
