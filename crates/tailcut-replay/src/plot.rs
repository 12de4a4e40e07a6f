//! SVG plots: latency ECDFs per policy with the deadlines marked.
//!
//! An ECDF answers "what share of requests finished within t seconds"; a policy whose
//! curve sits higher and further left is better. Requests with no valid result never
//! finish, so such a curve plateaus below 100% — the gap is its failure share.

use plotters::prelude::*;
use std::path::Path;

/// Why a plot could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw {path}: {message}")]
pub struct PlotError {
    /// Target file.
    pub path: String,
    /// Why.
    pub message: String,
}

const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Draws one ECDF per series (latencies in seconds; +∞ = no valid result) with a
/// dashed vertical line per deadline, and the legend in a panel to the right.
pub fn ecdf_svg(path: &Path, title: &str, series: &[(String, Vec<f64>)], deadlines: &[u32]) -> Result<(), PlotError> {
    let err = |e: &dyn std::fmt::Display| PlotError { path: path.display().to_string(), message: e.to_string() };
    let x_max = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied().filter(|x| x.is_finite()))
        .chain(deadlines.iter().map(|d| f64::from(*d)))
        .fold(1.0f64, f64::max)
        * 1.05;
    let legend_rows = series.len() as u32;
    let height = 600u32.max(120 + 22 * legend_rows);
    let root = SVGBackend::new(path, (1280, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (plot_area, legend_area) = root.split_horizontally(900);
    let mut chart = ChartBuilder::on(&plot_area)
        .caption(title, ("sans-serif", 18))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..x_max, 0.0..1.0)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("end-to-end latency (s)")
        .y_desc("share of requests finished by then")
        .y_label_formatter(&|y| format!("{:.0}%", y * 100.0))
        .light_line_style(RGBColor(240, 240, 240))
        .draw()
        .map_err(|e| err(&e))?;
    for d in deadlines {
        let x = f64::from(*d);
        chart
            .draw_series(DashedLineSeries::new(vec![(x, 0.0), (x, 1.0)], 6, 4, ShapeStyle::from(&RGBColor(120, 120, 120)).stroke_width(1)))
            .map_err(|e| err(&e))?;
        chart.draw_series(std::iter::once(Text::new(format!("{d} s deadline"), (x, 0.015), ("sans-serif", 12)))).map_err(|e| err(&e))?;
    }
    legend_area.draw(&Text::new("policy (curve higher and further left is better)", (8, 40), ("sans-serif", 14))).map_err(|e| err(&e))?;
    for (i, (name, values)) in series.iter().enumerate() {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        let n = values.len().max(1) as f64;
        let mut pts = vec![(0.0, 0.0)];
        for (k, x) in v.iter().enumerate() {
            pts.push((*x, k as f64 / n));
            pts.push((*x, (k + 1) as f64 / n));
        }
        pts.push((x_max, v.len() as f64 / n));
        let color = PALETTE[i % PALETTE.len()];
        let dashed = (i / PALETTE.len()) % 2 == 1;
        let style = ShapeStyle::from(&color).stroke_width(2);
        if dashed {
            chart.draw_series(DashedLineSeries::new(pts, 8, 4, style)).map_err(|e| err(&e))?;
        } else {
            chart.draw_series(LineSeries::new(pts, style)).map_err(|e| err(&e))?;
        }
        let failed = values.len() - v.len();
        let label = if failed > 0 { format!("{name}  ({failed}/{} no valid result)", values.len()) } else { name.clone() };
        let y = 70 + 22 * i as i32;
        if dashed {
            for seg in 0..3 {
                let x0 = 8 + seg * 10;
                legend_area
                    .draw(&PathElement::new(vec![(x0, y), (x0 + 6, y)], ShapeStyle::from(&color).stroke_width(3)))
                    .map_err(|e| err(&e))?;
            }
        } else {
            legend_area.draw(&PathElement::new(vec![(8, y), (34, y)], ShapeStyle::from(&color).stroke_width(3))).map_err(|e| err(&e))?;
        }
        legend_area.draw(&Text::new(label, (42, y - 7), ("sans-serif", 13))).map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
