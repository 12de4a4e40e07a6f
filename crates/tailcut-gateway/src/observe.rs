//! Observation: what the gateway tells operators and clients about a request besides its
//! reply. JSON log lines, the metrics a settled race records, and the names of the
//! response headers that describe a race (`x-tailcut-winner`, ...), and the buffer of
//! recent requests the status page shows.

use crate::learning::LiveModel;
use crate::metrics::{Metrics, RouteSeries, ATTEMPT_RESULTS};
use axum::http::HeaderValue;
use axum::response::Response;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use tailcut_core::engine::Settled;
use tailcut_core::trace::{AttemptTrace, Decisions, RequestTrace};
use tailcut_core::RaceError;

pub(crate) use crate::logline::log;

/// Why a whole reply's race launched an extra attempt (`none` when it did not).
pub(crate) fn hedge_reason(d: &Decisions) -> &'static str {
    if d.cutover_fired {
        "queued_cutover"
    } else if d.safety_hedge_fired {
        "safety_hedge"
    } else if d.escalation_fired {
        "escalation"
    } else if d.hedge_launched {
        "timer"
    } else {
        "none"
    }
}

/// How an attempt ended, as `tailcut_attempt_results_total` counts it: an index into
/// [`ATTEMPT_RESULTS`] (`valid`, `invalid`, `failed`, `cancelled`, `unresolved`).
fn attempt_result(a: &AttemptTrace) -> usize {
    use crate::metrics::result;
    use tailcut_core::JobState;
    if a.submit_error.is_some() {
        return result::FAILED;
    }
    match (a.outcome, a.valid) {
        (_, Some(true)) => result::VALID,
        (Some(JobState::Completed), Some(false)) => result::INVALID,
        (Some(JobState::Cancelled), _) => result::CANCELLED,
        (Some(JobState::Failed | JobState::TimedOut | JobState::Unknown), _) | (_, Some(false)) => result::FAILED,
        _ => result::UNRESOLVED,
    }
}

/// Counts a race the ledger refused before its first submission, by the limit that
/// refused it (`tailcut_budget_refusals_total{route, limit}`); other refusals are not
/// budget refusals and count nothing here.
pub(crate) fn record_refusal(m: &Metrics, route: &str, e: &RaceError) {
    use tailcut_core::ledger::LedgerError;
    let RaceError::Budget(b) = e else { return };
    let limit = match b {
        LedgerError::BudgetExceeded { limit_name, .. } => limit_name,
        LedgerError::AccountBudgetExceeded { .. } => "key_budget",
        _ => return,
    };
    m.inc("tailcut_budget_refusals_total", &[("route", route), ("limit", limit)]);
}

/// Counts attempts, wins, hedges, cancels and leaks of a settled request.
pub(crate) fn record_metrics(m: &Metrics, series: &RouteSeries, trace: &RequestTrace) {
    let route = series.route();
    for a in &trace.attempts {
        let spend = a.projected_cost_micro_usd.0 as f64;
        let result = attempt_result(a);
        match series.provider(&a.provider) {
            Some(p) => {
                m.add_series(&p.attempts, 1.0);
                m.add_series(&p.spend, spend);
                m.add_series(&p.results[result], 1.0);
            }
            None => {
                let labels = [("route", route), ("provider", a.provider.as_str()), ("result", ATTEMPT_RESULTS[result])];
                m.inc("tailcut_attempt_results_total", &labels);
                m.inc("tailcut_attempts_total", &[("route", route), ("provider", &a.provider)]);
                m.add("tailcut_spend_micro_usd_total", &[("route", route), ("provider", &a.provider)], spend);
            }
        }
    }
    if let Some(w) = &trace.winner {
        match series.provider(w) {
            Some(p) => m.add_series(&p.wins, 1.0),
            None => m.inc("tailcut_wins_total", &[("route", route), ("provider", w)]),
        }
    }
    if trace.decisions.hedged() {
        m.inc("tailcut_hedges_total", &[("route", route), ("reason", hedge_reason(&trace.decisions))]);
    }
    if trace.decisions.hedges_denied > 0 {
        m.add("tailcut_hedges_denied_total", &[("route", route)], f64::from(trace.decisions.hedges_denied));
    }
    for r in &trace.receipts {
        m.inc("tailcut_cancels_total", &[("route", route), ("evidence", r.evidence.wire())]);
        if r.leaked {
            m.inc("tailcut_leaks_total", &[("route", route)]);
        }
    }
}

/// Where a settled race is recorded: the metrics and the status page's recent requests.
#[derive(Debug, Clone)]
pub(crate) struct Sinks {
    /// The Prometheus registry.
    pub metrics: Arc<Metrics>,
    /// The status page's buffer.
    pub recent: Arc<Recent>,
    /// The gateway's task tracker: a race still settling is recorded from a task on it.
    pub tasks: tokio_util::task::TaskTracker,
}

impl Sinks {
    /// Records one settled race of `series`'s route.
    pub(crate) fn record(&self, series: &RouteSeries, trace: RequestTrace) {
        record_metrics(&self.metrics, series, &trace);
        self.recent.record(series.route(), trace);
    }
}

/// Records a race's metrics and keeps it for the status page once its losers are
/// settled: at once when they already are (no task), else from a task on the gateway's
/// tracker (a reply never waits for loser cleanup; the drain waits for the task).
///
/// A learned route's model (`learn`) is fed the settled trace first.
pub(crate) fn record_when_settled<R>(sinks: &Sinks, route: &Arc<R>, settled: Settled, learn: Option<&Arc<LiveModel>>)
where
    R: AsRef<RouteSeries> + Send + Sync + 'static,
{
    match settled.ready() {
        Ok(t) => {
            if let Some(l) = learn {
                l.observe(&t);
            }
            sinks.record(route.as_ref().as_ref(), t)
        }
        Err(pending) => {
            let (sinks, route, learn) = (sinks.clone(), route.clone(), learn.cloned());
            let tasks = sinks.tasks.clone();
            tasks.spawn(async move {
                if let Some(t) = pending.wait().await {
                    if let Some(l) = learn {
                        l.observe(&t);
                    }
                    sinks.record(route.as_ref().as_ref(), t);
                }
            });
        }
    }
}

/// Requests the page keeps (the newest).
pub const RECENT: usize = 50;

/// The last [`RECENT`] settled requests with their routes, oldest first.
#[derive(Debug, Default)]
pub struct Recent {
    entries: Mutex<VecDeque<(String, RequestTrace)>>,
}

impl Recent {
    /// Keeps `trace` (of route `route`), dropping the oldest past [`RECENT`]. On the
    /// request path: a full buffer reuses the evicted entry's route string, and the
    /// evicted trace is dropped after the lock is released.
    pub fn record(&self, route: &str, trace: RequestTrace) {
        let evicted = {
            let Ok(mut e) = self.entries.lock() else { return };
            let mut name = String::new();
            let evicted = if e.len() >= RECENT {
                e.pop_front().map(|(old, t)| {
                    name = old;
                    t
                })
            } else {
                None
            };
            name.clear();
            name.push_str(route);
            e.push_back((name, trace));
            evicted
        };
        drop(evicted);
    }

    /// The kept requests, newest first.
    pub fn newest_first(&self) -> Vec<(String, RequestTrace)> {
        self.entries.lock().map(|e| e.iter().rev().cloned().collect()).unwrap_or_default()
    }
}

/// The gateway's response header names, built at compile time (a name given as a
/// string is parsed and checked on every insert).
pub(crate) mod names {
    use axum::http::HeaderName;
    /// The request id, propagated or generated.
    pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
    /// The provider whose reply the client got.
    pub const WINNER: HeaderName = HeaderName::from_static("x-tailcut-winner");
    /// Attempts launched for the request.
    pub const ATTEMPTS: HeaderName = HeaderName::from_static("x-tailcut-attempts");
    /// Why a hedge launched (`none` when none did).
    pub const HEDGE_REASON: HeaderName = HeaderName::from_static("x-tailcut-hedge-reason");
    /// The route that served the request.
    pub const ROUTE: HeaderName = HeaderName::from_static("x-tailcut-route");
}

/// Names the request id on a reply built elsewhere than a whole proxied reply (errors,
/// the jobs API), whose headers come from the route's template.
pub(crate) fn with_request_id(mut resp: Response, request_id: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(request_id) {
        resp.headers_mut().insert(names::REQUEST_ID, v);
    }
    resp
}
