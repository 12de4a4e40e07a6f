//! `tailcut report`: live request traces summarised per policy arm.

use crate::cli::ReportArgs;
use crate::table::{miss_ci, Table};
use serde_json::json;
use std::process::ExitCode;
use tailcut_replay::live::{audit_matrix, read_live, summarize, Spread};

fn s1(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.1}"))
}

fn spread(s: Option<Spread>) -> String {
    s.map_or("-".into(), |s| format!("{:.0}–{:.0} (median {:.0})", s.min, s.max, s.median))
}

pub fn run(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    let traces = read_live(&args.traces, args.skip_bad_lines)?;
    if traces.skipped > 0 {
        eprintln!("tailcut: skipped {} malformed line(s), e.g. {}", traces.skipped, traces.skipped_examples.join("; "));
    }
    let arms = summarize(&traces.rows, args.deadline);
    let audits = audit_matrix(&traces.audits);

    if let Some(path) = &args.plot {
        let mut order: Vec<&str> = Vec::new();
        for r in &traces.rows {
            if !order.contains(&r.arm.as_str()) {
                order.push(&r.arm);
            }
        }
        // Refused requests were never sent: they have no latency to plot.
        let series: Vec<(String, Vec<f64>)> = order
            .iter()
            .map(|a| (a.to_string(), traces.rows.iter().filter(|r| r.arm == *a && !r.refused).map(|r| r.latency_s).collect()))
            .collect();
        let deadline = args.deadline.round().max(0.0) as u32;
        tailcut_replay::plot::ecdf_svg(path, "Live requests: share finished by time t", &series, &[deadline])?;
        eprintln!("tailcut: wrote {}", path.display());
    }

    if args.json {
        println!("{}", serde_json::to_string_pretty(&json!({"arms": arms, "cancel_audit": audits}))?);
        return Ok(ExitCode::SUCCESS);
    }
    if arms.is_empty() && audits.is_empty() {
        println!("no request or cancel-audit records found");
        return Ok(ExitCode::SUCCESS);
    }
    if !arms.is_empty() {
        let refused = traces.rows.iter().filter(|r| r.refused).count();
        println!("Live requests per arm ({} requests, {} sent, {refused} refused)", traces.rows.len(), traces.rows.len() - refused);
        let miss_title = format!("miss>{}s of sent (95% CI)", tailcut_replay::fmt_g(args.deadline));
        let mut t = Table::new(&["arm", "n", "refused", "p50 s", "p90 s", "p95 s nr / linear", "max s", &miss_title, "hedged", "winners"]);
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
        print!("{}", t.render());
        if refused > 0 {
            println!(
                "refused = never sent to any provider (the first submission was refused: budget or live-attempt cap); quantiles, misses, hedges and winners are over the sent requests."
            );
        }

        println!("\nLoser cancellations per arm");
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
        print!("{}", t.render());
        let estimated: usize = arms.iter().filter(|a| a.arm != "all").map(|a| a.latencies_estimated).sum();
        if estimated > 0 {
            println!(
                "\n{estimated} latenc{} rebuilt from legacy records without `winner_total_ms` (the winner's launch offset taken from the policy label).",
                if estimated == 1 { "y was" } else { "ies were" }
            );
        }
        if arms.iter().any(|a| a.evidence_inferred > 0) {
            println!("Inferred evidence: legacy receipts without an `evidence` field count as confirmed_terminal only when they recorded an observed terminal state and its time.");
        }
    }
    if !audits.is_empty() {
        println!("\nCancel audit (forced loser cancels)");
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
        print!("{}", t.render());
    }
    Ok(ExitCode::SUCCESS)
}
