//! The reliability diagram of a learned policy's predictions: on the left, each decile's
//! mean predicted miss against its realized miss rate, with the Wilson 95 % interval as a
//! whisker, numbered, and a strip below with each decile's count; on the right, mean predicted against mean
//! realized cost per decile of predicted cost. Both on equal axes with the diagonal
//! (perfect calibration) dashed: a point above it happened more than predicted.

use super::{DrawError, PlotError, FONT, GUIDE, PALETTE};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;
use tailcut_stats::reliability::Reliability;

type Err<'a> = &'a dyn Fn(DrawError) -> PlotError;
type Chart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>>;

fn pct_label(x: &f64) -> String {
    pct(*x)
}

fn usd_label(x: &f64) -> String {
    usd(*x)
}

/// A round upper end for an axis holding values up to `x` (1, 2 or 5 × 10^k).
fn nice_max(x: f64) -> f64 {
    if !(x.is_finite() && x > 0.0) {
        return 1.0;
    }
    let e = 10f64.powf(x.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * e).find(|v| *v >= x * 1.0001).unwrap_or(10.0 * e)
}

fn pct(x: f64) -> String {
    let p = x * 100.0;
    if p == 0.0 || p >= 10.0 {
        format!("{p:.0}%")
    } else if p >= 1.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.2}%")
    }
}

fn usd(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x >= 0.1 {
        format!("{x:.2}")
    } else if x >= 0.001 {
        format!("{x:.4}")
    } else {
        format!("{x:.6}")
    }
}

/// A square-ish panel with both axes from 0 to `hi` and the dashed diagonal.
fn frame<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    caption: &str,
    (lo, hi): (f64, f64),
    x_desc: &str,
    y_desc: &str,
    fmt: &'static dyn Fn(&f64) -> String,
    err: Err,
) -> Result<Chart<'a, 'b>, PlotError> {
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, 16))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(lo..hi, lo..hi)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_labels(6)
        .y_labels(6)
        .x_label_formatter(fmt)
        .y_label_formatter(fmt)
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(DashedLineSeries::new(vec![(lo, lo), (hi, hi)], 6, 4, ShapeStyle::from(&GUIDE).stroke_width(1)))
        .map_err(err)?
        .label("perfectly calibrated")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], ShapeStyle::from(&GUIDE).stroke_width(2)));
    Ok(chart)
}

fn draw_miss(area: &DrawingArea<SVGBackend, Shift>, r: &Reliability, err: Err) -> Result<(), PlotError> {
    let (area, lower) = area.split_vertically(area.dim_in_pixel().1 as i32 - 130);
    let area = &area;
    let lower = &lower;
    let top = r.groups.iter().map(|g| g.predicted.max(g.realized_ci95[1])).fold(0.0, f64::max);
    let hi = nice_max(top).min(1.0);
    let caption = format!("Miss: predicted vs realized ({} decisions, Brier {:.4}, ECE {:.4})", r.n, r.brier, r.ece);
    let mut chart =
        frame(area, &caption, (0.0, hi), "mean predicted P(miss) in the decile", "realized miss rate (Wilson 95%)", &pct_label, err)?;
    let colour = PALETTE[1];
    let whisker = ShapeStyle::from(&colour).stroke_width(2);
    let cap = hi * 0.008;
    for g in &r.groups {
        let (x, lo, up) = (g.predicted, g.realized_ci95[0], g.realized_ci95[1]);
        chart.draw_series(std::iter::once(PathElement::new(vec![(x, lo), (x, up)], whisker))).map_err(err)?;
        for y in [lo, up] {
            chart.draw_series(std::iter::once(PathElement::new(vec![(x - cap, y), (x + cap, y)], whisker))).map_err(err)?;
        }
    }
    chart
        .draw_series(r.groups.iter().map(|g| Circle::new((g.predicted, g.realized), 5, ShapeStyle::from(&colour).filled())))
        .map_err(err)?
        .label("decile: mean prediction, realized rate")
        .legend(move |(x, y)| Circle::new((x + 10, y), 5, ShapeStyle::from(&colour).filled()));
    let points: Vec<(f64, f64)> = r.groups.iter().map(|g| (g.predicted, g.realized)).collect();
    label_deciles(&mut chart, &points, hi * 0.012, err)?;
    draw_legend(&mut chart, err)?;
    let counts: Vec<(String, u64)> = r
        .groups
        .iter()
        .map(|g| (if g.predicted_min == g.predicted_max { pct(g.predicted_min) } else { format!("≤{}", pct(g.predicted_max)) }, g.n))
        .collect();
    draw_counts(lower, &counts, colour, err)
}

/// Numbers each decile's point (1 = lowest prediction) beside it, skipping a label that
/// would overlap one already drawn (the counts strip below names every decile).
fn label_deciles(chart: &mut Chart, points: &[(f64, f64)], dx: f64, err: Err) -> Result<(), PlotError> {
    let style = TextStyle::from((FONT, 11).into_font()).color(&RGBColor(60, 60, 60)).pos(Pos::new(HPos::Left, VPos::Center));
    let mut drawn: Vec<(i32, i32)> = Vec::new();
    for (k, &(x, y)) in points.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(x + dx, y));
        if drawn.iter().any(|&(qx, qy)| (qx - px).abs() < 16 && (qy - py).abs() < 12) {
            continue;
        }
        drawn.push((px, py));
        chart.draw_series(std::iter::once(Text::new(format!("{}", k + 1), (x + dx, y), style.clone()))).map_err(err)?;
    }
    Ok(())
}

/// The strip under a panel: decisions per decile, one bar each, labelled with the count
/// and the decile's predictions.
fn draw_counts(area: &DrawingArea<SVGBackend, Shift>, counts: &[(String, u64)], colour: RGBColor, err: Err) -> Result<(), PlotError> {
    let k = counts.len().max(1);
    let top = counts.iter().map(|c| c.1).max().unwrap_or(1).max(1) as f64 * 1.3;
    let mut chart = ChartBuilder::on(area)
        .margin_left(16)
        .margin_right(16)
        .margin_bottom(6)
        .x_label_area_size(30)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..k as f64, 0.0..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_y_mesh()
        .x_labels(0)
        .y_labels(3)
        .y_desc("decisions")
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(counts.iter().enumerate().map(|(i, c)| {
            Rectangle::new([(i as f64 + 0.15, 0.0), (i as f64 + 0.85, c.1 as f64)], ShapeStyle::from(&colour.mix(0.55)).filled())
        }))
        .map_err(err)?;
    let above = TextStyle::from((FONT, 11).into_font()).color(&RGBColor(40, 40, 40)).pos(Pos::new(HPos::Center, VPos::Bottom));
    chart
        .draw_series(
            counts.iter().enumerate().map(|(i, c)| Text::new(format!("{}: n={}", i + 1, c.1), (i as f64 + 0.5, c.1 as f64), above.clone())),
        )
        .map_err(err)?;
    let below = TextStyle::from((FONT, 10).into_font()).color(&RGBColor(90, 90, 90)).pos(Pos::new(HPos::Center, VPos::Top));
    chart
        .draw_series(counts.iter().enumerate().map(|(i, c)| Text::new(c.0.clone(), (i as f64 + 0.5, -top * 0.04), below.clone())))
        .map_err(err)?;
    Ok(())
}

fn draw_cost(area: &DrawingArea<SVGBackend, Shift>, r: &Reliability, err: Err) -> Result<(), PlotError> {
    let Some(c) = &r.cost else {
        let style = TextStyle::from((FONT, 15).into_font()).color(&RGBColor(90, 90, 90)).pos(Pos::new(HPos::Center, VPos::Center));
        let (w, h) = area.dim_in_pixel();
        area.draw(&Text::new("no decision with both a predicted and a realized cost", (w as i32 / 2, h as i32 / 2), style)).map_err(err)?;
        return Ok(());
    };
    let (area, lower) = area.split_vertically(area.dim_in_pixel().1 as i32 - 130);
    let area = &area;
    let lower = &lower;
    // Both axes over the data's range (equal, so the diagonal stays the diagonal).
    let top = c.groups.iter().map(|g| g.predicted.max(g.realized)).fold(0.0, f64::max);
    let bottom = c.groups.iter().map(|g| g.predicted.min(g.realized)).fold(f64::INFINITY, f64::min);
    let pad = ((top - bottom) * 0.08).max(top * 0.02).max(1e-9);
    let (lo, hi) = ((bottom - pad).max(0.0), top + pad);
    let caption = format!("Cost: predicted vs realized (mean ${} vs ${})", usd(c.predicted), usd(c.realized));
    let mut chart = frame(area, &caption, (lo, hi), "mean predicted $ in the decile", "mean realized $", &usd_label, err)?;
    let colour = PALETTE[3];
    chart
        .draw_series(c.groups.iter().map(|g| Circle::new((g.predicted, g.realized), 5, ShapeStyle::from(&colour).filled())))
        .map_err(err)?
        .label("decile of predicted cost: means")
        .legend(move |(x, y)| Circle::new((x + 10, y), 5, ShapeStyle::from(&colour).filled()));
    let points: Vec<(f64, f64)> = c.groups.iter().map(|g| (g.predicted, g.realized)).collect();
    label_deciles(&mut chart, &points, (hi - lo) * 0.012, err)?;
    draw_legend(&mut chart, err)?;
    let counts: Vec<(String, u64)> = c.groups.iter().map(|g| (format!("≤{}", usd(g.predicted_max)), g.n)).collect();
    draw_counts(lower, &counts, colour, err)
}

fn draw_legend<'a, DB: DrawingBackend<ErrorType = std::io::Error> + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    err: Err,
) -> Result<(), PlotError> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FONT, 12))
        .border_style(RGBColor(200, 200, 200))
        .background_style(WHITE.mix(0.92))
        .draw()
        .map_err(err)
}

/// Writes the reliability diagram of `r` to `path` (SVG) under `title`.
pub fn reliability_svg(path: &Path, title: &str, r: &Reliability) -> Result<(), PlotError> {
    let err = &PlotError::at(path);
    let root = SVGBackend::new(path, (1300, 780)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(title, (FONT, 19)).map_err(err)?;
    let (left, right) = root.split_horizontally(650);
    draw_miss(&left, r, err)?;
    draw_cost(&right, r, err)?;
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailcut_stats::reliability::{reliability, Forecast};

    #[test]
    fn axis_ends_are_round() {
        assert_eq!(nice_max(0.043), 0.05);
        assert_eq!(nice_max(0.21), 0.25);
        assert_eq!(nice_max(0.7), 1.0);
        assert_eq!(nice_max(0.0), 1.0);
    }

    #[test]
    fn the_diagram_renders_counts_and_both_panels() {
        let f: Vec<Forecast> = (0..200)
            .map(|i| {
                let p = f64::from(i % 20) / 200.0;
                Forecast { p, missed: i % 9 == 0, cost_predicted: Some(0.01 + p / 10.0), cost_realized: Some(0.012 + p / 12.0) }
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.svg");
        reliability_svg(&path, "auto", &reliability(&f)).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("n=20") && svg.contains("decisions") && svg.contains("Brier") && svg.contains("Cost: predicted"), "{svg}");
        let none = Forecast { cost_predicted: None, ..f[0] };
        reliability_svg(&path, "auto", &reliability(&[none])).unwrap();
        assert!(std::fs::read_to_string(&path).unwrap().contains("no decision with both"));
    }
}
