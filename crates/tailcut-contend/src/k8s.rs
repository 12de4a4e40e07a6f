//! Kubernetes manifests to run the same experiment on a GPU cluster:
//!
//! - the NVIDIA device-plugin sharing config (time-slicing or MPS, the plugin's exact
//!   `version: v1` schema) in a ConfigMap, with the node label that selects it;
//! - MIG layouts in the mig-parted `mig-configs` schema, validated against the GPU
//!   model's profiles and placement rules, with the `nvidia.com/mig-<profile>` resources
//!   the agents request (GPU Operator `mig.strategy=mixed`);
//! - a results volume and one Job per agent and arm running `tailcut contend agent`,
//!   whose sample files `tailcut contend report` reads.

use crate::agent::AgentSpec;
use crate::mig::{self, GpuModel, MigError};
use crate::protocol::{agent_names, Mode};
use serde_json::{json, Value};
use std::time::Duration;

/// What to generate.
#[derive(Clone, Debug)]
pub struct K8sSettings {
    /// Sharing mode (time-slicing, mps, mig or dedicated).
    pub mode: Mode,
    /// Replicas advertised per physical GPU (time-slicing, MPS).
    pub replicas: u32,
    /// The agents.
    pub agents: Vec<AgentSpec>,
    /// GPU model (MIG validation).
    pub gpu: Option<String>,
    /// MIG layout, e.g. `3g.40gb,2g.20gb`.
    pub mig_layout: Option<String>,
    /// Namespace of the agent Jobs.
    pub namespace: String,
    /// Namespace of the device plugin (where its config map lives).
    pub plugin_namespace: String,
    /// Container image with the `tailcut` binary built with `--features cuda`.
    pub image: String,
    /// Warm-up per agent run.
    pub warmup: Duration,
    /// Measurement window per agent run.
    pub duration: Duration,
    /// Pin every Job to this node (`kubernetes.io/hostname`).
    pub node: Option<String>,
}

/// Why manifests could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum K8sError {
    /// Bad settings.
    #[error("{0}")]
    Invalid(#[from] BadManifest),
    /// Impossible MIG layout.
    #[error("MIG layout: {0}")]
    Mig(#[from] MigError),
    /// YAML encoding failed.
    #[error("YAML: {0}")]
    Yaml(#[from] serde_yaml::Error),
}

/// Settings no manifest can be generated for.
#[derive(Debug, thiserror::Error)]
pub enum BadManifest {
    /// Fewer than two replicas per GPU.
    #[error("--replicas must be at least 2 for {mode} (the device plugin rejects fewer)")]
    TooFewReplicas {
        /// The mode.
        mode: &'static str,
    },
    /// A mode without a sharing config.
    #[error("{mode} has no device-plugin sharing config")]
    NoSharingConfig {
        /// The mode.
        mode: &'static str,
    },
    /// No agent given.
    #[error("give at least one --agent")]
    NoAgents,
    /// A CPU agent in a GPU experiment.
    #[error("`{kind}` is a CPU agent; GPU experiments use cuda-fft, cuda-gemm or http agents")]
    CpuAgent {
        /// Its kind.
        kind: &'static str,
    },
    /// `--mode mig` without `--gpu`.
    #[error("--mode mig needs --gpu (a100-40gb, a100-80gb, h100-80gb, h200-141gb)")]
    NoGpuModel,
    /// `--mode mig` without a layout.
    #[error("--mode mig needs --mig-layout, e.g. 3g.40gb,2g.20gb")]
    NoMigLayout,
    /// Fewer MIG instances than agents.
    #[error("the layout has {instances} instance(s) for {agents} agents")]
    TooFewInstances {
        /// Instances in the layout.
        instances: usize,
        /// Agents to place.
        agents: usize,
    },
    /// A CPU mode.
    #[error("{mode} is a CPU mode; use time-slicing, mps, mig or dedicated")]
    CpuMode {
        /// The mode.
        mode: &'static str,
    },
}

/// The device-plugin config document (as a value) for time-slicing or MPS.
pub fn device_plugin_config(mode: Mode, replicas: u32) -> Result<Value, K8sError> {
    if replicas < 2 {
        return Err(BadManifest::TooFewReplicas { mode: mode.name() }.into());
    }
    let resources = json!([{ "name": "nvidia.com/gpu", "replicas": replicas }]);
    let sharing = match mode {
        Mode::TimeSlicing => {
            json!({ "timeSlicing": { "renameByDefault": false, "failRequestsGreaterThanOne": true, "resources": resources } })
        }
        Mode::Mps => json!({ "mps": { "renameByDefault": false, "failRequestsGreaterThanOne": true, "resources": resources } }),
        other => return Err(BadManifest::NoSharingConfig { mode: other.name() }.into()),
    };
    let mut flags = json!({ "migStrategy": "none" });
    if mode == Mode::TimeSlicing {
        // Hand replicas of the same physical GPU out first, so the agents really share a card.
        flags["plugin"] = json!({ "sharedDevicesAllocationPolicy": "packed" });
    }
    if mode == Mode::Mps {
        flags["mpsRoot"] = json!("/run/nvidia/mps");
    }
    Ok(json!({ "version": "v1", "flags": flags, "sharing": sharing }))
}

/// The mig-parted config document (as a value) for one layout, after validation.
pub fn mig_parted_config(model: &GpuModel, layout: &[(String, u32)], name: &str) -> Result<Value, K8sError> {
    mig::validate_layout(model, layout)?;
    let devices: serde_json::Map<String, Value> = layout.iter().map(|(p, c)| (p.clone(), json!(c))).collect();
    Ok(json!({
        "version": "v1",
        "mig-configs": {
            "all-disabled": [{ "devices": "all", "mig-enabled": false }],
            name: [{ "devices": "all", "mig-enabled": true, "mig-devices": devices }]
        }
    }))
}

fn yaml(v: &Value) -> Result<String, K8sError> {
    Ok(serde_yaml::to_string(v)?)
}

fn job(s: &K8sSettings, name: &str, spec: &AgentSpec, arm: &str, resource: (&str, u32), order: usize) -> Value {
    let mut args = vec![
        "contend".to_string(),
        "agent".into(),
        "--kind".into(),
        spec.kind.name().into(),
        "--size".into(),
        spec.size.to_string(),
        "--batch".into(),
        spec.batch.to_string(),
        "--warmup-ms".into(),
        s.warmup.as_millis().to_string(),
        "--duration-ms".into(),
        s.duration.as_millis().to_string(),
        "--name".into(),
        name.into(),
        "--arm".into(),
        arm.into(),
        "--out".into(),
        format!("/results/{}-{arm}.json", name.replace('#', "-")),
    ];
    if let Some(url) = &spec.url {
        args.extend(["--url".into(), url.clone(), "--rate".into(), spec.rate_per_s.to_string()]);
    }
    let job_name = format!("tailcut-contend-{}-{arm}", name.replace('#', "-"));
    let mut pod_spec = json!({
        "restartPolicy": "Never",
        "containers": [{
            "name": "agent",
            "image": s.image,
            "command": ["tailcut"],
            "args": args,
            "resources": { "limits": { resource.0: resource.1 } },
            "volumeMounts": [{ "name": "results", "mountPath": "/results" }]
        }],
        "volumes": [{ "name": "results", "persistentVolumeClaim": { "claimName": "tailcut-contend-results" } }]
    });
    if let Some(node) = &s.node {
        pod_spec["nodeSelector"] = json!({ "kubernetes.io/hostname": node });
    }
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name,
            "namespace": s.namespace,
            "labels": { "app.kubernetes.io/name": "tailcut-contend", "tailcut.dev/agent": name.replace('#', "-"), "tailcut.dev/arm": arm },
            "annotations": { "tailcut.dev/order": order.to_string(), "tailcut.dev/mode": s.mode.name() }
        },
        "spec": {
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 86400,
            "template": { "metadata": { "labels": { "app.kubernetes.io/name": "tailcut-contend", "tailcut.dev/arm": arm } }, "spec": pod_spec }
        }
    })
}

/// All manifests as one multi-document YAML string, with instructions in comments.
pub fn generate(s: &K8sSettings) -> Result<String, K8sError> {
    if s.agents.is_empty() {
        return Err(BadManifest::NoAgents.into());
    }
    if let Some(cpu) = s.agents.iter().find(|a| matches!(a.kind.name(), "fft" | "gemm" | "membw")) {
        return Err(BadManifest::CpuAgent { kind: cpu.kind.name() }.into());
    }
    let names = agent_names(&s.agents);
    let mut docs: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut resources: Vec<(String, u32)> = vec![("nvidia.com/gpu".into(), 1); s.agents.len()];
    docs.push(yaml(&json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": s.namespace } }))?);
    match s.mode {
        Mode::TimeSlicing | Mode::Mps => {
            let key = format!("tailcut-{}", s.mode.name());
            let cfg = device_plugin_config(s.mode, s.replicas)?;
            docs.push(yaml(&json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": { "name": "tailcut-contend-device-plugin", "namespace": s.plugin_namespace },
                "data": { &key: yaml(&cfg)? }
            }))?);
            notes.push(format!(
                "helm upgrade -i nvdp nvdp/nvidia-device-plugin -n {} --set config.name=tailcut-contend-device-plugin --set config.default={key}",
                s.plugin_namespace
            ));
            notes.push(format!("kubectl label node <node> nvidia.com/device-plugin.config={key} --overwrite"));
            notes.push(format!("the node then advertises nvidia.com/gpu: {} per physical GPU", s.replicas));
            if s.mode == Mode::Mps {
                notes.push("MPS needs the plugin's mps-control-daemon (mpsRoot /run/nvidia/mps) and full GPUs (no MIG)".into());
            }
        }
        Mode::Mig => {
            let model = mig::model(s.gpu.as_deref().ok_or_else(|| K8sError::from(BadManifest::NoGpuModel))?)?;
            let layout = mig::parse_layout(s.mig_layout.as_deref().ok_or_else(|| K8sError::from(BadManifest::NoMigLayout))?)?;
            let placed = mig::validate_layout(&model, &layout)?;
            if placed.len() < s.agents.len() {
                return Err(BadManifest::TooFewInstances { instances: placed.len(), agents: s.agents.len() }.into());
            }
            for (i, r) in resources.iter_mut().enumerate() {
                *r = (format!("nvidia.com/mig-{}", placed[i].profile), 1);
            }
            let cfg = mig_parted_config(&model, &layout, "tailcut-contend")?;
            docs.push(yaml(&json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": { "name": "tailcut-contend-mig-parted", "namespace": "gpu-operator" },
                "data": { "config.yaml": yaml(&cfg)? }
            }))?);
            notes.push("helm upgrade -i gpu-operator nvidia/gpu-operator -n gpu-operator --set mig.strategy=mixed --set migManager.config.name=tailcut-contend-mig-parted".into());
            notes.push("kubectl label node <node> nvidia.com/mig.config=tailcut-contend --overwrite   # wait for nvidia.com/mig.config.state=success".into());
            notes.push(format!(
                "layout on {}: {}",
                model.name,
                placed.iter().map(|p| format!("{}@slice{}", p.profile, p.start)).collect::<Vec<_>>().join(", ")
            ));
        }
        Mode::Dedicated => notes.push("dedicated: no sharing config; each agent requests one whole nvidia.com/gpu".into()),
        other => return Err(BadManifest::CpuMode { mode: other.name() }.into()),
    }
    docs.push(yaml(&json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": { "name": "tailcut-contend-results", "namespace": s.namespace },
        "spec": { "accessModes": ["ReadWriteMany"], "resources": { "requests": { "storage": "1Gi" } } }
    }))?);
    let mut order = 0;
    for (i, spec) in s.agents.iter().enumerate() {
        order += 1;
        docs.push(yaml(&job(s, &names[i], spec, "solo", (&resources[i].0, resources[i].1), order))?);
    }
    order += 1;
    for (i, spec) in s.agents.iter().enumerate() {
        docs.push(yaml(&job(s, &names[i], spec, "shared", (&resources[i].0, resources[i].1), order))?);
    }
    let mut out = String::new();
    out.push_str("# Generated by `tailcut contend k8s`. Run the experiment:\n");
    // Nothing publishes an image: the Jobs pull the one the user built from this repo.
    out.push_str(&format!(
        "#   build and push the image the Jobs run (from the tailcut repository; --image names another):\n\
         #     docker build --build-arg FEATURES=cuda -t {img} . && docker push {img}\n",
        img = s.image
    ));
    for n in &notes {
        out.push_str(&format!("#   {n}\n"));
    }
    out.push_str(&format!(
        "#   kubectl apply -f this.yaml -l '!tailcut.dev/arm'   # namespace, config, volume\n\
         #   for each solo Job in tailcut.dev/order order: kubectl apply it, then kubectl -n {ns} wait --for=condition=complete job/<name> --timeout=30m\n\
         #   kubectl apply the shared Jobs together (same tailcut.dev/order), and wait for them\n\
         #   copy /results from the volume and run: tailcut contend report <dir>\n",
        ns = s.namespace
    ));
    for d in docs {
        out.push_str("---\n");
        out.push_str(&d);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::agent::AgentKind;
    use serde::Deserialize;

    #[test]
    fn the_manifest_says_how_to_build_the_image_it_names() {
        let mut s = settings(Mode::TimeSlicing);
        s.image = "registry.example/me/tailcut:cuda".into();
        let text = generate(&s).unwrap();
        assert!(text.contains("docker build --build-arg FEATURES=cuda -t registry.example/me/tailcut:cuda ."), "{text}");
        assert!(text.contains("image: registry.example/me/tailcut:cuda"));
    }

    fn settings(mode: Mode) -> K8sSettings {
        K8sSettings {
            mode,
            replicas: 4,
            agents: vec![AgentSpec::new(AgentKind::CudaFft), AgentSpec::new(AgentKind::CudaGemm)],
            gpu: Some("h100-80gb".into()),
            mig_layout: Some("3g.40gb,2g.20gb,1g.10gb".into()),
            namespace: "tailcut".into(),
            plugin_namespace: "nvidia-device-plugin".into(),
            image: "ghcr.io/example/tailcut:cuda".into(),
            warmup: Duration::from_secs(5),
            duration: Duration::from_secs(60),
            node: Some("gpu-node-1".into()),
        }
    }

    fn docs(text: &str) -> Vec<serde_yaml::Value> {
        serde_yaml::Deserializer::from_str(text).map(|d| serde_yaml::Value::deserialize(d).unwrap()).filter(|v| !v.is_null()).collect()
    }

    fn kind<'a>(docs: &'a [serde_yaml::Value], k: &str) -> Vec<&'a serde_yaml::Value> {
        docs.iter().filter(|d| d["kind"].as_str() == Some(k)).collect()
    }

    #[test]
    fn time_slicing_config_matches_the_plugin_schema() {
        let text = generate(&settings(Mode::TimeSlicing)).unwrap();
        let d = docs(&text);
        let cm = kind(&d, "ConfigMap")[0];
        let inner: serde_yaml::Value = serde_yaml::from_str(cm["data"]["tailcut-time-slicing"].as_str().unwrap()).unwrap();
        assert_eq!(inner["version"].as_str(), Some("v1"));
        let res = &inner["sharing"]["timeSlicing"]["resources"][0];
        assert_eq!(res["name"].as_str(), Some("nvidia.com/gpu"));
        assert_eq!(res["replicas"].as_u64(), Some(4));
        assert_eq!(inner["flags"]["plugin"]["sharedDevicesAllocationPolicy"].as_str(), Some("packed"));
        let jobs = kind(&d, "Job");
        assert_eq!(jobs.len(), 4, "solo and shared per agent");
        let c = &jobs[0]["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"].as_u64(), Some(1));
        let args: Vec<&str> = c["args"].as_sequence().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        assert_eq!(&args[..4], ["contend", "agent", "--kind", "cuda-fft"]);
        assert!(args.contains(&"/results/cuda-fft-solo.json"));
        assert_eq!(jobs[0]["spec"]["template"]["spec"]["nodeSelector"]["kubernetes.io/hostname"].as_str(), Some("gpu-node-1"));
        assert!(text.contains("nvidia.com/device-plugin.config=tailcut-time-slicing"));
    }

    #[test]
    fn mps_config_and_replica_floor() {
        let d = docs(&generate(&settings(Mode::Mps)).unwrap());
        let inner: serde_yaml::Value = serde_yaml::from_str(kind(&d, "ConfigMap")[0]["data"]["tailcut-mps"].as_str().unwrap()).unwrap();
        assert_eq!(inner["sharing"]["mps"]["resources"][0]["replicas"].as_u64(), Some(4));
        let mut s = settings(Mode::Mps);
        s.replicas = 1;
        assert!(generate(&s).unwrap_err().to_string().contains("at least 2"));
    }

    #[test]
    fn mig_layout_is_validated_and_resources_named() {
        let d = docs(&generate(&settings(Mode::Mig)).unwrap());
        let cm = kind(&d, "ConfigMap")[0];
        let inner: serde_yaml::Value = serde_yaml::from_str(cm["data"]["config.yaml"].as_str().unwrap()).unwrap();
        let layout = &inner["mig-configs"]["tailcut-contend"][0];
        assert_eq!(layout["devices"].as_str(), Some("all"));
        assert_eq!(layout["mig-enabled"].as_bool(), Some(true));
        assert_eq!(layout["mig-devices"]["3g.40gb"].as_u64(), Some(1));
        let jobs = kind(&d, "Job");
        let limits: Vec<String> = jobs
            .iter()
            .map(|j| {
                j["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
                    .as_mapping()
                    .unwrap()
                    .keys()
                    .next()
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert!(limits.iter().all(|l| l.starts_with("nvidia.com/mig-")), "{limits:?}");
        let mut bad = settings(Mode::Mig);
        bad.mig_layout = Some("3g.40gb,3g.40gb,1g.10gb".into());
        assert!(generate(&bad).unwrap_err().to_string().contains("memory slices"));
        bad.mig_layout = Some("1g.5gb".into());
        assert!(generate(&bad).unwrap_err().to_string().contains("does not exist on H100-80GB"));
    }

    #[test]
    fn cpu_agents_and_cpu_modes_are_rejected() {
        let mut s = settings(Mode::TimeSlicing);
        s.agents = vec![AgentSpec::new(AgentKind::Fft)];
        assert!(generate(&s).is_err());
        assert!(generate(&settings(Mode::SameCore)).is_err());
    }
}
