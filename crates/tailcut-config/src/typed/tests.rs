//! The typed configuration's unit tests: parsing, errors naming their keys, providers.

use super::*;
use tailcut_core::RateNanoUsdPerSec;

fn err(text: &str) -> String {
    Config::parse(text, "t.toml").unwrap_err().to_string()
}

#[test]
fn built_in_config_is_valid_and_ordered() {
    let c = Config::built_in();
    let names: Vec<_> = c.providers.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["runpod", "modal", "cerebrium"]);
    assert_eq!(c.policies.len(), 6);
    assert_eq!(c.race.max_live, 2);
    assert_eq!(c.budget.ledger, None);
    assert_eq!(c.providers[0].pricing.rate, RateNanoUsdPerSec(306_000));
    assert_eq!(c.replay.calibration_rounds, None, "no split unless asked for");
}

#[test]
fn unknown_top_level_key_is_rejected_with_its_name() {
    let e = err("colour = 1");
    assert!(e.starts_with("t.toml: key `colour`"), "{e}");
    assert!(e.contains("unknown field"), "{e}");
}

#[test]
fn unknown_provider_key_names_the_path() {
    let e = err("[providers.runpod]\nadapter = \"sim\"\nrate = 1\n");
    assert!(e.contains("key `providers.runpod.rate`"), "{e}");
}

#[test]
fn wrong_type_names_the_path_and_expectation() {
    let e = err("[providers.runpod]\nadapter = \"sim\"\nrate_usd_per_s = \"cheap\"\n");
    assert!(e.contains("providers.runpod.rate_usd_per_s"), "{e}");
    assert!(e.contains("expected a number"), "{e}");
    let e = err("[providers.runpod]\nadapter = \"sim\"\nrate_usd_per_s = -1.0\n");
    assert!(e.contains("expected a number from 0 to 1000 dollars per second, got -1"), "{e}");
}

#[test]
fn unknown_adapter_and_sim_setting_are_rejected() {
    assert!(err("[providers.x]\nadapter = \"aws\"\n").contains("providers.x.adapter"));
    let e = err("[providers.x]\nadapter = \"runpod\"\nendpoint_id = \"e\"\n");
    assert!(e.contains("providers.x.rate_usd_per_s") && e.contains("money is real"), "{e}");
    let e = err("[providers.x]\nadapter = \"runpod\"\nrate_usd_per_s = 0.0003\n");
    assert!(e.contains("providers.x.endpoint_id"), "{e}");
    let e = err("[providers.x]\nadapter = \"runpod\"\nrate_usd_per_s = 0.0003\nendpoint_id = \"e\"\nmodel = \"m\"\n");
    assert!(e.contains("providers.x.model") && e.contains("not used"), "{e}");
    let e = err("[providers.x]\nadapter = \"replicate\"\nrate_usd_per_s = 0.0003\n");
    assert!(e.contains("exactly one of version"), "{e}");
    let e = err("[providers.x]\nadapter = \"sim\"\nsim = { profile = \"runpod\", warp = 9 }\n");
    assert!(e.contains("providers.x.sim.warp"), "{e}");
    let e = err("[providers.x]\nadapter = \"sim\"\nsim = { profile = \"runpod\", leak_p = 3.0 }\n");
    assert!(e.contains("leak_p"), "{e}");
}

#[test]
fn http_providers_parse_and_know_when_they_cost_money() {
    let text = r#"
[providers.rp]
adapter = "runpod"
endpoint_id = "abc"
rate_usd_per_s = 0.000306
idle_window_s = 60
[providers.local]
adapter = "runpod"
base_url = "http://127.0.0.1:8001/v2"
endpoint_id = "sim"
rate_usd_per_s = 0.000306
[providers.vllm]
adapter = "openai"
base_url = "http://localhost:8000/v1"
model = "m"
stream = true
rate_usd_per_s = 0.0
[providers.api]
adapter = "http"
rate_usd_per_s = 0.001
http = { submit = { url = "https://x/jobs" }, status = { url = "https://x/jobs/{job_id}" }, state_map = { waiting = "QUEUED" } }
[policies.c]
kind = "cutover"
primary = "local"
hedge = "vllm"
"#;
    let c = Config::parse(text, "t").unwrap();
    assert!(c.provider("rp").unwrap().is_paid());
    assert!(!c.provider("local").unwrap().is_paid());
    assert!(!c.provider("vllm").unwrap().is_paid());
    assert!(c.provider("api").unwrap().is_paid());
    // The local RunPod-API server needs no credential.
    assert!(c.provider("local").unwrap().try_entry("t", true).is_ok());
}

#[test]
fn sim_overrides_apply() {
    let c = Config::parse("[providers.x]\nadapter = \"sim\"\nsim = { profile = \"runpod\", leak_p = 0.25, seed = 9 }\n", "t").unwrap();
    let (profile, seed) = c.providers[0].sim_profile().unwrap();
    assert_eq!(profile.leak_p, 0.25);
    assert_eq!(seed, 9);
}

#[test]
fn policy_errors_name_the_policy() {
    let base = "[providers.runpod]\nadapter = \"sim\"\n[providers.modal]\nadapter = \"sim\"\n";
    let e = err(&format!("{base}[policies.p]\nkind = \"cutover\"\nprimary = \"modal\"\nhedge = \"runpod\"\n"));
    assert!(e.contains("key `policies.p`") && e.contains("cannot tell queued from running"), "{e}");
    let e = err(&format!("{base}[policies.p]\nkind = \"hedge\"\nprimary = \"runpod\"\n"));
    assert!(e.contains("policies.p.hedge") && e.contains("required"), "{e}");
    let e = err(&format!("{base}[policies.p]\nkind = \"hedge\"\nprimary = \"runpod\"\nhedge = \"nope\"\n"));
    assert!(e.contains("unknown provider `nope`"), "{e}");
    let e = err(&format!("{base}[policies.p]\nkind = \"single\"\nprovider = \"runpod\"\ndelay_ms = 5\n"));
    assert!(e.contains("policies.p.delay_ms") && e.contains("not used"), "{e}");
    let e = err(&format!("{base}[policies.p]\nkind = \"magic\"\n"));
    assert!(e.contains("policies.p.kind"), "{e}");
}

#[test]
fn unknown_validator_is_a_config_error() {
    let e = err("[validator]\nname = \"psychic\"\n");
    assert!(e.contains("key `validator`") && e.contains("unknown validator `psychic`"), "{e}");
}

#[test]
fn syntax_errors_name_the_file() {
    let e = err("[providers\n");
    assert!(e.starts_with("t.toml: invalid TOML"), "{e}");
}

#[test]
fn budget_stops_are_ordered() {
    let e = err("[budget]\nsoft_stop_usd = 60\nhard_stop_usd = 50\n");
    assert!(e.contains("budget.soft_stop_usd"), "{e}");
    let c = Config::parse("[budget]\nsoft_stop_usd = 1.5\nhard_stop_usd = 2\nledger = \"x.sqlite\"\n", "t").unwrap();
    assert_eq!(c.budget.limits.hard_stop, MicroUsd(2_000_000));
    assert_eq!(c.budget.ledger, Some(PathBuf::from("x.sqlite")));
}

#[test]
fn load_reports_missing_file() {
    let e = Config::load(Path::new("/nonexistent/tailcut.toml")).unwrap_err().to_string();
    assert!(e.starts_with("/nonexistent/tailcut.toml: cannot read"), "{e}");
}
