//! The planner: per-agent p99 predictions for each sharing mode, the exact branch and
//! bound over set partitions for small instances and first-fit decreasing with a
//! GPU-emptying pass for larger ones.

use std::collections::{BTreeMap, HashMap};

use super::bound::{self, Spread};
use super::types::{
    AgentNeed, AgentNeedMissing, AgentsFile, BadPlan, GpuPlan, GpuPool, GroupMode, Interference, Plan, PlanError, Seat, SoloSpread,
};
use crate::mig::{self, GpuModel, Profile};

/// The planner.
#[derive(Debug)]
pub struct Planner {
    agents: Vec<AgentNeed>,
    interference: Interference,
    spreads: BTreeMap<String, SoloSpread>,
    pool: GpuPool,
    model: GpuModel,
    profiles: Vec<Profile>,
    cache: HashMap<u128, Option<(GroupMode, Vec<Seat>)>>,
    /// Largest instance solved exactly.
    pub exact_limit: usize,
    /// Confidence at which each admitted prediction's upper bound must be within its
    /// objective (0: the prediction itself, as before bounds existed). Set it before
    /// planning: group decisions are cached.
    pub confidence: f64,
}

fn bits(set: &[usize]) -> u128 {
    set.iter().fold(0u128, |b, &i| b | (1u128 << i))
}

impl Planner {
    /// Validates inputs and builds a planner.
    pub fn new(mut file: AgentsFile, pool: GpuPool) -> Result<Planner, PlanError> {
        for a in &mut file.agents {
            if a.p99_objective_ms <= 0.0 {
                if let Some(x) = a.objective_x_solo {
                    if !(x.is_finite() && x > 0.0) {
                        return Err(BadPlan::ObjectiveFactor { agent: a.name.clone() }.into());
                    }
                    a.p99_objective_ms = a.solo_p99_ms * x;
                }
            }
        }
        let model = mig::model(&pool.model)?;
        if file.agents.len() > 128 {
            return Err(BadPlan::TooManyAgents.into());
        }
        for a in &file.agents {
            // The first requirement that fails, said as what to give (NaN fails each).
            let positive = |x: f64| x > 0.0;
            let non_negative = |x: f64| x >= 0.0;
            let missing = if !positive(a.solo_p99_ms) {
                Some(AgentNeedMissing::SoloP99 { kind: a.kind.clone() })
            } else if !positive(a.p99_objective_ms) {
                Some(AgentNeedMissing::Objective)
            } else if !non_negative(a.memory_gb) {
                Some(AgentNeedMissing::MemoryGb(a.memory_gb))
            } else if !non_negative(a.mig_scaling) {
                Some(AgentNeedMissing::MigScaling(a.mig_scaling))
            } else {
                None
            };
            if let Some(need) = missing {
                return Err(BadPlan::Agent { agent: a.name.clone(), need }.into());
            }
        }
        let mut names: Vec<&str> = file.agents.iter().map(|a| a.name.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(BadPlan::DuplicateName { name: w[0].to_string() }.into());
        }
        let profiles = model.profiles.iter().filter(|p| !p.name.contains("+me") && p.compute < 7).cloned().collect();
        Ok(Planner {
            agents: file.agents,
            interference: file.interference,
            spreads: file.solo_p99_spread,
            pool,
            model,
            profiles,
            cache: HashMap::new(),
            exact_limit: 10,
            confidence: 0.9,
        })
    }

    /// Sets the confidence (see [`Planner::confidence`]); it must be in [0, 1).
    pub fn with_confidence(mut self, confidence: f64) -> Result<Planner, PlanError> {
        if !(0.0..1.0).contains(&confidence) {
            return Err(BadPlan::Confidence { confidence }.into());
        }
        self.confidence = confidence;
        self.cache.clear();
        Ok(self)
    }

    fn allowed(&self, m: GroupMode) -> bool {
        self.pool.modes.contains(&m)
    }

    fn mig_p99(&self, a: &AgentNeed, p: &Profile) -> f64 {
        a.solo_p99_ms * (f64::from(self.model.sms) / f64::from(p.sms)).powf(a.mig_scaling)
    }

    /// The best way to run `group` on one GPU, if any.
    fn group_plan(&mut self, group: &[usize]) -> Option<(GroupMode, Vec<Seat>)> {
        let key = bits(group);
        if let Some(hit) = self.cache.get(&key) {
            return hit.clone();
        }
        let result = self.compute_group(group);
        self.cache.insert(key, result.clone());
        result
    }

    fn seat(&self, i: usize, profile: Option<&str>, p99: f64) -> Seat {
        let a = &self.agents[i];
        Seat {
            agent: a.name.clone(),
            kind: a.kind.clone(),
            expected_error: None,
            profile: profile.map(str::to_string),
            predicted_p99_ms: p99,
            solo_p99_ms: Some(a.solo_p99_ms),
            objective_ms: a.p99_objective_ms,
            memory_gb: a.memory_gb,
            prediction_sd: None,
            bound_p99_ms: None,
            band_ms: None,
            margin: None,
            p_objective: None,
        }
    }

    /// The spread of agent `i`'s prediction: alone (`mode` None, or dedicated / MIG) from
    /// its solo spread; sharing `mode` with `group` from the factor errors as well.
    fn spread(&self, i: usize, mode: Option<GroupMode>, group: &[usize]) -> Option<Spread> {
        let a = &self.agents[i];
        let solo = self.spreads.get(&a.kind);
        match mode {
            Some(m @ (GroupMode::Mps | GroupMode::TimeSlicing)) => {
                let cells: Vec<Option<f64>> =
                    group.iter().filter(|&&j| j != i).map(|&j| self.interference.error(m, &a.kind, &self.agents[j].kind)).collect();
                bound::spread(solo, Some(bound::factor_term(&self.interference.composition(m), &cells)))
            }
            _ => bound::spread(solo, None),
        }
    }

    /// `seat` with its error bar at `z` filled in.
    fn bounded(mut seat: Seat, spread: Option<Spread>, z: f64) -> Seat {
        let p = seat.predicted_p99_ms;
        let sd = spread.map(|s| s.sd());
        let upper = sd.map_or(p, |sd| bound::upper(p, sd, z));
        seat.prediction_sd = sd;
        seat.bound_p99_ms = Some(upper);
        seat.band_ms = sd.filter(|_| z > 0.0).map(|sd| [p / (z * sd).exp(), upper]);
        seat.margin = Some(seat.objective_ms / upper - 1.0);
        seat.p_objective = sd.map(|sd| bound::probability(p, sd, seat.objective_ms));
        seat
    }

    /// Whether a seat's bound (its prediction, without an error bar) is within its objective.
    fn admits(seat: &Seat) -> bool {
        seat.bound_p99_ms.unwrap_or(seat.predicted_p99_ms) <= seat.objective_ms
    }

    fn compute_group(&self, group: &[usize]) -> Option<(GroupMode, Vec<Seat>)> {
        self.compute_group_at(group, bound::z(self.confidence))
    }

    /// The best way to run `group` on one GPU with bounds at `z` (0: on the predictions).
    fn compute_group_at(&self, group: &[usize], z: f64) -> Option<(GroupMode, Vec<Seat>)> {
        let gpu_mem = self.model.memory_gb;
        if group.len() == 1 && self.allowed(GroupMode::Dedicated) {
            let i = group[0];
            let a = &self.agents[i];
            let seat = Self::bounded(self.seat(i, None, a.solo_p99_ms), self.spread(i, None, group), z);
            if a.memory_gb <= gpu_mem && Self::admits(&seat) {
                return Some((GroupMode::Dedicated, vec![seat]));
            }
        }
        if self.allowed(GroupMode::Mig) && group.len() <= 7 {
            if let Some(seats) = self.mig_assignment(group, z) {
                return Some((GroupMode::Mig, seats));
            }
        }
        if group.len() >= 2 && group.len() <= self.pool.max_share {
            let mem: f64 = group.iter().map(|&i| self.agents[i].memory_gb).sum();
            for mode in [GroupMode::Mps, GroupMode::TimeSlicing] {
                if !self.allowed(mode) || mem > gpu_mem {
                    continue;
                }
                if mode == GroupMode::Mps && group.iter().any(|&i| self.agents[i].memory_gb > gpu_mem / group.len() as f64) {
                    continue;
                }
                let mut seats = Vec::new();
                let mut ok = true;
                let composition = self.interference.composition(mode);
                let error = if group.len() == 2 { composition.pair_error } else { composition.group_error };
                for &i in group {
                    let a = &self.agents[i];
                    let mut factors = Vec::new();
                    for &j in group.iter().filter(|&&j| j != i) {
                        match self.interference.factor(mode, &a.kind, &self.agents[j].kind) {
                            Some(f) => factors.push(f),
                            None => ok = false,
                        }
                    }
                    let p99 = a.solo_p99_ms * composition.model.combine(&factors);
                    let seat =
                        Self::bounded(Seat { expected_error: error, ..self.seat(i, None, p99) }, self.spread(i, Some(mode), group), z);
                    if !Self::admits(&seat) {
                        ok = false;
                    }
                    seats.push(seat);
                }
                if ok {
                    return Some((mode, seats));
                }
            }
        }
        None
    }

    fn mig_assignment(&self, group: &[usize], z: f64) -> Option<Vec<Seat>> {
        let seat = |i: usize, p: &Profile| {
            Self::bounded(self.seat(i, Some(p.name), self.mig_p99(&self.agents[i], p)), self.spread(i, None, group), z)
        };
        // Candidate profiles per agent, smallest first.
        let mut cands: Vec<Vec<&Profile>> = Vec::new();
        for &i in group {
            let a = &self.agents[i];
            let mut c: Vec<&Profile> = self.profiles.iter().filter(|p| a.memory_gb <= p.memory_gb && Self::admits(&seat(i, p))).collect();
            c.sort_by_key(|p| (p.compute, p.memory));
            if c.is_empty() {
                return None;
            }
            cands.push(c);
        }
        let mut chosen: Vec<&Profile> = Vec::new();
        if self.mig_search(&cands, 0, 0, 0, &mut chosen) {
            return Some(group.iter().zip(&chosen).map(|(&i, p)| seat(i, p)).collect());
        }
        None
    }

    fn mig_search<'a>(&self, cands: &[Vec<&'a Profile>], k: usize, compute: u32, memory: u32, chosen: &mut Vec<&'a Profile>) -> bool {
        if k == cands.len() {
            let mut counts: Vec<(String, u32)> = Vec::new();
            for p in chosen.iter() {
                match counts.iter_mut().find(|(n, _)| n == p.name) {
                    Some((_, c)) => *c += 1,
                    None => counts.push((p.name.to_string(), 1)),
                }
            }
            return mig::validate_layout(&self.model, &counts).is_ok();
        }
        for p in &cands[k] {
            let (c, m) = (compute + u32::from(p.compute), memory + u32::from(p.memory));
            if c > 7 || m > 8 {
                continue;
            }
            chosen.push(p);
            if self.mig_search(cands, k + 1, c, m, chosen) {
                return true;
            }
            chosen.pop();
        }
        false
    }

    fn lower_bound(&self) -> usize {
        let mem: f64 = self.agents.iter().map(|a| a.memory_gb).sum();
        ((mem / self.model.memory_gb).ceil() as usize).max(usize::from(!self.agents.is_empty()))
    }

    /// Finds a plan.
    pub fn plan(&mut self) -> Result<Plan, PlanError> {
        let n = self.agents.len();
        for i in 0..n {
            if self.group_plan(&[i]).is_none() {
                let a = &self.agents[i];
                let why = if a.memory_gb > self.model.memory_gb {
                    format!("needs {} GB, the {} has {} GB", a.memory_gb, self.model.name, self.model.memory_gb)
                } else {
                    let alone = Self::bounded(self.seat(i, None, a.solo_p99_ms), self.spread(i, None, &[i]), bound::z(self.confidence));
                    match alone.bound_p99_ms.filter(|b| *b > a.solo_p99_ms && a.solo_p99_ms <= a.p99_objective_ms) {
                        Some(b) => format!(
                            "alone its solo p99 {:.2} ms is within the {:.2} ms objective, but the {:.0}% bound {b:.2} ms is not (the solo runs spread too much: see `contend matrix`, or plan with a lower --confidence)",
                            a.solo_p99_ms,
                            a.p99_objective_ms,
                            self.confidence * 100.0
                        ),
                        None => format!(
                            "solo p99 {:.2} ms already exceeds the {:.2} ms objective (or dedicated GPUs are not allowed)",
                            a.solo_p99_ms, a.p99_objective_ms
                        ),
                    }
                };
                return Err(PlanError::Infeasible { agent: a.name.clone(), why });
            }
        }
        let (groups, exact) = if n <= self.exact_limit { (self.exact(), true) } else { (self.heuristic(), false) };
        let lower_bound = self.lower_bound();
        if groups.len() > self.pool.count {
            return Err(PlanError::NotEnoughGpus { needed: groups.len(), available: self.pool.count });
        }
        let mut gpus = Vec::new();
        let mut explanations = Vec::new();
        for (g, group) in groups.iter().enumerate() {
            let Some((mode, seats)) = self.group_plan(group) else { continue };
            let why = self.explain_group(mode, group);
            for s in &seats {
                let partners: Vec<&str> = seats.iter().filter(|o| o.agent != s.agent).map(|o| o.agent.as_str()).collect();
                let with = if partners.is_empty() { String::new() } else { format!(" with {}", partners.join(", ")) };
                let error = match (mode, s.expected_error) {
                    (GroupMode::Mps | GroupMode::TimeSlicing, Some(e)) => {
                        format!(" (±{:.0}% expected, {} composition)", e * 100.0, self.interference.composition(mode).model.name())
                    }
                    (GroupMode::Mps | GroupMode::TimeSlicing, None) => {
                        format!(
                            " (error unknown: {} composition, not checked on measured groups)",
                            self.interference.composition(mode).model.name()
                        )
                    }
                    _ => String::new(),
                };
                explanations.push(format!(
                    "{}: GPU {} ({}{}){with} — predicted p99 {:.2} ms{error}{}; {}",
                    s.agent,
                    g,
                    mode.name(),
                    s.profile.as_ref().map_or(String::new(), |p| format!(" {p}")),
                    s.predicted_p99_ms,
                    self.promise(s),
                    why
                ));
            }
            gpus.push(GpuPlan { gpu: g, mode, seats, why });
        }
        let noise = self.noise(&groups);
        Ok(Plan {
            confidence: self.confidence,
            noise,
            model: self.model.key.to_string(),
            gpus_used: groups.len(),
            lower_bound,
            method: if exact { "exact".into() } else { "heuristic".into() },
            optimal: exact || groups.len() == lower_bound,
            gpus,
            explanations,
        })
    }

    /// What the plan promises for a seat: its bound against the objective, the margin and
    /// the probability that the objective holds.
    fn promise(&self, s: &Seat) -> String {
        let pct = |x: f64| format!("{:.0}%", x * 100.0);
        let margin = s.margin.map_or(String::new(), |m| format!("margin {:+.1}%", m * 100.0));
        let odds = s.p_objective.map_or("P(objective holds) unknown".to_string(), |p| format!("P(objective holds) ≈ {}", pct(p)));
        match (s.prediction_sd, bound::z(self.confidence) > 0.0) {
            (Some(_), true) => format!(
                ", bound {:.2} ms at {} confidence ≤ objective {:.2} ms ({margin}, {odds})",
                s.bound_p99_ms.unwrap_or(s.predicted_p99_ms),
                pct(self.confidence),
                s.objective_ms
            ),
            (Some(_), false) => {
                format!(" ≤ objective {:.2} ms (confidence 0: admitted on the prediction; {margin}, {odds})", s.objective_ms)
            }
            (None, _) => format!(" ≤ objective {:.2} ms (no error bar: admitted on the prediction; {margin}, {odds})", s.objective_ms),
        }
    }

    /// Notes on what makes the plan's error bars wide: per agent whose bound adds more than
    /// [`bound::USEFUL_WIDTH`] to its prediction, the solo spread and factor error behind
    /// it and how many matrix trials would narrow it (or that none would); and the agents
    /// admitted without an error bar.
    fn noise(&self, groups: &[Vec<usize>]) -> Vec<String> {
        let z = bound::z(self.confidence.max(0.9));
        let trials = self.interference.composition.values().map(|c| c.trials).max().unwrap_or(0);
        let mut notes = Vec::new();
        let mut unknown = Vec::new();
        for group in groups {
            let Some((mode, _)) = self.cache.get(&bits(group)).cloned().flatten() else { continue };
            for &i in group {
                let a = &self.agents[i];
                let shared = matches!(mode, GroupMode::Mps | GroupMode::TimeSlicing);
                let Some(sp) = self.spread(i, shared.then_some(mode), group) else {
                    unknown.push(a.name.clone());
                    continue;
                };
                let width = (z * sp.sd()).exp() - 1.0;
                if width <= bound::USEFUL_WIDTH {
                    continue;
                }
                let solo = self.spreads.get(&a.kind).map_or("solo spread not measured".to_string(), |s| {
                    format!("solo p99 of `{}` spreads ±{:.1}% from run to run over {} runs", a.kind, s.log_sd * 100.0, s.runs)
                });
                let advice = match bound::trials_for_useful_bound(&sp, z, trials.max(1)) {
                    Ok(None) => String::new(),
                    Ok(Some(n)) if trials > 0 => format!("about {n} matrix trials (this table: {trials}) would bring it within +{:.0}%", bound::USEFUL_WIDTH * 100.0),
                    Ok(Some(n)) => format!("about {n}× the matrix's trials would bring it within +{:.0}%", bound::USEFUL_WIDTH * 100.0),
                    Err(floor) => format!(
                        "more trials will not: the runs' own spread alone leaves +{:.0}% — the matrix was measured under load; re-measure when the machine is quiet (`uptime`)",
                        floor * 100.0
                    ),
                };
                notes.push(format!(
                    "{}: the {:.0}% bound adds +{:.0}% to the prediction ({solo}); {advice}",
                    a.name,
                    self.confidence.max(0.9) * 100.0,
                    width * 100.0
                ));
            }
        }
        if !unknown.is_empty() && self.confidence > 0.0 {
            notes.push(format!(
                "no error bar for {}: admitted on the prediction alone (factors without measured errors, or a matrix of one trial); measure them with `contend matrix --trials 3`",
                unknown.join(", ")
            ));
        }
        notes
    }

    fn explain_group(&mut self, mode: GroupMode, group: &[usize]) -> String {
        match mode {
            GroupMode::Dedicated => {
                let i = group[0];
                let a = self.agents[i].clone();
                let others: Vec<usize> = (0..self.agents.len()).filter(|&j| j != i).collect();
                let sharable = others.iter().any(|&j| self.compute_group(&[i.min(j), i.max(j)]).is_some());
                // A partner the prediction alone would admit but the bound refuses.
                let z = bound::z(self.confidence);
                let refused_by_bound = (z > 0.0).then(|| {
                    others.iter().find_map(|&j| {
                        let pair = [i.min(j), i.max(j)];
                        if self.compute_group(&pair).is_some() {
                            return None;
                        }
                        let (m, seats) = self.compute_group_at(&pair, 0.0)?;
                        let bounded: Vec<Seat> =
                            pair.iter().zip(seats).map(|(&k, s)| Self::bounded(s, self.spread(k, Some(m), &pair), z)).collect();
                        let worst = bounded.iter().find(|s| !Self::admits(s))?;
                        Some(format!(
                            "alone: sharing with {} predicts {} p99 {:.2} ms ≤ {:.2} ms, but its {:.0}% bound {:.2} ms is over the objective",
                            self.agents[j].name,
                            worst.agent,
                            worst.predicted_p99_ms,
                            worst.objective_ms,
                            self.confidence * 100.0,
                            worst.bound_p99_ms.unwrap_or(worst.predicted_p99_ms)
                        ))
                    })
                });
                if sharable {
                    "alone because every partner it could share with is needed elsewhere".to_string()
                } else if let Some(Some(line)) = refused_by_bound {
                    line
                } else {
                    format!("alone: sharing with any other agent would break an objective or memory limit (solo p99 {:.2} ms, objective {:.2} ms)", a.solo_p99_ms, a.p99_objective_ms)
                }
            }
            GroupMode::Mig => "hardware-isolated MIG instances: the smallest profile meeting each objective".to_string(),
            GroupMode::Mps => {
                "MPS: MIG cannot fit every objective in 7 compute slices; predicted MPS interference stays within the objectives"
                    .to_string()
            }
            GroupMode::TimeSlicing => {
                "time-slicing: neither MIG nor MPS fits every objective; predicted interference stays within them".to_string()
            }
        }
    }

    /// Order agents hardest first: least slack, then most memory.
    fn order(&self) -> Vec<usize> {
        let mut idx: Vec<usize> = (0..self.agents.len()).collect();
        idx.sort_by(|&a, &b| {
            let (x, y) = (&self.agents[a], &self.agents[b]);
            (x.p99_objective_ms / x.solo_p99_ms).total_cmp(&(y.p99_objective_ms / y.solo_p99_ms)).then(y.memory_gb.total_cmp(&x.memory_gb))
        });
        idx
    }

    fn exact(&mut self) -> Vec<Vec<usize>> {
        let order = self.order();
        let mut best: Vec<Vec<usize>> = self.heuristic();
        let mut current: Vec<Vec<usize>> = Vec::new();
        self.branch(&order, 0, &mut current, &mut best);
        best
    }

    fn branch(&mut self, order: &[usize], k: usize, current: &mut Vec<Vec<usize>>, best: &mut Vec<Vec<usize>>) {
        if current.len() >= best.len() {
            return;
        }
        if k == order.len() {
            *best = current.clone();
            return;
        }
        let agent = order[k];
        for g in 0..current.len() {
            current[g].push(agent);
            let mut sorted = current[g].clone();
            sorted.sort_unstable();
            if self.group_plan(&sorted).is_some() {
                self.branch(order, k + 1, current, best);
            }
            current[g].pop();
        }
        if current.len() + 1 < best.len() {
            current.push(vec![agent]);
            self.branch(order, k + 1, current, best);
            current.pop();
        }
    }

    fn heuristic(&mut self) -> Vec<Vec<usize>> {
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for agent in self.order() {
            let mut placed = false;
            for g in groups.iter_mut() {
                let mut trial = g.clone();
                trial.push(agent);
                trial.sort_unstable();
                if self.group_plan(&trial).is_some() {
                    *g = trial;
                    placed = true;
                    break;
                }
            }
            if !placed {
                groups.push(vec![agent]);
            }
        }
        // Try to empty the smallest groups into the others.
        let mut improved = true;
        while improved {
            improved = false;
            groups.sort_by_key(Vec::len);
            'outer: for victim in 0..groups.len() {
                let mut rest = groups.clone();
                let members = rest.remove(victim);
                for m in members {
                    let mut moved = false;
                    for g in rest.iter_mut() {
                        let mut trial = g.clone();
                        trial.push(m);
                        trial.sort_unstable();
                        if self.group_plan(&trial).is_some() {
                            *g = trial;
                            moved = true;
                            break;
                        }
                    }
                    if !moved {
                        continue 'outer;
                    }
                }
                groups = rest;
                improved = true;
                break;
            }
        }
        groups
    }

    /// Whether a set of agents can share one GPU (for tests and brute force).
    pub fn feasible(&mut self, group: &[usize]) -> bool {
        let mut g = group.to_vec();
        g.sort_unstable();
        self.group_plan(&g).is_some()
    }

    /// The GPU model.
    pub fn model(&self) -> &GpuModel {
        &self.model
    }
}
