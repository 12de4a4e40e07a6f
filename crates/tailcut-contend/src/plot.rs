//! SVG for a contention run (and [`matrix_heatmap`] for an interference matrix): one row per agent — on the left the latency tail solo vs
//! shared as a complementary CDF, P(latency > x), with both axes logarithmic (so p99 and
//! p99.9 are a decade apart and a tail that stretches is visible), ticked on a 1-2-5
//! sequence that stays labelled below 1 ms; on the right the degradation factors per
//! percentile as bars against a line at ×1.

use crate::report::RunReport;
use plotters::prelude::*;
use plotters::style::text_anchor;
use std::path::Path;

/// Why the plot failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw {path}: {message}")]
pub struct PlotError {
    /// Target.
    pub path: String,
    /// Why.
    pub message: String,
}

const SOLO: RGBColor = RGBColor(31, 119, 180);
const SHARED: RGBColor = RGBColor(214, 39, 40);

/// Step points of P(latency > x) over the positive finite samples, ending at `floor`
/// (the bottom of the log axis, which cannot show 0).
fn ccdf(v: &[f64], floor: f64) -> Vec<(f64, f64)> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite() && *x > 0.0).collect();
    s.sort_by(f64::total_cmp);
    let n = s.len().max(1) as f64;
    let mut pts = Vec::with_capacity(2 * s.len());
    for (i, x) in s.iter().enumerate() {
        let after = (s.len() - i - 1) as f64 / n;
        pts.push((*x, (s.len() - i) as f64 / n));
        pts.push((*x, if after > 0.0 { after } else { floor }));
    }
    pts
}

/// Tick positions for a log axis over [lo, hi]: 1-2-5 in each decade, or 1-1.5-2-3-4-5-7
/// when the range spans less than a decade and 1-2-5 would leave fewer than 4 ticks.
pub(crate) fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let gen = |mantissas: &[f64]| -> Vec<f64> {
        let mut out = Vec::new();
        let mut decade = 10f64.powf(lo.log10().floor());
        while decade <= hi {
            for m in mantissas {
                let t = m * decade;
                if t >= lo && t <= hi {
                    out.push(t);
                }
            }
            decade *= 10.0;
        }
        out
    };
    let coarse = gen(&[1.0, 2.0, 5.0]);
    if coarse.len() >= 4 {
        return coarse;
    }
    gen(&[1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 7.0])
}

/// Milliseconds with as many decimals as a tick below 1 ms needs.
pub(crate) fn fmt_ms(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.0}")
    } else if x >= 1.0 {
        let s = format!("{x:.1}");
        s.strip_suffix(".0").map_or(s.clone(), str::to_string)
    } else if x >= 0.1 {
        let s = format!("{x:.2}");
        s.trim_end_matches('0').to_string()
    } else {
        let s = format!("{x:.3}");
        s.trim_end_matches('0').to_string()
    }
}

/// Draws the report's agents (needs the pooled samples kept in the report).
pub fn contention_svg(path: &Path, report: &RunReport) -> Result<(), PlotError> {
    let err = |e: &dyn std::fmt::Display| PlotError { path: path.display().to_string(), message: e.to_string() };
    let rows = report.agents.len().max(1);
    let root = SVGBackend::new(path, (1200, 60 + 360 * rows as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (title, body) = root.split_vertically(50);
    title
        .draw(&Text::new(format!("tailcut contend — {} mode: solo (blue) vs shared (red)", report.mode), (20, 15), ("sans-serif", 22)))
        .map_err(|e| err(&e))?;
    let panels = body.split_evenly((rows, 2));
    for (k, a) in report.agents.iter().enumerate() {
        let left = &panels[2 * k];
        let right = &panels[2 * k + 1];
        let solo = report.samples.get(&(a.agent.clone(), "solo".into())).cloned().unwrap_or_default();
        let shared = report.samples.get(&(a.agent.clone(), "shared".into())).cloned().unwrap_or_default();
        let all: Vec<f64> = solo.iter().chain(shared.iter()).copied().filter(|x| x.is_finite() && *x > 0.0).collect();
        let (lo, hi) = all.iter().fold((f64::INFINITY, 0f64), |(l, h), &x| (l.min(x), h.max(x)));
        let (lo, hi) = if all.is_empty() { (0.001, 1.0) } else { (lo * 0.9, hi * 1.1) };
        let n_max = solo.len().max(shared.len()).max(1) as f64;
        let floor = 10f64.powf(((1.0 / n_max).log10() + 1e-9).floor()).max(1e-7);
        let y_ticks: Vec<f64> = (0..=7).map(|k| 10f64.powi(-k)).filter(|y| *y >= floor * 0.999).collect();
        let mut chart = ChartBuilder::on(left)
            .caption(format!("{}: share of iterations slower than x", a.agent), ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(62)
            .build_cartesian_2d((lo..hi).log_scale().with_key_points(log_ticks(lo, hi)), (floor..1.0).log_scale().with_key_points(y_ticks))
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc("iteration latency x (ms, log scale)")
            .y_desc("share slower than x (log)")
            .y_label_formatter(&|y| {
                let p = y * 100.0;
                if p >= 1.0 {
                    format!("{p:.0}%")
                } else {
                    let s = format!("{p:.4}");
                    format!("{}%", s.trim_end_matches('0'))
                }
            })
            .x_label_formatter(&|x| fmt_ms(*x))
            .light_line_style(WHITE)
            .bold_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(|e| err(&e))?;
        let guide = ShapeStyle::from(&RGBColor(150, 150, 150)).stroke_width(1);
        for (level, name) in [(0.5, "p50"), (0.01, "p99"), (0.001, "p99.9")] {
            if level < floor * 1.5 {
                continue;
            }
            chart.draw_series(DashedLineSeries::new(vec![(lo, level), (hi, level)], 2, 4, guide)).map_err(|e| err(&e))?;
            let style = TextStyle::from(("sans-serif", 11).into_font())
                .color(&RGBColor(150, 150, 150))
                .pos(text_anchor::Pos::new(text_anchor::HPos::Right, text_anchor::VPos::Bottom));
            chart.draw_series(std::iter::once(Text::new(name.to_string(), (hi / 1.01, level), style))).map_err(|e| err(&e))?;
        }
        for (v, color, label) in [(&solo, SOLO, "solo"), (&shared, SHARED, "shared")] {
            if v.is_empty() {
                continue;
            }
            chart
                .draw_series(LineSeries::new(ccdf(v, floor), ShapeStyle::from(&color).stroke_width(2)))
                .map_err(|e| err(&e))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], ShapeStyle::from(&color).stroke_width(3)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerLeft)
            .border_style(RGBColor(200, 200, 200))
            .background_style(WHITE.mix(0.9))
            .draw()
            .map_err(|e| err(&e))?;

        let bars: Vec<(&str, f64)> = a
            .degradation
            .as_ref()
            .map(|d| {
                let mut b = vec![("p50", d.p50), ("p95", d.p95)];
                if let Some(x) = d.p99 {
                    b.push(("p99", x));
                }
                if let Some(x) = d.p999 {
                    b.push(("p99.9", x));
                }
                b.push(("throughput", d.throughput));
                b
            })
            .unwrap_or_default();
        let top = bars.iter().map(|(_, v)| *v).fold(1.2f64, f64::max) * 1.15;
        let n = bars.len().max(1);
        let mut chart = ChartBuilder::on(right)
            .caption(format!("{}: shared / solo", a.agent), ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(50)
            .build_cartesian_2d((0..n.saturating_sub(1)).into_segmented(), 0.0..top)
            .map_err(|e| err(&e))?;
        let names: Vec<String> = bars.iter().map(|(n, _)| n.to_string()).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => names.get(*i).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .y_label_formatter(&|y| format!("×{y:.1}"))
            .draw()
            .map_err(|e| err(&e))?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, (name, v))| {
                let color = if *name == "throughput" {
                    RGBColor(127, 127, 127)
                } else if *v >= report.thresholds.tail_factor {
                    SHARED
                } else {
                    SOLO
                };
                let mut bar = Rectangle::new(
                    [(SegmentValue::Exact(i), 0.0), (SegmentValue::Exact(i + 1), *v)],
                    ShapeStyle::from(&color.mix(0.8)).filled(),
                );
                bar.set_margin(0, 0, 10, 10);
                bar
            }))
            .map_err(|e| err(&e))?;
        chart
            .draw_series(
                bars.iter()
                    .enumerate()
                    .map(|(i, (_, v))| Text::new(format!("×{v:.2}"), (SegmentValue::CenterOf(i), *v + top * 0.04), ("sans-serif", 13))),
            )
            .map_err(|e| err(&e))?;
        chart
            .draw_series(DashedLineSeries::new(
                vec![(SegmentValue::Exact(0), 1.0), (SegmentValue::Exact(n), 1.0)],
                6,
                4,
                ShapeStyle::from(&BLACK).stroke_width(1),
            ))
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// Colour of a factor on a log scale from ×1 (white) through orange to ×`top` (dark red);
/// factors below 1 (the victim got faster) are pale blue.
fn heat(f: f64, top: f64) -> RGBColor {
    if !f.is_finite() {
        return RGBColor(220, 220, 220);
    }
    if f < 1.0 {
        return RGBColor(222, 235, 247);
    }
    let t = (f.ln() / top.max(1.01).ln()).clamp(0.0, 1.0);
    let lerp = |a: u8, b: u8, t: f64| (f64::from(a) + (f64::from(b) - f64::from(a)) * t).round() as u8;
    if t < 0.5 {
        let u = t * 2.0;
        RGBColor(255, lerp(255, 170, u), lerp(255, 60, u))
    } else {
        let u = (t - 0.5) * 2.0;
        RGBColor(lerp(255, 150, u), lerp(170, 0, u), lerp(60, 20, u))
    }
}

/// The interference matrix as a heatmap: victims down, aggressors across, each cell the
/// victim's p99 factor with its bootstrap interval; the diagonal gives each agent's solo
/// p99.
pub fn matrix_heatmap(path: &Path, m: &crate::matrix::MatrixReport) -> Result<(), PlotError> {
    let err = |e: &dyn std::fmt::Display| PlotError { path: path.display().to_string(), message: e.to_string() };
    let n = m.agents.len().max(1);
    let cell = 130i32;
    let (left, top_margin) = (150i32, 110i32);
    let width = ((left + cell * n as i32 + 40) as u32).max(760);
    let height = (top_margin + cell * n as i32 + 90) as u32;
    let root = SVGBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let title = format!("tailcut contend matrix — {} (fills the planner's {})", m.mode, m.table_mode);
    root.draw(&Text::new(title, (20, 15), ("sans-serif", 20))).map_err(|e| err(&e))?;
    let sub = format!(
        "victim's p99 shared / solo, median over trials [bootstrap 95% interval over trials]; {} trial(s) × {:.2} s per run, {:.0} s in all",
        m.trials, m.duration_s, m.run_time_s
    );
    root.draw(&Text::new(sub, (20, 42), ("sans-serif", 13).into_font().color(&RGBColor(90, 90, 90)))).map_err(|e| err(&e))?;
    let top = m.pairs.iter().map(|c| c.factor).filter(|f| f.is_finite()).fold(2.0f64, f64::max);
    let centre = |s: u32| {
        TextStyle::from(("sans-serif", s).into_font()).pos(text_anchor::Pos::new(text_anchor::HPos::Center, text_anchor::VPos::Center))
    };
    for (j, a) in m.agents.iter().enumerate() {
        let x = left + cell * j as i32 + cell / 2;
        root.draw(&Text::new(a.clone(), (x, top_margin - 18), centre(14))).map_err(|e| err(&e))?;
    }
    root.draw(&Text::new("aggressor →", (left, top_margin - 45), ("sans-serif", 13))).map_err(|e| err(&e))?;
    root.draw(&Text::new("victim ↓", (20, top_margin - 18), ("sans-serif", 13))).map_err(|e| err(&e))?;
    for (i, v) in m.agents.iter().enumerate() {
        let y0 = top_margin + cell * i as i32;
        root.draw(&Text::new(v.clone(), (20, y0 + cell / 2 - 7), ("sans-serif", 14))).map_err(|e| err(&e))?;
        for (j, a) in m.agents.iter().enumerate() {
            let x0 = left + cell * j as i32;
            let found = m.pairs.iter().find(|c| &c.victim == v && c.aggressors.len() == 1 && &c.aggressors[0] == a);
            let (fill, lines): (RGBColor, Vec<String>) = if i == j {
                let solo = m.solo.get(v);
                let (q, tail) = match (m.solo_tail_ms.get(v), solo.and_then(|s| s.p99_ms)) {
                    // The table's solo tail: the median of the solo runs' p99 (or p95).
                    (Some(&t), _) => (m.solo_tail_quantile.get(v).map_or("p99", String::as_str), t),
                    (None, Some(p)) => ("p99", p),
                    (None, None) => ("p95", solo.map_or(f64::NAN, |s| s.p95_ms)),
                };
                (RGBColor(240, 240, 240), vec![format!("solo {q}"), format!("{} ms", fmt_ms(tail))])
            } else if let Some(c) = found {
                let mut l = vec![format!("×{:.2}", c.factor), format!("[{:.2}–{:.2}]", c.ci95[0], c.ci95[1])];
                if c.quantile != "p99" {
                    l.push(format!("({})", c.quantile));
                }
                (heat(c.factor, top), l)
            } else {
                (RGBColor(220, 220, 220), vec!["not measured".into()])
            };
            root.draw(&Rectangle::new([(x0, y0), (x0 + cell - 2, y0 + cell - 2)], ShapeStyle::from(&fill).filled()))
                .map_err(|e| err(&e))?;
            let dark = found.is_some_and(|c| heat(c.factor, top).1 < 90);
            for (k, line) in lines.iter().enumerate() {
                let size = if k == 0 { 20 } else { 13 };
                let style = centre(size).color(if dark { &WHITE } else { &BLACK });
                let y = y0 + cell / 2 - 14 + 26 * k as i32;
                root.draw(&Text::new(line.clone(), (x0 + cell / 2, y), style)).map_err(|e| err(&e))?;
            }
        }
    }
    // Legend: the colour scale.
    let ly = top_margin + cell * n as i32 + 25;
    let steps = 40;
    let lw = (cell * n as i32).min(500);
    for k in 0..steps {
        let f = top.powf(f64::from(k) / f64::from(steps - 1));
        let x = left + lw * k / steps;
        root.draw(&Rectangle::new([(x, ly), (x + lw / steps + 1, ly + 16)], ShapeStyle::from(&heat(f, top)).filled()))
            .map_err(|e| err(&e))?;
    }
    root.draw(&Text::new("×1".to_string(), (left - 28, ly + 2), ("sans-serif", 13))).map_err(|e| err(&e))?;
    root.draw(&Text::new(format!("×{top:.1}"), (left + lw + 6, ly + 2), ("sans-serif", 13))).map_err(|e| err(&e))?;
    let c = &m.composition;
    let note = format!(
        "composition {} — expected p99 error: pairs {}, three or more {}",
        c.model.name(),
        c.pair_error.map_or("unknown".into(), |e| format!("±{:.0}%", e * 100.0)),
        c.group_error.map_or("unknown (no triples measured)".into(), |e| format!("±{:.0}%", e * 100.0))
    );
    root.draw(&Text::new(note, (left, ly + 30), ("sans-serif", 13))).map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_below_one_millisecond_are_labelled_and_do_not_crowd() {
        // The FFT agent's whole curve lies in 0.2–0.6 ms: the old axis had no tick there.
        let t = log_ticks(0.2, 0.6);
        assert!(t.len() >= 4, "{t:?}");
        let labels: Vec<String> = t.iter().map(|x| fmt_ms(*x)).collect();
        assert_eq!(labels, ["0.2", "0.3", "0.4", "0.5"]);
        // Over several decades only 1-2-5 is used, so 6, 7, 8, 9 never run together.
        let wide: Vec<String> = log_ticks(0.15, 17.0).iter().map(|x| fmt_ms(*x)).collect();
        assert_eq!(wide, ["0.2", "0.5", "1", "2", "5", "10"]);
    }

    #[test]
    fn ccdf_steps_down_to_the_floor() {
        let pts = ccdf(&[3.0, 1.0, 2.0, 0.0], 0.01);
        assert_eq!(pts.first(), Some(&(1.0, 1.0)));
        assert_eq!(pts.last(), Some(&(3.0, 0.01)));
    }
}
