//! SVG plots for the HTML report (plotters' SVG backend: text, no fonts, no network).
//!
//! Every function returns one `<svg>` element as a string, or `None` when there is
//! nothing to draw. Drawing errors cannot come from the data (the backend writes into a
//! string), so they become `None` too rather than a half-drawn plot.

use plotters::prelude::*;

use super::curves::BatteryCurve;
use crate::stats::{median, modified_z_outliers};
use crate::store::FindingState;

/// Colors of variants, in plan order (Tableau 10; distinguishable, print-safe).
pub const PALETTE: [RGBColor; 10] = [
    RGBColor(0x4e, 0x79, 0xa7),
    RGBColor(0xf2, 0x8e, 0x2b),
    RGBColor(0xe1, 0x57, 0x59),
    RGBColor(0x76, 0xb7, 0xb2),
    RGBColor(0x59, 0xa1, 0x4f),
    RGBColor(0xed, 0xc9, 0x48),
    RGBColor(0xb0, 0x7a, 0xa1),
    RGBColor(0xff, 0x9d, 0xa7),
    RGBColor(0x9c, 0x75, 0x5f),
    RGBColor(0xba, 0xb0, 0xac),
];

pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

const WIDTH: u32 = 640;

/// Above this many values a variant's points are not drawn, only its box: thousands of
/// overlapping dots show nothing more and make the page heavy.
pub const MAX_POINTS: usize = 200;

/// One variant's values of one metric.
pub struct Strip<'a> {
    pub variant: &'a str,
    /// Index into the palette (the variant's position in the plan).
    pub color: usize,
    pub values: &'a [f64],
}

/// A box plot (quartiles, median, whiskers to the most extreme values within 1.5 IQR)
/// with every value drawn over it as a jittered point (up to [`MAX_POINTS`] per
/// variant); outliers (modified z > 3.5) are ringed in black.
pub fn strip_box_plot(title: &str, unit: &str, strips: &[Strip]) -> Option<String> {
    let all: Vec<f64> = strips.iter().flat_map(|s| s.values.iter().copied()).collect();
    if all.is_empty() {
        return None;
    }
    let (lo, hi) = padded_range(&all);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 300)).into_drawing_area();
        root.fill(&WHITE).ok()?;
        let names: Vec<String> = strips.iter().map(|s| s.variant.to_string()).collect();
        let mut chart = indexed_chart(&root, title, unit, &names, lo..hi)?;
        for (i, s) in strips.iter().enumerate() {
            let x = i as f64;
            let c = color(s.color);
            if let Some(q) = quartiles(s.values) {
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(x - 0.25, q.q1), (x + 0.25, q.q3)],
                        c.mix(0.25).filled(),
                    )))
                    .ok()?;
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(x - 0.25, q.q1), (x + 0.25, q.q3)],
                        c.stroke_width(1),
                    )))
                    .ok()?;
                let lines = [
                    vec![(x - 0.25, q.median), (x + 0.25, q.median)],
                    vec![(x, q.q3), (x, q.high)],
                    vec![(x, q.q1), (x, q.low)],
                    vec![(x - 0.1, q.high), (x + 0.1, q.high)],
                    vec![(x - 0.1, q.low), (x + 0.1, q.low)],
                ];
                chart.draw_series(lines.into_iter().map(|l| PathElement::new(l, c.stroke_width(2)))).ok()?;
            }
            if s.values.len() > MAX_POINTS {
                continue;
            }
            let flagged = modified_z_outliers(s.values);
            let points = s.values.iter().enumerate().map(|(j, &v)| {
                // Deterministic jitter (golden-ratio sequence), so the same data draw the same plot.
                let dx = ((j as f64 * 0.618_033_988_75) % 1.0 - 0.5) * 0.3;
                (x + dx, v, flagged.contains(&j))
            });
            for (px, v, out) in points {
                chart.draw_series(std::iter::once(Circle::new((px, v), 4, c.filled()))).ok()?;
                if out {
                    chart.draw_series(std::iter::once(Circle::new((px, v), 7, BLACK.stroke_width(2)))).ok()?;
                }
            }
        }
        root.present().ok()?;
    }
    Some(svg)
}

type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// A chart whose x positions 0, 1, … are labelled by `names` (a variant, a date), with
/// its mesh drawn.
fn indexed_chart<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    title: &str,
    unit: &str,
    names: &[String],
    y: std::ops::Range<f64>,
) -> Option<Chart<'a, 'b>> {
    let k = names.len();
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(-0.5f64..(k as f64 - 0.5), y)
        .ok()?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .max_light_lines(1)
        .x_labels(k.min(12) + 2)
        .x_label_formatter(&|x| index_label(names, *x))
        .y_desc(unit)
        .draw()
        .ok()?;
    Some(chart)
}

/// The name at a whole-number position, nothing between them.
fn index_label(names: &[String], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() < 1e-9 && i >= 0.0 { names.get(i as usize).cloned().unwrap_or_default() } else { String::new() }
}

/// Battery level against time, one line per attempt, colored by variant (invalid
/// attempts dashed in grey would hide nothing: they are drawn thin and grey).
pub fn battery_curves(title: &str, curves: &[(&BatteryCurve, usize)]) -> Option<String> {
    let pts: Vec<(f64, f64)> = curves.iter().flat_map(|(c, _)| c.points.iter().copied()).collect();
    if pts.is_empty() {
        return None;
    }
    let x_max = pts.iter().map(|p| p.0).fold(0.0f64, f64::max).max(1.0);
    let ys: Vec<f64> = pts.iter().map(|p| p.1).collect();
    let (lo, hi) = padded_range(&ys);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 320)).into_drawing_area();
        root.fill(&WHITE).ok()?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..x_max, lo..hi)
            .ok()?;
        chart
            .configure_mesh()
            .max_light_lines(1)
            .x_desc("minutes since launch")
            .y_desc("battery level (%)")
            .draw()
            .ok()?;
        for (c, color_index) in curves {
            let style =
                if c.valid { color(*color_index).stroke_width(2) } else { RGBColor(0x99, 0x99, 0x99).stroke_width(1) };
            chart.draw_series(LineSeries::new(c.points.iter().copied(), style)).ok()?;
        }
        root.present().ok()?;
    }
    Some(svg)
}

/// One soak on the timeline.
pub struct Span<'a> {
    pub device: &'a str,
    /// Hours on the device clock, from the campaign's first soak.
    pub start_h: f64,
    pub end_h: f64,
    pub color: usize,
    pub valid: bool,
}

/// Soaks per device over the device clock: a bar per attempt in its variant's color;
/// invalid attempts outlined in red.
pub fn timeline(devices: &[&str], spans: &[Span]) -> Option<String> {
    if spans.is_empty() || devices.is_empty() {
        return None;
    }
    let x_max = spans.iter().map(|s| s.end_h).fold(0.0f64, f64::max).max(0.1) * 1.02;
    let height = 80 + 40 * devices.len() as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).ok()?;
        let mut chart = ChartBuilder::on(&root)
            .caption("trial timeline (soaks, device clock)", ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(110)
            .build_cartesian_2d(0.0..x_max, -0.5f64..(devices.len() as f64 - 0.5))
            .ok()?;
        let names: Vec<String> = devices.iter().map(|d| d.to_string()).collect();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .max_light_lines(1)
            .y_labels(devices.len() + 2)
            .y_label_formatter(&|y| index_label(&names, *y))
            .x_desc("hours")
            .draw()
            .ok()?;
        for s in spans {
            let Some(row) = devices.iter().position(|d| *d == s.device) else { continue };
            let y = row as f64;
            let corners = [(s.start_h, y - 0.3), (s.end_h, y + 0.3)];
            chart.draw_series(std::iter::once(Rectangle::new(corners, color(s.color).filled()))).ok()?;
            if !s.valid {
                chart.draw_series(std::iter::once(Rectangle::new(corners, RED.stroke_width(2)))).ok()?;
            }
        }
        root.present().ok()?;
    }
    Some(svg)
}

/// One campaign of a trend: its mean with the CI, labelled by date.
pub struct TrendPoint<'a> {
    pub label: &'a str,
    pub mean: Option<f64>,
    pub ci: Option<(f64, f64)>,
    /// The build's hash differs from the previous point's: drawn hollow.
    pub new_build: bool,
}

/// A change point at `index` (the first point of the new level), with the review's state.
pub struct TrendChange {
    pub index: usize,
    pub mean_before: f64,
    pub mean_after: f64,
    pub state: Option<FindingState>,
}

/// What a review did at a point.
pub enum TrendMark {
    /// A confirmation campaign ran for the point's finding.
    Confirmation { index: usize, state: FindingState },
    /// The point's slot alerted.
    Alert { index: usize },
}

const WORSE: RGBColor = RGBColor(0xc0, 0x39, 0x2b);
const BETTER: RGBColor = RGBColor(0x27, 0xae, 0x60);
const PENDING: RGBColor = RGBColor(0xf2, 0x8e, 0x2b);
const DISMISSED: RGBColor = RGBColor(0x99, 0x99, 0x99);

/// Red: confirmed; orange: still open; grey: dismissed; blue: found, never reviewed.
fn change_color(state: Option<FindingState>) -> RGBColor {
    match state {
        Some(FindingState::Confirmed) => WORSE,
        Some(FindingState::Confirming | FindingState::Unconfirmed) => PENDING,
        Some(FindingState::NotConfirmed | FindingState::SameBuild) => DISMISSED,
        Some(FindingState::Inconclusive | FindingState::Unconfirmable) | None => color(0),
    }
}

/// A metric's campaign means over time: the mean line with CI whiskers (hollow where the
/// build changed), the segment means between change points (dashed), each change point
/// as a vertical dashed line between its two points coloured by its review's state,
/// confirmations as triangles above their point and alerts as a red cross at the top.
pub fn trend(
    title: &str,
    unit: &str,
    points: &[TrendPoint],
    changes: &[TrendChange],
    marks: &[TrendMark],
) -> Option<String> {
    let mut ys: Vec<f64> = Vec::new();
    for p in points {
        ys.extend(p.mean);
        if let Some((lo, hi)) = p.ci {
            ys.extend([lo, hi]);
        }
    }
    if ys.is_empty() {
        return None;
    }
    ys.extend(changes.iter().flat_map(|c| [c.mean_before, c.mean_after]));
    let (lo, hi) = padded_range(&ys);
    // Headroom above the data for the alert crosses.
    let step = (hi - lo) * 0.06;
    let top = hi + 2.0 * step;
    let n = points.len();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 300)).into_drawing_area();
        root.fill(&WHITE).ok()?;
        let labels: Vec<String> = points.iter().map(|p| p.label.to_string()).collect();
        let mut chart = indexed_chart(&root, title, unit, &labels, lo..top)?;
        let c = color(0);
        let means: Vec<(f64, f64)> =
            points.iter().enumerate().filter_map(|(i, p)| p.mean.map(|m| (i as f64, m))).collect();
        chart.draw_series(LineSeries::new(means.iter().copied(), c.stroke_width(2))).ok()?;
        for (i, p) in points.iter().enumerate() {
            let x = i as f64;
            if let Some((l, h)) = p.ci {
                let whisker =
                    [vec![(x, l), (x, h)], vec![(x - 0.12, l), (x + 0.12, l)], vec![(x - 0.12, h), (x + 0.12, h)]];
                chart.draw_series(whisker.into_iter().map(|w| PathElement::new(w, c.stroke_width(1)))).ok()?;
            }
            if let Some(m) = p.mean {
                let style = if p.new_build { c.stroke_width(2) } else { c.filled() };
                chart.draw_series(std::iter::once(Circle::new((x, m), 4, style))).ok()?;
            }
        }
        // Segments: up to each change point at its mean before, the last one on at its mean after.
        let mut start = 0usize;
        for (k, ch) in changes.iter().enumerate() {
            let dashed = |a: usize, b: usize, y: f64| {
                DashedLineSeries::new([(a as f64 - 0.3, y), (b as f64 - 0.7, y)], 6, 4, DISMISSED.stroke_width(1))
            };
            chart.draw_series(dashed(start, ch.index, ch.mean_before)).ok()?;
            if k + 1 == changes.len() {
                chart.draw_series(dashed(ch.index, n, ch.mean_after)).ok()?;
            }
            start = ch.index;
            let x = ch.index as f64 - 0.5;
            let style = change_color(ch.state).stroke_width(2);
            chart.draw_series(DashedLineSeries::new([(x, lo), (x, top)], 8, 5, style)).ok()?;
        }
        for m in marks {
            match *m {
                TrendMark::Confirmation { index, state } => {
                    let Some(p) = points.get(index) else { continue };
                    let Some(base) = p.ci.map(|c| c.1).or(p.mean) else { continue };
                    let fill = match state {
                        FindingState::Confirmed => WORSE,
                        FindingState::NotConfirmed => BETTER,
                        _ => PENDING,
                    };
                    let at = (index as f64, base + step);
                    chart.draw_series(std::iter::once(TriangleMarker::new(at, 6, fill.filled()))).ok()?;
                }
                TrendMark::Alert { index } => {
                    let at = (index as f64, top - step * 0.6);
                    chart.draw_series(std::iter::once(Cross::new(at, 5, WORSE.stroke_width(2)))).ok()?;
                }
            }
        }
        root.present().ok()?;
    }
    Some(svg)
}

struct Quartiles {
    q1: f64,
    median: f64,
    q3: f64,
    low: f64,
    high: f64,
}

/// Tukey's box: quartiles (Hyndman & Fan definition 7), whiskers to the most extreme
/// values within 1.5 IQR of the box.
fn quartiles(xs: &[f64]) -> Option<Quartiles> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let q = |p: f64| {
        let h = (v.len() - 1) as f64 * p;
        let (i, f) = (h.floor() as usize, h - h.floor());
        v[i] + f * (v[(i + 1).min(v.len() - 1)] - v[i])
    };
    let (q1, q3) = (q(0.25), q(0.75));
    let iqr = q3 - q1;
    let low = v.iter().copied().find(|&x| x >= q1 - 1.5 * iqr).unwrap_or(q1);
    let high = v.iter().rev().copied().find(|&x| x <= q3 + 1.5 * iqr).unwrap_or(q3);
    Some(Quartiles { q1, median: median(xs)?, q3, low, high })
}

/// The data range with 8 % padding; a constant series gets a band around it.
fn padded_range(xs: &[f64]) -> (f64, f64) {
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let span = hi - lo;
    let pad = if span > 0.0 { span * 0.08 } else { lo.abs().max(1.0) * 0.05 };
    (lo - pad, hi + pad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strip_plot_draws_every_point_and_the_variant_names() {
        let a = [12.0, 12.5, 11.5, 12.2, 11.8, 30.0];
        let b = [185.0, 190.0, 180.0];
        let svg = strip_box_plot(
            "cpu_pct",
            "%",
            &[
                Strip { variant: "control", color: 0, values: &a },
                Strip { variant: "envoy-poll", color: 1, values: &b },
            ],
        )
        .unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{}", &svg[..80.min(svg.len())]);
        assert!(svg.contains("\ncontrol\n") && svg.contains("\nenvoy-poll\n"), "variant labels");
        // 9 points, each a filled circle in its variant's color, plus the ring of the outlier 30.
        assert_eq!(svg.matches("<circle").count(), 10, "{svg}");
        assert!(svg.contains("#4E79A7") || svg.contains("#4e79a7"));
        assert_eq!(strip_box_plot("x", "", &[Strip { variant: "a", color: 0, values: &[] }]), None);
    }

    #[test]
    fn many_values_draw_the_box_only() {
        let many: Vec<f64> = (0..=MAX_POINTS).map(|i| i as f64).collect();
        let svg = strip_box_plot("x", "", &[Strip { variant: "a", color: 0, values: &many }]).unwrap();
        assert_eq!(svg.matches("<circle").count(), 0);
        assert!(svg.contains("<rect") && svg.contains("<polyline"), "box and whiskers drawn");
    }

    #[test]
    fn constant_values_and_quartiles() {
        let one = [1.0; 6];
        assert!(strip_box_plot("energy", "level", &[Strip { variant: "control", color: 0, values: &one }]).is_some());
        let q = quartiles(&[1.0, 2.0, 3.0, 4.0, 5.0, 100.0]).unwrap();
        assert_eq!((q.q1, q.median, q.q3), (2.25, 3.5, 4.75));
        assert_eq!((q.low, q.high), (1.0, 5.0), "100 lies beyond 1.5 IQR");
    }

    #[test]
    fn curves_and_timeline() {
        let c = BatteryCurve {
            trial_key: "0000-d-a-r0".into(),
            device: "d".into(),
            model: "m".into(),
            variant: "a".into(),
            valid: true,
            points: vec![(0.0, 100.0), (30.0, 95.0), (60.0, 90.0)],
        };
        let svg = battery_curves("battery", &[(&c, 2)]).unwrap();
        assert!(svg.contains("<polyline") || svg.contains("<path"), "{svg}");
        assert_eq!(battery_curves("battery", &[]), None);
        let spans = [
            Span { device: "d1", start_h: 0.0, end_h: 1.0, color: 0, valid: true },
            Span { device: "d2", start_h: 1.1, end_h: 2.1, color: 1, valid: false },
        ];
        let svg = timeline(&["d1", "d2"], &spans).unwrap();
        assert!(svg.contains("\nd1\n") && svg.contains("\nd2\n"));
        assert_eq!(timeline(&[], &spans), None);
    }

    #[test]
    fn trend_draws_points_whiskers_changes_and_marks() {
        let labels = ["01-05", "01-12", "01-19", "01-26"];
        let points: Vec<TrendPoint> = labels
            .iter()
            .enumerate()
            .map(|(i, l)| TrendPoint {
                label: l,
                mean: Some(if i < 2 { 185.0 } else { 203.5 }),
                ci: (i != 1).then_some((180.0 + i as f64, 190.0 + 10.0 * i as f64)),
                new_build: i == 2,
            })
            .collect();
        let changes =
            [TrendChange { index: 2, mean_before: 185.0, mean_after: 203.5, state: Some(FindingState::Confirmed) }];
        let marks = [
            TrendMark::Confirmation { index: 2, state: FindingState::Confirmed },
            TrendMark::Alert { index: 2 },
            TrendMark::Confirmation { index: 9, state: FindingState::Confirmed },
        ];
        let svg = trend("cpu_pct", "%", &points, &changes, &marks).unwrap();
        assert_eq!(svg, trend("cpu_pct", "%", &points, &changes, &marks).unwrap(), "deterministic");
        assert!(svg.contains("\n01-05\n") && svg.contains("\n01-26\n"), "dates label the x axis");
        assert_eq!(svg.matches("<circle").count(), 4, "one per mean");
        let hollow = svg.lines().filter(|l| l.starts_with("<circle") && l.contains("fill=\"none\"")).count();
        assert_eq!(hollow, 1, "the new build's point is hollow");
        // A triangle is the one polygon; a cross is two lines in the alert red.
        assert_eq!(svg.matches("<polygon").count(), 1, "{svg}");
        assert!(svg.to_uppercase().matches("#C0392B").count() >= 3, "red change line, triangle and cross");
        // Three whiskers of three paths each, plus the mean line and the dashes.
        let without = trend("cpu_pct", "%", &points, &[], &[]).unwrap();
        assert!(svg.matches("<polyline").count() > without.matches("<polyline").count() + 2);
        assert_eq!(without.matches("<polygon").count(), 0);
        let none = [TrendPoint { label: "x", mean: None, ci: None, new_build: false }];
        assert_eq!(trend("x", "", &none, &[], &[]), None);
    }
}
