//! GPUHedge YAML → tailcut TOML (`tailcut config import-gpuhedge`).
//!
//! Providers keep their names, rates and idle windows; `adapter: http` specs carry over
//! with their field names; RunPod endpoints map to the RunPod provider module; Modal and
//! Cerebrium SDK settings are kept as comments because tailcut reaches them over HTTP (a
//! Modal job endpoint URL, a Cerebrium function URL).
//!
//! Every key and string taken from the YAML is written by `toml_edit` (a key quoted
//! where it is not a bare key, a string escaped), never pasted into the text: no name
//! can close its table and open one of its own. The YAML is bounded before it is parsed
//! ([`MAX_BYTES`], [`MAX_FLOW_DEPTH`]): the YAML parser takes time quadratic in the
//! nesting of flow collections (200 KB of `[` took 23 s).

use serde_json::Value;

/// The largest YAML file imported: 256 KiB. GPUHedge's configs are a few KB; the bound
/// keeps a hostile file's parse short.
pub const MAX_BYTES: usize = 256 << 10;

/// The deepest nesting of flow collections (`[`, `{`) imported. GPUHedge's configs nest
/// three or four deep; the YAML parser's time grows with the square of this depth.
pub const MAX_FLOW_DEPTH: usize = 32;

/// Why a GPUHedge file could not be imported: one line naming the key or the place.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ImportError {
    /// The file is past [`MAX_BYTES`].
    #[error("{bytes} bytes: expected at most {MAX_BYTES} (256 KiB) for a GPUHedge config")]
    TooLarge {
        /// Its size.
        bytes: usize,
    },
    /// Flow collections nest past [`MAX_FLOW_DEPTH`].
    #[error("line {line}: flow collections (`[`, `{{`) nested deeper than {MAX_FLOW_DEPTH} levels")]
    TooDeep {
        /// The line where the limit was passed.
        line: usize,
    },
    /// The file is not YAML.
    #[error("not YAML: {reason}")]
    NotYaml {
        /// The parser's message.
        reason: String,
    },
    /// No `providers` map.
    #[error("no `providers` map")]
    NoProviders,
    /// A provider lacks a key the import needs.
    #[error("providers.{provider}.{key} missing")]
    Missing {
        /// The provider's name, escaped for display.
        provider: String,
        /// The key.
        key: &'static str,
    },
    /// A provider's adapter is not one tailcut has.
    #[error("providers.{provider}: unknown adapter `{adapter}`")]
    UnknownAdapter {
        /// The provider's name, escaped for display.
        provider: String,
        /// The adapter, escaped for display.
        adapter: String,
    },
}

/// A TOML key: bare when it can be, else a quoted string.
fn key(name: &str) -> String {
    toml_edit::Key::new(name).to_string()
}

/// A TOML string value.
fn q(s: &str) -> String {
    toml_edit::Value::from(s).to_string().trim().to_string()
}

/// A TOML float (`inf` and `nan` included, for the config's range check to refuse).
fn num(x: f64) -> String {
    toml_edit::Value::from(x).to_string().trim().to_string()
}

/// Converts a JSON value into an inline TOML value.
fn inline(v: &Value) -> String {
    match v {
        Value::Null => "\"\"".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i.to_string(),
            (None, Some(x)) => num(x),
            (None, None) => q(&n.to_string()),
        },
        Value::String(s) => q(s),
        Value::Array(a) => format!("[{}]", a.iter().map(inline).collect::<Vec<_>>().join(", ")),
        Value::Object(m) => {
            format!("{{ {} }}", m.iter().map(|(k, v)| format!("{} = {}", key(k), inline(v))).collect::<Vec<_>>().join(", "))
        }
    }
}

/// Refuses a file past [`MAX_BYTES`] or with flow collections nested past
/// [`MAX_FLOW_DEPTH`], in one pass over its bytes (quoted scalars and comments skipped).
/// A `[` or `{` inside a plain scalar counts too: the bound is far above real configs.
pub fn check_bounds(yaml: &str) -> Result<(), ImportError> {
    if yaml.len() > MAX_BYTES {
        return Err(ImportError::TooLarge { bytes: yaml.len() });
    }
    #[derive(PartialEq)]
    enum In {
        Plain,
        Double,
        Single,
        Comment,
    }
    let (mut state, mut depth, mut line, mut prev) = (In::Plain, 0usize, 1usize, b'\n');
    let mut bytes = yaml.bytes();
    while let Some(b) = bytes.next() {
        if b == b'\n' {
            line += 1;
        }
        match state {
            In::Plain => match b {
                b'"' => state = In::Double,
                b'\'' => state = In::Single,
                b'#' if prev.is_ascii_whitespace() => state = In::Comment,
                b'[' | b'{' => {
                    depth += 1;
                    if depth > MAX_FLOW_DEPTH {
                        return Err(ImportError::TooDeep { line });
                    }
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            },
            In::Double => match b {
                // An escape: the next byte is taken with it (a line break counted).
                b'\\' => line += usize::from(bytes.next() == Some(b'\n')),
                b'"' => state = In::Plain,
                _ => {}
            },
            // `''` inside a single-quoted scalar closes and reopens it: the same to us.
            In::Single if b == b'\'' => state = In::Plain,
            In::Single => {}
            In::Comment if b == b'\n' => state = In::Plain,
            In::Comment => {}
        }
        prev = b;
    }
    Ok(())
}

/// GPUHedge YAML → tailcut TOML (not yet validated: `Config::parse` it).
pub fn import_gpuhedge(yaml: &str) -> Result<String, ImportError> {
    check_bounds(yaml)?;
    let v: Value = serde_yaml::from_str(yaml).map_err(|e| ImportError::NotYaml { reason: e.to_string() })?;
    let mut out = String::from("# Imported from a GPUHedge config by `tailcut config import-gpuhedge`.\n\n");
    let cap = v.pointer("/timeouts_s/moss").and_then(Value::as_f64).unwrap_or(300.0);
    out.push_str(&format!("[race]\nmax_live = 2\ncap_s = {}\n\n", num(cap)));
    if let Some(b) = v.get("budget") {
        out.push_str("[budget]\n");
        if let Some(x) = b.get("operational_stop").and_then(Value::as_f64) {
            out.push_str(&format!("soft_stop_usd = {}\n", num(x)));
        }
        if let Some(x) = b.get("absolute_ceiling").and_then(Value::as_f64) {
            out.push_str(&format!("hard_stop_usd = {}\n", num(x)));
        }
        out.push('\n');
    }
    out.push_str("[validator]\nname = \"wav\"\n\n");
    let providers = v.get("providers").and_then(Value::as_object).ok_or(ImportError::NoProviders)?;
    let mut names = Vec::new();
    for (name, p) in providers {
        out.push_str(&provider(name, p)?);
        out.push('\n');
        names.push(name.clone());
    }
    if let Some(pol) = v.get("policy") {
        let primary = pol.get("primary").and_then(Value::as_str).unwrap_or_else(|| names.first().map_or("", String::as_str));
        let delay = pol.get("hedge_after_ms").and_then(Value::as_u64).unwrap_or(10_000);
        let hedges: Vec<String> = pol
            .get("hedge_choose_one_of")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        for h in hedges.iter().filter(|h| names.contains(h) && h.as_str() != primary) {
            out.push_str(&format!(
                "[policies.{}]\nkind = \"hedge\"\nprimary = {}\nhedge = {}\ndelay_ms = {delay}\n\n",
                key(&format!("hedge-{h}")),
                q(primary),
                q(h)
            ));
        }
        if names.iter().any(|n| n == primary) {
            out.push_str(&format!("[policies.single]\nkind = \"single\"\nprovider = {}\n\n", q(primary)));
        }
    }
    if let Some(d) = v.pointer("/slo/report_deadlines_s").and_then(Value::as_array) {
        out.push_str(&format!(
            "[replay]\ndeadlines_s = [{}]\n",
            d.iter().filter_map(Value::as_f64).map(|x| (x as i64).to_string()).collect::<Vec<_>>().join(", ")
        ));
        if let Some(k) = v.pointer("/stages/moss/calibration_rounds").and_then(Value::as_u64) {
            out.push_str(&format!("calibration_rounds = {k}\n"));
        }
    }
    Ok(out)
}

/// One provider's table.
fn provider(name: &str, p: &Value) -> Result<String, ImportError> {
    let shown = tailcut_core::text::escaped(name);
    let rate = p
        .get("billed_rate_per_s")
        .and_then(Value::as_f64)
        .ok_or_else(|| ImportError::Missing { provider: shown.to_string(), key: "billed_rate_per_s" })?;
    let idle = p.get("idle_billed_seconds").and_then(Value::as_f64).unwrap_or(0.0);
    let adapter = p.get("adapter").and_then(Value::as_str).unwrap_or(name);
    let mut section = format!("[providers.{}]\nrate_usd_per_s = {}\nidle_window_s = {}\n", key(name), num(rate), num(idle));
    let text = |k: &str, default: &'static str| p.get(k).and_then(Value::as_str).map_or_else(|| q(default), q);
    match adapter {
        "runpod" => section.push_str(&format!("adapter = \"runpod\"\nendpoint_id = {}\n", text("endpoint_id", "REPLACE_ME"))),
        "http" => {
            let spec = p.get("http").ok_or_else(|| ImportError::Missing { provider: shown.to_string(), key: "http" })?;
            section.push_str(&format!("adapter = \"http\"\nhttp = {}\n", inline(spec)));
        }
        "sim" => section.push_str("adapter = \"sim\"\nsim = { profile = \"runpod\" }\n"),
        "modal" => {
            // The app name goes into a comment: no line break may end it early.
            let app = tailcut_core::text::escaped(p.get("app").and_then(Value::as_str).unwrap_or("?"));
            section.push_str(&format!(
                "# GPUHedge used the Modal SDK (app {app:?}); deploy examples/modal_job_endpoint.py and set its URL.\n\
                 adapter = \"modal\"\nurl = \"https://REPLACE--tailcut-jobs-api.modal.run\"\n"
            ));
        }
        "cerebrium" => section.push_str(&format!(
            "adapter = \"cerebrium\"\nproject_id = {}\napp = {}\nfunction = {}\n",
            text("project_id", "p-REPLACE"),
            text("app", "REPLACE"),
            text("function", "tts")
        )),
        other => {
            return Err(ImportError::UnknownAdapter {
                provider: shown.to_string(),
                adapter: tailcut_core::text::escaped(other).to_string(),
            })
        }
    }
    Ok(section)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_the_reference_benchmark_config_shape() {
        let yaml = r#"
model: moss
timeouts_s: { moss: 300 }
budget: { operational_stop: 45, absolute_ceiling: 50 }
slo: { primary_deadline_s: 60, report_deadlines_s: [30, 60, 90, 120] }
stages: { moss: { calibration_rounds: 18 } }
policy: { primary: runpod, hedge_after_ms: 10000, hedge_choose_one_of: [modal, myapi] }
providers:
  runpod: { role: primary, gpu: RTX_4090, billed_rate_per_s: 0.000306, gpu_rate_per_s: 0.000306, region: EU, idle_billed_seconds: 60, endpoint_id: abc }
  modal: { role: hedge, gpu: L40S, billed_rate_per_s: 0.000704, gpu_rate_per_s: 0.000542, region: us, app: moss-tts }
  myapi:
    role: hedge
    gpu: L40S
    billed_rate_per_s: 0.0007
    gpu_rate_per_s: 0.0005
    region: us
    adapter: http
    http:
      headers: { Authorization: "Bearer ${MYAPI_KEY}" }
      submit: { method: POST, url: "https://api.example.com/jobs", body: { input: "{request}" }, job_id_path: "job.id" }
      status: { method: GET, url: "https://api.example.com/jobs/{job_id}", state_path: "state", state_map: { waiting: QUEUED } }
      result: { method: GET, url: "https://api.example.com/jobs/{job_id}/result", audio_b64_path: "audio", metrics_path: "metrics" }
      cancel: { method: DELETE, url: "https://api.example.com/jobs/{job_id}" }
"#;
        let toml = import_gpuhedge(yaml).unwrap();
        let c = crate::Config::parse(&toml, "imported").unwrap_or_else(|e| panic!("{e}\n{toml}"));
        assert_eq!(c.providers.len(), 3);
        assert_eq!(c.provider("runpod").unwrap().idle_window_s, 60.0);
        assert!(c.policy("hedge-myapi").is_some() && c.policy("hedge-modal").is_some());
        assert_eq!(c.replay.calibration_rounds, Some(18));
        assert_eq!(c.budget.limits.hard_stop.0, 50_000_000);
    }

    #[test]
    fn keys_are_bare_only_when_they_can_be() {
        assert_eq!(key("runpod-eu_2"), "runpod-eu_2");
        assert_eq!(key("a.b"), "\"a.b\"");
        assert_eq!(key("a]\n[gateway]"), "\"a]\\n[gateway]\"");
        for s in ["x\"\n\u{7f}", "a]\n[gateway]", "'''", "\u{1b}[2J", "\"\"\""] {
            let doc: toml::Table = toml::from_str(&format!("{} = {}", key(s), q(s))).unwrap();
            assert_eq!(doc.get(s).and_then(|v| v.as_str()), Some(s));
        }
    }

    #[test]
    fn deep_flow_nesting_and_huge_files_are_refused_at_once() {
        let deep = format!("providers: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
        let t = std::time::Instant::now();
        let e = import_gpuhedge(&deep).unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("deeper than 32"), "{e}");
        assert!(t.elapsed() < std::time::Duration::from_millis(100), "{:?}", t.elapsed());
        // Brackets in quotes and comments do not count.
        let quoted = format!("providers: {{}}\nx: \"{}\"\ny: '{}' # {}\n", "[".repeat(100), "{".repeat(100), "[".repeat(100));
        assert!(check_bounds(&quoted).is_ok());
        let big = format!("providers: {{}}\n#{}\n", "x".repeat(MAX_BYTES));
        assert!(import_gpuhedge(&big).unwrap_err().to_string().contains("at most 262144"));
    }
}
