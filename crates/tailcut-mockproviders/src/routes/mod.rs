//! Each provider kind's HTTP surface over the shared engine: one module per kind, and
//! what they share (error replies, injected faults, vanishing).

mod baseten;
mod cerebrium;
mod fal;
mod generic;
mod modal;
mod openai;
mod replicate;
mod runpod;
mod shared;
mod vast;

use crate::engine::State;
use axum::Router;
use shared::gone;
use std::sync::Arc;
use tailcut_providers::ProviderKind;

pub(crate) fn router(state: Arc<State>) -> Router {
    let r = match state.kind {
        ProviderKind::RunPod => runpod::router(),
        ProviderKind::Replicate => replicate::router(),
        ProviderKind::Fal => fal::router(),
        ProviderKind::Baseten => baseten::router(),
        ProviderKind::Modal => modal::router(),
        ProviderKind::Cerebrium => cerebrium::router(),
        ProviderKind::OpenAi => openai::router(),
        ProviderKind::Vast => vast::router(),
        ProviderKind::Generic => generic::router(),
        // Refused by `MockServer::start`; a router that answers nothing otherwise.
        ProviderKind::Sim => Router::new(),
    };
    r.layer(axum::middleware::from_fn_with_state(state.clone(), gone)).with_state(state)
}
