//! Random provider scripts for the engine's property tests: how a [`ScriptedProvider`]
//! submits, queues, finishes, answers and takes a cancel, drawn by proptest. Each
//! property test says how often submits and status polls fail, and whether a cancel may
//! panic.
//!
//! [`ScriptedProvider`]: crate::ScriptedProvider

use crate::{CancelBehaviour, Output, Script};
use proptest::prelude::*;
use std::time::Duration;

/// How often things go wrong in the scripts [`script_strategy`] draws.
#[derive(Debug, Clone, Copy)]
pub struct ScriptOdds {
    /// Submits that fail, out of 256.
    pub submit_fails_per_256: u8,
    /// Status polls that fail, out of 256.
    pub status_fails_per_256: u8,
    /// Whether a cancel may panic (the engine must turn that into a leaked receipt).
    pub cancel_may_panic: bool,
}

/// A provider script: submit within 0.5 s, queued up to 40 s, finished within 120 s, a
/// valid answer two times in three, and a cancel confirmed within 2 s five times in
/// seven (else an error or a leak, or with `cancel_may_panic` a panic).
pub fn script_strategy(odds: ScriptOdds) -> impl Strategy<Value = Script> {
    let ms = Duration::from_millis;
    let output = prop_oneof![6 => Just(Output::Valid), 2 => Just(Output::Invalid), 1 => Just(Output::Fails)];
    let cancel = if odds.cancel_may_panic {
        prop_oneof![
            5 => (0u64..2_000).prop_map(move |d| CancelBehaviour::Confirm(ms(d))),
            1 => Just(CancelBehaviour::Error),
            1 => (0u64..2_000).prop_map(move |d| CancelBehaviour::Leak(ms(d))),
            1 => Just(CancelBehaviour::Panic),
        ]
        .boxed()
    } else {
        prop_oneof![
            5 => (0u64..2_000).prop_map(move |d| CancelBehaviour::Confirm(ms(d))),
            1 => Just(CancelBehaviour::Error),
            1 => (0u64..2_000).prop_map(move |d| CancelBehaviour::Leak(ms(d))),
        ]
        .boxed()
    };
    (0u64..500, any::<u8>(), 0u64..40_000, 0u64..120_000, output, cancel, any::<u8>()).prop_map(
        move |(submit, submit_fail, queued, finish, output, cancel, status_fail)| Script {
            submit_delay: ms(submit),
            submit_fails: submit_fail < odds.submit_fails_per_256,
            queued_for: ms(queued.min(finish)),
            finish_after: ms(finish),
            output,
            cancel,
            status_fails: status_fail < odds.status_fails_per_256,
        },
    )
}
