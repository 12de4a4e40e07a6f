//! `tailcut config show|check`.

use crate::cli::ConfigCommand;
use crate::commands::BadInput;
use std::process::ExitCode;

pub fn run(cmd: &ConfigCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ConfigCommand::Show => {
            print!("{}", tailcut_config::BUILT_IN);
        }
        ConfigCommand::Check { file } => {
            let c = tailcut_config::Config::load(file)?;
            // What `serve` and the live commands check at start, so a file that passes
            // here starts.
            let serves = !c.routes.is_empty();
            if serves {
                c.gateway.check_serving(&c.source)?;
            }
            c.check_writable(serves)?;
            println!(
                "{}: ok — {} provider(s) [{}], {} polic{} [{}]",
                file.display(),
                c.providers.len(),
                c.providers.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", "),
                c.policies.len(),
                if c.policies.len() == 1 { "y" } else { "ies" },
                c.policies.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ")
            );
            if let Some(w) = c.gateway.auth_warning().filter(|_| serves) {
                eprintln!("{w}");
            }
        }
        ConfigCommand::ImportGpuhedge { file } => {
            let text = std::fs::read_to_string(file).map_err(|e| BadInput(format!("{}: {e}", file.display())))?;
            let toml = import_gpuhedge(&text).map_err(|e| BadInput(format!("{}: {e}", file.display())))?;
            // What we emit must itself be valid.
            tailcut_config::Config::parse(&toml, "<imported>").map_err(|e| BadInput(format!("imported config does not validate: {e}")))?;
            print!("{toml}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// Converts a JSON value into an inline TOML value.
fn inline(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "\"\"".into(),
        serde_json::Value::Bool(b) => b.to_string(),
        serde_json::Value::Number(n) => n.to_string(),
        serde_json::Value::String(s) => q(s),
        serde_json::Value::Array(a) => format!("[{}]", a.iter().map(inline).collect::<Vec<_>>().join(", ")),
        serde_json::Value::Object(m) => {
            format!("{{ {} }}", m.iter().map(|(k, v)| format!("{} = {}", q(k), inline(v))).collect::<Vec<_>>().join(", "))
        }
    }
}

/// GPUHedge YAML → tailcut TOML. Providers keep their names, rates and idle windows;
/// `adapter: http` specs carry over with their field names; RunPod endpoints map to the
/// RunPod adapter; Modal and Cerebrium SDK settings are kept as comments because tailcut
/// reaches them over HTTP (a Modal job endpoint URL, a Cerebrium function URL).
pub fn import_gpuhedge(yaml: &str) -> Result<String, String> {
    let v: serde_json::Value = serde_yaml::from_str(yaml).map_err(|e| format!("not YAML: {e}"))?;
    let mut out = String::from("# Imported from a GPUHedge config by `tailcut config import-gpuhedge`.\n\n");
    let cap = v.pointer("/timeouts_s/moss").and_then(serde_json::Value::as_f64).unwrap_or(300.0);
    out.push_str(&format!("[race]\nmax_live = 2\ncap_s = {cap}\n\n"));
    if let Some(b) = v.get("budget") {
        out.push_str("[budget]\n");
        if let Some(x) = b.get("operational_stop").and_then(serde_json::Value::as_f64) {
            out.push_str(&format!("soft_stop_usd = {x}\n"));
        }
        if let Some(x) = b.get("absolute_ceiling").and_then(serde_json::Value::as_f64) {
            out.push_str(&format!("hard_stop_usd = {x}\n"));
        }
        out.push('\n');
    }
    out.push_str("[validator]\nname = \"wav\"\n\n");
    let providers = v.get("providers").and_then(serde_json::Value::as_object).ok_or("no `providers` map")?;
    let mut names = Vec::new();
    for (name, p) in providers {
        let rate = p
            .get("billed_rate_per_s")
            .and_then(serde_json::Value::as_f64)
            .ok_or_else(|| format!("providers.{name}.billed_rate_per_s missing"))?;
        let idle = p.get("idle_billed_seconds").and_then(serde_json::Value::as_f64).unwrap_or(0.0);
        let adapter = p.get("adapter").and_then(serde_json::Value::as_str).unwrap_or(name.as_str());
        let mut section = format!("[providers.{name}]\nrate_usd_per_s = {rate}\nidle_window_s = {idle}\n");
        match adapter {
            "runpod" => {
                let ep = p.get("endpoint_id").and_then(serde_json::Value::as_str).unwrap_or("REPLACE_ME");
                section.push_str(&format!("adapter = \"runpod\"\nendpoint_id = {}\n", q(ep)));
            }
            "http" => {
                let spec = p.get("http").ok_or_else(|| format!("providers.{name}.http missing"))?;
                section.push_str(&format!("adapter = \"http\"\nhttp = {}\n", inline(spec)));
            }
            "sim" => {
                section.push_str("adapter = \"sim\"\nsim = { profile = \"runpod\" }\n");
            }
            "modal" => {
                section.push_str(&format!(
                    "# GPUHedge used the Modal SDK (app {:?}); deploy examples/modal_job_endpoint.py and set its URL.\nadapter = \"modal\"\nurl = \"https://REPLACE--tailcut-jobs-api.modal.run\"\n",
                    p.get("app").and_then(serde_json::Value::as_str).unwrap_or("?")
                ));
            }
            "cerebrium" => {
                let project = p.get("project_id").and_then(serde_json::Value::as_str).unwrap_or("p-REPLACE");
                let app = p.get("app").and_then(serde_json::Value::as_str).unwrap_or("REPLACE");
                let function = p.get("function").and_then(serde_json::Value::as_str).unwrap_or("tts");
                section.push_str(&format!(
                    "adapter = \"cerebrium\"\nproject_id = {}\napp = {}\nfunction = {}\n",
                    q(project),
                    q(app),
                    q(function)
                ));
            }
            other => return Err(format!("providers.{name}: unknown adapter `{other}`")),
        }
        out.push_str(&section);
        out.push('\n');
        names.push(name.clone());
    }
    if let Some(pol) = v.get("policy") {
        let primary = pol.get("primary").and_then(serde_json::Value::as_str).unwrap_or_else(|| names.first().map_or("", String::as_str));
        let delay = pol.get("hedge_after_ms").and_then(serde_json::Value::as_u64).unwrap_or(10_000);
        let hedges: Vec<String> = pol
            .get("hedge_choose_one_of")
            .and_then(serde_json::Value::as_array)
            .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        for h in hedges.iter().filter(|h| names.contains(h) && h.as_str() != primary) {
            out.push_str(&format!(
                "[policies.hedge-{h}]\nkind = \"hedge\"\nprimary = {}\nhedge = {}\ndelay_ms = {delay}\n\n",
                q(primary),
                q(h)
            ));
        }
        if names.iter().any(|n| n == primary) {
            out.push_str(&format!("[policies.single]\nkind = \"single\"\nprovider = {}\n\n", q(primary)));
        }
    }
    if let Some(d) = v.pointer("/slo/report_deadlines_s").and_then(serde_json::Value::as_array) {
        out.push_str(&format!(
            "[replay]\ndeadlines_s = [{}]\n",
            d.iter().filter_map(serde_json::Value::as_f64).map(|x| (x as i64).to_string()).collect::<Vec<_>>().join(", ")
        ));
        if let Some(k) = v.pointer("/stages/moss/calibration_rounds").and_then(serde_json::Value::as_u64) {
            out.push_str(&format!("calibration_rounds = {k}\n"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
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
        let toml = super::import_gpuhedge(yaml).unwrap();
        let c = tailcut_config::Config::parse(&toml, "imported").unwrap_or_else(|e| panic!("{e}\n{toml}"));
        assert_eq!(c.providers.len(), 3);
        assert_eq!(c.provider("runpod").unwrap().idle_window_s, 60.0);
        assert!(c.policy("hedge-myapi").is_some() && c.policy("hedge-modal").is_some());
        assert_eq!(c.replay.calibration_rounds, Some(18));
        assert_eq!(c.budget.limits.hard_stop.0, 50_000_000);
    }
}
