//! The tail-against-load figure of a scenario: the fixed-delay curve's lower envelope
//! and the SVG of p99 against extra attempts per request.

/// The best fixed-delay p99 at an extra load of at most `x` (the fixed curve's lower
/// envelope), +∞ when no fixed point is that cheap.
pub fn fixed_envelope(fixed: &[(f64, f64)], x: f64) -> f64 {
    fixed.iter().filter(|(l, _)| *l <= x + 1e-12).map(|(_, p)| *p).fold(f64::INFINITY, f64::min)
}

/// Draws p99 against extra load, one line with markers per curve.
pub fn tail_load_svg(path: &std::path::Path, title: &str, curves: &[(String, Vec<(f64, f64)>)]) -> Result<(), crate::plot::PlotError> {
    use plotters::prelude::*;
    let err = |e: &dyn std::fmt::Display| crate::plot::PlotError { path: path.display().to_string(), message: e.to_string() };
    let pts = curves.iter().flat_map(|(_, v)| v.iter().copied()).filter(|(x, y)| x.is_finite() && y.is_finite());
    let (x_max, y_max) = pts.fold((0.01f64, 0.1f64), |(a, b), (x, y)| (a.max(x), b.max(y)));
    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..(x_max * 100.0 * 1.05), 0.0..(y_max * 1.08))
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("extra attempts per request (%)")
        .y_desc("p99 latency (s)")
        .light_line_style(RGBColor(240, 240, 240))
        .draw()
        .map_err(|e| err(&e))?;
    let colors = [RGBColor(127, 127, 127), RGBColor(31, 119, 180), RGBColor(214, 39, 40), RGBColor(44, 160, 44)];
    for (i, (name, v)) in curves.iter().enumerate() {
        let color = colors[i % colors.len()];
        let line: Vec<(f64, f64)> = v.iter().filter(|(x, y)| x.is_finite() && y.is_finite()).map(|(x, y)| (x * 100.0, *y)).collect();
        chart
            .draw_series(LineSeries::new(line.clone(), ShapeStyle::from(&color).stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], ShapeStyle::from(&color).stroke_width(3)));
        chart.draw_series(line.iter().map(|p| Circle::new(*p, 3, ShapeStyle::from(&color).filled()))).map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
