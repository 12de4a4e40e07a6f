//! Per-arm statistics of live requests (latency quantiles, misses with Wilson
//! intervals, hedge and cancel counts) and the cancel-audit matrix.

use serde::Serialize;
use std::collections::BTreeMap;
use tailcut_stats::{max_finite, quantile_linear, quantile_nearest, sort_latencies, wilson};

use super::record::{AuditRow, LiveRow, ReceiptFacts};

/// Min / median / max of a list.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    /// Smallest.
    pub min: f64,
    /// Median (nearest estimator).
    pub median: f64,
    /// Largest.
    pub max: f64,
}

fn spread(mut v: Vec<f64>) -> Option<Spread> {
    if v.is_empty() {
        return None;
    }
    sort_latencies(&mut v);
    Some(Spread { min: v[0], median: quantile_nearest(&v, 0.5), max: v[v.len() - 1] })
}

/// One arm's summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmSummary {
    /// Arm.
    pub arm: String,
    /// The kind of policy its requests ran (that of the first that names one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_kind: Option<tailcut_core::PolicyKind>,
    /// Requests in the traces, refused ones included.
    pub n: usize,
    /// Requests never sent to any provider (refused at the first submission); not part
    /// of the latency statistics below.
    pub refused: usize,
    /// Requests sent: `n - refused`, the denominator of `valid`, the quantiles and `misses`.
    pub sent: usize,
    /// Sent requests with a valid result.
    pub valid: usize,
    /// Quantiles by the reference estimator (null = no valid result at that rank).
    pub p50_s: Option<f64>,
    /// 90th percentile.
    pub p90_s: Option<f64>,
    /// 95th percentile.
    pub p95_s: Option<f64>,
    /// Linear-interpolation quantiles.
    pub p50_linear_s: Option<f64>,
    /// Linear p90.
    pub p90_linear_s: Option<f64>,
    /// Linear p95.
    pub p95_linear_s: Option<f64>,
    /// Largest finite latency.
    pub max_s: Option<f64>,
    /// Deadline used for misses.
    pub deadline_s: f64,
    /// Sent requests without a valid result by the deadline.
    pub misses: u64,
    /// Wilson 95% interval of the miss rate (`misses / sent`).
    pub miss_ci95: [f64; 2],
    /// Requests that launched any extra attempt.
    pub hedged: usize,
    /// Timer hedges.
    pub hedges: usize,
    /// Cutovers.
    pub cutovers: usize,
    /// Safety hedges.
    pub safety_hedges: usize,
    /// Escalations.
    pub escalations: usize,
    /// Winners of the sent requests by provider (`none` for no valid result).
    pub winners: BTreeMap<String, usize>,
    /// Receipts.
    pub receipts: usize,
    /// Receipts by evidence level.
    pub evidence: BTreeMap<String, usize>,
    /// Evidence levels inferred from legacy receipts.
    pub evidence_inferred: usize,
    /// Leaked receipts.
    pub leaked: usize,
    /// Cancel ack latency, ms.
    pub ack_ms: Option<Spread>,
    /// Cancel-to-terminal latency, ms.
    pub terminal_ms: Option<Spread>,
    /// Latencies rebuilt from legacy records.
    pub latencies_estimated: usize,
}

fn fin(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// Summarises rows sharing an arm label. Refused requests (never sent) are counted
/// apart and left out of every latency statistic.
pub fn summarize_arm(arm: &str, all_rows: &[&LiveRow], deadline_s: f64) -> ArmSummary {
    let n = all_rows.len();
    let rows: Vec<&LiveRow> = all_rows.iter().copied().filter(|r| !r.refused).collect();
    let sent = rows.len();
    let mut lat: Vec<f64> = rows.iter().map(|r| r.latency_s).collect();
    sort_latencies(&mut lat);
    let misses = lat.iter().filter(|&&l| l > deadline_s).count() as u64;
    let (lo, hi) = wilson(misses, sent as u64);
    let receipts: Vec<&ReceiptFacts> = rows.iter().flat_map(|r| r.receipts.iter()).collect();
    let mut winners = BTreeMap::new();
    for r in &rows {
        *winners.entry(r.winner.clone().unwrap_or_else(|| "none".into())).or_insert(0) += 1;
    }
    let mut evidence = BTreeMap::new();
    for r in &receipts {
        *evidence.entry(r.evidence.clone()).or_insert(0) += 1;
    }
    ArmSummary {
        arm: arm.to_string(),
        // One kind only when every row has it (the `all` row mixes kinds: it has none).
        policy_kind: all_rows.first().and_then(|f| f.policy_kind).filter(|k| all_rows.iter().all(|r| r.policy_kind == Some(*k))),
        n,
        refused: n - sent,
        sent,
        valid: lat.iter().filter(|l| l.is_finite()).count(),
        p50_s: fin(quantile_nearest(&lat, 0.5)),
        p90_s: fin(quantile_nearest(&lat, 0.9)),
        p95_s: fin(quantile_nearest(&lat, 0.95)),
        p50_linear_s: fin(quantile_linear(&lat, 0.5)),
        p90_linear_s: fin(quantile_linear(&lat, 0.9)),
        p95_linear_s: fin(quantile_linear(&lat, 0.95)),
        max_s: fin(max_finite(&lat)),
        deadline_s,
        misses,
        miss_ci95: [lo, hi],
        hedged: rows.iter().filter(|r| r.hedge_launched || r.cutover || r.safety || r.escalation).count(),
        hedges: rows.iter().filter(|r| r.hedge_launched).count(),
        cutovers: rows.iter().filter(|r| r.cutover).count(),
        safety_hedges: rows.iter().filter(|r| r.safety).count(),
        escalations: rows.iter().filter(|r| r.escalation).count(),
        winners,
        receipts: receipts.len(),
        evidence,
        evidence_inferred: receipts.iter().filter(|r| r.evidence_inferred).count(),
        leaked: receipts.iter().filter(|r| r.leaked).count(),
        ack_ms: spread(receipts.iter().filter_map(|r| r.ack_ms).collect()),
        terminal_ms: spread(receipts.iter().filter_map(|r| r.terminal_ms).collect()),
        latencies_estimated: rows.iter().filter(|r| r.latency_estimated).count(),
    }
}

/// The rows of each arm, arms in first-seen order: one pass over the rows (a hash from
/// arm to group), so many distinct arms cost no more than few.
pub fn group_by_arm(rows: &[LiveRow]) -> Vec<(&str, Vec<&LiveRow>)> {
    let mut index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut groups: Vec<(&str, Vec<&LiveRow>)> = Vec::new();
    for r in rows {
        let i = *index.entry(r.arm.as_str()).or_insert_with(|| {
            groups.push((r.arm.as_str(), Vec::new()));
            groups.len() - 1
        });
        groups[i].1.push(r);
    }
    groups
}

/// Per-arm summaries in first-seen order, then an `all` row when there are several arms.
pub fn summarize(rows: &[LiveRow], deadline_s: f64) -> Vec<ArmSummary> {
    let groups = group_by_arm(rows);
    let several = groups.len() > 1;
    let mut out: Vec<ArmSummary> = groups.iter().map(|(arm, group)| summarize_arm(arm, group, deadline_s)).collect();
    if several {
        let all: Vec<&LiveRow> = rows.iter().collect();
        out.push(summarize_arm("all", &all, deadline_s));
    }
    out
}

/// Cancel-audit matrix cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditCell {
    /// Provider.
    pub provider: String,
    /// Phase.
    pub phase: String,
    /// Attempts.
    pub attempts: usize,
    /// Terminal status present and not leaked.
    pub terminal: usize,
    /// Leaked.
    pub leaked: usize,
    /// Was running when cancelled.
    pub was_running: usize,
    /// Ack latency, ms.
    pub ack_ms: Option<Spread>,
}

/// The cancel-audit matrix, in first-seen order (grouped in one pass, as [`group_by_arm`]).
pub fn audit_matrix(audits: &[AuditRow]) -> Vec<AuditCell> {
    let mut index: std::collections::HashMap<(&str, &str), usize> = std::collections::HashMap::new();
    let mut groups: Vec<(&str, &str, Vec<&AuditRow>)> = Vec::new();
    for a in audits {
        let i = *index.entry((a.provider.as_str(), a.phase.as_str())).or_insert_with(|| {
            groups.push((a.provider.as_str(), a.phase.as_str(), Vec::new()));
            groups.len() - 1
        });
        groups[i].2.push(a);
    }
    groups
        .into_iter()
        .map(|(provider, phase, group)| AuditCell {
            attempts: group.len(),
            terminal: group.iter().filter(|a| a.has_terminal_status && !a.receipt.leaked).count(),
            leaked: group.iter().filter(|a| a.receipt.leaked).count(),
            was_running: group.iter().filter(|a| a.receipt.was_running == Some(true)).count(),
            ack_ms: spread(group.iter().filter_map(|a| a.receipt.ack_ms).collect()),
            provider: provider.to_string(),
            phase: phase.to_string(),
        })
        .collect()
}
