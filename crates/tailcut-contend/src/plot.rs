//! SVG for a contention run: one row per agent — on the left the latency ECDF solo vs
//! shared (log-scaled time axis, so a tail that stretches is visible), on the right the
//! degradation factors per percentile as bars against a line at ×1.

use crate::report::RunReport;
use plotters::prelude::*;
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

fn ecdf(v: &[f64]) -> Vec<(f64, f64)> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite() && *x > 0.0).collect();
    s.sort_by(f64::total_cmp);
    let n = s.len().max(1) as f64;
    s.iter().enumerate().map(|(i, x)| (*x, (i + 1) as f64 / n)).collect()
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
        let mut chart = ChartBuilder::on(left)
            .caption(format!("{}: share of iterations finished within t", a.agent), ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(50)
            .build_cartesian_2d((lo..hi).log_scale(), 0.0..1.0)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc("iteration latency (ms, log scale)")
            .y_label_formatter(&|y| format!("{:.0}%", y * 100.0))
            .x_labels(10)
            .x_label_formatter(&|x| {
                if *x >= 10.0 {
                    format!("{x:.0}")
                } else if *x >= 1.0 {
                    format!("{x:.1}")
                } else if *x >= 0.1 {
                    format!("{x:.2}")
                } else {
                    format!("{x:.3}")
                }
            })
            .draw()
            .map_err(|e| err(&e))?;
        for (v, color, label) in [(&solo, SOLO, "solo"), (&shared, SHARED, "shared")] {
            if v.is_empty() {
                continue;
            }
            chart
                .draw_series(LineSeries::new(ecdf(v), ShapeStyle::from(&color).stroke_width(2)))
                .map_err(|e| err(&e))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], ShapeStyle::from(&color).stroke_width(3)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
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
