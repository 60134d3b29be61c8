//! SVG plots for the HTML report (plotters' SVG backend: text, no fonts, no network).
//!
//! Every function returns one `<svg>` element as a string, or `None` when there is
//! nothing to draw. Drawing errors cannot come from the data (the backend writes into a
//! string), so they become `None` too rather than a half-drawn plot.

use std::collections::HashMap;

use plotters::prelude::*;

use crate::report::model::curves::BatteryCurve;
use crate::report::model::power_bands::PowerBand;
use crate::report::render::sample::{Bin, bins, stride};
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

/// Above this many values a variant draws every k-th of them (k = ⌈n / 200⌉) and its
/// flagged outliers, over a box from every value: thousands of overlapping dots show
/// nothing more and make the page heavy.
pub const MAX_POINTS: usize = 200;

/// One variant's values of one metric.
pub struct Strip<'a> {
    pub variant: &'a str,
    /// Index into the palette (the variant's position in the plan).
    pub color: usize,
    pub values: &'a [f64],
}

/// A drawn plot: the `<svg>` element, and what was left out of it. It reads as its SVG
/// (`Deref<Target = str>`), since that is what callers mostly want.
#[derive(Debug, Clone, PartialEq)]
pub struct Plot<S> {
    pub svg: String,
    pub sampled: S,
}

impl<S> std::ops::Deref for Plot<S> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.svg
    }
}

impl<S> std::fmt::Display for Plot<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.svg)
    }
}

/// A strip plot, with the variants whose points were sampled (none under [`MAX_POINTS`]).
pub type StripPlot = Plot<Vec<StripSample>>;

/// One variant's points drawn in a strip plot above [`MAX_POINTS`] values.
#[derive(Debug, Clone, PartialEq)]
pub struct StripSample {
    pub variant: String,
    /// Values drawn by the stride (every `step`-th in trial order), of `total`.
    pub drawn: usize,
    pub total: usize,
    pub step: usize,
    /// Flagged outliers drawn (all of them up to [`MAX_POINTS`], else every k-th), of `outliers`.
    pub outliers_drawn: usize,
    pub outliers: usize,
}

/// A box plot (quartiles, median, whiskers to the most extreme values within 1.5 IQR)
/// with every value drawn over it as a jittered point (above [`MAX_POINTS`] per variant,
/// a stride sample and the outliers); outliers (modified z > 3.5) are ringed in black.
pub fn strip_box_plot(title: &str, unit: &str, strips: &[Strip]) -> Option<StripPlot> {
    let all: Vec<f64> = strips.iter().flat_map(|s| s.values.iter().copied()).collect();
    if all.is_empty() {
        return None;
    }
    let (lo, hi) = padded_range(&all);
    let mut svg = String::new();
    let mut sampled = Vec::new();
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
            let flagged = modified_z_outliers(s.values);
            let (drawn, sample) = point_sample(s, &flagged);
            sampled.extend(sample);
            for j in drawn {
                let v = s.values[j];
                // Deterministic jitter (golden-ratio sequence) by the value's index among
                // all, so a sampled point sits where it does in the full plot.
                let px = x + ((j as f64 * 0.618_033_988_75) % 1.0 - 0.5) * 0.3;
                chart.draw_series(std::iter::once(Circle::new((px, v), 4, c.filled()))).ok()?;
                if flagged.binary_search(&j).is_ok() {
                    chart.draw_series(std::iter::once(Circle::new((px, v), 7, BLACK.stroke_width(2)))).ok()?;
                }
            }
        }
        root.present().ok()?;
    }
    Some(Plot { svg, sampled })
}

/// The indices of a strip's values to draw, ascending: all up to [`MAX_POINTS`], else a
/// stride sample merged with the flagged outliers (`flagged`, ascending; themselves
/// strided above [`MAX_POINTS`]), and what was left out.
fn point_sample(s: &Strip, flagged: &[usize]) -> (Vec<usize>, Option<StripSample>) {
    let n = s.values.len();
    if n <= MAX_POINTS {
        return ((0..n).collect(), None);
    }
    let (step, picks) = stride(n, MAX_POINTS);
    let mut drawn: Vec<usize> = picks.collect();
    let (_, outliers) = stride(flagged.len(), MAX_POINTS);
    let sample = StripSample {
        variant: s.variant.to_string(),
        drawn: drawn.len(),
        total: n,
        step,
        outliers_drawn: outliers.len(),
        outliers: flagged.len(),
    };
    drawn.extend(outliers.map(|k| flagged[k]));
    drawn.sort_unstable();
    drawn.dedup();
    (drawn, Some(sample))
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

/// A white chart over a time axis, with its mesh drawn: `x` and `y` are the ranges and
/// their descriptions.
fn time_chart<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    title: &str,
    x: (std::ops::Range<f64>, &str),
    y: (std::ops::Range<f64>, &str),
) -> Option<Chart<'a, 'b>> {
    root.fill(&WHITE).ok()?;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(x.0, y.0)
        .ok()?;
    chart.configure_mesh().max_light_lines(1).x_desc(x.1).y_desc(y.1).draw().ok()?;
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
        let mut chart = time_chart(&root, title, (0.0..x_max, "minutes since launch"), (lo..hi, "battery level (%)"))?;
        for (c, color_index) in curves {
            let style =
                if c.valid { color(*color_index).stroke_width(2) } else { RGBColor(0x99, 0x99, 0x99).stroke_width(1) };
            chart.draw_series(LineSeries::new(c.points.iter().copied(), style)).ok()?;
        }
        root.present().ok()?;
    }
    Some(svg)
}

/// The power monitor's bands of one model: per variant the median across attempts as a
/// line and the quartiles as a shaded band, over seconds (or minutes) since the soak began.
pub fn power_bands(title: &str, bands: &[(&PowerBand, usize)]) -> Option<String> {
    let pts: Vec<&(f64, f64, f64, f64)> = bands.iter().flat_map(|(b, _)| b.points.iter()).collect();
    if pts.is_empty() {
        return None;
    }
    let x_end = pts.iter().map(|p| p.0).fold(0.0f64, f64::max);
    let (scale, unit) = if x_end > 600.0 { (60.0, "minutes") } else { (1.0, "seconds") };
    let x_max = (x_end / scale).max(1e-9) * 1.02;
    let ys: Vec<f64> = pts.iter().flat_map(|p| [p.1, p.3]).collect();
    let (lo, hi) = padded_range(&ys);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 320)).into_drawing_area();
        let x_desc = format!("{unit} since the soak began");
        let mut chart = time_chart(&root, title, (0.0..x_max, &x_desc), (lo.min(0.0)..hi, "power (mW)"))?;
        for (b, color_index) in bands {
            let c = color(*color_index);
            let upper = b.points.iter().map(|p| (p.0 / scale, p.3));
            let lower = b.points.iter().rev().map(|p| (p.0 / scale, p.1));
            chart
                .draw_series(std::iter::once(Polygon::new(upper.chain(lower).collect::<Vec<_>>(), c.mix(0.25))))
                .ok()?;
            let median = b.points.iter().map(|p| (p.0 / scale, p.2));
            chart
                .draw_series(LineSeries::new(median, c.stroke_width(2)))
                .ok()?
                .label(format!("{} (n = {})", b.variant, b.attempts))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
        }
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().ok()?;
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

/// Above this many soaks the timeline is binned ([`Binned`]): 144 000 bars are 20 MB of
/// SVG, narrower than a pixel each.
pub const MAX_SPANS: usize = 2_000;
/// Columns per device of a binned timeline: about one per pixel of the plot area.
pub const TIMELINE_COLUMNS: usize = 560;

/// How a timeline above [`MAX_SPANS`] soaks was binned.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Binned {
    /// Columns per device, each `minutes` wide.
    pub columns: usize,
    pub minutes: f64,
}

/// A timeline, binned or not.
pub type TimelinePlot = Plot<Option<Binned>>;

/// Soaks per device over the device clock: a bar per attempt in its variant's color;
/// invalid attempts outlined in red. Above [`MAX_SPANS`] soaks, each device's row is cut
/// into [`TIMELINE_COLUMNS`] columns instead, colored by the variant with the most soak
/// time in the column and marked red above where an invalid attempt reaches into it; a
/// column without soak stays empty, so cool-downs and charging still show as gaps.
pub fn timeline(devices: &[&str], spans: &[Span]) -> Option<TimelinePlot> {
    if spans.is_empty() || devices.is_empty() {
        return None;
    }
    let x_max = spans.iter().map(|s| s.end_h).fold(0.0f64, f64::max).max(0.1) * 1.02;
    let height = 80 + 40 * devices.len() as u32;
    let binned = (spans.len() > MAX_SPANS)
        .then(|| Binned { columns: TIMELINE_COLUMNS, minutes: x_max * 60.0 / TIMELINE_COLUMNS as f64 });
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
        if binned.is_some() {
            binned_rows(&mut chart, devices, spans, x_max)?;
        } else {
            for s in spans {
                let Some(row) = devices.iter().position(|d| *d == s.device) else { continue };
                let y = row as f64;
                let corners = [(s.start_h, y - 0.3), (s.end_h, y + 0.3)];
                chart.draw_series(std::iter::once(Rectangle::new(corners, color(s.color).filled()))).ok()?;
                if !s.valid {
                    chart.draw_series(std::iter::once(Rectangle::new(corners, RED.stroke_width(2)))).ok()?;
                }
            }
        }
        root.present().ok()?;
    }
    Some(Plot { svg, sampled: binned })
}

/// Each device's row as [`TIMELINE_COLUMNS`] columns ([`bins`]): a bar per run of
/// adjacent columns of one variant, then a red mark per run of columns holding an
/// invalid attempt.
fn binned_rows(chart: &mut Chart, devices: &[&str], spans: &[Span], x_max: f64) -> Option<()> {
    let at: HashMap<&str, usize> = devices.iter().enumerate().map(|(i, d)| (*d, i)).collect();
    let mut rows: Vec<Vec<(f64, f64, usize, bool)>> = vec![Vec::new(); devices.len()];
    for s in spans {
        if let Some(&row) = at.get(s.device) {
            rows[row].push((s.start_h, s.end_h, s.color, !s.valid));
        }
    }
    let width = x_max / TIMELINE_COLUMNS as f64;
    for (row, row_spans) in rows.into_iter().enumerate() {
        let columns = bins(row_spans, x_max, TIMELINE_COLUMNS);
        let y = row as f64;
        let bar = |first: usize, end: usize| [(first as f64 * width, y - 0.3), (end as f64 * width, y + 0.3)];
        for (first, end, class) in runs(&columns, |b| Some(b.class)) {
            chart.draw_series(std::iter::once(Rectangle::new(bar(first, end), color(class).filled()))).ok()?;
        }
        // A red mark above the bar, not an outline: at a column a pixel wide an outline
        // would paint the whole row red once a few percent of attempts are invalid.
        for (first, end, _) in runs(&columns, |b| b.flagged.then_some(())) {
            let mark = [(first as f64 * width, y + 0.32), (end as f64 * width, y + 0.44)];
            chart.draw_series(std::iter::once(Rectangle::new(mark, RED.filled()))).ok()?;
        }
    }
    Some(())
}

/// Maximal runs `first..end` of adjacent columns with the same `key`, skipping columns
/// whose key is `None` (and empty ones).
fn runs<K: PartialEq + Copy>(columns: &[Option<Bin>], key: impl Fn(&Bin) -> Option<K>) -> Vec<(usize, usize, K)> {
    let mut out: Vec<(usize, usize, K)> = Vec::new();
    for (i, k) in columns.iter().map(|b| b.as_ref().and_then(&key)).enumerate() {
        match (out.last_mut(), k) {
            (Some(last), Some(k)) if last.1 == i && last.2 == k => last.1 = i + 1,
            (_, Some(k)) => out.push((i, i + 1, k)),
            (_, None) => {}
        }
    }
    out
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
    fn many_values_draw_a_stated_sample() {
        // 201 values, 100 at even indices and 200 at odd ones, three far ones at 3, 4, 5:
        // every 2nd is drawn (101 points, all 100 but the 2000), plus the two outliers off
        // the stride, each of the three ringed.
        let mut many: Vec<f64> = (0..=MAX_POINTS).map(|i| if i % 2 == 0 { 100.0 } else { 200.0 }).collect();
        many[3..6].copy_from_slice(&[1000.0, 2000.0, 3000.0]);
        let plot = strip_box_plot("x", "", &[Strip { variant: "a", color: 0, values: &many }]).unwrap();
        let sample =
            StripSample { variant: "a".into(), drawn: 101, total: 201, step: 2, outliers_drawn: 3, outliers: 3 };
        assert_eq!(plot.sampled, [sample]);
        assert_eq!(plot.matches("<circle").count(), 101 + 2 + 3, "stride, off-stride outliers, rings");
        assert!(plot.contains("<polyline"), "whiskers drawn");
        // The box comes from every value (100 to 200), not from the drawn ones (all 100).
        let height = |svg: &str| -> f64 {
            let rect = svg.lines().find(|l| l.starts_with("<rect") && l.contains("opacity")).expect("box");
            rect.split("height=\"").nth(1).and_then(|h| h.split('"').next()).unwrap().parse().unwrap()
        };
        assert!(height(&plot) > 20.0, "{plot}");
        // A point drawn in both plots sits at the same place: jitter by its index among all.
        let small = strip_box_plot("x", "", &[Strip { variant: "a", color: 0, values: &many[..MAX_POINTS] }]).unwrap();
        assert!(small.sampled.is_empty(), "200 values: all drawn");
        let circles =
            |svg: &str| svg.lines().filter(|l| l.starts_with("<circle")).map(str::to_string).collect::<Vec<_>>();
        let (all, some) = (circles(&small), circles(&plot));
        assert_eq!((&some[0], &some[1]), (&all[0], &all[2]), "values 0 and 2 at the same places");
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
    fn a_long_timeline_is_binned_and_keeps_its_gaps() {
        // d1: 3 000 half-hour soaks back to back, with a 200 h break in the middle and one
        // invalid; d2: one soak.
        let mut spans: Vec<Span> = (0..3000)
            .map(|i| {
                let start = i as f64 * 0.5 + if i >= 1500 { 200.0 } else { 0.0 };
                Span { device: "d1", start_h: start, end_h: start + 0.5, color: 0, valid: i != 100 }
            })
            .collect();
        spans.push(Span { device: "d2", start_h: 0.0, end_h: 1.0, color: 1, valid: true });
        let plot = timeline(&["d1", "d2"], &spans).unwrap();
        let binned = plot.sampled.expect("binned above MAX_SPANS");
        assert_eq!(binned.columns, TIMELINE_COLUMNS);
        assert!((binned.minutes - 1700.0 * 1.02 * 60.0 / 560.0).abs() < 1e-9);
        let rects = |attr: &str| plot.lines().filter(|l| l.starts_with("<rect") && l.contains(attr)).count();
        assert_eq!(rects("fill=\"#4E79A7\""), 2, "d1: one bar each side of the break");
        assert_eq!(rects("fill=\"#F28E2B\""), 1, "d2: one bar");
        assert_eq!(rects("fill=\"#FF0000\""), 1, "one column holds the invalid soak");
        assert_eq!(plot, timeline(&["d1", "d2"], &spans).unwrap(), "deterministic");
        // At the threshold: a bar per soak, as always.
        let plot = timeline(&["d1", "d2"], &spans[..MAX_SPANS]).unwrap();
        assert_eq!(plot.sampled, None);
        assert_eq!(plot.matches("fill=\"#4E79A7\"").count(), MAX_SPANS);
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
