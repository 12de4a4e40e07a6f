//! The gateway as one service. The OpenAI endpoints, which every proxied call takes, go
//! straight to their handler; every other path goes through the axum router. The router's
//! layers on the hot path (route lookup, boxed-service clones, request extensions, the
//! extractors' copy of the headers, the response's length header rebuilt) cost about
//! 6,000 instructions per request of the ~70,000 the whole request takes.

use crate::runtime::{openai, read_body, router, AppState, Endpoint};
use axum::extract::Request;
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::Router;
use futures::future::BoxFuture;
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Dispatches requests: the OpenAI endpoints directly, the rest through the router.
#[derive(Clone)]
pub(crate) struct Gateway {
    state: Arc<AppState>,
    router: Router,
}

impl Gateway {
    pub(crate) fn new(state: Arc<AppState>) -> Gateway {
        Gateway { router: router(state.clone()), state }
    }

    fn endpoint(req: &Request) -> Option<Endpoint> {
        if req.method() != Method::POST {
            return None;
        }
        match req.uri().path() {
            "/v1/chat/completions" => Some(Endpoint::Chat),
            "/v1/completions" => Some(Endpoint::Completions),
            "/v1/embeddings" => Some(Endpoint::Embeddings),
            _ => None,
        }
    }
}

impl tower_service::Service<Request> for Gateway {
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        match Gateway::endpoint(&req) {
            Some(ep) => {
                let st = self.state.clone();
                Box::pin(async move {
                    let (parts, body) = req.into_parts();
                    Ok(match read_body(&st, &parts.headers, body).await {
                        Ok(bytes) => openai(st, parts.headers, bytes, ep).await,
                        Err(e) => e.into_response(),
                    })
                })
            }
            None => {
                let mut router = self.router.clone();
                Box::pin(async move { tower_service::Service::call(&mut router, req).await })
            }
        }
    }
}

impl<'a, L: axum::serve::Listener> tower_service::Service<axum::serve::IncomingStream<'a, L>> for Gateway {
    type Response = Gateway;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Gateway, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _conn: axum::serve::IncomingStream<'a, L>) -> Self::Future {
        std::future::ready(Ok(self.clone()))
    }
}
