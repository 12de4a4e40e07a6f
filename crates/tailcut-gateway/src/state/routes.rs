//! Building one configuration's routes: an `openai` route's hedger per endpoint (whole
//! replies and streams, each with its policy, fixed or learned) and a `jobs` route's
//! hedger, from what every route of the configuration shares ([`Shared`]).

use super::*;

/// What every route of one configuration shares when it is built.
pub(super) struct Shared<'a> {
    pub(super) config: &'a Config,
    pub(super) store: &'a Arc<JobStore>,
    /// How many replicas share the rate limits and the hedge-load cap.
    pub(super) replicas: crate::tenancy::Replicas,
    pub(super) budget: Arc<dyn BudgetGate>,
    pub(super) trace: Option<Arc<TraceWriter>>,
    /// The provider clients' own timeout.
    pub(super) timeout: Duration,
    /// The TLS client for streams to `https://` providers.
    pub(super) tls: reqwest::Client,
    /// Learned policies built so far, with their store.
    pub(super) learned: RefCell<LiveModels>,
    /// The gateway's task tracker: every hedger settles its races on it.
    pub(super) tasks: tokio_util::task::TaskTracker,
}

impl Shared<'_> {
    /// An `openai` route over `spec`'s providers: one hedger per endpoint for whole
    /// replies (the route's policy) and one per streamed endpoint (the first-token hedge
    /// chain over the same providers, in order), all sharing the route's hedge-load gate.
    pub(super) fn openai_route(&self, route: &RouteConfig, spec: &tailcut_config::PolicySpec) -> Result<OpenAiRoute, SetupError> {
        let config = self.config;
        let gate = Arc::new(SlidingHedgeGate::shared(
            config.gateway.hedge_budget_percent,
            config.gateway.hedge_budget_burst,
            self.replicas.clone(),
        ));
        let names = spec_providers(spec);
        // Each provider once per slot: whole replies per endpoint, then streams.
        const SLOTS: [(Endpoint, bool); 5] = [
            (Endpoint::Chat, false),
            (Endpoint::Completions, false),
            (Endpoint::Embeddings, false),
            (Endpoint::Chat, true),
            (Endpoint::Completions, true),
        ];
        let mut lists: [Vec<Provider>; 5] = Default::default();
        for name in &names {
            let p = config.provider(name).ok_or_else(|| SetupError::NoProvider { name: name.clone() })?;
            let Some(a) = p.openai() else {
                return Err(SetupError::NotOpenAi { name: name.clone() });
            };
            // One client per provider for its three endpoints and its streams: one
            // connection pool per serving thread, not five.
            let http = HttpClient::new(self.timeout, tailcut_providers::client::RetryPolicy::default())?;
            for ((ep, streamed), list) in SLOTS.into_iter().zip(lists.iter_mut()) {
                // Whole replies are judged by a JSON validator requiring `choices`/`data`,
                // which also rejects non-JSON: the gateway reads them (`Reader::Gateway`)
                // without the provider module's own syntax check.
                let api: Arc<dyn tailcut_core::ProviderApi> = if streamed {
                    Arc::new(a.stream_provider(name, ep, &http, self.tls.clone()))
                } else {
                    Arc::new(a.provider(name, ep, Reader::Gateway, http.clone()))
                };
                list.push(Provider { name: name.clone(), api, pricing: p.pricing });
            }
        }
        let hedger = |providers: Vec<Provider>, validator: Arc<dyn tailcut_core::validate::Validator>| {
            Hedger::with_gate(
                providers,
                validator,
                self.budget.clone(),
                config.race,
                self.trace.clone(),
                Some(gate.clone()),
                self.tasks.clone(),
            )
        };
        let whole = |providers, required: &[&str], slot: &'static str| -> Result<Raced, SetupError> {
            let hedger = hedger(providers, Arc::new(JsonValidator::requiring(required)));
            if let Some(l) = spec.learned() {
                let live = self.learned(route, slot, l, &hedger)?;
                return Ok(Raced { hedger, policy: live.policy.clone(), learned: Some(live) });
            }
            let policy = spec.build(hedger.providers())?;
            Ok(Raced { hedger, policy, learned: None })
        };
        let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
        // Streams: a learned route learns each provider's time to the first content
        // token (a stream job resolves at its first content event) and decides with it;
        // any other route runs the first-token hedge chain.
        let streamed = |providers, slot: &'static str| -> Result<Raced, SetupError> {
            let hedger = hedger(providers, Arc::new(FirstEvent));
            if let Some(l) = spec.learned() {
                let live = self.learned(route, slot, l, &hedger)?;
                return Ok(Raced { hedger, policy: live.policy.clone(), learned: Some(live) });
            }
            let policy = FirstTokenHedge::try_new(hedger.providers(), &name_refs, route.first_token_hedge)?;
            Ok(Raced { hedger, policy: Arc::new(policy), learned: None })
        };
        let [chat, completions, embeddings, chat_stream, completions_stream] = lists;
        let route_header = HeaderValue::from_str(&route.name).unwrap_or(HeaderValue::from_static("-"));
        Ok(OpenAiRoute {
            cfg: route.clone(),
            chat: whole(chat, &["choices"], "chat")?,
            completions: whole(completions, &["choices"], "completions")?,
            embeddings: whole(embeddings, &["data"], "embeddings")?,
            chat_stream: streamed(chat_stream, "chat_stream")?,
            completions_stream: streamed(completions_stream, "completions_stream")?,
            series: RouteSeries::new(&route.name, name_refs.iter().copied()),
            provider_headers: names.iter().filter_map(|n| Some((n.clone(), HeaderValue::from_str(n).ok()?))).collect(),
            reply_headers: reply_headers(&route_header),
        })
    }

    /// A `jobs` route: the configured live providers under the route's policy.
    pub(super) fn job_route(&self, route: &RouteConfig, spec: &tailcut_config::PolicySpec) -> Result<JobRoute, SetupError> {
        let config = self.config;
        let gate = Arc::new(SlidingHedgeGate::shared(
            config.gateway.hedge_budget_percent,
            config.gateway.hedge_budget_burst,
            self.replicas.clone(),
        ));
        // Each submit's provider job id is stored before the race goes on.
        let entries = crate::recorded::Recorded::wrap(config.live_entries()?, self.store);
        let validator = tailcut_core::validate::ValidatorRegistry::default().build(&config.validator)?;
        let hedger =
            Hedger::with_gate(entries, validator, self.budget.clone(), config.race, self.trace.clone(), Some(gate), self.tasks.clone());
        let (policy, learned) = match spec.learned() {
            Some(l) => {
                let live = self.learned(route, "jobs", l, &hedger)?;
                (live.policy.clone() as Arc<dyn Policy>, Some(live))
            }
            None => (spec.build(hedger.providers())?, None),
        };
        let series = RouteSeries::new(&route.name, hedger.providers().iter().map(|p| p.name.as_str()));
        Ok(JobRoute { cfg: route.clone(), hedger, policy, learned, series })
    }

    /// A learned policy for `route`'s `slot` over `hedger`'s providers, starting from the
    /// stored model when there is a usable one, and registered for saving.
    fn learned(&self, route: &RouteConfig, slot: &'static str, spec: &LearnedSpec, hedger: &Hedger) -> Result<Arc<LiveModel>, SetupError> {
        let mut live = self.learned.borrow_mut();
        let stored = live.stored(&route.name, slot, &spec.providers);
        let policy = spec.build(hedger.providers(), self.config.race.max_live, stored)?;
        Ok(live.add(&route.name, slot, Arc::new(policy)))
    }
}
