//! The corpus of bad configurations (`tests/corpus/*.toml`, each naming the key its
//! error must name in a `# expect: KEY` first line): every one is refused at load with
//! a `ConfigError` naming the file and that key, never accepted and never a panic.
//! They are also the seeds of the loader's fuzz test (`fuzz_loader.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use std::path::{Path, PathBuf};
use tailcut_config::{AuthMode, Config, ConfigError};
use tailcut_testkit::config::{openai_provider, single_chat_route};

fn corpus() -> Vec<(PathBuf, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|x| x == "toml")).collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let key =
                text.lines().next().and_then(|l| l.strip_prefix("# expect: ")).unwrap_or_else(|| panic!("{}: no expect line", p.display()));
            (p.clone(), key.to_string())
        })
        .collect()
}

#[test]
fn every_bad_config_in_the_corpus_is_refused_naming_its_key() {
    let cases = corpus();
    assert!(cases.len() >= 25, "corpus shrank: {}", cases.len());
    for (path, key) in cases {
        match Config::load(&path) {
            Ok(_) => panic!("{} was accepted (expected an error naming `{key}`)", path.display()),
            Err(e @ ConfigError::Invalid { .. }) => {
                let msg = e.to_string();
                assert!(msg.starts_with(&format!("{}: key `{key}`:", path.display())), "{}: {msg}", path.display());
            }
            Err(e) => panic!("{}: not a key error: {e}", path.display()),
        }
    }
}

/// A provider `up` served as the OpenAI route `chat` through policy `p`.
fn routes() -> String {
    format!("{}{}", openai_provider("up", "http://127.0.0.1:9/v1"), single_chat_route("p", "up"))
}

const SHA: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

#[test]
fn no_keys_needs_an_explicit_auth_none_to_serve() {
    let routes = routes();
    // `keys = []` used to turn authentication off silently.
    let c = Config::parse(&format!("[gateway]\nkeys = []\n{routes}"), "t.toml").unwrap();
    assert_eq!(c.gateway.auth, AuthMode::Keys, "keys is the default");
    let e = c.gateway.check_serving("t.toml").unwrap_err().to_string();
    assert!(e.starts_with("t.toml: key `gateway.keys`"), "{e}");
    assert!(e.contains("auth = \"none\"") && e.contains("sha256sum"), "says how to fix it: {e}");
    assert!(c.gateway.auth_warning().is_none());

    let c = Config::parse(&format!("[gateway]\nauth = \"none\"\n{routes}"), "t.toml").unwrap();
    assert_eq!(c.gateway.auth, AuthMode::None);
    c.gateway.check_serving("t.toml").unwrap();
    assert!(c.gateway.auth_warning().unwrap().contains("every route is unauthenticated"));

    let c = Config::parse(
        &format!("[gateway]\nkeys = [{{ name = \"a\", sha256 = \"{SHA}\", budget_usd = 0.05, rate_per_s = 2 }}]\n{routes}"),
        "t",
    )
    .unwrap();
    c.gateway.check_serving("t").unwrap();
    assert_eq!(c.gateway.keys[0].budget_usd, Some(0.05));
}

#[test]
fn new_gateway_settings_have_their_defaults_and_are_range_checked() {
    let g = Config::parse("", "t").unwrap().gateway;
    assert!(!g.webhook_allow_private);
    assert_eq!(g.header_read_timeout.as_secs(), 10);
    assert_eq!(g.body_read_timeout.as_secs(), 30);
    assert_eq!(g.idle_timeout.as_secs(), 60);
    assert_eq!(g.max_connections, None);
    let g = Config::parse(
        "[gateway]\nwebhook_allow_private = true\nheader_read_timeout_s = 2.5\nbody_read_timeout_s = 5\nidle_timeout_s = 7\nmax_connections = 900\n",
        "t",
    )
    .unwrap()
    .gateway;
    assert!(g.webhook_allow_private);
    assert_eq!(g.header_read_timeout.as_millis(), 2500);
    assert_eq!((g.body_read_timeout.as_secs(), g.idle_timeout.as_secs(), g.max_connections), (5, 7, Some(900)));
    for bad in ["header_read_timeout_s = 0", "body_read_timeout_s = -1", "idle_timeout_s = 1e308", "max_connections = -5"] {
        let e = Config::parse(&format!("[gateway]\n{bad}\n"), "t").unwrap_err().to_string();
        let key = bad.split(' ').next().unwrap();
        assert!(e.starts_with(&format!("t: key `gateway.{key}`")), "{e}");
    }
}

#[test]
fn unwritable_ledger_and_store_paths_fail_the_check_naming_the_key() {
    let routes = routes();
    // /proc refuses new files even to root.
    let c =
        Config::parse(&format!("[budget]\nledger = \"/proc/tailcut-test/ledger.sqlite\"\n[gateway]\nauth = \"none\"\n{routes}"), "t.toml")
            .unwrap();
    let e = c.check_writable(true).unwrap_err().to_string();
    assert!(e.starts_with("t.toml: key `budget.ledger`: `/proc/tailcut-test/ledger.sqlite`"), "{e}");
    let c = Config::parse(&format!("[budget]\nledger = \":memory:\"\n[gateway]\nstore = \"/proc/version\"\n{routes}"), "t.toml").unwrap();
    let e = c.check_writable(true).unwrap_err().to_string();
    assert!(e.starts_with("t.toml: key `gateway.store`"), "{e}");
    // The store is only checked for the gateway.
    c.check_writable(false).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ok = format!(
        "[budget]\nledger = \"{}/a/ledger.sqlite\"\n[gateway]\nstore = \"{}/b/g.sqlite\"\n",
        dir.path().display(),
        dir.path().display()
    );
    Config::parse(&ok, "t").unwrap().check_writable(true).unwrap();
}

#[test]
fn sane_values_at_the_edges_still_load() {
    let routes = routes();
    let text = format!(
        "[race]\ncap_s = 604800\n[budget]\nhard_stop_usd = 1e9\nsoft_stop_usd = 0\n[gateway]\njob_retention_s = 2592000\nkeys = [{{ name = \"a\", sha256 = \"{SHA}\", budget_usd = 1e-6, rate_per_s = 0.01, routes = [\"chat\"] }}]\n{routes}[providers.x]\nadapter = \"sim\"\nidle_window_s = 0\nsim = {{ profile = \"runpod\", cold_slow_queue_s = [0.0, 604800.0] }}\n"
    );
    let c = Config::parse(&text, "t").unwrap();
    assert_eq!(c.race.cap.as_secs(), 604_800);
}

#[test]
fn learned_policies_load_with_their_defaults() {
    use tailcut_config::PolicySpec;
    let providers = format!("{}{}", openai_provider("a", "http://127.0.0.1:9/v1"), openai_provider("b", "http://127.0.0.1:8/v1"));
    let policies = r#"
[policies.auto]
kind = "auto"
providers = ["a", "b"]
deadline_ms = 250
target_miss = 0.01
[policies.adaptive]
kind = "adaptive"
primary = "a"
hedge = "b"
[policies.singler]
kind = "singler"
primary = "b"
hedge = "a"
extra_load_percent = 2
"#;
    let c = Config::parse(&format!("{providers}{policies}"), "t.toml").unwrap();
    let Some(PolicySpec::Learned(auto)) = c.policy("auto") else { panic!("{:?}", c.policy("auto")) };
    assert_eq!(auto.providers, ["a", "b"]);
    let tailcut_model::LearnedKind::Auto(s) = auto.kind else { panic!() };
    assert_eq!((s.deadline_s, s.target_miss, s.max_extra), (0.25, 0.01, 0.1), "extra load defaults to 10 %");
    assert_eq!(auto.extra_burst, 5.0);
    assert_eq!(auto.label(), "auto:a,b@250ms/miss1%");
    let Some(PolicySpec::Learned(ad)) = c.policy("adaptive") else { panic!() };
    let tailcut_model::LearnedKind::Adaptive(a) = ad.kind else { panic!() };
    assert_eq!((a.quantile, a.min_samples, a.budget), (0.95, 20, 0.05));
    let Some(PolicySpec::Learned(sr)) = c.policy("singler") else { panic!() };
    assert_eq!(sr.providers, ["b", "a"]);
    let tailcut_model::LearnedKind::Singler(x) = sr.kind else { panic!() };
    assert_eq!((x.budget, x.level), (0.02, 0.99));
}
