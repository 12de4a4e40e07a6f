//! Fuzz-style tests of the GPUHedge importer (`tailcut config import-gpuhedge`), bounded
//! for CI: arbitrary bytes and damaged GPUHedge configs (the testkit's mutations, deep
//! `[` nesting among them).
//!
//! Properties: the importer never panics and decides each case within [`CASE_LIMIT`];
//! what it writes is TOML whose tables are only those the importer writes (no name can
//! open a table of its own), whose providers are exactly the YAML's, and which the
//! config loader then accepts or refuses without a panic.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use proptest::prelude::*;
use std::time::Duration;
use tailcut_config::import::import_gpuhedge;
use tailcut_config::Config;

/// Longest a case may take (debug build on a shared 2-core machine; most take well
/// under a millisecond).
const CASE_LIMIT: Duration = Duration::from_secs(5);

const TABLES: [&str; 6] = ["race", "budget", "validator", "providers", "policies", "replay"];

fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    let text = String::from_utf8_lossy(bytes).into_owned();
    let yaml = text.clone();
    let imported = tailcut_testkit::fuzz::bounded(CASE_LIMIT, move || import_gpuhedge(&yaml))
        .map_err(|why| TestCaseError::fail(format!("{why} on {} bytes", bytes.len())))?;
    let Ok(toml_text) = imported else { return Ok(()) };
    let doc: toml::Table =
        toml::from_str(&toml_text).map_err(|e| TestCaseError::fail(format!("the importer wrote invalid TOML: {e}\n{toml_text}")))?;
    for table in doc.keys() {
        prop_assert!(TABLES.contains(&table.as_str()), "a table the importer does not write: `{}`\n{}", table, toml_text);
    }
    let yaml: serde_json::Value = serde_yaml::from_str(&text).expect("the importer parsed it");
    let want: Vec<&String> = yaml["providers"].as_object().expect("providers").keys().collect();
    let got: Vec<&String> = doc.get("providers").and_then(|p| p.as_table()).map(|t| t.keys().collect()).unwrap_or_default();
    prop_assert_eq!(got, want);
    let owned = toml_text.clone();
    tailcut_testkit::fuzz::bounded(CASE_LIMIT, move || Config::parse(&owned, "<imported>").map(|_| ()))
        .map_err(|why| TestCaseError::fail(format!("the loader on the imported config: {why}")))?
        .ok();
    Ok(())
}

fn seeds() -> Vec<Vec<u8>> {
    let mut s: Vec<Vec<u8>> = vec![
        br#"
model: moss
timeouts_s: { moss: 300 }
budget: { operational_stop: 45, absolute_ceiling: 50 }
slo: { primary_deadline_s: 60, report_deadlines_s: [30, 60, 90, 120] }
stages: { moss: { calibration_rounds: 18 } }
policy: { primary: runpod, hedge_after_ms: 10000, hedge_choose_one_of: [modal, myapi, cerebrium] }
providers:
  runpod: { billed_rate_per_s: 0.000306, idle_billed_seconds: 60, endpoint_id: abc }
  modal: { billed_rate_per_s: 0.000704, app: moss-tts }
  cerebrium: { billed_rate_per_s: 0.000736, project_id: p-1, app: tts, function: run }
  myapi:
    billed_rate_per_s: 0.0007
    adapter: http
    http:
      headers: { Authorization: "Bearer ${MYAPI_KEY}" }
      submit: { method: POST, url: "https://api.example.com/jobs", body: { input: "{request}" }, job_id_path: "job.id" }
      status: { method: GET, url: "https://api.example.com/jobs/{job_id}", state_path: "state", state_map: { waiting: QUEUED } }
      result: { method: GET, url: "https://api.example.com/jobs/{job_id}/result", audio_b64_path: "audio" }
      cancel: { method: DELETE, url: "https://api.example.com/jobs/{job_id}" }
"#
        .to_vec(),
        b"providers: { s: { billed_rate_per_s: 0.1, adapter: sim } }\npolicy: { primary: s }\n".to_vec(),
        // Issue 27 item 5: a name that closes its table.
        b"providers:\n  \"a]\\n[gateway]\\nauth = \\\"none\\\"\\n[providers.x\": { billed_rate_per_s: 0.1, adapter: sim }\n\
          policy: { primary: x, hedge_choose_one_of: [\"a]\\n[gateway]\\nauth = \\\"none\\\"\\n[providers.x\"] }\n"
            .to_vec(),
        b"providers: { \"'''\": { billed_rate_per_s: .inf, adapter: modal, app: \"x\\ny\" } }\ntimeouts_s: { moss: .nan }\n".to_vec(),
    ];
    // Issue 27 item 10: 200 KB of nesting (took 23 s in a release build).
    s.push(format!("providers: {}{}\n", "[".repeat(100_000), "]".repeat(100_000)).into_bytes());
    s.push(format!("providers: {}1{}\n", "{a: ".repeat(25_000), "}".repeat(25_000)).into_bytes());
    s
}

tailcut_testkit::fuzz_tests!(seeds: seeds, check: check, cases: 1500);
