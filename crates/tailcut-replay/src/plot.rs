//! SVG plots of latency tails and of the cost/latency trade-off between policies.
//!
//! Tails are drawn the way their practitioners read them: a complementary CDF,
//! P(latency > x), on a logarithmic y-axis, so p95, p99 and p99.9 are each a decade
//! apart instead of squeezed into the top strip of an ECDF. A curve that sits lower and
//! further left is better; requests with no valid result never finish, so such a curve
//! ends in a plateau at its failure share. Only a few curves are drawn (a baseline and the
//! policies on the cost/latency frontier), in colours that stay distinguishable for
//! colour-blind readers, and policies whose latencies are identical share one curve.
//!
//! [`policy_svg`] adds, beside the tails, every policy as a point of billed cost against
//! p95 with the frontier (no other policy both cheaper and faster) joined and labelled:
//! the picture a user choosing a policy wants. [`frontier`] and [`pick_curves`] are the
//! selection rules, kept apart from the drawing so they can be tested.
//!
//! [`reliability_svg`] (in `plot/reliability.rs`) draws a learned policy's predictions
//! against what happened: its reliability diagram.

mod reliability;

pub use reliability::reliability_svg;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// What plotters reports when drawing on an SVG file fails.
pub type DrawError = DrawingAreaErrorKind<std::io::Error>;

/// Why a plot could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw {path}: {source}")]
pub struct PlotError {
    /// Target file.
    pub path: String,
    /// Why.
    #[source]
    pub source: DrawError,
}

impl PlotError {
    /// The error of drawing on `path`, for `map_err`.
    pub(crate) fn at(path: &Path) -> impl Fn(DrawError) -> PlotError + '_ {
        move |source| PlotError { path: path.display().to_string(), source }
    }
}

/// The Okabe–Ito palette (distinguishable with every common colour-vision deficiency),
/// without its yellow, which is unreadable on white. The baseline is drawn in black.
/// Ordered so that neighbours differ most: the two orange-ish hues (orange, vermillion)
/// are far apart, and each curve also gets its own dash pattern ([`STROKES`]), so two
/// curves never differ by hue alone.
pub const PALETTE: [RGBColor; 6] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
];

/// The dash pattern of each curve, in step with [`PALETTE`]: `None` is a solid line,
/// `Some((dash, gap))` in pixels.
pub const STROKES: [Option<(u32, u32)>; 6] = [None, Some((10, 4)), Some((2, 3)), Some((16, 5)), Some((3, 6)), Some((6, 3))];

/// The colour and dash pattern of the `k`-th non-baseline curve.
pub fn curve_style(k: usize) -> (RGBColor, Option<(u32, u32)>) {
    (PALETTE[k % PALETTE.len()], STROKES[k % STROKES.len()])
}

/// Draws `pts` as a line in `color` with the given dash pattern (solid when `None`),
/// with a legend sample in the same pattern.
pub(crate) fn styled_line<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    pts: Vec<(f64, f64)>,
    color: RGBColor,
    dash: Option<(u32, u32)>,
    width: u32,
    label: String,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    DB: DrawingBackend + 'a,
    CT: CoordTranslate<From = (f64, f64)>,
{
    let style = ShapeStyle::from(&color).stroke_width(width);
    // The legend's sample: four strokes, contiguous for a solid line, spaced by the
    // dash pattern otherwise (a dotted curve shows dots).
    let (d, g) = dash.map_or((5, 0), |(d, g)| (d.min(8) as i32, g.min(5) as i32));
    let sample = move |(x, y): (i32, i32)| {
        let stroke = ShapeStyle::from(&color).stroke_width(width + 1);
        let seg = |k: i32| PathElement::new(vec![((k * (d + g)).min(20), 0), ((k * (d + g) + d).min(20), 0)], stroke);
        EmptyElement::at((x, y)) + seg(0) + seg(1) + seg(2) + seg(3)
    };
    match dash {
        None => chart.draw_series(LineSeries::new(pts, style))?.label(label).legend(sample),
        Some((d, g)) => chart.draw_series(DashedLineSeries::new(pts, d, g, style))?.label(label).legend(sample),
    };
    Ok(())
}

const BASELINE: RGBColor = RGBColor(0, 0, 0);
const GUIDE: RGBColor = RGBColor(150, 150, 150);
const FONT: &str = "sans-serif";

/// One latency distribution to draw.
#[derive(Debug, Clone)]
pub struct Curve {
    /// Legend label (policies with identical latencies are merged as `a = b`).
    pub label: String,
    /// End-to-end latencies in seconds; +∞ (or NaN) = no valid result.
    pub latencies: Vec<f64>,
    /// Drawn in black, dashed, as the reference the others are read against.
    pub baseline: bool,
}

/// One policy on the cost/latency plane.
#[derive(Debug, Clone)]
pub struct PolicyPoint {
    /// Policy label.
    pub label: String,
    /// p95 latency in seconds (+∞ when fewer than 95% of requests have a valid result).
    pub p95_s: f64,
    /// Cost per request in USD.
    pub usd_per_req: f64,
}

/// Indices of the policies on the cost/p95 frontier (none is beaten by another that is at
/// least as cheap and at least as fast, and strictly better in one), fastest first.
/// Policies without a finite p95 or cost are never on it; exact ties are all kept.
pub fn frontier(points: &[PolicyPoint]) -> Vec<usize> {
    let ok = |p: &PolicyPoint| p.p95_s.is_finite() && p.usd_per_req.is_finite();
    let mut idx: Vec<usize> = (0..points.len()).filter(|&i| ok(&points[i])).collect();
    idx.retain(|&i| {
        let a = &points[i];
        !points
            .iter()
            .any(|b| ok(b) && b.p95_s <= a.p95_s && b.usd_per_req <= a.usd_per_req && (b.p95_s < a.p95_s || b.usd_per_req < a.usd_per_req))
    });
    idx.sort_by(|&a, &b| points[a].p95_s.total_cmp(&points[b].p95_s).then(points[a].usd_per_req.total_cmp(&points[b].usd_per_req)));
    idx
}

/// The curves worth drawing: `baseline` (if any) first, then up to `n` policies of
/// `among` (the rows the tables print, so that plot and table show the same policies)
/// on their cost/p95 frontier, spread evenly from the fastest to the cheapest (the ends
/// always included), never repeating the baseline; when that frontier holds fewer than
/// `n`, the fastest other printed policies make up the number.
pub fn pick_curves(points: &[PolicyPoint], among: &[usize], baseline: Option<usize>, n: usize) -> Vec<usize> {
    let candidates: Vec<PolicyPoint> = among.iter().filter_map(|&i| points.get(i).cloned()).collect();
    let front: Vec<usize> = frontier(&candidates).into_iter().map(|k| among[k]).filter(|&i| Some(i) != baseline).collect();
    let mut out: Vec<usize> = baseline.into_iter().collect();
    if n == 0 {
        return out;
    }
    if front.len() <= n {
        out.extend(&front);
        // A short frontier leaves room: the fastest other printed policies fill it, so
        // the plot shows up to `n` of the table's rows, not one or two.
        let mut rest: Vec<usize> =
            among.iter().copied().filter(|i| !out.contains(i) && points.get(*i).is_some_and(|p| p.p95_s.is_finite())).collect();
        rest.sort_by(|&a, &b| points[a].p95_s.total_cmp(&points[b].p95_s).then(points[a].usd_per_req.total_cmp(&points[b].usd_per_req)));
        let room = (n + usize::from(baseline.is_some())).saturating_sub(out.len());
        out.extend(rest.into_iter().take(room));
        return out;
    }
    let last = front.len() - 1;
    let mut chosen: Vec<usize> = (0..n).map(|k| if n == 1 { 0 } else { (k * last + (n - 1) / 2) / (n - 1) }).collect();
    chosen.dedup();
    out.extend(chosen.into_iter().map(|k| front[k]));
    out
}

/// Merges curves with identical latencies into one (labels joined with ` = `), keeping
/// the first one's place and baseline flag.
fn merge_identical(curves: &[Curve]) -> Vec<Curve> {
    let mut out: Vec<Curve> = Vec::new();
    for c in curves {
        let same = |a: &Curve| {
            a.latencies.len() == c.latencies.len() && a.latencies.iter().zip(&c.latencies).all(|(x, y)| x.to_bits() == y.to_bits())
        };
        match out.iter_mut().find(|a| same(a)) {
            Some(a) => {
                a.label = format!("{} = {}", a.label, c.label);
                a.baseline |= c.baseline;
            }
            None => out.push(c.clone()),
        }
    }
    out
}

/// Step points of P(latency > x) for x from 0: level 1 until the first result, down by
/// 1/n at each, a plateau at the failure share (to `x_end`) when some never finished,
/// otherwise a last drop to `floor` (the bottom of a log axis, which cannot show 0).
fn ccdf_points(latencies: &[f64], x_end: f64, floor: f64) -> (Vec<(f64, f64)>, usize) {
    let mut v: Vec<f64> = latencies.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = latencies.len().max(1) as f64;
    let failed = latencies.len() - v.len();
    let mut pts = vec![(0.0, 1.0)];
    for (k, x) in v.iter().enumerate() {
        let before = (latencies.len() - k) as f64 / n;
        let after = (latencies.len() - k - 1) as f64 / n;
        pts.push((*x, before));
        pts.push((*x, if after > 0.0 { after } else { floor }));
    }
    if failed > 0 {
        pts.push((x_end, failed as f64 / n));
    }
    (pts, failed)
}

/// Bottom of the log axis: the decade at or below 1/n, where the last request's
/// step stays visible.
fn y_floor(curves: &[Curve]) -> f64 {
    let n = curves.iter().map(|c| c.latencies.len()).max().unwrap_or(1).max(1) as f64;
    10f64.powf(((1.0 / n).log10() + 1e-9).floor()).max(1e-6)
}

fn fmt_s(x: f64) -> String {
    if x >= 10.0 || x == 0.0 {
        format!("{x:.0}")
    } else if x >= 1.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn pct(y: f64) -> String {
    let p = y * 100.0;
    if p >= 1.0 {
        format!("{p:.0}%")
    } else if p >= 0.1 {
        format!("{p:.1}%")
    } else if p >= 0.01 {
        format!("{p:.2}%")
    } else {
        format!("{p:.3}%")
    }
}

type Err<'a> = &'a dyn Fn(DrawError) -> PlotError;

/// Draws the tail panel on `area`: one CCDF per (merged) curve, the p50/p95/p99/p99.9
/// levels as dotted guides, a dashed line per deadline (labelled inside the frame) and
/// the legend inside the frame's upper right, where a CCDF leaves room.
fn draw_tails(area: &DrawingArea<SVGBackend, Shift>, title: &str, curves: &[Curve], deadlines: &[f64], err: Err) -> Result<(), PlotError> {
    let curves = merge_identical(curves);
    let floor = y_floor(&curves);
    let x_data = curves.iter().flat_map(|c| c.latencies.iter().copied().filter(|x| x.is_finite())).fold(0f64, f64::max);
    let x_max = deadlines.iter().copied().filter(|d| d.is_finite()).fold(x_data, f64::max).max(f64::MIN_POSITIVE) * 1.04;
    let y_ticks: Vec<f64> = (0..=6).map(|k| 10f64.powi(-k)).filter(|y| *y >= floor * 0.999).collect();
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 17))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(62)
        .build_cartesian_2d(0.0..x_max, (floor..1.0).log_scale().with_key_points(y_ticks))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("end-to-end latency x (s)")
        .y_desc("share of requests slower than x (log)")
        .x_labels(10)
        .x_label_formatter(&|x| fmt_s(*x))
        .y_label_formatter(&|y| pct(*y))
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(err)?;
    let guide = ShapeStyle::from(&GUIDE).stroke_width(1);
    for (level, name) in [(0.5, "p50"), (0.05, "p95"), (0.01, "p99"), (0.001, "p99.9")] {
        if level < floor * 1.5 {
            continue;
        }
        chart.draw_series(DashedLineSeries::new(vec![(0.0, level), (x_max, level)], 2, 4, guide)).map_err(err)?;
        let style = TextStyle::from((FONT, 11).into_font()).color(&GUIDE).pos(Pos::new(HPos::Left, VPos::Bottom));
        chart.draw_series(std::iter::once(Text::new(name.to_string(), (x_max * 0.005, level), style))).map_err(err)?;
    }
    for d in deadlines.iter().copied().filter(|d| d.is_finite()) {
        chart
            .draw_series(DashedLineSeries::new(vec![(d, floor), (d, 1.0)], 6, 4, ShapeStyle::from(&RGBColor(90, 90, 90)).stroke_width(1)))
            .map_err(err)?;
        // Label beside the line at the bottom, on whichever side has room.
        let (h, x) = if d > x_max * 0.8 { (HPos::Right, d - x_max * 0.006) } else { (HPos::Left, d + x_max * 0.006) };
        let style = TextStyle::from((FONT, 12).into_font()).color(&RGBColor(60, 60, 60)).pos(Pos::new(h, VPos::Bottom));
        chart.draw_series(std::iter::once(Text::new(format!("{d} s deadline"), (x, floor * 1.15), style))).map_err(err)?;
    }
    // The baseline is drawn last, on top: dashed, it hides nothing, and no coloured
    // curve can hide it.
    let mut order: Vec<&Curve> = curves.iter().filter(|c| !c.baseline).collect();
    order.extend(curves.iter().filter(|c| c.baseline));
    let mut k = 0;
    for c in order {
        let (pts, failed) = ccdf_points(&c.latencies, x_max, floor);
        let name = if c.baseline { format!("{} (baseline)", c.label) } else { c.label.clone() };
        let label = if failed > 0 { format!("{name}  ({failed}/{} no valid result)", c.latencies.len()) } else { name };
        let (color, dash, width) = if c.baseline {
            (BASELINE, Some((7, 4)), 2)
        } else {
            let (color, dash) = curve_style(k);
            k += 1;
            (color, dash, 2)
        };
        styled_line(&mut chart, pts, color, dash, width, label).map_err(err)?;
    }
    draw_legend(&mut chart).map_err(err)
}

/// Draws the cost/p95 panel: every policy a grey dot, the frontier joined by a line, the
/// policies drawn as curves in their curve colours and labelled inside the frame.
fn draw_frontier(
    area: &DrawingArea<SVGBackend, Shift>,
    cost_label: &str,
    points: &[PolicyPoint],
    highlighted: &[(usize, RGBColor)],
    err: Err,
) -> Result<(), PlotError> {
    let finite: Vec<&PolicyPoint> = points.iter().filter(|p| p.p95_s.is_finite() && p.usd_per_req.is_finite()).collect();
    let (x_lo, x_hi) = finite.iter().fold((f64::INFINITY, 0f64), |(l, h), p| (l.min(p.p95_s), h.max(p.p95_s)));
    let (y_lo, y_hi) = finite.iter().fold((f64::INFINITY, 0f64), |(l, h), p| (l.min(p.usd_per_req), h.max(p.usd_per_req)));
    let (x_lo, x_hi) = if finite.is_empty() { (0.0, 1.0) } else { (x_lo, x_hi) };
    let (y_lo, y_hi) = if finite.is_empty() { (0.0, 1.0) } else { (y_lo, y_hi) };
    let xpad = ((x_hi - x_lo) * 0.08).max(x_hi * 0.02).max(1e-9);
    let ypad = ((y_hi - y_lo) * 0.10).max(y_hi * 0.02).max(1e-9);
    let (x0, x1) = ((x_lo - xpad).max(0.0), x_hi + xpad);
    let (y0, y1) = ((y_lo - ypad).max(0.0), y_hi + ypad);
    let hidden = points.len() - finite.len();
    let caption = if hidden > 0 {
        format!("Every policy: cost against p95 ({hidden} without a p95 not shown)")
    } else {
        "Every policy: cost against p95".to_string()
    };
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, 17))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("p95 latency (s)")
        .y_desc(cost_label)
        .x_label_formatter(&|x| fmt_s(*x))
        .y_label_formatter(&|y| format!("{y:.4}"))
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(finite.iter().map(|p| Circle::new((p.p95_s, p.usd_per_req), 3, ShapeStyle::from(&RGBColor(170, 170, 170)).filled())))
        .map_err(err)?;
    let front = frontier(points);
    if !front.is_empty() {
        // A staircase: between two frontier points nothing cheaper is reachable.
        let mut stairs = Vec::new();
        for (k, &i) in front.iter().enumerate() {
            let p = &points[i];
            if k > 0 {
                stairs.push((p.p95_s, points[front[k - 1]].usd_per_req));
            }
            stairs.push((p.p95_s, p.usd_per_req));
        }
        chart
            .draw_series(LineSeries::new(stairs, ShapeStyle::from(&RGBColor(110, 110, 110)).stroke_width(1)))
            .map_err(err)?
            .label("frontier: nothing both cheaper and faster")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], ShapeStyle::from(&RGBColor(110, 110, 110)).stroke_width(1)));
        chart
            .draw_series(front.iter().map(|&i| {
                Circle::new((points[i].p95_s, points[i].usd_per_req), 4, ShapeStyle::from(&RGBColor(110, 110, 110)).stroke_width(1))
            }))
            .map_err(err)?;
    }
    let mid_x = (x0 + x1) / 2.0;
    for &(i, color) in highlighted {
        let p = &points[i];
        if !(p.p95_s.is_finite() && p.usd_per_req.is_finite()) {
            continue;
        }
        chart.draw_series(std::iter::once(Circle::new((p.p95_s, p.usd_per_req), 6, ShapeStyle::from(&color).filled()))).map_err(err)?;
        // Labels point towards the middle so they stay inside the frame.
        let (h, dx) = if p.p95_s > mid_x { (HPos::Right, -(x1 - x0) * 0.015) } else { (HPos::Left, (x1 - x0) * 0.015) };
        let style = TextStyle::from((FONT, 11).into_font()).color(&color).pos(Pos::new(h, VPos::Center));
        chart.draw_series(std::iter::once(Text::new(p.label.clone(), (p.p95_s + dx, p.usd_per_req), style))).map_err(err)?;
    }
    draw_legend(&mut chart).map_err(err)
}

/// The series legend every panel draws: upper right, on a light box.
fn draw_legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FONT, 12))
        .border_style(RGBColor(200, 200, 200))
        .background_style(WHITE.mix(0.92))
        .draw()
}

/// The tail plot alone: one CCDF per curve (see the module docs) with the deadlines.
pub fn tail_svg(path: &Path, title: &str, curves: &[Curve], deadlines: &[f64]) -> Result<(), PlotError> {
    let err = &PlotError::at(path);
    let root = SVGBackend::new(path, (1000, 620)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    draw_tails(&root, title, curves, deadlines, err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// The policy plot: the tails of `curves` (which index into `points`, baseline flagged)
/// on the left, and every policy's cost against p95 with the frontier on the right, the
/// drawn policies highlighted in their curve colours.
pub fn policy_svg(
    path: &Path,
    title: &str,
    points: &[PolicyPoint],
    curves: &[(usize, Curve)],
    deadlines: &[f64],
    cost_label: &str,
) -> Result<(), PlotError> {
    let err = &PlotError::at(path);
    let root = SVGBackend::new(path, (1600, 640)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (left, right) = root.split_horizontally(920);
    let only: Vec<Curve> = curves.iter().map(|(_, c)| c.clone()).collect();
    draw_tails(&left, title, &only, deadlines, err)?;
    // The same colours as the tail panel: merged curves share their first member's colour.
    let merged = merge_identical(&only);
    let mut k = 0;
    let mut colours: Vec<RGBColor> = Vec::new();
    for m in &merged {
        colours.push(if m.baseline {
            BASELINE
        } else {
            k += 1;
            curve_style(k - 1).0
        });
    }
    let highlighted: Vec<(usize, RGBColor)> = curves
        .iter()
        .map(|(i, c)| {
            let k = merged.iter().position(|m| {
                m.latencies.len() == c.latencies.len() && m.latencies.iter().zip(&c.latencies).all(|(a, b)| a.to_bits() == b.to_bits())
            });
            (*i, k.map_or(BASELINE, |k| colours[k]))
        })
        .collect();
    draw_frontier(&right, cost_label, points, &highlighted, err)?;
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(label: &str, p95: f64, usd: f64) -> PolicyPoint {
        PolicyPoint { label: label.into(), p95_s: p95, usd_per_req: usd }
    }

    #[test]
    fn frontier_keeps_only_undominated_policies_fastest_first() {
        let pts = vec![
            pt("slow-cheap", 100.0, 0.01),
            pt("fast-dear", 20.0, 0.05),
            pt("dominated", 30.0, 0.06),
            pt("middle", 25.0, 0.02),
            pt("no-p95", f64::INFINITY, 0.001),
            pt("tie-a", 25.0, 0.02),
        ];
        assert_eq!(frontier(&pts), vec![1, 3, 5, 0]);
    }

    #[test]
    fn picked_curves_are_the_baseline_and_both_ends_of_the_frontier() {
        let pts: Vec<PolicyPoint> = (0..10).map(|k| pt(&format!("p{k}"), 10.0 + k as f64, 0.1 - 0.01 * k as f64)).collect();
        let base = Some(9);
        let all: Vec<usize> = (0..pts.len()).collect();
        let picked = pick_curves(&pts, &all, base, 4);
        assert_eq!(picked[0], 9);
        assert_eq!(picked.len(), 5);
        assert_eq!(picked[1], 0, "the fastest frontier policy is drawn");
        assert_eq!(picked[4], 8, "the cheapest frontier policy other than the baseline is drawn");
        assert_eq!(pick_curves(&pts, &all, None, 20).len(), 10);
    }

    #[test]
    fn picked_curves_come_only_from_the_printed_rows() {
        // p0 is the fastest of all, but the table does not print it: the plot must not
        // draw a policy the reader cannot find in the table.
        let pts: Vec<PolicyPoint> = (0..6).map(|k| pt(&format!("p{k}"), 10.0 + k as f64, 0.1 - 0.01 * k as f64)).collect();
        let printed = [2, 3, 5];
        let picked = pick_curves(&pts, &printed, None, 4);
        assert_eq!(picked, vec![2, 3, 5]);
        // A frontier of one (p1 is both fastest and cheapest) is filled up to n with
        // the fastest other printed rows.
        let mut pts = pts;
        pts[1] = pt("best", 1.0, 0.001);
        assert_eq!(pick_curves(&pts, &[1, 2, 3, 4, 5], Some(5), 2), vec![5, 1, 2]);
        assert!(pick_curves(&pts, &printed, Some(5), 1).iter().all(|i| printed.contains(i)));
    }

    #[test]
    fn identical_curves_are_merged_into_one_labelled_with_both() {
        let a = Curve { label: "a".into(), latencies: vec![1.0, 2.0], baseline: false };
        let b = Curve { label: "b".into(), latencies: vec![1.0, 2.0], baseline: false };
        let c = Curve { label: "c".into(), latencies: vec![1.0, 3.0], baseline: true };
        let m = merge_identical(&[a, c, b]);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].label, "a = b");
        assert!(m[1].baseline);
    }

    #[test]
    fn ccdf_steps_down_by_one_over_n_and_plateaus_at_the_failure_share() {
        let (pts, failed) = ccdf_points(&[2.0, 1.0, f64::INFINITY, 3.0], 10.0, 0.01);
        assert_eq!(failed, 1);
        assert_eq!(pts.first(), Some(&(0.0, 1.0)));
        assert_eq!(pts[1..3], [(1.0, 1.0), (1.0, 0.75)]);
        assert_eq!(pts.last(), Some(&(10.0, 0.25)), "one in four never finished");
        let (pts, _) = ccdf_points(&[1.0, 2.0], 10.0, 0.01);
        assert_eq!(pts.last(), Some(&(2.0, 0.01)), "the last drop reaches the axis floor");
    }

    #[test]
    fn plots_render_with_labels_inside_the_frame() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.svg");
        let pts = vec![pt("single:a", 100.0, 0.02), pt("hedge:a->b@10s", 30.0, 0.021), pt("cutover:a->b", 22.0, 0.015)];
        let lat = |k: f64| (0..200).map(|i| if i == 7 { f64::INFINITY } else { k + i as f64 * 0.3 }).collect::<Vec<_>>();
        let curves = vec![
            (0, Curve { label: "single:a".into(), latencies: lat(5.0), baseline: true }),
            (2, Curve { label: "cutover:a->b".into(), latencies: lat(4.0), baseline: false }),
        ];
        policy_svg(&path, "t", &pts, &curves, &[60.0], "billed $/request").unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("60 s deadline") && svg.contains("(baseline)") && svg.contains("p99"));
        assert!(svg.contains("cutover:a-&gt;b") || svg.contains("cutover:a->b"));
        tail_svg(&path, "t", &[curves[0].1.clone()], &[]).unwrap();
    }
}
