//! Every provider kind is read by dispatch to its provider module: each kind's minimal
//! table loads, builds and reports its kind; a key of another kind, an unknown key, or a
//! missing required key is refused naming the key and what the kind takes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use tailcut_config::{ApiConfig, Config};
use tailcut_providers::ProviderKind;

/// The smallest table of each HTTP kind (an exhaustive match: a new kind must add one).
fn table(kind: ProviderKind, extra: &str) -> String {
    format!("[providers.p]\nadapter = \"{kind}\"\nrate_usd_per_s = 0.001\ntimeout_s = 5\n{}\n{extra}\n", kind.minimal_table())
}

fn err(text: &str) -> String {
    Config::parse(text, "t.toml").unwrap_err().to_string()
}

#[test]
fn every_http_kind_loads_from_its_minimal_table_and_builds() {
    for &kind in ProviderKind::HTTP {
        let c = Config::parse(&table(kind, ""), "t.toml").unwrap_or_else(|e| panic!("{kind}: {e}"));
        let p = c.provider("p").unwrap();
        assert_eq!(p.kind(), kind);
        assert!(matches!(p.api, ApiConfig::Http(_)), "{kind}");
        assert!(p.try_entry("t.toml", false).is_ok(), "{kind}");
        assert_eq!(p.openai().is_some(), kind == ProviderKind::OpenAi, "{kind}");
    }
}

#[test]
fn a_key_of_another_kind_is_not_used_and_an_unknown_key_lists_what_the_kind_takes() {
    for &kind in ProviderKind::HTTP {
        // A key some other kind takes and this one does not.
        let other = ProviderKind::HTTP
            .iter()
            .flat_map(|k| k.fields())
            .find(|f| !kind.fields().contains(f))
            .unwrap_or_else(|| panic!("{kind} takes every key"));
        let e = err(&table(kind, &format!("{other} = \"x\"")));
        assert!(e.starts_with("t.toml: key `providers.p."), "{kind}: {e}");
        assert!(e.contains(&format!("not used by adapter = \"{kind}\" (it takes: ")), "{kind}: {e}");
        let e = err(&table(kind, "colour = 1"));
        assert!(e.contains("key `providers.p.colour`: unknown key"), "{kind}: {e}");
        assert!(e.contains("rate_usd_per_s") && e.contains("timeout_s"), "the shared keys are listed: {e}");
    }
}

#[test]
fn the_simulator_takes_no_http_keys() {
    // The old reader accepted these and ignored them (checked: `Ok` on 830e13f).
    for extra in ["timeout_s = 5", "poll_interval_ms = 10", "base_url = \"http://x\""] {
        let e = err(&format!("[providers.runpod]\nadapter = \"sim\"\n{extra}\n"));
        let k = extra.split(' ').next().unwrap_or_default();
        assert!(e.contains(&format!("key `providers.runpod.{k}`: not used by adapter = \"sim\" (it takes: sim)")), "{e}");
    }
}

#[test]
fn kind_errors_name_the_key_under_the_provider() {
    let e = err("[providers.p]\nadapter = \"http\"\nrate_usd_per_s = 0.001\nhttp = { submit = { url = 7 } }\n");
    assert!(e.contains("key `providers.p.http.submit.url`"), "{e}");
    let e = err("[providers.p]\nadapter = \"http\"\nrate_usd_per_s = 0.001\nhttp = { submit = { url = \"u\", poll_interval_s = 0.0 } }\n");
    assert!(e.contains("key `providers.p.http.submit.poll_interval_s`: expected a number greater than 0"), "{e}");
    let e = err("[providers.p]\nadapter = \"replicate\"\nrate_usd_per_s = 0.001\nmodel = \"o/m\"\nprefer_wait_s = 61\n");
    assert!(e.contains("key `providers.p.prefer_wait_s`: expected an integer from 1 to 60 seconds, got 61"), "{e}");
    let e = err("[providers.p]\nadapter = \"openai\"\nrate_usd_per_s = 0\nbase_url = \"http://h/v1\"\nroute = \"edits\"\n");
    assert!(e.contains("key `providers.p.route`: `edits`: expected chat or completions"), "{e}");
    let e = err("[providers.p]\nadapter = 3\n");
    assert!(e.contains("key `providers.p.adapter`: invalid type: integer, expected a string"), "{e}");
    let e = err("[providers.p]\nrate_usd_per_s = 1\n");
    assert!(e.contains("key `providers.p`: missing field `adapter`"), "{e}");
    let e = err("[providers.p]\nadapter = \"aws\"\n");
    assert!(e.contains(&format!("key `providers.p.adapter`: unknown adapter `aws`; expected {}", ProviderKind::expected())), "{e}");
}

#[test]
fn a_paid_providers_missing_credential_is_an_error_only_when_strict() {
    let text =
        "[providers.p]\nadapter = \"fal\"\nrate_usd_per_s = 0.001\nmodel = \"fal-ai/x\"\napi_key_env = \"TAILCUT_TEST_UNSET_FAL_KEY\"\n";
    let c = Config::parse(text, "t.toml").unwrap();
    let p = c.provider("p").unwrap();
    assert!(p.is_paid());
    assert!(p.try_entry("t.toml", false).is_ok());
    let e = p.try_entry("t.toml", true).unwrap_err().to_string();
    assert_eq!(
        e,
        "t.toml: key `providers.p.api_key_env`: environment variable `TAILCUT_TEST_UNSET_FAL_KEY` is not set (the fal credential)"
    );
}
