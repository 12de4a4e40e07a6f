//! What a matrix run writes: the interference table in the schema `contend plan` reads,
//! the text report and the numbers they share.

use super::*;

impl MatrixReport {
    /// The interference table in the schema `contend plan` reads (an agents file without
    /// agents): solo p99 per class, `victim<-aggressor` factors (copies of one agent
    /// averaged into `x<-x`), and the composition with its errors.
    pub fn table(&self) -> AgentsFile {
        // Per key: (factor sum, relative half-width sum, widths counted, cells).
        let mut sums: BTreeMap<String, (f64, f64, u32, u32)> = BTreeMap::new();
        for c in &self.pairs {
            let key = format!("{}<-{}", class(&c.victim), class(&c.aggressors[0]));
            let e = sums.entry(key).or_insert((0.0, 0.0, 0, 0));
            e.0 += c.factor;
            e.3 += 1;
            if c.ci95[0].is_finite() && c.ci95[1].is_finite() && c.factor > 0.0 {
                e.1 += (c.ci95[1] - c.ci95[0]) / 2.0 / c.factor;
                e.2 += 1;
            }
        }
        let factors: BTreeMap<String, f64> = sums.iter().map(|(k, (s, _, _, n))| (k.clone(), round4(s / f64::from(*n)))).collect();
        let errors: BTreeMap<String, f64> =
            sums.into_iter().filter(|(_, (_, _, w, _))| *w > 0).map(|(k, (_, h, w, _))| (k, round4(h / f64::from(w)))).collect();
        let mut modes = BTreeMap::new();
        modes.insert(self.table_mode.clone(), factors);
        let mut error_modes = BTreeMap::new();
        if !errors.is_empty() {
            error_modes.insert(self.table_mode.clone(), errors);
        }
        let mut composition = BTreeMap::new();
        let mut c = self.composition.clone();
        c.pair_error = c.pair_error.map(round4);
        c.group_error = c.group_error.map(round4);
        c.trials = self.trials;
        composition.insert(self.table_mode.clone(), c);
        let mut solo_p99_ms = BTreeMap::new();
        let mut solo_p99_spread = BTreeMap::new();
        for (name, st) in &self.solo {
            let tail = self.solo_tail_ms.get(name).copied().unwrap_or(st.p99_ms.unwrap_or(st.p95_ms));
            solo_p99_ms.entry(class(name).to_string()).or_insert(round4(tail));
            if let Some(sp) = self.solo_spread.get(name) {
                solo_p99_spread.entry(class(name).to_string()).or_insert(SoloSpread { runs: sp.runs, log_sd: round4(sp.log_sd) });
            }
        }
        AgentsFile {
            agents: Vec::new(),
            interference: Interference { modes, composition, errors: error_modes },
            solo_p99_ms,
            solo_p99_spread,
        }
    }

    /// The table as TOML with a header saying how it was measured.
    pub fn table_toml(&self, command: &str) -> Result<String, toml::ser::Error> {
        let body = toml::to_string(&self.table())?;
        Ok(format!(
            "# Interference table measured by `{command}`\n\
             # mode {} (fills the planner's {}), {} trial(s) × {:.2} s per run, {} CPU(s), {:.1} s in all.\n\
             # Feed it to `tailcut contend plan --table <this file>`.\n\n{body}",
            self.mode, self.table_mode, self.trials, self.duration_s, self.host_cpus, self.run_time_s
        ))
    }

    /// Text: solo tails, the victim × aggressor grid, triples and the composition check.
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "tailcut contend matrix — mode {} (table for {}), {} trial(s) × ({:.2} s warm-up + {:.2} s measured) per run, {} CPU(s), {:.1} s in all",
            self.mode, self.table_mode, self.trials, self.warmup_s, self.duration_s, self.host_cpus, self.run_time_s
        );
        s.push('\n');
        let rows: Vec<Vec<String>> = self
            .agents
            .iter()
            .map(|a| {
                let st = &self.solo[a];
                vec![
                    a.clone(),
                    st.samples.to_string(),
                    format!("{:.3}", st.p50_ms),
                    st.p99_ms.map_or("-".into(), |x| format!("{x:.3}")),
                    self.solo_tail_ms.get(a).map_or("-".into(), |x| {
                        format!("{x:.3}{}", if self.solo_tail_quantile.get(a).is_some_and(|q| q != "p99") { " p95" } else { "" })
                    }),
                    self.solo_spread.get(a).map_or("-".into(), |sp| format!("±{:.1}% ({} runs)", sp.log_sd * 100.0, sp.runs)),
                ]
            })
            .collect();
        s.push_str(&crate::report::table(
            &["solo", "n", "p50 ms", "p99 ms (pooled)", "table tail ms (median of runs)", "run-to-run spread"],
            &rows,
        ));
        s.push_str(
            "\np99 factor of the victim (row) next to the aggressor (column): median over trials of each trial's shared / solo,\n\
             bootstrap 95% interval over trials\n",
        );
        let mut header = vec!["victim \\ aggressor"];
        header.extend(self.agents.iter().map(String::as_str));
        let rows: Vec<Vec<String>> = self
            .agents
            .iter()
            .map(|v| {
                let mut r = vec![v.clone()];
                for a in &self.agents {
                    r.push(match self.pairs.iter().find(|c| &c.victim == v && c.aggressors[0] == *a) {
                        Some(c) => {
                            format!("×{:.2} ({:.2}–{:.2}){}", c.factor, c.ci95[0], c.ci95[1], if c.quantile == "p99" { "" } else { " p95" })
                        }
                        None => "·".into(),
                    });
                }
                r
            })
            .collect();
        s.push_str(&crate::report::table(&header, &rows));
        if !self.triples.is_empty() {
            s.push_str("\nTriples: measured p99 factor vs each composition of the pair factors\n");
            let mut header = vec!["victim", "aggressors", "measured"];
            let names: Vec<&str> = self.checks.iter().map(|c| c.model.name()).collect();
            header.extend(names.iter().copied());
            let rows: Vec<Vec<String>> = self
                .triples
                .iter()
                .map(|c| {
                    let mut r = vec![c.victim.clone(), c.aggressors.join(" + "), format!("×{:.2}", c.factor)];
                    let fs: Option<Vec<f64>> = c.aggressors.iter().map(|a| pair_factor(&self.pairs, &c.victim, a)).collect();
                    for check in &self.checks {
                        r.push(fs.as_ref().map_or("-".into(), |fs| {
                            let p = check.model.combine(fs);
                            format!("×{p:.2} ({:+.0}%)", (p / c.factor - 1.0) * 100.0)
                        }));
                    }
                    r
                })
                .collect();
            s.push_str(&crate::report::table(&header, &rows));
            for c in &self.checks {
                let _ =
                    writeln!(s, "{}: mean |error| {:.1}%, max {:.1}%", c.model.name(), c.mean_abs_error * 100.0, c.max_abs_error * 100.0);
            }
        }
        let pct = |x: Option<f64>| x.map_or("unknown".to_string(), |e| format!("±{:.1}%", e * 100.0));
        let _ = writeln!(
            s,
            "\ncomposition: {} — expected p99 error: pairs {} (bootstrap half-width), three or more {}{}",
            self.composition.model.name(),
            pct(self.composition.pair_error),
            pct(self.composition.group_error),
            if self.composition.groups_checked == 0 { " (measure --triples to check)" } else { "" }
        );
        s
    }
}

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}
