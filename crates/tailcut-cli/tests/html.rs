//! `tailcut report --html FILE` and `tailcut replay --html FILE` through the real binary:
//! one self-contained file (no script, no external asset) with the command's tables and
//! its plot inlined as SVG, while what the command prints stays exactly the same.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use std::path::PathBuf;
use std::process::Command;

fn tailcut(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tailcut")).args(args).output().unwrap()
}

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/gpuhedge-2026-07").join(name).display().to_string()
}

fn stdout(o: &std::process::Output) -> String {
    assert!(o.status.success(), "stderr: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// The file is one page that loads nothing: no script, no `src`/`href` but `data:`.
fn assert_self_contained(page: &str) {
    assert!(page.starts_with("<!doctype html>"), "{}", &page[..page.len().min(200)]);
    assert!(!page.to_lowercase().contains("<script"), "a script in the page");
    for attr in ["src=\"", "href=\""] {
        for (i, _) in page.match_indices(attr) {
            let value = &page[i + attr.len()..];
            assert!(value.starts_with("data:") || value.starts_with('#'), "an external reference: {}", &page[i..(i + 80).min(page.len())]);
        }
    }
    assert_eq!(page.matches("<svg").count(), page.matches("</svg>").count());
}

#[test]
fn report_html_has_the_tables_and_the_tail_plot_and_prints_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let traces = [fixture("live_hedge.jsonl"), fixture("cancel_audit.jsonl")];
    let plain = stdout(&tailcut(&["report", &traces[0], &traces[1]]));
    let with = stdout(&tailcut(&["report", &traces[0], &traces[1], "--html", html.to_str().unwrap()]));
    assert_eq!(plain, with, "--html changes nothing printed");
    let page = std::fs::read_to_string(&html).unwrap();
    assert_self_contained(&page);
    for want in [
        "<h2>Live requests per arm (18 requests, 18 sent, 0 refused)</h2>",
        "<h2>Loser cancellations per arm</h2>",
        "<h2>Cancel audit (forced loser cancels)</h2>",
        "<th>p95 s (nearest / linear)</th>",
        "<td>runpod-&gt;cerebrium@10s</td>",
        "<svg",
        "Live requests: tail latency per arm",
    ] {
        assert!(page.contains(want), "the page lacks {want:?}");
    }
    assert_eq!(page.matches("<table>").count(), 3);
    // --json and --html together: JSON printed, the page written all the same.
    let html2 = dir.path().join("r2.html");
    let json = stdout(&tailcut(&["report", &traces[0], "--json", "--html", html2.to_str().unwrap()]));
    assert!(serde_json::from_str::<serde_json::Value>(&json).is_ok(), "{json}");
    assert!(std::fs::read_to_string(&html2).unwrap().contains("<table>"));
}

#[test]
fn replay_html_has_every_split_and_the_policy_plot_and_prints_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("replay.html");
    let plot = dir.path().join("replay.svg");
    let rounds = fixture("moss_rounds.jsonl");
    let args = ["replay", rounds.as_str(), "--calibration-rounds", "18", "--top", "3"];
    let plain = stdout(&tailcut(&args));
    let mut with_args = args.to_vec();
    with_args.extend(["--html", html.to_str().unwrap(), "--plot", plot.to_str().unwrap()]);
    let with = stdout(&tailcut(&with_args));
    assert_eq!(plain, with, "--html changes nothing printed");
    let page = std::fs::read_to_string(&html).unwrap();
    assert_self_contained(&page);
    assert!(page.contains("Per-provider cold starts"), "provider table");
    assert!(page.contains("EVALUATION (rounds 19+; report these numbers)"), "evaluation split");
    assert_eq!(page.matches("<table>").count(), 4, "providers, all, calibration, evaluation");
    // The plot inlined is the one --plot wrote.
    let svg = std::fs::read_to_string(&plot).unwrap();
    let start = svg.find("<svg").unwrap();
    assert!(page.contains(&svg[start..start + 200]), "the --plot figure is inlined");
    // --html with --json or --csv is refused as a usage error.
    let o = tailcut(&["replay", &rounds, "--json", "--html", html.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
}
