//! The books of the PostgreSQL ledger: every budget's charged, reconciled, granted,
//! returned and reclaimed micro-dollars read in one query, and the identities that must
//! hold between them (`tailcut state reconcile`).

use crate::pg::{PgError, PgState};
use serde::Serialize;

/// One budget's books.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ScopeReconciliation {
    /// `global` or `account:NAME`.
    pub scope: String,
    /// `budget_scopes.spent`: charges of closed leases plus reconciliations.
    pub spent: i64,
    /// `budget_scopes.leased`: granted on open leases.
    pub leased: i64,
    /// Sum of every `projected` charge row.
    pub charged: i64,
    /// Number of charge rows.
    pub charges: i64,
    /// Sum of `reconcile` rows.
    pub reconciled: i64,
    /// Granted on every lease ever taken.
    pub granted: i64,
    /// Charges on closed leases.
    pub charged_closed: i64,
    /// Charges on open leases.
    pub charged_open: i64,
    /// Given back by their replicas.
    pub returned: i64,
    /// Taken back from dead replicas.
    pub reclaimed: i64,
    /// Granted on leases still open.
    pub open_granted: i64,
    /// Open leases.
    pub open_leases: i64,
    /// Closed leases.
    pub closed_leases: i64,
    /// Whether every identity below holds: `granted = charged_closed + returned +
    /// reclaimed + open_granted`, `spent = charged_closed + reconciled`, `leased =
    /// open_granted`, `charged = charged_closed + charged_open`.
    pub balanced: bool,
}

/// The books of every budget.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Reconciliation {
    /// Per budget, `global` first.
    pub scopes: Vec<ScopeReconciliation>,
    /// Whether every budget balances.
    pub balanced: bool,
}

pub(super) async fn reconciliation(st: &PgState) -> Result<Reconciliation, PgError> {
    let c = st.client().await?;
    let rows = c
        .query(
            "WITH l AS (
                 SELECT scope,
                        COALESCE(SUM(granted), 0) AS granted,
                        COALESCE(SUM(charged) FILTER (WHERE closed_at IS NOT NULL), 0) AS charged_closed,
                        COALESCE(SUM(granted - charged) FILTER (WHERE closed_how = 'returned'), 0) AS returned,
                        COALESCE(SUM(granted - charged) FILTER (WHERE closed_how = 'reclaimed'), 0) AS reclaimed,
                        COALESCE(SUM(granted) FILTER (WHERE closed_at IS NULL), 0) AS open_granted,
                        COUNT(*) FILTER (WHERE closed_at IS NULL) AS open_leases,
                        COUNT(*) FILTER (WHERE closed_at IS NOT NULL) AS closed_leases
                 FROM budget_leases GROUP BY scope),
             e AS (
                 SELECT CASE WHEN s = 'global' THEN 'global' ELSE 'account:' || account END AS scope,
                        SUM(micro_usd) FILTER (WHERE kind = 'projected') AS charged,
                        COUNT(*) FILTER (WHERE kind = 'projected') AS charges,
                        SUM(micro_usd) FILTER (WHERE kind = 'reconcile') AS reconciled,
                        SUM(micro_usd) FILTER (WHERE kind = 'projected' AND open) AS charged_open
                 FROM (SELECT en.*, 'global' AS s,
                              EXISTS (SELECT 1 FROM budget_leases bl WHERE bl.id = en.lease AND bl.closed_at IS NULL) AS open
                       FROM ledger_entries en WHERE en.kind IN ('projected', 'reconcile')
                       UNION ALL
                       SELECT en.*, 'account' AS s,
                              EXISTS (SELECT 1 FROM budget_leases bl WHERE bl.id = en.account_lease AND bl.closed_at IS NULL) AS open
                       FROM ledger_entries en WHERE en.kind IN ('projected', 'reconcile') AND en.account IS NOT NULL
                         AND (en.kind = 'reconcile' OR en.account_lease IS NOT NULL)) x
                 GROUP BY 1)
             SELECT b.scope, b.spent, b.leased,
                    COALESCE(e.charged, 0)::bigint, COALESCE(e.charges, 0)::bigint, COALESCE(e.reconciled, 0)::bigint,
                    COALESCE(l.granted, 0)::bigint, COALESCE(l.charged_closed, 0)::bigint, COALESCE(e.charged_open, 0)::bigint,
                    COALESCE(l.returned, 0)::bigint, COALESCE(l.reclaimed, 0)::bigint, COALESCE(l.open_granted, 0)::bigint,
                    COALESCE(l.open_leases, 0)::bigint, COALESCE(l.closed_leases, 0)::bigint
             FROM budget_scopes b LEFT JOIN l ON l.scope = b.scope LEFT JOIN e ON e.scope = b.scope
             ORDER BY b.scope <> 'global', b.scope",
            &[],
        )
        .await?;
    let scopes: Vec<ScopeReconciliation> = rows
        .iter()
        .map(|r| {
            let mut s = ScopeReconciliation {
                scope: r.get(0),
                spent: r.get(1),
                leased: r.get(2),
                charged: r.get(3),
                charges: r.get(4),
                reconciled: r.get(5),
                granted: r.get(6),
                charged_closed: r.get(7),
                charged_open: r.get(8),
                returned: r.get(9),
                reclaimed: r.get(10),
                open_granted: r.get(11),
                open_leases: r.get(12),
                closed_leases: r.get(13),
                balanced: false,
            };
            s.balanced = s.granted == s.charged_closed + s.returned + s.reclaimed + s.open_granted
                && s.spent == s.charged_closed + s.reconciled
                && s.leased == s.open_granted
                && s.charged == s.charged_closed + s.charged_open;
            s
        })
        .collect();
    let balanced = scopes.iter().all(|s| s.balanced);
    Ok(Reconciliation { scopes, balanced })
}
