//! The two-sided Student t-test of one segment against the next, as Apache Otava runs it.
//!
//! Otava 0.8.0 `TTestSignificanceTester.compare` (otava/analysis.py:114-129) feeds numpy's
//! population standard deviations (ddof = 0) into scipy's `ttest_ind_from_stats(...,
//! equal_var=True)`, whose pooled variance (`_equal_var_ttest_denom`, scipy 1.16
//! `_stats_py.py:6304-6319`) expects sample ones. That is not the textbook pooled t-test,
//! but it is Otava's, and its p-values decide which change points survive:
//!
//! ```text
//! sᵢ = √(Σ(x − x̄)²/nᵢ) (0 when nᵢ = 1)     df = n₁ + n₂ − 2
//! s² = ((n₁ − 1)·s₁² + (n₂ − 1)·s₂²) / df    t = (x̄₁ − x̄₂) / √(s²·(1/n₁ + 1/n₂))
//! p  = P(|T_df| ≥ |t|)                        (p = 1 when n₁ + n₂ ≤ 2)
//! ```
//!
//! Both sides without spread: p = 0 when the means differ (t = ±∞), NaN when they are equal
//! (t = 0/0), as scipy returns. Means and deviations are summed in numpy's pairwise order so
//! the figures are Otava's to the last bit or close to it.

use serde::Serialize;

use super::t_two_sided_p;

/// Means, population deviations and p of a left segment against a right one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SegmentTest {
    pub mean_before: f64,
    pub mean_after: f64,
    pub std_before: f64,
    pub std_after: f64,
    /// Two-sided p; NaN (JSON `null`) when both sides are constant and equal.
    pub pvalue: f64,
}

impl SegmentTest {
    /// The test of `left` against `right`; `None` when either is empty (Otava raises there).
    pub fn of(left: &[f64], right: &[f64]) -> Option<SegmentTest> {
        if left.is_empty() || right.is_empty() {
            return None;
        }
        let (n1, n2) = (left.len(), right.len());
        let (m1, m2) = (numpy_mean(left), numpy_mean(right));
        let s1 = if n1 >= 2 { numpy_std(left, m1) } else { 0.0 };
        let s2 = if n2 >= 2 { numpy_std(right, m2) } else { 0.0 };
        let pvalue = if n1 + n2 > 2 { pooled_p((m1, s1, n1), (m2, s2, n2)) } else { 1.0 };
        Some(SegmentTest { mean_before: m1, mean_after: m2, std_before: s1, std_after: s2, pvalue })
    }

    /// Otava's change magnitude (analysis.py:51-73): the relative change of the means in the
    /// direction that makes it larger, max(|m₂/m₁ − 1|, |m₁/m₂ − 1|); a zero mean makes
    /// its ratio 0.
    pub fn magnitude(&self) -> f64 {
        self.forward_change().abs().max(self.backward_change().abs())
    }

    /// m₂/m₁ − 1, 0 when m₁ = 0 (Otava's `forward_rel_change`).
    pub fn forward_change(&self) -> f64 {
        if self.mean_before == 0.0 { 0.0 } else { self.mean_after / self.mean_before - 1.0 }
    }

    fn backward_change(&self) -> f64 {
        if self.mean_after == 0.0 { 0.0 } else { self.mean_before / self.mean_after - 1.0 }
    }
}

/// scipy's equal-variance t-test from (mean, std, n), two-sided.
fn pooled_p((m1, s1, n1): (f64, f64, usize), (m2, s2, n2): (f64, f64, usize)) -> f64 {
    // `std**2` as scipy squares it; a single value has variance 0 by definition.
    let v1 = if n1 == 1 { 0.0 } else { s1 * s1 };
    let v2 = if n2 == 1 { 0.0 } else { s2 * s2 };
    let (f1, f2) = (n1 as f64, n2 as f64);
    let df = f1 + f2 - 2.0;
    let svar = ((f1 - 1.0) * v1 + (f2 - 1.0) * v2) / df;
    let denom = (svar * (1.0 / f1 + 1.0 / f2)).sqrt();
    // d/0 is ±inf (p = 0, t_two_sided_p handles it) and 0/0 NaN (p NaN), as numpy divides.
    let t = (m1 - m2) / denom;
    t_two_sided_p(t, df).unwrap_or(f64::NAN)
}

/// `np.mean`: the pairwise sum divided by n.
fn numpy_mean(xs: &[f64]) -> f64 {
    numpy_sum(xs) / xs.len() as f64
}

/// `np.std` (ddof = 0) around the mean `m`.
fn numpy_std(xs: &[f64], m: f64) -> f64 {
    let squares: Vec<f64> = xs.iter().map(|x| (x - m) * (x - m)).collect();
    (numpy_sum(&squares) / xs.len() as f64).sqrt()
}

/// numpy's pairwise summation of float64 (`pairwise_sum_DOUBLE`, numpy/_core/src/umath/
/// loops_utils.h.src): a plain loop below 8 values, eight interleaved accumulators up to
/// 128, halves (at a multiple of 8) above.
fn numpy_sum(a: &[f64]) -> f64 {
    let n = a.len();
    if n < 8 {
        return a.iter().fold(0.0, |acc, x| acc + x);
    }
    if n > 128 {
        let half = n / 2 - (n / 2) % 8;
        return numpy_sum(&a[..half]) + numpy_sum(&a[half..]);
    }
    let mut r = [0.0; 8];
    r.copy_from_slice(&a[..8]);
    let blocks_end = n - n % 8;
    for block in a[8..blocks_end].chunks_exact(8) {
        for (acc, x) in r.iter_mut().zip(block) {
            *acc += x;
        }
    }
    let res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    a[blocks_end..].iter().fold(res, |acc, x| acc + x)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BRIEF: [f64; 14] = [0.3, 2.4, 1.5, -0.9, -0.5, 99.7, 98.3, 99.1, 149.0, 149.7, 149.5, 149.1, 148.8, 150.0];

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    #[test]
    fn the_brief_series_first_split_matches_otavas_trace() {
        // Research notes §2: x[0:5] (mean 0.56, std₀ 1.232) vs x[5:14] (132.58, 23.72), p 3.98e-8.
        let t = SegmentTest::of(&BRIEF[..5], &BRIEF[5..]).unwrap();
        assert!(close(t.mean_before, 0.56, 1e-12), "{t:?}");
        assert!(close(t.std_before, 1.232, 1e-3) && close(t.std_after, 23.72, 1e-3), "{t:?}");
        assert!(close(t.pvalue, 3.98e-8, 1e-2), "{t:?}");
        // x[0:5] vs x[5:8]: p 1.58e-11, magnitude 175.8.
        let t = SegmentTest::of(&BRIEF[..5], &BRIEF[5..8]).unwrap();
        assert!(close(t.pvalue, 1.58e-11, 1e-2) && close(t.magnitude(), 175.8, 1e-3), "{t:?}");
    }

    #[test]
    fn ddof_zero_variances_go_into_the_pooled_formula() {
        // [1, 2, 3] vs [4, 6]: scipy 1.16 `ttest_ind_from_stats(2, np.std([1,2,3]), 3, 5,
        // np.std([4,6]), 2)` gives p = 0.033659295204337074 (t = −3.7264), where the textbook
        // `ttest_ind` (ddof 1) gives 0.0653.
        let t = SegmentTest::of(&[1.0, 2.0, 3.0], &[4.0, 6.0]).unwrap();
        assert!(close(t.pvalue, 0.033659295204337074, 1e-12), "{t:?}");
        assert_eq!((t.mean_before, t.mean_after, t.std_after), (2.0, 5.0, 1.0));
    }

    #[test]
    fn constant_sides_give_zero_or_nan_and_two_points_give_one() {
        assert_eq!(SegmentTest::of(&[1.0, 1.0], &[2.0, 2.0]).unwrap().pvalue, 0.0);
        assert!(SegmentTest::of(&[1.0, 1.0], &[1.0, 1.0]).unwrap().pvalue.is_nan());
        assert_eq!(SegmentTest::of(&[1.0], &[5.0]).unwrap().pvalue, 1.0);
        assert_eq!(SegmentTest::of(&[], &[5.0]), None);
    }

    #[test]
    fn magnitude_is_the_larger_relative_change_and_guards_zero_means() {
        let t = |a: f64, b: f64| SegmentTest {
            mean_before: a,
            mean_after: b,
            std_before: 0.0,
            std_after: 0.0,
            pvalue: 0.0,
        };
        assert!(close(t(100.0, 90.0).magnitude(), 1.0 / 9.0, 1e-15));
        assert!(close(t(90.0, 100.0).magnitude(), 1.0 / 9.0, 1e-15));
        assert_eq!(t(0.0, 5.0).magnitude(), 1.0); // forward 0 (guard), backward |0/5 − 1|
        assert_eq!(t(0.0, 0.0).magnitude(), 0.0);
        assert_eq!(t(0.0, 5.0).forward_change(), 0.0);
    }

    #[test]
    fn numpy_sum_order() {
        // Values from numpy 2.2.0 `np.sum(np.array(v))`; a plain loop gives 1e16 and
        // 1990.0000000000002.
        let mut v = vec![1.0; 20];
        v[0] = 1e16;
        assert_eq!(numpy_sum(&v), 1.0000000000000016e16);
        let w: Vec<f64> = (1..200).map(|i| 0.1 * f64::from(i)).collect();
        assert_eq!(numpy_sum(&w), 1990.0);
        assert_eq!(numpy_sum(&[1.0, 2.0, 3.0]), 6.0);
    }
}
