//! The race behind every OpenAI-style request, whole or streamed: the route's hedger run
//! in the scope of the tenant's account, stopped at the total timeout or when the client
//! goes away. Both handlers ([`super::openai`], [`super::stream`]) call it, and it calls
//! neither.

use crate::hangup::Hangup;
use crate::state::Raced;
use crate::tenancy::TENANT_LEDGER;
use std::sync::Arc;
use tailcut_core::engine::Outcome;
use tailcut_core::JobRequest;

/// Runs `raced`'s race on `request` in the scope of the tenant's account `ledger`,
/// stopped (every live attempt cancelled with receipts) at `stop_at` or when the client
/// goes away, whichever comes first.
pub(crate) async fn race(
    raced: &Raced,
    ledger: Option<Arc<tailcut_core::ledger::Account>>,
    request: JobRequest,
    stop_at: Option<tokio::time::Instant>,
    hangup: Option<&Arc<Hangup>>,
) -> Result<Outcome, tailcut_core::RaceError> {
    let stop = hangup.map(|h| -> futures::future::BoxFuture<'static, ()> { Box::pin(h.clone().wait()) });
    TENANT_LEDGER.scope(ledger, raced.hedger.run_stopping(raced.policy.as_ref(), request, stop_at, stop)).await
}
