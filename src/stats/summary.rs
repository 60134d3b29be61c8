//! Descriptive summary of one sample.

use serde::{Deserialize, Serialize};

use super::{mean, median, median_ci, sample_variance, t_quantile};

/// Descriptive statistics of one sample.
///
/// Fields that need a spread (variance, sd, cv, se, CI) are `None` when n = 1; `cv` is
/// also `None` when the mean is 0, and the CI when the confidence level is not strictly
/// between 0 and 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    /// Sample variance, denominator n − 1.
    pub variance: Option<f64>,
    /// Sample standard deviation: √variance.
    pub sd: Option<f64>,
    /// Coefficient of variation: sd / |mean|.
    pub cv: Option<f64>,
    /// Standard error of the mean: sd / √n.
    pub se: Option<f64>,
    /// Two-sided Student t confidence interval for the mean at `confidence`.
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// The level `ci_low`/`ci_high` were computed at (0.95 = 95 %).
    pub confidence: f64,
    pub median: f64,
    /// Distribution-free interval for the median (order statistics) at `confidence` or
    /// more; `None` when n is too small for that level (n < 6 at 95 %).
    pub median_ci_low: Option<f64>,
    pub median_ci_high: Option<f64>,
    /// The exact coverage of that interval (0.96875 for n = 6).
    pub median_ci_coverage: Option<f64>,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    /// Half-width of the confidence interval: t·se.
    pub fn ci_half_width(&self) -> Option<f64> {
        Some((self.ci_high? - self.ci_low?) / 2.0)
    }
}

/// Version of how the summary rows the store keeps (`campaign_summaries`) are computed:
/// the one number the report (which writes them) and the store (which says which are
/// stale, `Store::stale_summaries`) share. Rows stored with a lower one are recomputed
/// from the measurements: bump it when `report::build_report`'s statistics or
/// `report::summary_rows` change.
pub const SUMMARY_VERSION: u32 = 1;

/// Summarizes `xs` at a confidence level (0.95 for a 95 % interval).
///
/// `None` when `xs` is empty or holds a non-finite value (a NaN or ∞ would silently
/// poison every statistic; callers filter and count them).
///
/// Formulas: mean and sample variance by the corrected two-pass algorithm (see
/// [`mean`], [`sample_variance`]); sd = √s²; cv = sd / |x̄|; se = sd / √n; confidence
/// interval x̄ ± t₍₁₊c₎/₂,ₙ₋₁ · se (Student t, two-sided; NIST/SEMATECH e-Handbook of
/// Statistical Methods, §7.2.2.1 "Confidence limits for the mean"); median per
/// [`median`], its interval per [`median_ci`].
pub fn summarize(xs: &[f64], confidence: f64) -> Option<Summary> {
    if xs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let n = xs.len();
    let m = mean(xs)?;
    let variance = sample_variance(xs);
    let sd = variance.map(f64::sqrt);
    let cv = sd.filter(|_| m != 0.0).map(|s| s / m.abs());
    let se = sd.map(|s| s / (n as f64).sqrt());
    let t = t_quantile((1.0 + confidence) / 2.0, n as f64 - 1.0);
    let half = se.zip(t).map(|(se, t)| t * se);
    let mci = median_ci(xs, confidence);
    let (min, max) = xs.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    Some(Summary {
        n,
        mean: m,
        variance,
        sd,
        cv,
        se,
        ci_low: half.map(|h| m - h),
        ci_high: half.map(|h| m + h),
        confidence,
        median: median(xs)?,
        median_ci_low: mci.map(|c| c.low),
        median_ci_high: mci.map(|c| c.high),
        median_ci_coverage: mci.map(|c| c.coverage),
        min,
        max,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NIST StRD NumAcc2–4: 1001 observations, `mid`, then 500 pairs (`mid` − 0.1,
    /// `mid` + 0.1). Certified mean `mid`, certified sd 0.1 (both exact).
    fn numacc(first: f64, low: f64, high: f64) -> Vec<f64> {
        let mut xs = vec![first];
        for _ in 0..500 {
            xs.push(low);
            xs.push(high);
        }
        xs
    }

    fn check(name: &str, xs: &[f64], mean: f64, sd: f64, mean_tol: f64, sd_tol: f64) {
        let s = summarize(xs, 0.95).unwrap();
        assert!((s.mean - mean).abs() <= mean_tol, "{name}: mean {} vs {mean}", s.mean);
        let got = s.sd.unwrap();
        assert!((got - sd).abs() <= sd_tol, "{name}: sd {got} vs {sd}");
    }

    #[test]
    fn nist_numacc1() {
        let s = summarize(&[10000001.0, 10000003.0, 10000002.0], 0.95).unwrap();
        assert_eq!(s.n, 3);
        assert_eq!(s.mean, 10000002.0);
        assert_eq!(s.variance, Some(1.0));
        assert_eq!(s.sd, Some(1.0));
        assert_eq!(s.median, 10000002.0);
        assert_eq!((s.min, s.max), (10000001.0, 10000003.0));
    }

    // Tolerances: the data are decimal fractions that binary doubles cannot hold exactly,
    // so the sd of the stored doubles differs from 0.1 by the representation error alone
    // (≈ 5.6e-10 for NumAcc4, where one ulp is 1.9e-9). The textbook formula
    // Σx² − n·x̄² misses by far more: sd 0.107 for NumAcc3, a negative variance (−2) for NumAcc4.
    #[test]
    fn nist_numacc2() {
        let xs = numacc(1.2, 1.1, 1.3);
        assert_eq!(xs.len(), 1001);
        check("NumAcc2", &xs, 1.2, 0.1, 1e-15, 1e-14);
    }

    #[test]
    fn nist_numacc3() {
        let xs = numacc(1000000.2, 1000000.1, 1000000.3);
        check("NumAcc3", &xs, 1000000.2, 0.1, 1e-9, 1e-9);
    }

    #[test]
    fn nist_numacc4() {
        let xs = numacc(10000000.2, 10000000.1, 10000000.3);
        check("NumAcc4", &xs, 10000000.2, 0.1, 1e-8, 1e-8);
    }

    #[test]
    fn confidence_interval_uses_student_t() {
        // n = 5, so df = 4 and t(0.975, 4) = 2.7764451051977934.
        let xs = [1.0, 2.0, 3.0, 4.0, 5.0];
        let s = summarize(&xs, 0.95).unwrap();
        let se = (2.5f64).sqrt() / 5f64.sqrt();
        let half = 2.7764451051977934 * se;
        assert!((s.se.unwrap() - se).abs() < 1e-15);
        assert!((s.ci_low.unwrap() - (3.0 - half)).abs() < 1e-9);
        assert!((s.ci_high.unwrap() - (3.0 + half)).abs() < 1e-9);
        assert!((s.ci_half_width().unwrap() - half).abs() < 1e-9);
        assert!((s.cv.unwrap() - (2.5f64).sqrt() / 3.0).abs() < 1e-15);
        assert_eq!(s.median, 3.0);
        // A wider level gives a wider interval.
        let wide = summarize(&xs, 0.99).unwrap();
        assert!(wide.ci_half_width().unwrap() > half);
    }

    #[test]
    fn single_value_has_no_spread() {
        let s = summarize(&[42.0], 0.95).unwrap();
        assert_eq!(s.n, 1);
        assert_eq!(s.mean, 42.0);
        assert_eq!((s.median, s.min, s.max), (42.0, 42.0, 42.0));
        assert_eq!(s.variance, None);
        assert_eq!(s.sd, None);
        assert_eq!(s.se, None);
        assert_eq!(s.cv, None);
        assert_eq!(s.ci_low, None);
        assert_eq!(s.ci_high, None);
    }

    #[test]
    fn empty_non_finite_and_zero_mean() {
        assert_eq!(summarize(&[], 0.95), None);
        assert_eq!(summarize(&[1.0, f64::NAN], 0.95), None);
        assert_eq!(summarize(&[1.0, f64::INFINITY], 0.95), None);
        let s = summarize(&[-1.0, 1.0], 0.95).unwrap();
        assert_eq!(s.mean, 0.0);
        assert_eq!(s.cv, None);
        assert!(s.sd.is_some());
    }

    #[test]
    fn invalid_confidence_gives_no_interval() {
        let s = summarize(&[1.0, 2.0, 3.0], 1.5).unwrap();
        assert_eq!((s.ci_low, s.ci_high), (None, None));
        assert!(s.sd.is_some());
    }
}
