//! Change points of a series: E-divisive means with a Student t-test, as Apache Otava does it.
//!
//! Method: Fleming, Kolodziejski, Stuart, Zhang, Farinier, Henderson, "Hunter: Using Change
//! Point Detection to Hunt for Performance Regressions", ICPE 2023
//! (<https://doi.org/10.1145/3578244.3583719>), built on the E-divisive q̂ of Matteson &
//! James, "A Nonparametric Approach for Multiple Change Point Analysis of Multivariate Data",
//! JASA 109(505), 2014 ([`super::e_divisive`]). Reproduced from Apache Otava 0.8.0
//! (`otava.analysis.compute_change_points`, otava/analysis.py:191-326, and
//! otava/change_point_divisive/{base,calculator,detector}.py), index for index
//! (`tests/crosscheck_otava.py` compares them on generated series):
//!
//! 1. **Split** (analysis.py:235-277): windows of `window_len` points; in each, repeatedly
//!    take the best q̂ split over the current segments (detector.py:35-63) and keep it while
//!    its t-test ([`SegmentTest`], whole segment left against whole segment right) has
//!    p ≤ the *first-pass* threshold (10 × `max_pvalue` below 0.05, 2 × below 0.5, else
//!    `max_pvalue`; analysis.py:324). The next window starts at the last new point or half
//!    a window on, whichever is further. The union of all windows' points are the weak
//!    change points, each re-tested against its neighbours in the whole series.
//! 2. **Merge** (analysis.py:191-232): while some point has p ≥ `max_pvalue`, or else the
//!    smallest magnitude is ≤ `min_magnitude`, drop that weakest point and re-test its
//!    neighbours.
//!
//! The significance test replaces Matteson & James's permutation test, so nothing is random:
//! the same series and options give the same points.

use serde::Serialize;
use thiserror::Error;

use super::e_divisive::PairDistances;
use super::segment_test::SegmentTest;

/// The knobs of [`change_points`], with Otava's defaults (analysis.py:295).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ChangePointOptions {
    /// Points per analysis window (≥ 2). Default 50.
    pub window_len: usize,
    /// A change point is kept when its p-value is below this. Default 0.001.
    pub max_pvalue: f64,
    /// … and its magnitude above this (0: any change). Default 0.
    pub min_magnitude: f64,
}

impl Default for ChangePointOptions {
    fn default() -> Self {
        ChangePointOptions { window_len: 50, max_pvalue: 0.001, min_magnitude: 0.0 }
    }
}

/// One change point: `index` is the first point of the new level (0-based).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ChangePoint {
    pub index: usize,
    /// The segment before (from the previous change point) against the one after (to the next).
    #[serde(flatten)]
    pub test: SegmentTest,
    /// max(|m₂/m₁ − 1|, |m₁/m₂ − 1|), see [`SegmentTest::magnitude`].
    pub magnitude: f64,
    /// The E-divisive statistic when the point was found, in the window that found it first.
    pub qhat: f64,
}

impl ChangePoint {
    /// mean after / mean before − 1 (+0.25: 25 % higher); `None` when the mean before is 0.
    pub fn relative_change(&self) -> Option<f64> {
        (self.test.mean_before != 0.0).then(|| self.test.mean_after / self.test.mean_before - 1.0)
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum ChangePointError {
    #[error("window_len is {0}; fix: use a window of at least 2 points (default 50)")]
    WindowTooShort(usize),
    #[error("max_pvalue is {0}; fix: use a p-value between 0 and 1 (default 0.001)")]
    BadPValue(f64),
    #[error("min_magnitude is {0}; fix: use a relative change of 0 or more (default 0)")]
    BadMagnitude(f64),
    #[error("point {index} is {value}; fix: every point must be a finite number")]
    NonFinite { index: usize, value: f64 },
}

/// Otava's change points of `series` (see the module doc), sorted by index.
pub fn change_points(series: &[f64], opts: &ChangePointOptions) -> Result<Vec<ChangePoint>, ChangePointError> {
    if opts.window_len < 2 {
        return Err(ChangePointError::WindowTooShort(opts.window_len));
    }
    if !(0.0..=1.0).contains(&opts.max_pvalue) {
        return Err(ChangePointError::BadPValue(opts.max_pvalue));
    }
    if !(opts.min_magnitude >= 0.0 && opts.min_magnitude.is_finite()) {
        return Err(ChangePointError::BadMagnitude(opts.min_magnitude));
    }
    if let Some((index, &value)) = series.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(ChangePointError::NonFinite { index, value });
    }
    let p = opts.max_pvalue;
    let first_pass = if p < 0.05 {
        p * 10.0
    } else if p < 0.5 {
        p * 2.0
    } else {
        p
    };
    let weak = split(series, opts.window_len, first_pass);
    Ok(merge(weak, series, opts.max_pvalue, opts.min_magnitude)
        .into_iter()
        .map(|w| ChangePoint { index: w.index, test: w.test, magnitude: w.test.magnitude(), qhat: w.qhat })
        .collect())
}

/// A point with its current test (the split and merge steps' working list).
#[derive(Debug, Clone, Copy)]
struct Weak {
    index: usize,
    qhat: f64,
    test: SegmentTest,
}

/// The test of the existing point `at` of `points` (sorted indices), between its neighbours
/// (Otava's "merge step" rule, analysis.py:147-152): x[previous..at] against x[at..next].
fn retest(x: &[f64], points: &[usize], at: usize) -> SegmentTest {
    let from = if at == 0 { 0 } else { points[at - 1] };
    let to = points.get(at + 1).copied().unwrap_or(x.len());
    let c = points[at];
    SegmentTest::of(&x[from..c], &x[c..to]).expect("change points lie strictly inside the series")
}

/// The split step: weak change points over sliding windows (analysis.py:235-277).
fn split(x: &[f64], window_len: usize, max_p: f64) -> Vec<Weak> {
    let step = window_len / 2;
    let mut start = 0;
    let mut found: Vec<(usize, f64)> = Vec::new();
    while start < x.len() {
        let end = (start + window_len).min(x.len());
        let new = detect(&x[start..end], max_p);
        let last = new.last().map_or(0, |&(i, _)| i + start);
        // Otava's `cp not in change_points` compares indices only: the first window's q̂ stays.
        for (i, q) in new {
            if !found.iter().any(|&(j, _)| j == i + start) {
                found.push((i + start, q));
            }
        }
        start = last.max(start + step);
    }
    found.sort_by_key(|&(i, _)| i);
    let indices: Vec<usize> = found.iter().map(|&(i, _)| i).collect();
    found.iter().enumerate().map(|(at, &(index, qhat))| Weak { index, qhat, test: retest(x, &indices, at) }).collect()
}

/// E-divisive on one window with the t-test as the stopping rule (detector.py:35-63):
/// (local index, q̂) of each accepted split, sorted by index.
fn detect(y: &[f64], max_p: f64) -> Vec<(usize, f64)> {
    let calc = PairDistances::new(y);
    let mut points: Vec<(usize, f64)> = Vec::new();
    loop {
        let mut bounds = vec![0];
        bounds.extend(points.iter().map(|&(i, _)| i));
        bounds.push(y.len());
        // The best split over every segment of 2 or more points; the first segment wins a
        // tie (Python's `max`, base.py:108).
        let mut best: Option<(usize, f64, usize, usize)> = None;
        for seg in bounds.windows(2).filter(|s| s[1] - s[0] > 1) {
            let (tau, q) = calc.best(seg[0], seg[1]);
            if best.is_none_or(|b| q > b.1) {
                best = Some((tau, q, seg[0], seg[1]));
            }
        }
        let Some((tau, q, a, b)) = best else { break };
        let test = SegmentTest::of(&y[a..tau], &y[tau..b]).expect("τ lies strictly inside its segment");
        // `p <= max_p` (base.py:87); a NaN p stops too.
        if test.pvalue <= max_p {
            let at = points.partition_point(|&(i, _)| i < tau);
            points.insert(at, (tau, q));
        } else {
            break;
        }
    }
    points
}

/// The merge step (analysis.py:191-232).
fn merge(mut points: Vec<Weak>, x: &[f64], max_p: f64, min_magnitude: f64) -> Vec<Weak> {
    while !points.is_empty() {
        // Python's max/min keep the first on ties and compare with `>` / `<`, so a NaN p is
        // the weakest only when it comes first; these loops do the same.
        let mut weakest = 0;
        for (k, w) in points.iter().enumerate() {
            if w.test.pvalue > points[weakest].test.pvalue {
                weakest = k;
            }
        }
        if points[weakest].test.pvalue < max_p {
            weakest = 0;
            for (k, w) in points.iter().enumerate() {
                if w.test.magnitude() < points[weakest].test.magnitude() {
                    weakest = k;
                }
            }
            if points[weakest].test.magnitude() > min_magnitude {
                return points;
            }
        }
        points.remove(weakest);
        // Otava re-tests the points now at `weakest` and `weakest + 1` (analysis.py:229-230):
        // the removed point's right neighbour and the one after it. The left neighbour,
        // whose right segment just grew, keeps its old test. That looks like a bug (the PR
        // that wrote it, apache/otava#96, says as much in review) but it decides which points
        // survive — a "fixed" merge differs in about 1 case in 5 — so it is kept to match.
        let indices: Vec<usize> = points.iter().map(|w| w.index).collect();
        for at in [weakest, weakest + 1] {
            if at < points.len() {
                points[at].test = retest(x, &indices, at);
            }
        }
    }
    points
}

#[cfg(test)]
mod tests {
    use super::*;

    /// BRIEF.md (statistics) and Otava's own `SEQUENCE` (tests/change_point_divisive_test.py:27-32).
    const BRIEF: [f64; 14] = [0.3, 2.4, 1.5, -0.9, -0.5, 99.7, 98.3, 99.1, 149.0, 149.7, 149.5, 149.1, 148.8, 150.0];

    fn indices(x: &[f64], window_len: usize, max_pvalue: f64) -> Vec<usize> {
        let opts = ChangePointOptions { window_len, max_pvalue, ..ChangePointOptions::default() };
        change_points(x, &opts).unwrap().iter().map(|c| c.index).collect()
    }

    #[test]
    fn the_brief_series_has_change_points_at_5_and_8_for_every_window_from_3() {
        for w in 3..=50 {
            assert_eq!(indices(&BRIEF, w, 0.001), [5, 8], "window {w}");
        }
        // Window 2: every split has one point a side, whose t-test gives p = 1.
        assert_eq!(indices(&BRIEF, 2, 0.001), Vec::<usize>::new());
    }

    #[test]
    fn the_brief_series_figures() {
        let cps = change_points(&BRIEF, &ChangePointOptions::default()).unwrap();
        let (a, b) = (cps[0], cps[1]);
        // Research notes §2 (Otava 0.8.0): 5 is x[0:5] vs x[5:8], p 1.58e-11, magnitude 175.8;
        // 8 is x[5:8] vs x[8:14], p 1.42e-13, magnitude 0.508.
        assert!((a.test.mean_before - 0.56).abs() < 1e-12 && (a.test.mean_after - 99.033333).abs() < 1e-5, "{a:?}");
        assert!((a.test.pvalue / 1.58e-11 - 1.0).abs() < 0.01 && (a.magnitude - 175.8).abs() < 0.1, "{a:?}");
        assert!((b.test.pvalue / 1.42e-13 - 1.0).abs() < 0.01 && (b.magnitude - 0.508).abs() < 0.001, "{b:?}");
        assert!((a.qhat - 761.28).abs() < 0.01 && (b.qhat - 198.27).abs() < 0.01, "{a:?} {b:?}");
    }

    #[test]
    fn otavas_own_test_vector() {
        // otava tests/analysis_test.py:41-66: window 10, max_pvalue 0.0001 → [10].
        let x = [
            1.02, 0.95, 0.99, 1.00, 1.12, 1.00, 1.01, 0.98, 1.01, 0.96, 0.50, 0.51, 0.48, 0.48, 0.55, 0.50, 0.49, 0.51,
            0.50, 0.49,
        ];
        assert_eq!(indices(&x, 10, 0.0001), [10]);
    }

    #[test]
    fn merge_keeps_otavas_stale_left_neighbour() {
        // Weak points 5 (p 0), 8 (p 0), 10 (p 0.01005 ≥ 0.01): 10 goes, 8 is not re-tested, so
        // Otava 0.8.0 returns [5, 8]; re-testing 8 against x[5..12] would drop everything.
        let x = [11.0, 11.0, 11.0, 11.0, 11.0, 13.0, 13.0, 13.0, 14.0, 14.0, 10.0, 11.0];
        let weak: Vec<usize> = split(&x, 6, 0.1).iter().map(|w| w.index).collect();
        assert_eq!(weak, [5, 8, 10]);
        assert_eq!(indices(&x, 6, 0.01), [5, 8]);
    }

    #[test]
    fn an_outlier_makes_a_one_point_segment() {
        let x = [
            98.63, 102.15, 99.42, 102.13, 102.23, 97.81, 99.6, 99.79, 99.54, 98.16, 98.22, 100.95, 97.98, 98.79,
            101.77, 101.59, 100.0, 97.29, 95.55, 100.25, 111.87, 114.33, 114.29, 110.86, 111.5, 111.94, 112.19, 113.16,
            115.33, 113.06, 112.79, 111.32, 110.19, 110.25, 110.39, 112.18, 114.37, 109.93, 109.57, 112.68, 132.13,
            122.26, 122.36, 124.53, 124.4, 123.56, 126.35, 122.62, 120.27, 126.13, 123.53, 126.3, 125.36, 126.09,
            123.55, 122.63, 122.49, 126.23, 119.79, 125.81,
        ];
        assert_eq!(indices(&x, 20, 0.001), [20, 40, 41]);
    }

    #[test]
    fn constant_tied_and_short_series() {
        assert_eq!(indices(&[5.0; 30], 50, 0.001), Vec::<usize>::new());
        // Two constant levels: both sides without spread, p = 0 exactly.
        let steps: Vec<f64> = (0..12).map(|i| if i < 6 { 1.0 } else { 2.0 }).collect();
        assert_eq!(indices(&steps, 50, 0.001), [6]);
        for n in 0..3 {
            assert_eq!(indices(&BRIEF[4..4 + n], 50, 0.001), Vec::<usize>::new(), "n = {n}");
        }
    }

    #[test]
    fn the_same_input_gives_the_same_output() {
        let opts = ChangePointOptions { window_len: 7, ..ChangePointOptions::default() };
        assert_eq!(change_points(&BRIEF, &opts), change_points(&BRIEF, &opts));
    }

    #[test]
    fn bad_options_and_points_are_refused() {
        let o = ChangePointOptions::default();
        assert_eq!(
            change_points(&BRIEF, &ChangePointOptions { window_len: 1, ..o }),
            Err(ChangePointError::WindowTooShort(1))
        );
        assert!(matches!(
            change_points(&BRIEF, &ChangePointOptions { max_pvalue: 1.5, ..o }),
            Err(ChangePointError::BadPValue(_))
        ));
        assert!(matches!(
            change_points(&BRIEF, &ChangePointOptions { min_magnitude: -0.1, ..o }),
            Err(ChangePointError::BadMagnitude(_))
        ));
        assert!(matches!(change_points(&[1.0, f64::NAN, 2.0], &o), Err(ChangePointError::NonFinite { index: 1, .. })));
    }
}
