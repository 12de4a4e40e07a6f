//! Why a request was refused or failed, one enum per HTTP answer of [`super::ApiError`]:
//! each variant holds the field, key, route or id at fault, and its `Display` is the
//! message the client reads.

use tailcut_http::HeadRefusal;

/// A malformed or incomplete request (400).
#[derive(Debug, thiserror::Error)]
pub enum BadRequest {
    /// A required member of the JSON body is missing.
    #[error("`{field}` is required")]
    Required {
        /// The member.
        field: &'static str,
    },
    /// Several jobs routes and no `route` member.
    #[error("`route` is required (several jobs routes are configured)")]
    RouteRequired,
    /// `?wait=` is not a number of seconds in range.
    #[error("`wait` must be a number of seconds from 0 to 3600")]
    Wait,
    /// `webhook` is not a string.
    #[error("`webhook` must be a URL string")]
    WebhookNotString,
    /// The webhook target was refused.
    #[error("`webhook`: {0}")]
    Webhook(#[source] crate::webhook::WebhookError),
    /// Two `Authorization` headers.
    #[error("more than one Authorization header")]
    TwoAuthorizations,
    /// The request head was refused (a bad `Host`).
    #[error("{0}")]
    Head(HeadRefusal),
    /// The body is not JSON.
    #[error("body is not valid JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// The body is JSON but not an object.
    #[error("body must be a JSON object")]
    NotObject,
    /// The body broke off while it was read.
    #[error("could not read the request body: {reason}")]
    Body {
        /// The body stream's error.
        reason: String,
    },
}

/// A missing, malformed or unknown API key (401).
#[derive(Debug, thiserror::Error)]
pub enum Unauthorized {
    /// No `Authorization` header.
    #[error("missing API key (Authorization: Bearer <key>)")]
    MissingKey,
    /// An `Authorization` header that is not `Bearer <key>`.
    #[error("malformed Authorization header (expected `Bearer <key>`)")]
    Malformed,
    /// A key no tenant has.
    #[error("invalid API key")]
    InvalidKey,
    /// The status page without a key.
    #[error("the status page needs an admin key (Authorization: Bearer <key>, or as the Basic password)")]
    AdminKeyNeeded,
}

/// A known key that may not do this (403).
#[derive(Debug, thiserror::Error)]
pub enum Forbidden {
    /// The key's routes do not include this one.
    #[error("this key may not use route `{route}`")]
    Route {
        /// The route.
        route: String,
    },
    /// The status page with a key that is not an admin key.
    #[error("key `{key}` is not an admin key (`admin = true` in gateway.keys)")]
    NotAdmin {
        /// The key's name.
        key: String,
    },
}

/// An unknown model, route or job (404).
#[derive(Debug, thiserror::Error)]
pub enum NotFound {
    /// A model no route serves.
    #[error("model `{model}` is not served here")]
    Model {
        /// The model asked for.
        model: String,
    },
    /// A jobs route that is not configured.
    #[error("no jobs route `{route}`")]
    JobsRoute {
        /// The route asked for.
        route: String,
    },
    /// No jobs route at all.
    #[error("no jobs route")]
    NoJobsRoute,
    /// A job that does not exist (or not for this key).
    #[error("no job `{id}`")]
    Job {
        /// The job's id.
        id: String,
    },
    /// A job that vanished while it was waited on: its id alone.
    #[error("{id}")]
    JobGone {
        /// The job's id.
        id: String,
    },
    /// A path no handler serves.
    #[error("no such route")]
    Path,
}

/// A rate limit, job cap or budget (429).
#[derive(Debug, thiserror::Error)]
pub enum TooMany {
    /// The key's request rate.
    #[error("rate limit exceeded for key `{key}`")]
    Rate {
        /// The key's name.
        key: String,
    },
    /// The key's running jobs.
    #[error("key `{key}` already has {cap} jobs running (its max_running_jobs)")]
    Jobs {
        /// The key's name.
        key: String,
        /// Its `max_running_jobs`.
        cap: usize,
    },
    /// The engine refused to race the request (budget, live cap).
    #[error("refused: {0}")]
    Refused(#[source] tailcut_core::RaceError),
}

/// Every provider failed, or the winner's stream broke (502).
#[derive(Debug, thiserror::Error)]
pub enum Upstream {
    /// No attempt gave a valid reply.
    #[error("no upstream returned a valid response ({attempts} attempt(s): {})", why.join("; "))]
    AllFailed {
        /// Attempts made.
        attempts: usize,
        /// Each failed provider's reason (`name: reason`, bounded).
        why: Vec<String>,
    },
    /// The winning stream broke after its first token.
    #[error("upstream failed mid-stream: {reason}")]
    MidStream {
        /// What the provider's reader saw.
        reason: String,
    },
}

/// Overloaded, draining or unable to keep a job (503).
#[derive(Debug, thiserror::Error)]
pub enum Unavailable {
    /// A drain began.
    #[error("the gateway is draining")]
    Draining,
    /// The server is shutting down.
    #[error("the gateway is shutting down")]
    ShuttingDown,
    /// Every in-flight slot is taken.
    #[error("too many requests in flight")]
    InFlight,
    /// No random bytes for a job id.
    #[error("no randomness for a job id: {0}")]
    Randomness(getrandom::Error),
    /// The job store failed.
    #[error("job store: {0}")]
    JobStore(#[source] tailcut_state::jobs::StoreError),
}
