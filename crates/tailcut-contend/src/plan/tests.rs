use super::types::all_modes;
use super::*;
use std::collections::BTreeMap;

fn agent(name: &str, kind: &str, mem: f64, obj: f64, solo: f64) -> AgentNeed {
    AgentNeed {
        name: name.into(),
        kind: kind.into(),
        memory_gb: mem,
        p99_objective_ms: obj,
        objective_x_solo: None,
        solo_p99_ms: solo,
        mig_scaling: 1.0,
    }
}

fn interference() -> Interference {
    let mut ts = BTreeMap::new();
    ts.insert("fft<-gemm".to_string(), 1.66);
    ts.insert("gemm<-fft".to_string(), 1.05);
    ts.insert("default".to_string(), 1.3);
    let mut mps = BTreeMap::new();
    mps.insert("default".to_string(), 1.15);
    let mut modes = BTreeMap::new();
    modes.insert("time-slicing".to_string(), ts);
    modes.insert("mps".to_string(), mps);
    Interference { modes, composition: BTreeMap::new(), errors: BTreeMap::new() }
}

fn pool(count: usize) -> GpuPool {
    GpuPool { model: "h100-80gb".into(), count, modes: all_modes(), max_share: 4 }
}

/// Minimum number of blocks over all set partitions whose blocks are all feasible.
fn brute_force(p: &mut Planner, n: usize) -> usize {
    fn rec(p: &mut Planner, k: usize, n: usize, blocks: &mut Vec<Vec<usize>>, best: &mut usize) {
        if blocks.len() >= *best {
            return;
        }
        if k == n {
            if blocks.iter().all(|b| p.feasible(b)) {
                *best = blocks.len();
            }
            return;
        }
        for i in 0..blocks.len() {
            blocks[i].push(k);
            rec(p, k + 1, n, blocks, best);
            blocks[i].pop();
        }
        blocks.push(vec![k]);
        rec(p, k + 1, n, blocks, best);
        blocks.pop();
    }
    let mut best = usize::MAX;
    rec(p, 0, n, &mut Vec::new(), &mut best);
    best
}

fn lcg(seed: &mut u64) -> f64 {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    ((*seed >> 11) as f64) / ((1u64 << 53) as f64)
}

fn random_agents(seed: &mut u64, n: usize) -> Vec<AgentNeed> {
    let kinds = ["fft", "gemm", "llm"];
    (0..n)
        .map(|i| {
            let solo = 2.0 + 8.0 * lcg(seed);
            agent(&format!("a{i}"), kinds[(lcg(seed) * 3.0) as usize % 3], 2.0 + 30.0 * lcg(seed), solo * (1.0 + 2.5 * lcg(seed)), solo)
        })
        .collect()
}

#[test]
fn exact_plans_match_brute_force_on_small_instances() {
    let mut seed = 42u64;
    for case in 0..40 {
        let n = 2 + case % 6;
        let agents = random_agents(&mut seed, n);
        let mut planner = Planner::new(
            AgentsFile {
                agents: agents.clone(),
                interference: interference(),
                solo_p99_ms: BTreeMap::new(),
                solo_p99_spread: BTreeMap::new(),
            },
            pool(64),
        )
        .unwrap();
        let plan = planner.plan().unwrap();
        let mut fresh = Planner::new(
            AgentsFile { agents, interference: interference(), solo_p99_ms: BTreeMap::new(), solo_p99_spread: BTreeMap::new() },
            pool(64),
        )
        .unwrap();
        let best = brute_force(&mut fresh, n);
        assert_eq!(plan.gpus_used, best, "case {case}: planner {} vs brute force {best}", plan.gpus_used);
        assert!(plan.optimal);
        for g in &plan.gpus {
            for s in &g.seats {
                assert!(s.predicted_p99_ms <= s.objective_ms + 1e-9, "{s:?}");
            }
        }
    }
}

#[test]
fn hundred_agents_plan_fast_and_feasibly() {
    let mut seed = 7u64;
    let agents = random_agents(&mut seed, 100);
    let t = std::time::Instant::now();
    let mut planner = Planner::new(
        AgentsFile { agents, interference: interference(), solo_p99_ms: BTreeMap::new(), solo_p99_spread: BTreeMap::new() },
        pool(200),
    )
    .unwrap();
    let plan = planner.plan().unwrap();
    let elapsed = t.elapsed();
    assert!(elapsed.as_secs_f64() < 1.0, "took {elapsed:?}");
    assert_eq!(plan.method, "heuristic");
    let placed: usize = plan.gpus.iter().map(|g| g.seats.len()).sum();
    assert_eq!(placed, 100);
    assert!(plan.gpus_used >= plan.lower_bound);
    for g in &plan.gpus {
        for s in &g.seats {
            assert!(s.predicted_p99_ms <= s.objective_ms + 1e-9);
        }
    }
    assert!(plan.gpus_used < 100, "sharing happened: {}", plan.gpus_used);
}

#[test]
fn the_published_pair_is_split_under_time_slicing_but_fits_mig() {
    // FFT agent: p99 3.68 ms solo, objective 5 ms; time-slicing with GEMM predicts 6.1 ms.
    let agents = vec![
        AgentNeed { mig_scaling: 0.2, ..agent("fft", "fft", 4.0, 5.0, 3.68) },
        AgentNeed { mig_scaling: 0.5, ..agent("gemm", "gemm", 20.0, 40.0, 20.0) },
    ];
    let only_ts = GpuPool { modes: vec![GroupMode::Dedicated, GroupMode::TimeSlicing], ..pool(4) };
    let plan = Planner::new(
        AgentsFile { agents: agents.clone(), interference: interference(), solo_p99_ms: BTreeMap::new(), solo_p99_spread: BTreeMap::new() },
        only_ts,
    )
    .unwrap()
    .plan()
    .unwrap();
    assert_eq!(plan.gpus_used, 2, "time-slicing would push fft's p99 to 6.1 ms");
    assert!(plan.explanations.iter().any(|e| e.contains("fft") && e.contains("dedicated")));
    let plan = Planner::new(
        AgentsFile { agents, interference: interference(), solo_p99_ms: BTreeMap::new(), solo_p99_spread: BTreeMap::new() },
        pool(4),
    )
    .unwrap()
    .plan()
    .unwrap();
    assert_eq!(plan.gpus_used, 1);
    assert_eq!(plan.gpus[0].mode, GroupMode::Mig);
    let k8s = plan_k8s(&plan).unwrap();
    assert!(k8s.contains("mig-configs") && k8s.contains("nvidia.com/mig-"), "{k8s}");
}

#[test]
fn infeasible_agents_and_pool_limits_are_errors() {
    let e = Planner::new(
        AgentsFile {
            agents: vec![agent("big", "llm", 200.0, 10.0, 5.0)],
            interference: interference(),
            solo_p99_ms: BTreeMap::new(),
            solo_p99_spread: BTreeMap::new(),
        },
        pool(4),
    )
    .unwrap()
    .plan()
    .unwrap_err();
    assert!(e.to_string().contains("needs 200 GB"), "{e}");
    let agents: Vec<AgentNeed> = (0..3).map(|i| agent(&format!("a{i}"), "llm", 70.0, 10.0, 5.0)).collect();
    let e = Planner::new(
        AgentsFile { agents, interference: interference(), solo_p99_ms: BTreeMap::new(), solo_p99_spread: BTreeMap::new() },
        pool(2),
    )
    .unwrap()
    .plan()
    .unwrap_err();
    assert!(matches!(e, PlanError::NotEnoughGpus { needed: 3, available: 2 }), "{e}");
}

#[test]
fn compositions_differ_for_three_agents_and_carry_their_error() {
    // Three agents on one core-like device, each ×1.5 from each partner: multiplicative
    // predicts ×2.25, additive ×2.0. An objective of 2.1× solo separates the two.
    let mut ts = BTreeMap::new();
    ts.insert("default".to_string(), 1.5);
    let mut modes = BTreeMap::new();
    modes.insert("time-slicing".to_string(), ts);
    let agents: Vec<AgentNeed> = (0..3).map(|i| agent(&format!("a{i}"), "x", 0.0, 2.1, 1.0)).collect();
    let only_ts = GpuPool { modes: vec![GroupMode::Dedicated, GroupMode::TimeSlicing], max_share: 3, ..pool(3) };
    let file = |model, pair, group| {
        let mut composition = BTreeMap::new();
        composition.insert(
            "time-slicing".to_string(),
            Composition { model, pair_error: Some(pair), group_error: Some(group), groups_checked: 3, trials: 3 },
        );
        AgentsFile {
            agents: agents.clone(),
            interference: Interference { modes: modes.clone(), composition, errors: BTreeMap::new() },
            solo_p99_ms: BTreeMap::new(),
            solo_p99_spread: BTreeMap::new(),
        }
    };
    // Confidence 0: this test is about the composition, not the bound.
    let mult = Planner::new(file(CompositionModel::Multiplicative, 0.05, 0.2), only_ts.clone())
        .unwrap()
        .with_confidence(0.0)
        .unwrap()
        .plan()
        .unwrap();
    assert_eq!(mult.gpus_used, 2, "×2.25 breaks 2.1: a pair (×1.5) and one alone");
    let add = Planner::new(file(CompositionModel::Additive, 0.05, 0.2), only_ts).unwrap().with_confidence(0.0).unwrap().plan().unwrap();
    assert_eq!(add.gpus_used, 1);
    for s in &add.gpus[0].seats {
        assert!((s.predicted_p99_ms - 2.0).abs() < 1e-9, "{s:?}");
        assert_eq!(s.expected_error, Some(0.2), "three agents: the group error");
        assert_eq!(s.kind, "x");
    }
    let pair = mult.gpus.iter().find(|g| g.seats.len() == 2).unwrap();
    assert!(pair.seats.iter().all(|s| s.expected_error == Some(0.05)), "two agents: the pair error");
    assert!(add.explanations[0].contains("±20% expected, additive"), "{}", add.explanations[0]);
}

#[test]
fn a_measured_table_overlays_factors_and_fills_solo_p99() {
    let table: AgentsFile = toml::from_str(
        r#"
[solo_p99_ms]
fft = 1.5

[interference.time-slicing]
"fft<-gemm" = 2.5

[interference.composition.time-slicing]
model = "additive"
pair_error = 0.04
group_error = 0.12
groups_checked = 6
"#,
    )
    .unwrap();
    let mut file = AgentsFile {
        agents: vec![AgentNeed { solo_p99_ms: 0.0, ..agent("r", "fft", 1.0, 5.0, 0.0) }, agent("g", "gemm", 1.0, 50.0, 9.0)],
        interference: interference(),
        solo_p99_ms: BTreeMap::new(),
        solo_p99_spread: BTreeMap::new(),
    };
    file.agents[0].p99_objective_ms = 0.0;
    file.agents[0].objective_x_solo = Some(3.0);
    file.apply_table(&table);
    assert_eq!(file.agents[0].solo_p99_ms, 1.5);
    let plan = Planner::new(file.clone(), pool(2)).unwrap().plan().unwrap();
    let r = plan.gpus.iter().flat_map(|g| &g.seats).find(|s| s.agent == "r").unwrap();
    assert!((r.objective_ms - 4.5).abs() < 1e-9, "3 × the measured 1.5 ms: {r:?}");
    assert_eq!(file.agents[1].solo_p99_ms, 9.0, "a given solo p99 is kept");
    assert_eq!(file.interference.factor(GroupMode::TimeSlicing, "fft", "gemm"), Some(2.5));
    assert_eq!(file.interference.factor(GroupMode::TimeSlicing, "gemm", "fft"), Some(1.05), "unmeasured keys are kept");
    assert_eq!(file.interference.composition(GroupMode::TimeSlicing).model, CompositionModel::Additive);
    assert_eq!(file.interference.composition(GroupMode::Mps).model, CompositionModel::Multiplicative);
    let back: AgentsFile = toml::from_str(&toml::to_string(&file).unwrap()).unwrap();
    assert_eq!(back, file, "the table round-trips through TOML");
}

/// Two agents on a time-sliced device: `a` slowed ×2 by `b` (objective exactly 2 × its
/// solo p99), `b` untouched; the table states ±5% per factor and solo runs spreading 5%.
fn edge_file(solo_sd: f64, pair_error: f64) -> AgentsFile {
    let mut ts = BTreeMap::new();
    ts.insert("a<-b".to_string(), 2.0);
    ts.insert("b<-a".to_string(), 1.0);
    let mut errors = BTreeMap::new();
    errors.insert("a<-b".to_string(), pair_error);
    errors.insert("b<-a".to_string(), pair_error);
    let mut composition = BTreeMap::new();
    composition.insert(
        "time-slicing".to_string(),
        Composition { model: CompositionModel::Additive, pair_error: Some(pair_error), group_error: None, groups_checked: 0, trials: 3 },
    );
    let spread = SoloSpread { runs: 6, log_sd: solo_sd };
    AgentsFile {
        agents: vec![agent("a", "a", 0.0, 2.0, 1.0), agent("b", "b", 0.0, 10.0, 1.0)],
        interference: Interference {
            modes: [("time-slicing".to_string(), ts)].into_iter().collect(),
            composition,
            errors: [("time-slicing".to_string(), errors)].into_iter().collect(),
        },
        solo_p99_ms: BTreeMap::new(),
        solo_p99_spread: [("a".to_string(), spread.clone()), ("b".to_string(), spread)].into_iter().collect(),
    }
}

/// Issue 30: a placement whose prediction equals the objective is refused at confidence
/// 0.9 (its upper bound is over) and accepted at confidence 0 (today's rule), where the
/// plan says the objective holds with even odds and no margin.
#[test]
fn a_placement_at_predicted_equals_objective_is_refused_at_90_and_accepted_at_0() {
    let only_ts = GpuPool { modes: vec![GroupMode::Dedicated, GroupMode::TimeSlicing], max_share: 2, ..pool(2) };
    let at0 = Planner::new(edge_file(0.05, 0.05), only_ts.clone()).unwrap().with_confidence(0.0).unwrap().plan().unwrap();
    assert_eq!(at0.gpus_used, 1, "{at0:#?}");
    assert_eq!(at0.confidence, 0.0);
    let a = at0.gpus[0].seats.iter().find(|s| s.agent == "a").unwrap();
    assert!((a.predicted_p99_ms - a.objective_ms).abs() < 1e-12, "{a:?}");
    assert!(a.margin.unwrap().abs() < 1e-12, "no margin: {a:?}");
    assert!((a.p_objective.unwrap() - 0.5).abs() < 1e-6, "even odds: {a:?}");
    assert_eq!(a.band_ms, None, "confidence 0 states no band");
    assert!(
        at0.explanations.iter().any(|e| e.starts_with("a:") && e.contains("confidence 0: admitted on the prediction")),
        "{:?}",
        at0.explanations
    );

    let at90 = Planner::new(edge_file(0.05, 0.05), only_ts).unwrap().plan().unwrap();
    assert_eq!(at90.confidence, 0.9, "the default");
    assert_eq!(at90.gpus_used, 2, "{at90:#?}");
    assert!(at90.gpus.iter().all(|g| g.mode == GroupMode::Dedicated));
    let why = at90.explanations.iter().find(|e| e.starts_with("a:")).unwrap();
    assert!(why.contains("sharing with b predicts a p99 2.00 ms ≤ 2.00 ms, but its 90% bound"), "{why}");
    for s in at90.gpus.iter().flat_map(|g| &g.seats) {
        let (b, [lo, hi]) = (s.bound_p99_ms.unwrap(), s.band_ms.unwrap());
        assert!(b <= s.objective_ms && s.margin.unwrap() >= 0.0, "{s:?}");
        assert!(lo < s.predicted_p99_ms && (hi - b).abs() < 1e-12, "{s:?}");
        assert!(s.p_objective.unwrap() >= 0.9, "{s:?}");
    }
    assert!(at90.noise.is_empty(), "a quiet table: {:?}", at90.noise);
}

/// A table measured under load says so: solo runs spreading 30% leave a bound that no
/// number of trials narrows; a wide factor interval on a quiet machine asks for more trials.
#[test]
fn a_noisy_table_says_so_and_how_many_trials_would_help() {
    let only_ts = GpuPool { modes: vec![GroupMode::Dedicated, GroupMode::TimeSlicing], max_share: 2, ..pool(2) };
    let mut loud = edge_file(0.3, 0.05);
    loud.agents[0].p99_objective_ms = 100.0;
    let plan = Planner::new(loud, only_ts.clone()).unwrap().plan().unwrap();
    assert!(
        plan.noise.iter().any(|n| n.contains("spreads ±30.0% from run to run over 6 runs") && n.contains("more trials will not")),
        "{:?}",
        plan.noise
    );
    let mut wide = edge_file(0.01, 0.4);
    wide.agents[0].p99_objective_ms = 100.0;
    let plan = Planner::new(wide, only_ts).unwrap().plan().unwrap();
    let note = plan.noise.iter().find(|n| n.starts_with("a:")).unwrap_or_else(|| panic!("{:?}", plan.noise));
    let n: u32 =
        note.split("about ").nth(1).and_then(|t| t.split(' ').next()).and_then(|t| t.parse().ok()).unwrap_or_else(|| panic!("{note}"));
    assert!(n > 3, "{note}");
    // Without measured errors the plan says it planned on the predictions alone.
    let plan = Planner::new(
        AgentsFile { agents: vec![agent("x", "fft", 1.0, 10.0, 1.0)], interference: interference(), ..Default::default() },
        pool(1),
    )
    .unwrap()
    .plan()
    .unwrap();
    assert!(plan.noise.iter().any(|n| n.contains("no error bar for x")), "{:?}", plan.noise);
    assert!(plan.gpus[0].seats[0].p_objective.is_none());
}
