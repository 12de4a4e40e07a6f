//! The HTTP handlers and the one table of paths the gateway answers. The OpenAI
//! endpoints ([`openai`], streams in [`stream`], both raced by [`race`] and answered by
//! [`respond`]), the jobs API ([`jobs`]) and the
//! operations paths ([`ops`]). The fast-path dispatcher ([`crate::dispatch`]) and the
//! axum [`router`] both read the endpoints from [`ENDPOINTS`].

mod jobs;
mod openai;
mod ops;
mod race;
mod respond;
mod stream;

use crate::admission::RequestBody;
use crate::state::AppState;
use axum::extract::State;
use axum::http::{HeaderMap, Method};
use axum::routing::{get, post};
use axum::Router;
use std::sync::Arc;
use tailcut_providers::openai::Endpoint;

pub(crate) use openai::serve as serve_openai;

/// The OpenAI endpoints, by path (each answers `POST`).
pub(crate) const ENDPOINTS: [(&str, Endpoint); 3] =
    [("/v1/chat/completions", Endpoint::Chat), ("/v1/completions", Endpoint::Completions), ("/v1/embeddings", Endpoint::Embeddings)];

/// The OpenAI endpoint a request is for, if it is one.
pub(crate) fn endpoint(method: &Method, path: &str) -> Option<Endpoint> {
    if method != Method::POST {
        return None;
    }
    ENDPOINTS.iter().find(|(p, _)| *p == path).map(|(_, ep)| *ep)
}

/// The gateway's paths.
pub fn router(state: Arc<AppState>) -> Router {
    let mut router = Router::new();
    for (path, ep) in ENDPOINTS {
        router = router.route(
            path,
            post(move |State(st): State<Arc<AppState>>, headers: HeaderMap, RequestBody(body): RequestBody| {
                openai::serve(st, headers, body, ep, None)
            }),
        );
    }
    router
        .route("/v1/models", get(openai::models))
        .route("/v1/jobs", post(jobs::create))
        .route("/v1/jobs/{id}", get(jobs::get).delete(jobs::delete))
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        .route("/ui", get(crate::ui::page))
        .route("/admin/models", get(ops::models))
        .fallback(ops::not_found)
        .method_not_allowed_fallback(ops::method_not_allowed)
        .with_state(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_path_takes_exactly_the_endpoints_of_the_table() {
        for (path, ep) in ENDPOINTS {
            assert_eq!(endpoint(&Method::POST, path), Some(ep), "{path}");
            assert_eq!(endpoint(&Method::GET, path), None, "{path}: only POST is an endpoint");
            assert_eq!(format!("/v1/{}", ep.path()), path, "the table agrees with the provider's own path");
        }
        for other in ["/v1/models", "/v1/jobs", "/healthz", "/v1/chat/completions/", "/v1/chat"] {
            assert_eq!(endpoint(&Method::POST, other), None, "{other}");
        }
    }
}
