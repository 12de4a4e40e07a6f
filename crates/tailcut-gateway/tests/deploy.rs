//! The shipped Dockerfile and Kubernetes manifests parse and agree with the gateway.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use serde::Deserialize;
use std::path::PathBuf;

fn repo(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(p)
}

fn yaml(p: &str) -> serde_yaml::Value {
    let text = std::fs::read_to_string(repo(p)).unwrap();
    serde_yaml::Value::deserialize(serde_yaml::Deserializer::from_str(&text)).unwrap()
}

#[test]
fn deployment_has_probes_prometheus_annotations_config_and_secret() {
    let d = yaml("deploy/k8s/deployment.yaml");
    assert_eq!(d["kind"].as_str(), Some("Deployment"));
    let t = &d["spec"]["template"];
    assert_eq!(t["metadata"]["annotations"]["prometheus.io/scrape"].as_str(), Some("true"));
    assert_eq!(t["metadata"]["annotations"]["prometheus.io/path"].as_str(), Some("/metrics"));
    let c = &t["spec"]["containers"][0];
    assert_eq!(c["readinessProbe"]["httpGet"]["path"].as_str(), Some("/readyz"));
    assert_eq!(c["livenessProbe"]["httpGet"]["path"].as_str(), Some("/healthz"));
    assert_eq!(c["envFrom"][0]["secretRef"]["name"].as_str(), Some("tailcut-provider-keys"));
    assert_eq!(t["spec"]["volumes"][0]["configMap"]["name"].as_str(), Some("tailcut-config"));
    assert_eq!(c["args"][0].as_str(), Some("serve"));
    let grace = t["spec"]["terminationGracePeriodSeconds"].as_u64().unwrap();
    assert!(grace > 300, "drain needs longer than the total timeout");
}

#[test]
fn service_selects_the_deployment() {
    let s = yaml("deploy/k8s/service.yaml");
    let d = yaml("deploy/k8s/deployment.yaml");
    assert_eq!(s["spec"]["selector"], d["spec"]["selector"]["matchLabels"]);
    assert_eq!(s["spec"]["ports"][0]["targetPort"].as_str(), Some("http"));
}

#[test]
fn configmap_holds_a_valid_gateway_config() {
    let cm = yaml("deploy/k8s/configmap.yaml");
    let toml = cm["data"]["tailcut.toml"].as_str().unwrap();
    let c = tailcut_config::Config::parse(toml, "configmap tailcut.toml").unwrap();
    assert_eq!(c.routes.len(), 2);
    assert_eq!(c.gateway.listen, "0.0.0.0:8080");
    // `serve` would start: no keys only with an explicit `auth = "none"`.
    c.gateway.check_serving("configmap tailcut.toml").unwrap();
    let secret = yaml("deploy/k8s/secret.yaml");
    for k in ["RUNPOD_API_KEY", "CEREBRIUM_TOKEN"] {
        assert!(secret["stringData"].get(k).is_some(), "{k}");
    }
}

#[test]
fn three_replicas_share_postgres_with_migrations_first_and_a_disruption_budget() {
    let d = yaml("deploy/k8s/deployment.yaml");
    assert_eq!(d["spec"]["replicas"].as_u64(), Some(3));
    let t = &d["spec"]["template"]["spec"];
    let init = &t["initContainers"][0];
    assert_eq!(init["args"][0].as_str(), Some("state"));
    assert_eq!(init["args"][1].as_str(), Some("migrate"));
    assert_eq!(init["envFrom"][0]["secretRef"]["name"].as_str(), Some("tailcut-state"));
    let refs: Vec<&str> =
        t["containers"][0]["envFrom"].as_sequence().unwrap().iter().filter_map(|e| e["secretRef"]["name"].as_str()).collect();
    assert!(refs.contains(&"tailcut-state"), "{refs:?}");
    // The config reads the URL from the Secret's variable.
    let cm = yaml("deploy/k8s/configmap.yaml");
    let c = tailcut_config::Config::parse(cm["data"]["tailcut.toml"].as_str().unwrap(), "configmap").unwrap();
    let tailcut_config::StateBackend::Postgres { url } = &c.state.backend else { panic!("the configmap is not on PostgreSQL") };
    assert_eq!(url, &tailcut_config::SecretUrl::Env { var: "TAILCUT_STATE_URL".into() });
    let docs: Vec<serde_yaml::Value> =
        serde_yaml::Deserializer::from_str(&std::fs::read_to_string(repo("deploy/k8s/postgres.yaml")).unwrap())
            .map(|d| serde_yaml::Value::deserialize(d).unwrap())
            .collect();
    let secret = docs.iter().find(|d| d["kind"].as_str() == Some("Secret")).unwrap();
    assert_eq!(secret["metadata"]["name"].as_str(), Some("tailcut-state"));
    assert!(secret["stringData"]["TAILCUT_STATE_URL"].as_str().unwrap().starts_with("postgres://"));
    assert!(docs.iter().any(|d| d["kind"].as_str() == Some("StatefulSet")));
    let pdb = yaml("deploy/k8s/pdb.yaml");
    assert_eq!(pdb["kind"].as_str(), Some("PodDisruptionBudget"));
    assert_eq!(pdb["spec"]["selector"], d["spec"]["selector"]);
    assert!(pdb["spec"]["minAvailable"].as_u64().unwrap() < 3);
}

#[test]
fn dockerfile_runs_the_gateway_as_non_root() {
    let text = std::fs::read_to_string(repo("Dockerfile")).unwrap();
    assert!(text.contains("USER tailcut"));
    assert!(text.contains("\"serve\""));
    assert!(text.contains("EXPOSE 8080"));
}

#[test]
fn scripts_stop_only_the_processes_they_started() {
    // A guard, not a stopper: a benchmark script that once stopped processes by name
    // stopped a user's own gateway too. Scripts must stop only the pids they recorded.
    for entry in std::fs::read_dir(repo("scripts")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "sh") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split('#').next().unwrap_or("");
            // The forbidden commands, spelled in pieces so that a search of the repository
            // for them finds only real uses (this test stops nothing).
            let forbidden = [concat!("pk", "ill"), concat!("kill", "all"), concat!("kill", " 0"), concat!("kill", " -- -"), "$(jobs -p)"];
            for word in forbidden {
                assert!(!code.contains(word), "{}:{}: `{word}` stops processes by name or group: {line}", path.display(), n + 1);
            }
            // Every background process is recorded by pid on the next line.
            if code.trim_end().ends_with('&') {
                let next = text.lines().nth(n + 1).unwrap_or("");
                assert!(next.contains("$!"), "{}:{}: a background process whose pid is not kept: {line}", path.display(), n + 1);
            }
        }
        if text.contains(" &\n") {
            assert!(text.contains("trap "), "{}: starts processes but stops none on exit", path.display());
        }
    }
}
