//! The race behind every OpenAI-style request, whole or streamed: the route's hedger run
//! in the request's scope (the tenant's account, the total timeout, a stream's hand-over),
//! stopped too when the client goes away. Both handlers ([`super::openai`],
//! [`super::stream`]) call it, and it calls neither.

use crate::hangup::Hangup;
use crate::state::Raced;
use std::sync::Arc;
use tailcut_core::engine::{Outcome, RunScope};
use tailcut_core::JobRequest;

/// Runs `raced`'s race on `request` in `scope` (the tenant's account charged with every
/// launch, stopped at the scope's deadline), stopped as well (every live attempt
/// cancelled with receipts) when the client goes away, whichever comes first.
pub(crate) async fn race(
    raced: &Raced,
    request: JobRequest,
    scope: RunScope,
    hangup: Option<&Arc<Hangup>>,
) -> Result<Outcome, tailcut_core::RaceError> {
    let scope = match hangup {
        Some(h) => scope.stop(h.clone().wait()),
        None => scope,
    };
    raced.hedger.run_scoped(raced.policy.as_ref(), request, scope).await
}
