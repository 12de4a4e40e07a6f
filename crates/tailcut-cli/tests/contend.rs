//! `tailcut contend` through the real binary (short windows so the suite stays fast).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "tests stop loudly, report on stdout")]

use std::path::PathBuf;
use std::process::Command;

fn tailcut(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tailcut")).args(args).output().unwrap()
}

/// The output of a command that must succeed, read as JSON.
fn json_ok(out: &std::process::Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `contend run` of an FFT and a GEMM agent sharing one core, with `extra` arguments.
fn run_fft_gemm(trials: &str, warmup: &str, duration: &str, bootstrap: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "contend",
        "run",
        "--agent",
        "fft:1024x8",
        "--agent",
        "gemm:128",
        "--mode",
        "same-core",
        "--trials",
        trials,
        "--warmup",
        warmup,
        "--duration",
        duration,
        "--bootstrap",
        bootstrap,
    ];
    args.extend_from_slice(extra);
    tailcut(&args)
}

/// `contend agent --kind kind --size size` pinned to core 0, warming up 20 ms from
/// `start` (Unix ms), then measuring 200 ms.
fn agent_on_core_0(kind: &str, size: &str, start: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tailcut"));
    cmd.args(["contend", "agent", "--kind", kind, "--size", size, "--cpu", "0"]);
    cmd.args(["--warmup-ms", "20", "--duration-ms", "200", "--start-at-ms", start]);
    cmd
}

fn repo(p: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(p).display().to_string()
}

#[test]
fn run_json_has_per_arm_stats_and_degradation() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("c.svg");
    let v = json_ok(&run_fft_gemm("2", "30ms", "250ms", "50", &["--json", "--plot", svg.to_str().unwrap()]));
    assert_eq!(v["mode"], "same-core");
    assert_eq!(v["agents"].as_array().unwrap().len(), 2);
    for a in v["agents"].as_array().unwrap() {
        for arm in ["solo", "shared"] {
            for key in ["p50_ms", "p95_ms", "p99_ms", "jitter", "throughput_per_s"] {
                assert!(a[arm].get(key).is_some(), "{} {arm} {key}", a["agent"]);
            }
            assert!(a[arm]["samples"].as_u64().unwrap() > 0);
        }
        assert!(a["degradation"]["p50"].as_f64().unwrap() > 0.0);
        assert!(a["degradation"].get("p99").is_some());
        assert!(a["verdict"].is_string());
        assert_eq!(a["placement"]["cpu"], 0, "same-core pins every agent to core 0");
    }
    assert!(v["timer_overhead_ns"].as_f64().unwrap() > 0.0);
    assert!(v["timer_overhead_ok"].as_bool().unwrap());
    assert!(std::fs::read_to_string(&svg).unwrap().contains("shared / solo"));
}

#[test]
fn agent_files_feed_report_and_compare() {
    let dir = tempfile::tempdir().unwrap();
    for (arm, extra) in [("solo", None), ("shared", Some("gemm"))] {
        let out = dir.path().join(format!("fft-{arm}.json"));
        let mut handles = vec![];
        let start = (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() + 200).to_string();
        let fft = agent_on_core_0("fft", "1024", &start)
            .args(["--batch", "4", "--name", "fft", "--arm", arm, "--out", out.to_str().unwrap()])
            .spawn()
            .unwrap();
        handles.push(fft);
        if let Some(kind) = extra {
            let g = agent_on_core_0(kind, "128", &start).stdout(std::process::Stdio::null()).spawn().unwrap();
            handles.push(g);
        }
        for mut h in handles {
            assert!(h.wait().unwrap().success());
        }
    }
    let out = tailcut(&["contend", "report", dir.path().to_str().unwrap(), "--json", "--bootstrap", "20"]);
    let v = json_ok(&out);
    assert_eq!(v["agents"][0]["agent"], "fft");
    assert!(v["agents"][0]["degradation"]["p50"].is_f64());
    let a = dir.path().join("a.json");
    std::fs::write(&a, &out.stdout).unwrap();
    let cmp = tailcut(&["contend", "compare", a.to_str().unwrap(), a.to_str().unwrap()]);
    assert!(cmp.status.success());
    assert!(String::from_utf8_lossy(&cmp.stdout).contains("p99 factor"));
}

#[test]
fn cuda_agent_without_a_device_exits_2_and_says_so() {
    let out = tailcut(&["contend", "agent", "--kind", "cuda-fft", "--duration-ms", "10"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--features cuda") || err.contains("no CUDA device"), "{err}");
}

#[test]
fn k8s_mig_rejects_impossible_layouts_with_a_reason() {
    let out = tailcut(&[
        "contend",
        "k8s",
        "--mode",
        "mig",
        "--gpu",
        "h100-80gb",
        "--mig-layout",
        "3g.40gb,3g.40gb,1g.10gb",
        "--agent",
        "cuda-fft",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("9 memory slices"));
    let ok = tailcut(&[
        "contend",
        "k8s",
        "--mode",
        "mig",
        "--gpu",
        "a100-40gb",
        "--mig-layout",
        "3g.20gb,2g.10gb",
        "--agent",
        "cuda-fft",
        "--agent",
        "cuda-gemm",
    ]);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    let text = String::from_utf8_lossy(&ok.stdout);
    assert!(text.contains("nvidia.com/mig-3g.20gb") && text.contains("mig-configs"));
}

#[test]
fn plan_example_places_every_agent_within_objective() {
    let dir = tempfile::tempdir().unwrap();
    let k8s = dir.path().join("plan.yaml");
    let out = tailcut(&[
        "contend",
        "plan",
        "--agents",
        &repo("examples/contend/agents.toml"),
        "--gpus",
        &repo("examples/contend/gpus.toml"),
        "--json",
        "--k8s",
        k8s.to_str().unwrap(),
    ]);
    let v = json_ok(&out);
    let seats: Vec<&serde_json::Value> = v["gpus"].as_array().unwrap().iter().flat_map(|g| g["seats"].as_array().unwrap()).collect();
    assert_eq!(seats.len(), 5);
    for s in seats {
        assert!(s["predicted_p99_ms"].as_f64().unwrap() <= s["objective_ms"].as_f64().unwrap());
    }
    assert!(std::fs::read_to_string(&k8s).unwrap().contains("version: v1"));
}

#[test]
fn matrix_table_feeds_plan_and_verify_closes_the_loop() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("m.toml");
    let heat = dir.path().join("m.svg");
    let out = tailcut(&[
        "contend",
        "matrix",
        "--agent",
        "fft:256x4",
        "--agent",
        "gemm:64",
        "--agent",
        "llm-decode:64",
        "--triples",
        "--trials",
        "1",
        "--warmup",
        "20ms",
        "--duration",
        "150ms",
        "--bootstrap",
        "30",
        "--table",
        table.to_str().unwrap(),
        "--heatmap",
        heat.to_str().unwrap(),
        "--json",
    ]);
    let v = json_ok(&out);
    assert_eq!(v["pairs"].as_array().unwrap().len(), 6, "every ordered pair of three agents");
    assert_eq!(v["triples"].as_array().unwrap().len(), 3);
    assert_eq!(v["table_mode"], "time-slicing");
    assert!(v["composition"]["group_error"].is_f64(), "triples check the composition: {}", v["composition"]);
    let text = std::fs::read_to_string(&table).unwrap();
    assert!(text.contains("[interference.time-slicing]") && text.contains("\"fft:256x4<-gemm:64\""), "{text}");
    assert!(std::fs::read_to_string(&heat).unwrap().contains("solo p99"));
    // An earlier result renders again without measuring.
    let saved = dir.path().join("m.json");
    std::fs::write(&saved, &out.stdout).unwrap();
    let again = tailcut(&["contend", "matrix", "--from", saved.to_str().unwrap()]);
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    assert!(String::from_utf8_lossy(&again.stdout).contains("victim \\ aggressor"));

    // The planner reads the table: solo p99 from it, objectives generous enough to share.
    let agents = dir.path().join("agents.toml");
    std::fs::write(
        &agents,
        "[[agents]]\nname = \"router\"\nkind = \"fft:256x4\"\nmemory_gb = 0\np99_objective_ms = 10000\n\n\
         [[agents]]\nname = \"decoder\"\nkind = \"llm-decode:64\"\nmemory_gb = 0\np99_objective_ms = 10000\n",
    )
    .unwrap();
    let pool = dir.path().join("pool.toml");
    std::fs::write(&pool, "model = \"h100-80gb\"\ncount = 2\nmodes = [\"dedicated\", \"time-slicing\"]\nmax_share = 3\n").unwrap();
    let out = tailcut(&[
        "contend",
        "plan",
        "--agents",
        agents.to_str().unwrap(),
        "--gpus",
        pool.to_str().unwrap(),
        "--table",
        table.to_str().unwrap(),
        "--json",
    ]);
    let plan = json_ok(&out);
    assert_eq!(plan["gpus_used"], 1, "{plan}");
    assert_eq!(plan["gpus"][0]["mode"], "time-slicing");
    let seat = &plan["gpus"][0]["seats"][0];
    assert!(seat["expected_error"].is_f64(), "a measured pair carries its error: {seat}");
    let plan_path = dir.path().join("plan.json");
    std::fs::write(&plan_path, &out.stdout).unwrap();
    let out =
        tailcut(&["contend", "verify", plan_path.to_str().unwrap(), "--trials", "1", "--warmup", "20ms", "--duration", "150ms", "--json"]);
    let r = json_ok(&out); // exit 0: every objective met
    assert_eq!(r["seats"].as_array().unwrap().len(), 2);
    for s in r["seats"].as_array().unwrap() {
        assert!(s["measured_p99_ms"].as_f64().unwrap() > 0.0 && s["met"] == true, "{s}");
        // Each sharing agent also ran alone in the trial: a measured factor beside the plan's.
        assert!(s["solo_now_p99_ms"].as_f64().unwrap() > 0.0, "{s}");
        assert!(s["measured_factor"].as_f64().unwrap() > 0.0 && s["predicted_factor"].as_f64().unwrap() > 0.0, "{s}");
        let e = s["factor_error"].as_f64().unwrap();
        let expected = s["measured_factor"].as_f64().unwrap() / s["predicted_factor"].as_f64().unwrap() - 1.0;
        assert!((e - expected).abs() < 1e-9, "{s}");
    }
    assert!(r["pair_mean_abs_error"].is_f64() && r["pair_mean_abs_factor_error"].is_f64(), "{r}");
    // A one-trial matrix states no error bar: the plan (at the default confidence 0.9)
    // admits on the predictions and says so.
    assert_eq!(plan["confidence"], 0.9);
    assert!(plan["noise"].to_string().contains("no error bar for"), "{}", plan["noise"]);
    // Repeated runs are scored against the promise.
    let out = tailcut(&[
        "contend",
        "verify",
        plan_path.to_str().unwrap(),
        "--repeat",
        "2",
        "--trials",
        "1",
        "--warmup",
        "20ms",
        "--duration",
        "100ms",
        "--no-solo",
        "--json",
    ]);
    let r = json_ok(&out);
    assert_eq!(r["outcomes"], 4, "{r}");
    assert_eq!(r["runs"].as_array().unwrap().len(), 2);
    assert_eq!(r["promise_kept"], true, "{r}");
    let out = tailcut(&["contend", "plan", "--agents", agents.to_str().unwrap(), "--gpus", pool.to_str().unwrap(), "--confidence", "1"]);
    assert_eq!(out.status.code(), Some(2), "a confidence of 1 would need an infinite bound");

    // The same plan with an objective nobody can meet: verify exits 1 and names the agent.
    let strict = String::from_utf8(std::fs::read(&plan_path).unwrap()).unwrap().replace("10000.0", "0.000001");
    assert!(strict.contains("0.000001"), "{strict}");
    std::fs::write(&plan_path, strict).unwrap();
    let out = tailcut(&["contend", "verify", plan_path.to_str().unwrap(), "--trials", "1", "--warmup", "20ms", "--duration", "100ms"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("objective MISSED: router, decoder"), "{text}");
}

#[test]
fn matrix_and_verify_reject_bad_input_with_exit_2() {
    let out = tailcut(&["contend", "matrix", "--agent", "fft"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least two"));
    let out = tailcut(&["contend", "matrix", "--agent", "fft", "--agent", "tpu"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown kind"));
    let out = tailcut(&["contend", "matrix", "--agent", "fft", "--agent", "gemm", "--table", "/nonexistent-dir/t.toml"]);
    assert_eq!(out.status.code(), Some(2));
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("plan.json");
    std::fs::write(&p, "{}").unwrap();
    let out = tailcut(&["contend", "verify", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a `contend plan --json` result"));
}

#[test]
fn expect_share_flags_a_share_that_is_not_enforced() {
    // Two CPU-bound agents time-slice one core: each gets about half of it, far from the
    // 5% slice it was "configured" (tests running alongside move the half, not this far).
    let args = |share: &str, tol: &str| run_fft_gemm("1", "20ms", "300ms", "20", &["--expect-share", share, "--share-tolerance", tol]);
    let out = args("0.05", "0.01");
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("NOT ENFORCED"), "{text}");
    let out = args("0.5", "10");
    assert_eq!(out.status.code(), Some(0), "within any tolerance: {}", String::from_utf8_lossy(&out.stdout));
    let out = args("1.5", "0.1");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn agent_loop_reports_ttft_and_tpot_per_call() {
    let out = tailcut(&[
        "contend",
        "agent",
        "--kind",
        "agent-loop",
        "--size",
        "4",
        "--think-ms",
        "1",
        "--warmup-ms",
        "0",
        "--duration-ms",
        "60000",
        "--iterations",
        "3",
    ]);
    let v = json_ok(&out);
    assert_eq!(v["samples_ns"].as_array().unwrap().len(), 3);
    assert_eq!(v["ttft_ns"].as_array().unwrap().len(), 3);
    assert_eq!(v["tpot_ns"].as_array().unwrap().len(), 3);
    assert_eq!(v["spec"]["think_ms"], 1);
}
