//! `tailcut report`: live request traces summarised per policy arm.

use crate::cli::ReportArgs;
use crate::commands::calibration;
use crate::html::Tee;
use crate::table::{miss_ci, Table};
use serde_json::json;
use std::process::ExitCode;
use tailcut_replay::calibration::live_calibration;
use tailcut_replay::traces::{audit_matrix, group_by_arm, read_live, summarize, ArmSummary, LiveRow, Spread};

fn s1(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.1}"))
}

fn spread(s: Option<Spread>) -> String {
    s.map_or("-".into(), |s| format!("{:.0}–{:.0} (median {:.0})", s.min, s.max, s.median))
}

/// The `--plot` figure: each arm's tail against one single-provider arm as the dashed
/// baseline, the other single-provider arms left out (they are the baseline's
/// alternatives, not hedging policies), so a handful of curves remain.
///
/// The baseline is what the hedging arms were meant to improve on: the single arm of the
/// provider that most hedging arms launch as their primary (the demo's headline
/// comparison, `single:runpod`). Without such an arm it is the single arm of lowest p95.
fn plot_arms(path: &std::path::Path, rows: &[LiveRow], arms: &[ArmSummary], deadline: f64) -> anyhow::Result<()> {
    use tailcut_replay::plot::{tail_svg, Curve};
    let baseline = baseline_arm(rows, arms);
    let singles: Vec<&ArmSummary> = arms.iter().filter(|a| a.policy_kind == Some(tailcut_core::PolicyKind::Single)).collect();
    let single = |a: &str| arms.iter().any(|s| s.arm == a && s.policy_kind == Some(tailcut_core::PolicyKind::Single));
    let keep = |a: &str| !single(a) || Some(a) == baseline.as_deref();
    let mut curves: Vec<Curve> = group_by_arm(rows)
        .into_iter()
        .filter(|(a, _)| keep(a))
        .map(|(a, group)| Curve {
            label: a.to_string(),
            // Refused requests were never sent: they have no latency to plot.
            latencies: group.iter().filter(|r| !r.refused).map(|r| r.latency_s).collect(),
            baseline: Some(a) == baseline.as_deref(),
        })
        .collect();
    curves.sort_by_key(|c| !c.baseline);
    let left_out = singles.len().saturating_sub(1);
    let against = baseline.as_deref().map_or(String::new(), |b| format!(" against {b}"));
    let title = if left_out > 0 {
        format!("Live requests: tail latency per arm{against} ({left_out} other single-provider arm(s) not drawn)")
    } else {
        format!("Live requests: tail latency per arm{against}")
    };
    tail_svg(path, &title, &curves, &[deadline])?;
    Ok(())
}

/// The single-provider arm the plot compares against: that of the most common primary
/// of the other arms' requests, else the single arm of lowest p95.
fn baseline_arm(rows: &[LiveRow], arms: &[ArmSummary]) -> Option<String> {
    let singles: Vec<&ArmSummary> = arms.iter().filter(|a| a.policy_kind == Some(tailcut_core::PolicyKind::Single)).collect();
    let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for r in rows.iter().filter(|r| r.policy_kind != Some(tailcut_core::PolicyKind::Single)) {
        if let Some(p) = &r.primary {
            *counts.entry(p.as_str()).or_default() += 1;
        }
    }
    let mut by_use: Vec<(&str, usize)> = counts.into_iter().collect();
    by_use.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let of_primary = by_use.iter().find_map(|(p, _)| singles.iter().find(|a| a.arm == format!("single:{p}")).map(|a| a.arm.clone()));
    let p95 = |a: &ArmSummary| a.p95_s.unwrap_or(f64::INFINITY);
    of_primary.or_else(|| singles.iter().min_by(|a, b| p95(a).total_cmp(&p95(b))).map(|a| a.arm.clone()))
}

pub fn run(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    crate::commands::check_output("--plot", args.plot.as_deref())?;
    crate::commands::check_output("--html", args.html.as_deref())?;
    let traces = read_live(&args.traces, args.skip_bad_lines)?;
    if traces.skipped > 0 {
        eprintln!("tailcut: skipped {} malformed line(s), e.g. {}", traces.skipped, traces.skipped_examples.join("; "));
    }
    let arms = summarize(&traces.rows, args.deadline);
    let audits = audit_matrix(&traces.audits);
    // Learned decisions' predictions against what happened, misses over each `auto`
    // label's own deadline (or --deadline for labels without one).
    let config = crate::commands::load_config(args.config.as_deref())?;
    let cals = live_calibration(&traces.rows, &calibration::rates(&config), None, Some(args.deadline))?;

    if let Some(path) = &args.plot {
        plot_arms(path, &traces.rows, &arms, args.deadline)?;
        eprintln!("tailcut: wrote {}", path.display());
    }

    if args.json {
        crate::output::print_json(&json!({"arms": arms, "cancel_audit": audits, "calibration": cals}))?;
        if args.html.is_none() {
            return Ok(ExitCode::SUCCESS);
        }
    }
    // Printed (unless JSON was) and, with --html, kept for the HTML file.
    let mut out = Tee::new(!args.json, args.html.is_some());
    if arms.is_empty() && audits.is_empty() {
        out.note("no request or cancel-audit records found");
    }
    if !arms.is_empty() {
        let refused = traces.rows.iter().filter(|r| r.refused).count();
        out.heading(&format!(
            "Live requests per arm ({} requests, {} sent, {refused} refused)",
            traces.rows.len(),
            traces.rows.len() - refused
        ));
        // The deadline as given (0.6 stays 0.6, 45.5 stays 45.5).
        let miss_title = format!("miss>{}s of sent (95% CI)", args.deadline);
        let mut t =
            Table::new(&["arm", "n", "refused", "p50 s", "p90 s", "p95 s (nearest / linear)", "max s", &miss_title, "hedged", "winners"]);
        for a in &arms {
            let hedged = if a.cutovers + a.safety_hedges + a.escalations > 0 {
                format!("{}/{} ({} cutover, {} safety, {} escalated)", a.hedged, a.sent, a.cutovers, a.safety_hedges, a.escalations)
            } else {
                format!("{}/{}", a.hedged, a.sent)
            };
            let winners = a.winners.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ");
            t.row(vec![
                a.arm.clone(),
                a.n.to_string(),
                a.refused.to_string(),
                s1(a.p50_s),
                s1(a.p90_s),
                format!("{} / {}", s1(a.p95_s), s1(a.p95_linear_s)),
                s1(a.max_s),
                miss_ci(a.misses, a.sent as u64),
                hedged,
                winners,
            ]);
        }
        out.table(&t);
        if refused > 0 {
            out.note(
                "refused = never sent to any provider (the first submission was refused: budget or live-attempt cap); quantiles, misses, hedges and winners are over the sent requests.",
            );
        }
        out.note(
            "p95 by two estimators: nearest (the order statistic at rank q·(n−1) rounded, as the reference tool computes it: an observed latency) / linear (interpolated between the two neighbouring ranks); they differ most when n is small.",
        );
        if let Some(html) = &args.html {
            let svg = crate::html::svg_via_file(html, args.plot.as_deref(), |p| plot_arms(p, &traces.rows, &arms, args.deadline))?;
            out.figure("Tail latency per arm", &svg);
        }

        out.heading("\nLoser cancellations per arm");
        let mut t = Table::new(&["arm", "receipts", "evidence", "leaked", "ack ms", "cancel→terminal ms"]);
        for a in &arms {
            let ev = a.evidence.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ");
            let ev = if a.evidence_inferred > 0 { format!("{ev} ({} inferred)", a.evidence_inferred) } else { ev };
            t.row(vec![
                a.arm.clone(),
                a.receipts.to_string(),
                if ev.is_empty() { "-".into() } else { ev },
                a.leaked.to_string(),
                spread(a.ack_ms),
                spread(a.terminal_ms),
            ]);
        }
        out.table(&t);
        let estimated: usize = arms.iter().filter(|a| a.arm != "all").map(|a| a.latencies_estimated).sum();
        if estimated > 0 {
            out.note(&format!(
                "\n{estimated} latenc{} rebuilt from legacy records without `winner_total_ms` (the winner's launch offset taken from the policy label).",
                if estimated == 1 { "y was" } else { "ies were" }
            ));
        }
        if arms.iter().any(|a| a.evidence_inferred > 0) {
            out.note("Inferred evidence: legacy receipts without an `evidence` field count as confirmed_terminal only when they recorded an observed terminal state and its time.");
        }
    }
    calibration::print_live(&mut out, &cals, &config.source);
    if !audits.is_empty() {
        out.heading("\nCancel audit (forced loser cancels)");
        let mut t = Table::new(&["provider", "phase", "attempts", "terminal", "leaked", "was running", "ack ms"]);
        for c in &audits {
            t.row(vec![
                c.provider.clone(),
                c.phase.clone(),
                c.attempts.to_string(),
                c.terminal.to_string(),
                c.leaked.to_string(),
                c.was_running.to_string(),
                spread(c.ack_ms),
            ]);
        }
        out.table(&t);
    }
    if let Some(html) = &args.html {
        let sources = args.traces.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
        out.write("tailcut report", &format!("live traces {sources}; deadline {} s", args.deadline), html)?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailcut_replay::traces::summarize;

    fn row(arm: &str, primary: &str, latency_s: f64) -> LiveRow {
        LiveRow {
            arm: arm.into(),
            policy_kind: tailcut_core::PolicyKind::from_legacy_label(arm),
            latency_s,
            latency_estimated: false,
            winner: Some(primary.into()),
            hedge_launched: false,
            cutover: false,
            safety: false,
            escalation: false,
            receipts: Vec::new(),
            refused: false,
            primary: Some(primary.into()),
            learned: None,
        }
    }

    #[test]
    fn the_plot_s_baseline_is_the_hedged_arms_primary_not_the_fastest_single() {
        // single:modal has the lowest p95, but the hedged arms all start on runpod: the
        // comparison they are read against is single:runpod (the demo's headline).
        let mut rows = Vec::new();
        for k in 0..20 {
            rows.push(row("single:runpod", "runpod", if k % 3 == 0 { 110.0 } else { 7.0 }));
            rows.push(row("single:modal", "modal", 38.0));
            rows.push(row("hedge:runpod->cerebrium@10s", "runpod", 8.0));
            rows.push(row("cutover:runpod->cerebrium@q2.5s+s8.5s", "runpod", 8.0));
        }
        let arms = summarize(&rows, 60.0);
        assert_eq!(baseline_arm(&rows, &arms).as_deref(), Some("single:runpod"));
        // With no hedged arm, the single arm of lowest p95.
        let singles: Vec<LiveRow> = rows.iter().filter(|r| r.policy_kind == Some(tailcut_core::PolicyKind::Single)).cloned().collect();
        assert_eq!(baseline_arm(&singles, &summarize(&singles, 60.0)).as_deref(), Some("single:modal"));
    }
}
