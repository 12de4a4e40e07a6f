//! `tailcut model calibration`, and the reliability tables `replay --learned` and
//! `report` print: a learned policy's predicted miss and cost against what happened.

use crate::cli::ModelCalibrationArgs;
use crate::commands::{load_config, BadInput};
use crate::html::Tee;
use crate::table::Table;
use serde_json::json;
use std::process::ExitCode;
use tailcut_replay::calibration::{live_calibration, DeadlineFrom, PolicyCalibration};
use tailcut_replay::sweep::ProviderRates;
use tailcut_replay::traces::read_live;
use tailcut_stats::reliability::Reliability;

fn pct(x: f64) -> String {
    let p = x * 100.0;
    if p == 0.0 || p >= 10.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.2}%")
    }
}

fn usd(x: f64) -> String {
    format!("{x:.5}")
}

/// Prints `r`'s reliability tables (miss by decile, then cost by decile) and the summary
/// line, for misses counted over `deadline_s`.
pub fn print_reliability(out: &mut Tee, r: &Reliability, deadline_s: f64) {
    if r.n == 0 {
        out.note("  no decision with a predicted miss");
        return;
    }
    let mut t = Table::new(&["decile", "predicted P(miss)", "n", "mean predicted", "realized (95% CI)", "misses"]);
    for (k, g) in r.groups.iter().enumerate() {
        let range = if g.predicted_min == g.predicted_max {
            pct(g.predicted_min)
        } else {
            format!("{}–{}", pct(g.predicted_min), pct(g.predicted_max))
        };
        t.row(vec![
            (k + 1).to_string(),
            range,
            g.n.to_string(),
            pct(g.predicted),
            format!("{} ({}–{})", pct(g.realized), pct(g.realized_ci95[0]), pct(g.realized_ci95[1])),
            g.misses.to_string(),
        ]);
    }
    out.table(&t);
    out.note(&format!(
        "  all {} decisions: predicted miss>{}s {} on average, realized {} ({}–{}); Brier {:.4} (always forecasting the realized rate: {:.4}); ECE {:.4}",
        r.n,
        tailcut_replay::fmt_g(deadline_s),
        pct(r.predicted),
        pct(r.realized),
        pct(r.realized_ci95[0]),
        pct(r.realized_ci95[1]),
        r.brier,
        r.brier_base_rate,
        r.ece
    ));
    let Some(c) = &r.cost else { return };
    let mut t = Table::new(&["decile", "predicted $ range", "n", "mean predicted $", "mean realized $", "realized / predicted"]);
    for (k, g) in c.groups.iter().enumerate() {
        let ratio = if g.predicted > 0.0 { format!("{:.2}", g.realized / g.predicted) } else { "-".into() };
        t.row(vec![
            (k + 1).to_string(),
            format!("{}–{}", usd(g.predicted_min), usd(g.predicted_max)),
            g.n.to_string(),
            usd(g.predicted),
            usd(g.realized),
            ratio,
        ]);
    }
    out.table(&t);
    out.note(&format!(
        "  cost over {} decisions: predicted ${} on average, realized ${} (×{:.2}); mean |error| ${}, by decile ${}",
        c.n,
        usd(c.predicted),
        usd(c.realized),
        c.ratio,
        usd(c.mean_abs_error),
        usd(c.group_error)
    ));
}

/// The explanation printed under reliability tables.
pub const RELIABILITY_NOTE: &str = "Reliability: decisions grouped by predicted P(miss) into deciles (equal counts, equal predictions kept together); realized = share that missed, Wilson 95% interval; Brier = mean (predicted − missed)²; ECE = count-weighted mean |mean predicted − realized| over the deciles. Costs grouped the same way by predicted cost.";

/// Rates from a configuration, for pricing realized costs.
pub fn rates(config: &tailcut_config::Config) -> Vec<ProviderRates> {
    config.providers.iter().map(|p| ProviderRates { name: p.name.clone(), rate: p.rate_usd_per_s, idle_s: p.idle_window_s }).collect()
}

/// Prints each policy's calibration from live traces.
pub fn print_live(out: &mut Tee, cals: &[PolicyCalibration], rates_from: &str) {
    for c in cals {
        let from = match c.deadline_from {
            DeadlineFrom::PolicyLabel => "its label's deadline",
            DeadlineFrom::Given => "--deadline",
        };
        out.heading(&format!(
            "\nCalibration of {} ({} learned decisions; misses over {} s, {from})",
            c.policy,
            c.decisions,
            tailcut_replay::fmt_g(c.deadline_s)
        ));
        print_reliability(out, &c.reliability, c.deadline_s);
        let mut left = Vec::new();
        if c.without_prediction > 0 {
            left.push(format!("{} without a predicted miss (explorations, re-probes)", c.without_prediction));
        }
        if c.refused > 0 {
            left.push(format!("{} never sent", c.refused));
        }
        if c.cost_unpriced > 0 {
            left.push(format!("{} not priced (a provider without a rate in {rates_from})", c.cost_unpriced));
        }
        if !left.is_empty() {
            out.note(&format!("  left out: {}", left.join("; ")));
        }
    }
    if !cals.is_empty() {
        out.note(&format!(
            "{RELIABILITY_NOTE} Realized cost = each attempt's running time × its rate, plus the idle window × rate for every attempt that started a worker (rates from {rates_from}): the model's price of what ran, not a provider's invoice; predicted cost as the engine records it (active plus billed idle)."
        ));
    }
}

/// The error for traces without learned predictions: which commands write them.
pub fn none_message(files: &str) -> String {
    format!(
        "{files}: no learned decision with a predicted miss (a `tailcut_request` record whose `learned` object has `predicted_miss`). \
         Only an `auto` policy predicts its misses: record one with `tailcut run --policy NAME --trace FILE` or `tailcut demo --config FILE --trace FILE` \
         over a configuration with a `kind = \"auto\"` policy, or with `[trace] path` on a gateway whose route uses one. \
         For paired rounds, `tailcut replay ROUNDS --learned` prints the same table"
    )
}

pub fn run(a: &ModelCalibrationArgs) -> anyhow::Result<ExitCode> {
    crate::commands::check_output("--plot", a.plot.as_deref())?;
    if let Some(d) = a.deadline {
        if !(d.is_finite() && d > 0.0 && d <= 1e6) {
            return Err(BadInput(format!("--deadline {d}: expected positive seconds up to 1000000")).into());
        }
    }
    let config = load_config(a.config.as_deref())?;
    let rates = rates(&config);
    let traces = read_live(&a.traces, a.skip_bad_lines)?;
    if traces.skipped > 0 {
        eprintln!("tailcut: skipped {} malformed line(s), e.g. {}", traces.skipped, traces.skipped_examples.join("; "));
    }
    let cals = live_calibration(&traces.rows, &rates, a.deadline, None).map_err(|e| BadInput(e.to_string()))?;
    let files = a.traces.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
    if cals.iter().all(|c| c.reliability.n == 0) {
        return Err(BadInput(none_message(&files)).into());
    }
    if let (Some(path), Some(c)) = (&a.plot, cals.iter().filter(|c| c.reliability.n > 0).max_by_key(|c| c.reliability.n)) {
        let title = format!("Reliability of {} (misses over {} s) — {files}", c.policy, tailcut_replay::fmt_g(c.deadline_s));
        tailcut_replay::plot::reliability_svg(path, &title, &c.reliability)?;
        eprintln!("tailcut: wrote {} ({})", path.display(), c.policy);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&json!({"traces": a.traces, "rates_from": config.source, "policies": cals}))?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = Tee::new(true, false);
    out.note(&format!("Learned decisions in {files} ({} requests read)", traces.rows.len()));
    print_live(&mut out, &cals, &config.source);
    Ok(ExitCode::SUCCESS)
}
