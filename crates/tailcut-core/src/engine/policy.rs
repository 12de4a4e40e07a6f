//! The contract between the engine and a policy: the [`Policy`] trait the [`Hedger`](super::Hedger)
//! runs. It lives with the engine so that the engine never depends on the built-in
//! policies (in [`crate::policy`], which re-exports it).

use super::{Race, RaceError};
use async_trait::async_trait;
use std::fmt;

/// A hedging policy.
#[async_trait]
pub trait Policy: Send + Sync + fmt::Debug {
    /// The label written to traces and tables.
    fn label(&self) -> &str;

    /// Which kind of policy it is: written to traces (`policy_kind`) so replay and
    /// reports tell policies apart without reading labels.
    fn kind(&self) -> crate::PolicyKind;

    /// Drives the race until it has a winner or nothing more can be tried. Returning
    /// early is safe: the engine cancels whatever is still running.
    async fn drive(&self, race: &mut Race) -> Result<(), RaceError>;
}
