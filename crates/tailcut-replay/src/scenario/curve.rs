//! The tail-against-load figure of a scenario: the fixed-delay curve's lower envelope
//! and the SVG of p99 against extra attempts per request.
//!
//! Everything of interest happens at a few per cent of extra load (a straggler share of
//! 2 % wants about 2 % of hedges), while a hedge at 0 s costs 100 %: both axes are
//! logarithmic, so 0.5 %, 5 % and 50 % are equally far apart. Each family's points are
//! drawn as markers and joined along their lower envelope in order of load (the best p99
//! reachable at that load or less), so a line never doubles back.

use crate::plot::{curve_style, styled_line, PlotError};

/// The best fixed-delay p99 at an extra load of at most `x` (the fixed curve's lower
/// envelope), +∞ when no fixed point is that cheap.
pub fn fixed_envelope(fixed: &[(f64, f64)], x: f64) -> f64 {
    fixed.iter().filter(|(l, _)| *l <= x + 1e-12).map(|(_, p)| *p).fold(f64::INFINITY, f64::min)
}

/// The points of `pts` on their lower envelope, in order of load: each is strictly
/// faster than every point at the same or lower load.
pub fn lower_envelope(pts: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut sorted: Vec<(f64, f64)> = pts.iter().copied().filter(|(x, y)| x.is_finite() && y.is_finite()).collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut out: Vec<(f64, f64)> = Vec::new();
    for p in sorted {
        if out.last().is_none_or(|l| p.1 < l.1) {
            out.push(p);
        }
    }
    out
}

/// 1-2-5 ticks between `lo` and `hi`, so a log axis is labelled more than once a decade.
fn key_points(lo: f64, hi: f64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut decade = 10f64.powf(lo.log10().floor());
    while decade <= hi {
        for m in [1.0, 2.0, 5.0] {
            let v = decade * m;
            if v >= lo && v <= hi {
                out.push(v);
            }
        }
        decade *= 10.0;
    }
    out
}

/// The envelope as the step function it is: the best p99 at a load of at most x holds
/// until the next point's load, then drops; the last level runs on to `x_end`.
fn staircase(env: &[(f64, f64)], x_end: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(env.len() * 2 + 1);
    for (k, p) in env.iter().enumerate() {
        if k > 0 {
            out.push((p.0, env[k - 1].1));
        }
        out.push(*p);
    }
    if let Some(last) = env.last() {
        out.push((x_end, last.1));
    }
    out
}

/// Draws p99 against extra load (log-log): every point of each curve as a marker, and
/// its lower envelope as a line. A load of 0 (no hedging at all) is drawn at the left
/// edge, which the axis title says.
pub fn tail_load_svg(path: &std::path::Path, title: &str, curves: &[(String, Vec<(f64, f64)>)]) -> Result<(), PlotError> {
    use plotters::prelude::*;
    let err = &PlotError::at(path);
    let finite = || curves.iter().flat_map(|(_, v)| v.iter().copied()).filter(|(x, y)| x.is_finite() && y.is_finite());
    // Loads in per cent; the left edge sits a little below the smallest positive load.
    let min_pos = finite().map(|(x, _)| x * 100.0).filter(|x| *x > 0.0).fold(f64::INFINITY, f64::min);
    let x_lo = if min_pos.is_finite() { (min_pos / 2.0).min(0.1) } else { 0.1 };
    let x_hi = finite().map(|(x, _)| x * 100.0).fold(1.0, f64::max) * 1.3;
    let (y_lo, y_hi) = finite().fold((f64::INFINITY, 0f64), |(l, h), (_, y)| (l.min(y), h.max(y)));
    let (y_lo, y_hi) = if y_lo.is_finite() && y_lo > 0.0 { (y_lo / 1.15, y_hi * 1.15) } else { (0.1, 10.0) };
    let at = |x: f64| (x * 100.0).max(x_lo);
    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(60)
        .build_cartesian_2d(
            (x_lo..x_hi).log_scale().with_key_points(key_points(x_lo, x_hi)),
            (y_lo..y_hi).log_scale().with_key_points(key_points(y_lo, y_hi)),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(format!("extra attempts per request (%, log; no hedging drawn at {x_lo:.2} %)"))
        .y_desc("p99 latency (s, log)")
        .x_label_formatter(&|x| if *x >= 1.0 { format!("{x:.0}") } else { format!("{x}") })
        .y_label_formatter(&|y| if *y >= 1.0 { format!("{y:.0}") } else { format!("{y}") })
        .light_line_style(RGBColor(245, 245, 245))
        .bold_line_style(RGBColor(225, 225, 225))
        .draw()
        .map_err(err)?;
    for (i, (name, v)) in curves.iter().enumerate() {
        // The fixed-delay family is the reference: black, dashed, like the baselines of
        // the other plots; the learned families take the shared palette.
        let (color, dash) = if i == 0 { (RGBColor(0, 0, 0), Some((7, 4))) } else { curve_style(i - 1) };
        let pts: Vec<(f64, f64)> = v.iter().filter(|(x, y)| x.is_finite() && y.is_finite()).map(|(x, y)| (at(*x), *y)).collect();
        let line = staircase(&lower_envelope(&pts), x_hi);
        styled_line(&mut chart, line, color, dash, 2, format!("{name} (lower envelope)")).map_err(err)?;
        let marker = ShapeStyle::from(&color).stroke_width(1);
        chart.draw_series(pts.iter().map(|p| Circle::new(*p, 3, marker))).map_err(err)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(200, 200, 200))
        .label_font(("sans-serif", 13))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_envelope_runs_in_load_order_and_never_rises() {
        let pts = [(0.5, 2.0), (0.0, 16.0), (0.023, 4.0), (0.023, 2.2), (0.14, 2.2), (0.2, 2.1), (0.1, 3.0)];
        let env = lower_envelope(&pts);
        assert_eq!(env, vec![(0.0, 16.0), (0.023, 2.2), (0.2, 2.1), (0.5, 2.0)]);
        assert!(env.windows(2).all(|w| w[0].0 <= w[1].0 && w[1].1 < w[0].1));
        assert_eq!(staircase(&env[..3], 1.0), vec![(0.0, 16.0), (0.023, 16.0), (0.023, 2.2), (0.2, 2.2), (0.2, 2.1), (1.0, 2.1)]);
    }

    #[test]
    fn log_ticks_go_one_two_five() {
        assert_eq!(key_points(0.1, 130.0), vec![0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]);
    }
}
