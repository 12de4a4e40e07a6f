//! Each provider kind's HTTP surface over the shared engine: one module per kind, and
//! what they share (error replies, injected faults, vanishing).

mod shared;

use crate::engine::State;
use axum::Router;
use shared::gone;
use std::sync::Arc;
use tailcut_providers::ProviderKind;

/// Declares one route module per provider kind (`routes/<module>.rs`, named as the
/// provider module) and [`kind_router`], from the one list of kinds: a new kind's mock is
/// its module, with no arm to add here.
macro_rules! kind_routes {
    ($($(#[doc = $doc:literal])* $kind:ident = $name:literal => $module:ident,)*) => {
        $(mod $module;)*

        /// The router of `kind`'s mock (empty for the simulator, which has no mock).
        fn kind_router(kind: ProviderKind) -> Router<Arc<State>> {
            match kind {
                $(ProviderKind::$kind => $module::router(),)*
                // Refused by `MockServer::start`; a router that answers nothing otherwise.
                ProviderKind::Sim => Router::new(),
            }
        }
    };
}
tailcut_providers::for_each_provider_kind!(kind_routes);

pub(crate) fn router(state: Arc<State>) -> Router {
    kind_router(state.kind).layer(axum::middleware::from_fn_with_state(state.clone(), gone)).with_state(state)
}
