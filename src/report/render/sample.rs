//! Down-sampling for the HTML report's plots of huge campaigns: a page with 144 000
//! bars, dots or lines is tens of megabytes and shows nothing more than a few hundred
//! well-chosen ones. Pure and deterministic: the same campaign draws the same page.
//! Statistics never go through here; they use every value.

/// Every `step`-th index of `0..n` from 0, with `step = ⌈n / max⌉` (1 when `n ≤ max`):
/// at most `max` indices, spread over the whole range in order.
pub fn stride(n: usize, max: usize) -> (usize, std::iter::StepBy<std::ops::Range<usize>>) {
    let step = n.div_ceil(max.max(1)).max(1);
    (step, (0..n).step_by(step))
}

/// Largest-triangle-three-buckets (Steinarsson 2013): `threshold` points of a line that
/// keep its shape. The first and last points stay; the rest is cut into `threshold - 2`
/// buckets, and each bucket keeps the point making the largest triangle with the point
/// kept before it and the mean of the next bucket, so spikes and steps survive where a
/// stride would skip them. Returns the input when it has at most `threshold` points (a
/// threshold below 3 counts as 3).
pub fn lttb(points: &[(f64, f64)], threshold: usize) -> Vec<(f64, f64)> {
    let threshold = threshold.max(3);
    let n = points.len();
    if n <= threshold {
        return points.to_vec();
    }
    let every = (n - 2) as f64 / (threshold - 2) as f64;
    // Bucket `i` of the inner points is `edge(i)..edge(i + 1)`; `edge(threshold - 2)` is
    // the last point, which is the "next bucket" of the last inner one.
    let edge = |i: usize| ((i as f64 * every) as usize + 1).min(n - 1);
    let mut out = Vec::with_capacity(threshold);
    out.push(points[0]);
    let mut kept = 0;
    for i in 0..threshold - 2 {
        let next = &points[edge(i + 1)..edge(i + 2).max(edge(i + 1) + 1).min(n)];
        let (sx, sy) = next.iter().fold((0.0, 0.0), |(x, y), p| (x + p.0, y + p.1));
        let (cx, cy) = (sx / next.len() as f64, sy / next.len() as f64);
        let (ax, ay) = points[kept];
        let mut best = (edge(i), f64::NEG_INFINITY);
        for (j, &(x, y)) in points.iter().enumerate().take(edge(i + 1)).skip(edge(i)) {
            let area = ((ax - cx) * (y - ay) - (ax - x) * (cy - ay)).abs();
            if area > best.1 {
                best = (j, area);
            }
        }
        kept = best.0;
        out.push(points[kept]);
    }
    out.push(points[n - 1]);
    out
}

/// One column of a binned timeline: the class (variant) with the most span time in it,
/// and whether a flagged (invalid) span reaches into it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bin {
    pub class: usize,
    pub flagged: bool,
}

/// `spans` (start, end, class, flagged) binned into `columns` equal columns over
/// `0..x_max`. A column that no span reaches is `None`, so gaps longer than a column
/// stay gaps. Ties in time go to the lower class; non-finite spans are skipped.
pub fn bins(spans: impl IntoIterator<Item = (f64, f64, usize, bool)>, x_max: f64, columns: usize) -> Vec<Option<Bin>> {
    if columns == 0 || x_max.is_nan() || x_max <= 0.0 {
        return Vec::new();
    }
    let width = x_max / columns as f64;
    let column = |x: f64| ((x / width).floor().max(0.0) as usize).min(columns - 1);
    // Time per class in each column; `None` for a class that never touched it.
    let mut time: Vec<Vec<Option<f64>>> = vec![Vec::new(); columns];
    let mut flagged = vec![false; columns];
    for (start, end, class, flag) in spans {
        if !start.is_finite() || !end.is_finite() {
            continue;
        }
        let (start, end) = (start.min(end), start.max(end));
        let first = column(start);
        // A span ending on a column's edge does not reach into the column after it.
        let last = if end > start { ((end / width).ceil() as usize).saturating_sub(1) } else { first };
        for c in first..=last.clamp(first, columns - 1) {
            let overlap = (end.min((c + 1) as f64 * width) - start.max(c as f64 * width)).max(0.0);
            let cell = &mut time[c];
            if cell.len() <= class {
                cell.resize(class + 1, None);
            }
            *cell[class].get_or_insert(0.0) += overlap;
            flagged[c] |= flag;
        }
    }
    time.iter()
        .zip(flagged)
        .map(|(cell, flagged)| {
            let mut best: Option<(usize, f64)> = None;
            for (class, t) in cell.iter().enumerate() {
                if let Some(t) = *t
                    && best.is_none_or(|(_, b)| t > b)
                {
                    best = Some((class, t));
                }
            }
            best.map(|(class, _)| Bin { class, flagged })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stride_counts_are_exact() {
        let picks = |n, max| {
            let (step, it) = stride(n, max);
            (step, it.collect::<Vec<_>>())
        };
        assert_eq!(picks(5, 200), (1, vec![0, 1, 2, 3, 4]), "under the maximum: every index");
        assert_eq!(picks(200, 200).1.len(), 200);
        let (step, got) = picks(201, 200);
        assert_eq!((step, got.len(), got[1], *got.last().unwrap()), (2, 101, 2, 200));
        let (step, got) = picks(36_000, 200);
        assert_eq!((step, got.len(), got[199]), (180, 200, 35_820));
        let (step, got) = picks(36_001, 200);
        assert_eq!((step, got.len()), (181, 199));
        assert_eq!(picks(0, 200), (1, vec![]));
    }

    #[test]
    fn lttb_returns_short_lines_unchanged() {
        let line: Vec<(f64, f64)> = (0..120).map(|i| (i as f64, (i * i) as f64)).collect();
        assert_eq!(lttb(&line, 120), line);
        assert_eq!(lttb(&line[..2], 120), &line[..2]);
        assert!(lttb(&[], 120).is_empty());
    }

    #[test]
    fn lttb_keeps_the_ends_and_a_spike() {
        // A slow decline with one point spiking up and, further on, one dipping down (a
        // bucket keeps one point: these are 8 buckets apart).
        let mut line: Vec<(f64, f64)> = (0..1000).map(|i| (i as f64 * 3.6, 100.0 - i as f64 * 0.01)).collect();
        line[433].1 = 140.0;
        line[500].1 = 20.0;
        let down = lttb(&line, 120);
        assert_eq!(down.len(), 120);
        assert_eq!((down[0], down[119]), (line[0], line[999]), "first and last kept");
        assert!(down.contains(&line[433]) && down.contains(&line[500]), "both extremes of the spike kept");
        assert!(down.windows(2).all(|w| w[0].0 < w[1].0), "in order, no point twice");
        assert_eq!(down, lttb(&line, 120), "deterministic");
        // Every kept point is one of the input's.
        assert!(down.iter().all(|p| line.contains(p)));
        assert_eq!(lttb(&line, 1).len(), 3, "a threshold below 3 counts as 3");
    }

    #[test]
    fn bins_take_the_variant_with_most_time_and_keep_gaps() {
        // 10 columns of 1 h: class 0 for 0–1.5 h, class 1 for 1.5–1.8 h (flagged), a gap,
        // class 1 for 5–6 h exactly.
        let spans = [(0.0, 1.5, 0, false), (1.5, 1.8, 1, true), (5.0, 6.0, 1, false)];
        let got = bins(spans, 10.0, 10);
        let b = |class, flagged| Some(Bin { class, flagged });
        assert_eq!(got, [b(0, false), b(0, true), None, None, None, b(1, false), None, None, None, None]);
        // Equal time: the lower class; beyond the range: the last column.
        let got = bins([(0.0, 0.5, 1, false), (0.5, 1.0, 0, false), (12.0, 13.0, 2, false)], 10.0, 10);
        assert_eq!((got[0], got[9]), (b(0, false), b(2, false)));
        assert_eq!(bins([(f64::NAN, 1.0, 0, false)], 10.0, 10), vec![None; 10]);
        assert!(bins(spans, 0.0, 10).is_empty());
    }
}
