//! Fuzzing the configuration loader in bounded time (runs in CI with the other tests).
//!
//! Inputs: arbitrary bytes, text-level mutations (lines dropped, duplicated, truncated,
//! bytes spliced in) and structure-aware mutations (a key's value replaced by NaN,
//! ±inf, 1e308, extremes of i64, wrong types; keys removed or invented) of valid
//! configurations: the built-in one, `examples/sim-walkthrough.toml`, the Kubernetes
//! config map's, a gateway with keys, and the bad-config corpus of `tests/corpus/`.
//!
//! Properties: the loader never panics and never hangs (each case runs on its own
//! thread and must finish within [`CASE_LIMIT`]); every rejection is a `ConfigError`
//! naming a key (`key `...``) or a line (TOML syntax errors); and every accepted
//! configuration can be turned into what the commands build from it (provider
//! entries, policies, every duration) without a panic.
// Tests spawn and read the wall clock freely (clippy.toml's bans are for the gateway's
// own code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tailcut_config::{Config, ConfigError};

/// Longest a single case may take (debug build, on a shared 2-core machine; a case
/// normally takes well under a millisecond).
const CASE_LIMIT: Duration = Duration::from_secs(5);

/// Cases per property.
const BYTES_CASES: u32 = 1500;
const TEXT_CASES: u32 = 1500;
const TREE_CASES: u32 = 3000;

fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(p)
}

/// The gateway configuration of `deploy/k8s/configmap.yaml` (its indented block).
fn configmap_toml() -> String {
    let text = std::fs::read_to_string(repo("deploy/k8s/configmap.yaml")).unwrap_or_default();
    let mut out = String::new();
    let mut inside = false;
    for line in text.lines() {
        if line.trim_start().starts_with("tailcut.toml: |") {
            inside = true;
        } else if inside {
            out.push_str(line.strip_prefix("    ").unwrap_or(line));
            out.push('\n');
        }
    }
    out
}

const GATEWAY_WITH_KEYS: &str = r#"
[budget]
ledger = ":memory:"
[gateway]
store = ":memory:"
header_read_timeout_s = 10
body_read_timeout_s = 30
idle_timeout_s = 60
max_connections = 1000
webhook_allow_private = false
keys = [
  { name = "a", sha256 = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", budget_usd = 0.05, rate_per_s = 2, routes = ["chat"] },
  { name = "b", sha256 = "3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d" },
]
[providers.up]
adapter = "openai"
base_url = "http://127.0.0.1:9/v1"
rate_usd_per_s = 0.0
timeout_s = 30
poll_interval_ms = 500
[providers.sim]
adapter = "sim"
sim = { profile = "runpod", seed = 3, cold_slow_queue_s = [1.0, 2.0], cancel_ack_ms = [10.0, 20.0] }
[providers.sim2]
adapter = "sim"
sim = { profile = "modal" }
[providers.api]
adapter = "http"
rate_usd_per_s = 0.001
http = { submit = { url = "https://x/jobs" }, status = { url = "https://x/jobs/{job_id}" }, result = { url = "https://x/r/{job_id}", poll_interval_s = 1.0 } }
[policies.p]
kind = "single"
provider = "up"
[policies.c]
kind = "cascade"
primary = "sim"
hedge = "api"
fallback = "sim2"
escalate_at_ms = 30000
[routes.chat]
kind = "openai"
models = ["m"]
policy = "p"
first_token_hedge_ms = 500
[routes.jobs]
kind = "jobs"
policy = "c"
[replay]
deadlines_s = [30, 60]
delays_s = [0.0, 5.0]
calibration_rounds = 3
cap_s = 300
"#;

fn seeds() -> &'static [String] {
    static SEEDS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    SEEDS.get_or_init(load_seeds)
}

fn load_seeds() -> Vec<String> {
    let mut seeds = vec![tailcut_config::BUILT_IN.to_string(), GATEWAY_WITH_KEYS.to_string(), configmap_toml()];
    if let Ok(t) = std::fs::read_to_string(repo("examples/sim-walkthrough.toml")) {
        seeds.push(t);
    }
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(corpus).map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
    files.sort();
    seeds.extend(files.iter().filter_map(|p| std::fs::read_to_string(p).ok()));
    for s in &seeds[..3] {
        Config::parse(s, "seed").unwrap_or_else(|e| panic!("a valid seed does not load: {e}"));
    }
    seeds
}

/// Values that have broken loaders: non-finite and huge numbers, extremes, wrong types.
fn nasty_value() -> impl Strategy<Value = toml::Value> {
    use toml::Value as V;
    prop_oneof![
        Just(V::Float(f64::NAN)),
        Just(V::Float(f64::INFINITY)),
        Just(V::Float(f64::NEG_INFINITY)),
        Just(V::Float(1e308)),
        Just(V::Float(-1e308)),
        Just(V::Float(-1.0)),
        Just(V::Float(0.0)),
        Just(V::Float(5e-324)),
        Just(V::Integer(0)),
        Just(V::Integer(-1)),
        Just(V::Integer(i64::MAX)),
        Just(V::Integer(i64::MIN)),
        Just(V::Integer(u32::MAX as i64 + 1)),
        Just(V::String(String::new())),
        Just(V::String(":memory:".into())),
        Just(V::String("none".into())),
        Just(V::Boolean(true)),
        Just(V::Array(vec![V::Float(1e308), V::Float(1e308)])),
        Just(V::Array(vec![V::Float(f64::NAN)])),
        Just(V::Array(vec![])),
        Just(V::Table(toml::Table::new())),
        any::<f64>().prop_map(V::Float),
        any::<i64>().prop_map(V::Integer),
        "[a-z_.]{0,12}".prop_map(V::String),
    ]
}

/// One structural edit, applied at the `pick`-th (mod count) value of the tree.
#[derive(Clone, Debug)]
enum Edit {
    Replace(toml::Value),
    Remove,
    Invent(String, toml::Value),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        6 => nasty_value().prop_map(Edit::Replace),
        2 => Just(Edit::Remove),
        1 => ("[a-z_]{1,10}", nasty_value()).prop_map(|(k, v)| Edit::Invent(k, v)),
    ]
}

/// Counts values (table entries and array items) in depth-first order.
fn count(v: &toml::Value) -> usize {
    match v {
        toml::Value::Table(t) => t.values().map(|x| 1 + count(x)).sum(),
        toml::Value::Array(a) => a.iter().map(|x| 1 + count(x)).sum(),
        _ => 0,
    }
}

/// Applies `edit` to the `n`-th value in depth-first order; returns true once applied.
fn apply(v: &mut toml::Value, n: &mut usize, edit: &Edit) -> bool {
    match v {
        toml::Value::Table(t) => {
            let keys: Vec<String> = t.keys().cloned().collect();
            for k in keys {
                if *n == 0 {
                    match edit {
                        Edit::Replace(x) => {
                            t.insert(k, x.clone());
                        }
                        Edit::Remove => {
                            t.remove(&k);
                        }
                        Edit::Invent(name, x) => {
                            if let Some(toml::Value::Table(inner)) = t.get_mut(&k) {
                                inner.insert(name.clone(), x.clone());
                            } else {
                                t.insert(name.clone(), x.clone());
                            }
                        }
                    }
                    return true;
                }
                *n -= 1;
                if let Some(child) = t.get_mut(&k) {
                    if apply(child, n, edit) {
                        return true;
                    }
                }
            }
            false
        }
        toml::Value::Array(a) => {
            for i in 0..a.len() {
                if *n == 0 {
                    match edit {
                        Edit::Replace(x) | Edit::Invent(_, x) => a[i] = x.clone(),
                        Edit::Remove => {
                            a.remove(i);
                        }
                    }
                    return true;
                }
                *n -= 1;
                if apply(&mut a[i], n, edit) {
                    return true;
                }
            }
            false
        }
        _ => false,
    }
}

/// TOML text for a tree; non-finite floats are written the way TOML spells them.
fn to_text(v: &toml::Value) -> String {
    toml::to_string(v).unwrap_or_default()
}

/// Loads `text` on its own thread within [`CASE_LIMIT`], then checks the properties.
fn check(text: String) -> Result<(), TestCaseError> {
    let started = Instant::now();
    let outcome = tailcut_testkit::fuzz::bounded(CASE_LIMIT, move || Config::parse(&text, "fuzz.toml").map(|c| exercise(&c)))
        .map_err(|why| TestCaseError::fail(format!("the loader failed a case: {why}")))?;
    prop_assert!(started.elapsed() < CASE_LIMIT);
    match outcome {
        Ok(()) => {}
        Err(e @ ConfigError::Invalid { .. }) => {
            let msg = e.to_string();
            let ConfigError::Invalid { key, expected, .. } = &e else { unreachable!() };
            prop_assert!(msg.starts_with("fuzz.toml: key `"), "{}", msg);
            prop_assert!(!expected.is_empty(), "no expectation: {}", msg);
            prop_assert!(!key.is_empty() && key != ".", "no key: {}", msg);
        }
        Err(e @ ConfigError::Syntax { .. }) => {
            let msg = e.to_string();
            prop_assert!(msg.starts_with("fuzz.toml: invalid TOML") && msg.contains("line"), "{}", msg);
        }
        Err(e @ ConfigError::Read { .. }) => prop_assert!(false, "parse read a file: {}", e),
    }
    Ok(())
}

/// What the commands derive from an accepted configuration, which must not panic.
fn exercise(c: &Config) {
    let entries = c.provider_entries();
    for e in &entries {
        let _ = e.pricing.projected_submission();
    }
    for (_, spec) in &c.policies {
        let _ = spec.build(&entries);
    }
    let now = std::time::Instant::now();
    for d in [c.race.cap, c.gateway.total_timeout, c.gateway.job_retention, c.gateway.admission_wait, c.gateway.idle_timeout] {
        let _ = now + d;
    }
    for p in &c.providers {
        if let Some((profile, _)) = p.sim_profile() {
            for (lo, hi) in [profile.submit_latency_s, profile.warm_run_s, profile.cold_slow_queue_s, profile.cold_slow_run_s] {
                let _ = Duration::from_secs_f64(lo) + Duration::from_secs_f64(hi);
            }
            for (_, hi) in [profile.cancel_ack_ms, profile.cancel_confirm_ms] {
                let _ = Duration::from_secs_f64(hi / 1000.0);
            }
            let _ = Duration::from_secs_f64(profile.idle_window_s + profile.billing_granularity_s);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: BYTES_CASES, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic_or_hang(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        check(String::from_utf8_lossy(&bytes).into_owned())?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: TEXT_CASES, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn text_mutations_of_valid_configs_never_panic_or_hang(
        seed in any::<prop::sample::Index>(),
        op in 0u8..4,
        at in any::<prop::sample::Index>(),
        junk in "[\\[\\]=\"'{},.\\na-z0-9_ +-]{0,16}",
    ) {
        let text = seed.get(seeds()).clone();
        let lines: Vec<&str> = text.lines().collect();
        let mutated = match op {
            // Drop a line.
            0 if !lines.is_empty() => {
                let i = at.index(lines.len());
                lines.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, l)| *l).collect::<Vec<_>>().join("\n")
            }
            // Duplicate a line (duplicate keys and tables).
            1 if !lines.is_empty() => {
                let i = at.index(lines.len());
                let mut v = lines.clone();
                v.insert(i, lines[i]);
                v.join("\n")
            }
            // Truncate at a byte (on a char boundary).
            2 => {
                let mut i = at.index(text.len() + 1);
                while !text.is_char_boundary(i) {
                    i -= 1;
                }
                text[..i].to_string()
            }
            // Splice junk in.
            _ => {
                let mut i = at.index(text.len() + 1);
                while !text.is_char_boundary(i) {
                    i -= 1;
                }
                format!("{}{junk}{}", &text[..i], &text[i..])
            }
        };
        check(mutated)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: TREE_CASES, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn structural_mutations_of_valid_configs_never_panic_or_hang(
        seed in any::<prop::sample::Index>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), edit()), 1..4),
    ) {
        let Ok(table) = seed.get(seeds()).parse::<toml::Table>() else { return Ok(()) };
        let mut tree = toml::Value::Table(table);
        for (at, e) in &edits {
            let n = count(&tree);
            if n == 0 {
                break;
            }
            let mut i = at.index(n);
            apply(&mut tree, &mut i, e);
        }
        check(to_text(&tree))?;
    }
}

#[test]
fn the_seed_corpus_loads_or_is_refused_cleanly() {
    for s in seeds() {
        check(s.clone()).unwrap();
    }
}
