//! Spend against budgets, read from the ledger for the `/metrics` gauges and the status
//! page: the global ledger's soft and hard stops and each key's budget.

use crate::state::Runtime;

/// One account's spend against its limits (see [`Runtime::budgets`]).
pub(crate) struct BudgetLine {
    /// `global`, or a key's name.
    pub account: String,
    /// Spent so far (None: the ledger could not be read).
    pub spent: Option<tailcut_core::MicroUsd>,
    /// New requests are refused past this (the global ledger only).
    pub soft_stop: Option<tailcut_core::MicroUsd>,
    /// No submission may cross this.
    pub hard_stop: Option<tailcut_core::MicroUsd>,
}

impl Runtime {
    /// Spend against limits: the global ledger (soft and hard stop), then each key with
    /// a budget (its budget is a hard stop), by name. A ledger that cannot be read gives
    /// no `spent`.
    pub(crate) fn budgets(&self) -> Vec<BudgetLine> {
        let limits = self.config.budget.limits;
        let mut lines = vec![BudgetLine {
            account: "global".into(),
            spent: self.budget.summary().ok().map(|s| s.total),
            soft_stop: Some(limits.soft_stop),
            hard_stop: Some(limits.hard_stop),
        }];
        let mut keys: Vec<&tailcut_core::ledger::Account> = self.tenants.values().filter_map(|t| t.ledger.as_deref()).collect();
        keys.sort_by(|a, b| a.name.cmp(&b.name));
        lines.extend(keys.into_iter().map(|a| BudgetLine {
            account: a.name.clone(),
            spent: self.budget.account_spent(&a.name).ok(),
            soft_stop: None,
            hard_stop: a.limit,
        }));
        lines
    }
}

/// The budget gauges: `tailcut_budget_spent_micro_usd{account}` and
/// `tailcut_budget_limit_micro_usd{account, limit}` from [`Runtime::budgets`].
pub(crate) fn write_gauges(rt: &Runtime, out: &mut String) {
    let lines = rt.budgets();
    let spent_pairs: Vec<[(&str, &str); 1]> = lines.iter().map(|l| [("account", l.account.as_str())]).collect();
    let spent: Vec<(&[(&str, &str)], f64)> =
        lines.iter().zip(&spent_pairs).filter_map(|(l, p)| Some((&p[..], l.spent?.0 as f64))).collect();
    crate::metrics::write_gauge(out, "tailcut_budget_spent_micro_usd", &spent);
    let cap_pairs: Vec<([(&str, &str); 2], f64)> = lines
        .iter()
        .flat_map(|l| {
            [("soft_stop", l.soft_stop), ("hard_stop", l.hard_stop)]
                .into_iter()
                .filter_map(|(name, v)| Some(([("account", l.account.as_str()), ("limit", name)], v?.0 as f64)))
        })
        .collect();
    let caps: Vec<(&[(&str, &str)], f64)> = cap_pairs.iter().map(|(p, v)| (&p[..], *v)).collect();
    crate::metrics::write_gauge(out, "tailcut_budget_limit_micro_usd", &caps);
}
