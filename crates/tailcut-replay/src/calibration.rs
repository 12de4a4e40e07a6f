//! Calibration of learned decisions recorded in live traces: every `tailcut_request`
//! whose `learned` object carries a predicted miss becomes a [`Forecast`] (did the
//! request miss the deadline the prediction was made for?), grouped per policy, and
//! summarised by [`tailcut_stats::reliability`].
//!
//! The deadline comes from the `auto` policy label (`auto:a,b@250ms/miss1%`) unless the
//! caller fixes one. A trace records no realized bill, so the realized cost is priced
//! here from rates, on the basis the engine predicts on (active plus billed idle): each
//! attempt's running time × its provider's rate, plus the provider's idle window × rate
//! for every attempt that started a worker (one cancelled while still queued did not).
//! A request touching a provider without a rate has no realized cost.

use crate::sweep::ProviderRates;
use crate::traces::{LearnedFacts, LiveRow};
use serde::Serialize;
use tailcut_stats::reliability::{reliability, Forecast, Reliability};

/// Where a policy's deadline came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeadlineFrom {
    /// The `auto` policy label.
    PolicyLabel,
    /// Given by the caller (a flag).
    Given,
}

/// One policy's learned decisions against what happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyCalibration {
    /// Policy label (the trace's `policy`).
    pub policy: String,
    /// The deadline a miss is counted at, s.
    pub deadline_s: f64,
    /// Where it came from.
    pub deadline_from: DeadlineFrom,
    /// Requests with a `learned` object.
    pub decisions: u64,
    /// Of those, requests without a predicted miss (explorations, re-probes, `adaptive`,
    /// `singler`): not in the table.
    pub without_prediction: u64,
    /// Requests never sent (refused before their first attempt): not in the table.
    pub refused: u64,
    /// Predicted requests whose realized cost could not be priced (a provider without a rate).
    pub cost_unpriced: u64,
    /// The table.
    pub reliability: Reliability,
}

/// The realized cost of a request's attempts at `rates`, or None when a provider has no rate.
pub fn realized_cost(facts: &LearnedFacts, rates: &[ProviderRates]) -> Option<f64> {
    facts.attempts.iter().try_fold(0.0, |sum, a| {
        let r = rates.iter().find(|r| r.name == a.provider)?;
        let idle = if a.started { r.idle_s } else { 0.0 };
        Some(sum + r.rate * (a.ran_s + idle))
    })
}

/// Why calibration could not be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CalibrationError {
    /// A policy's predictions have no deadline to count misses at.
    #[error("policy `{policy}` records predicted misses but its label names no deadline (only `auto:...@<ms>ms/...` labels do): give one with --deadline")]
    NoDeadline {
        /// The policy's label.
        policy: String,
    },
}

/// The calibration of every policy in `rows` that recorded a predicted miss, in first-seen
/// order. `deadline_s` (when given) overrides the labels' deadlines; `fallback_s` is used
/// for labels that name none.
pub fn live_calibration(
    rows: &[LiveRow],
    rates: &[ProviderRates],
    deadline_s: Option<f64>,
    fallback_s: Option<f64>,
) -> Result<Vec<PolicyCalibration>, CalibrationError> {
    let mut order: Vec<&str> = Vec::new();
    for r in rows.iter().filter(|r| r.learned.is_some()) {
        if !order.contains(&r.arm.as_str()) {
            order.push(&r.arm);
        }
    }
    let mut out = Vec::new();
    for arm in order {
        let mine: Vec<(&LiveRow, &LearnedFacts)> =
            rows.iter().filter(|r| r.arm == arm).filter_map(|r| Some((r, r.learned.as_ref()?))).collect();
        let predicted: Vec<&(&LiveRow, &LearnedFacts)> = mine.iter().filter(|(_, f)| f.predicted_miss.is_some()).collect();
        if predicted.is_empty() {
            continue;
        }
        let (deadline, from) = match (deadline_s, predicted.iter().find_map(|(_, f)| f.deadline_s)) {
            (Some(d), _) => (d, DeadlineFrom::Given),
            (None, Some(d)) => (d, DeadlineFrom::PolicyLabel),
            (None, None) => match fallback_s {
                Some(d) => (d, DeadlineFrom::Given),
                None => return Err(CalibrationError::NoDeadline { policy: arm.to_string() }),
            },
        };
        let sent: Vec<&&(&LiveRow, &LearnedFacts)> = predicted.iter().filter(|(r, _)| !r.refused).collect();
        let mut unpriced = 0;
        let forecasts: Vec<Forecast> = sent
            .iter()
            .filter_map(|(r, f)| {
                let cost_realized = realized_cost(f, rates);
                unpriced += u64::from(cost_realized.is_none());
                Some(Forecast {
                    p: f.predicted_miss?,
                    missed: r.latency_s.is_nan() || r.latency_s > deadline,
                    cost_predicted: f.predicted_cost_usd,
                    cost_realized,
                })
            })
            .collect();
        out.push(PolicyCalibration {
            policy: arm.to_string(),
            deadline_s: deadline,
            deadline_from: from,
            decisions: mine.len() as u64,
            without_prediction: (mine.len() - predicted.len()) as u64,
            refused: (predicted.len() - sent.len()) as u64,
            cost_unpriced: unpriced,
            reliability: reliability(&forecasts),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traces::AttemptSpend;

    fn row(arm: &str, latency_s: f64, p: Option<f64>, deadline: Option<f64>) -> LiveRow {
        LiveRow {
            arm: arm.into(),
            policy_kind: tailcut_core::PolicyKind::from_legacy_label(arm),
            latency_s,
            latency_estimated: false,
            winner: None,
            hedge_launched: false,
            cutover: false,
            safety: false,
            escalation: false,
            receipts: Vec::new(),
            refused: false,
            primary: Some("a".into()),
            learned: Some(LearnedFacts {
                plan: "single:a".into(),
                predicted_miss: p,
                predicted_cost_usd: Some(0.01),
                deadline_s: deadline,
                attempts: vec![AttemptSpend { provider: "a".into(), ran_s: 10.0, started: true }],
            }),
        }
    }

    #[test]
    fn misses_are_counted_at_the_label_deadline_and_costs_priced_from_rates() {
        let rows = vec![
            row("auto:a@1000ms/miss5%", 0.5, Some(0.1), Some(1.0)),
            row("auto:a@1000ms/miss5%", 1.5, Some(0.1), Some(1.0)),
            row("auto:a@1000ms/miss5%", f64::INFINITY, Some(0.3), Some(1.0)),
            row("auto:a@1000ms/miss5%", 0.2, None, Some(1.0)),
            LiveRow { learned: None, ..row("single:a", 9.0, None, None) },
        ];
        let rates = vec![ProviderRates { name: "a".into(), rate: 0.001, idle_s: 5.0 }];
        let c = live_calibration(&rows, &rates, None, None).unwrap();
        assert_eq!(c.len(), 1);
        let c = &c[0];
        assert_eq!((c.decisions, c.without_prediction, c.deadline_from), (4, 1, DeadlineFrom::PolicyLabel));
        assert_eq!((c.reliability.n, c.reliability.misses), (3, 2));
        let cost = c.reliability.cost.as_ref().unwrap();
        // 0.001 $/s × (10 s ran + 5 s idle window).
        assert!((cost.realized - 0.015).abs() < 1e-12, "{cost:?}");
        // A given deadline overrides the label's: at 2 s only the failed request misses.
        let c = live_calibration(&rows, &rates, Some(2.0), None).unwrap();
        assert_eq!((c[0].reliability.misses, c[0].deadline_from), (1, DeadlineFrom::Given));
        // A provider without a rate: no realized cost.
        let c = live_calibration(&rows, &[], None, None).unwrap();
        assert_eq!(c[0].cost_unpriced, 3);
        assert!(c[0].reliability.cost.is_none());
    }

    #[test]
    fn predictions_without_a_deadline_are_an_error_unless_one_is_given() {
        let rows = vec![row("custom", 1.0, Some(0.1), None)];
        assert_eq!(live_calibration(&rows, &[], None, None), Err(CalibrationError::NoDeadline { policy: "custom".into() }));
        assert_eq!(live_calibration(&rows, &[], Some(3.0), None).unwrap()[0].reliability.misses, 0);
        assert_eq!(live_calibration(&rows, &[], None, Some(0.5)).unwrap()[0].reliability.misses, 1);
    }
}
