//! Relative change of a treatment against a baseline, with a confidence interval.

use serde::{Deserialize, Serialize};

use super::{Summary, t_quantile};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeScale {
    /// CI of the ratio of means on the log scale (both means positive).
    LogRatio,
    /// CI of the difference of means divided by |baseline mean| (a mean ≤ 0).
    Difference,
}

/// Relative change treatment / baseline − 1 (0.12 = +12 %).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelativeChange {
    pub delta: f64,
    /// Confidence interval of `delta`; `None` when an arm has fewer than two values.
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    pub scale: ChangeScale,
    /// Degrees of freedom of the interval; `None` when neither arm has spread (the
    /// interval is then the point itself).
    pub df: Option<f64>,
}

/// The relative change of `treatment` against `baseline` at `confidence` (0.95).
/// `None` when the baseline mean is 0 (no relative change exists).
///
/// **Log ratio** (both means > 0): R = x̄ₜ / x̄_b; by the delta method
/// Var(ln x̄) ≈ s² / (n x̄²), so se(ln R) = √(aₜ + a_b) with a = s²/(n x̄²), and the
/// interval is exp(ln R ± t₍₁₊c₎/₂,ν · se) − 1 with Welch–Satterthwaite
/// ν = (aₜ + a_b)² / (aₜ²/(nₜ − 1) + a_b²/(n_b − 1)) (Satterthwaite 1946 applied to the
/// log-scale variances; the interval is asymmetric around δ, as a ratio's should be;
/// see Herson, "Fieller's theorem vs. the delta method", Biometrics 31, 1975).
///
/// **Difference** (a mean ≤ 0, where logs do not exist): δ = (x̄ₜ − x̄_b)/|x̄_b| and the
/// Welch interval of the difference, x̄ₜ − x̄_b ± t · √(sₜ²/nₜ + s_b²/n_b), divided by |x̄_b|.
///
/// Zero spread in both arms gives a zero-width interval at δ (`df` = `None`), not NaN.
pub fn relative_change(treatment: &Summary, baseline: &Summary, confidence: f64) -> Option<RelativeChange> {
    let (mt, mb) = (treatment.mean, baseline.mean);
    if mb == 0.0 {
        return None;
    }
    let log_scale = mt > 0.0 && mb > 0.0;
    let (scale, delta) = if log_scale {
        (ChangeScale::LogRatio, mt / mb - 1.0)
    } else {
        (ChangeScale::Difference, (mt - mb) / mb.abs())
    };
    let (Some(vt), Some(vb)) = (treatment.variance, baseline.variance) else {
        return Some(RelativeChange { delta, ci_low: None, ci_high: None, scale, df: None });
    };
    let (nt, nb) = (treatment.n as f64, baseline.n as f64);
    let (at, ab) = if log_scale { (vt / (nt * mt * mt), vb / (nb * mb * mb)) } else { (vt / nt, vb / nb) };
    let se2 = at + ab;
    if se2 == 0.0 {
        return Some(RelativeChange { delta, ci_low: Some(delta), ci_high: Some(delta), scale, df: None });
    }
    let df = se2 * se2 / (at * at / (nt - 1.0) + ab * ab / (nb - 1.0));
    // Spreads beyond f64 (values near 1e300) leave df undefined: a change without an interval.
    let Some(q) = t_quantile((1.0 + confidence) / 2.0, df) else {
        return Some(RelativeChange { delta, ci_low: None, ci_high: None, scale, df: None });
    };
    let half = q * se2.sqrt();
    let (lo, hi) = if log_scale {
        let l = (mt / mb).ln();
        ((l - half).exp() - 1.0, (l + half).exp() - 1.0)
    } else {
        (delta - half / mb.abs(), delta + half / mb.abs())
    };
    // Two values with a huge spread can push exp() past f64: no interval rather than ∞.
    let finite = |x: f64| x.is_finite().then_some(x);
    Some(RelativeChange { delta, ci_low: finite(lo), ci_high: finite(hi), scale, df: Some(df) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::summarize;

    fn rel(got: f64, want: f64) -> bool {
        (got - want).abs() <= 1e-9 * want.abs()
    }

    #[test]
    fn log_ratio_interval_matches_an_independent_computation() {
        // numpy/scipy: R = mean(t)/mean(b); a = var/(n·mean²); exp(ln R ± t.ppf(0.975, ν)·se) − 1.
        let t = summarize(&[11.5, 12.0, 12.2, 11.8, 12.4, 12.1], 0.95).unwrap();
        let b = summarize(&[1.02, 0.98, 1.01, 0.99, 1.0, 1.03], 0.95).unwrap();
        let c = relative_change(&t, &b, 0.95).unwrap();
        assert_eq!(c.scale, ChangeScale::LogRatio);
        assert!(rel(c.delta, 10.940298507462686), "{c:?}");
        assert!(rel(c.ci_low.unwrap(), 10.589738547412232), "{c:?}");
        assert!(rel(c.ci_high.unwrap(), 11.301462010042401), "{c:?}");
        assert!(rel(c.df.unwrap(), 8.99518116156956), "{c:?}");
    }

    #[test]
    fn zero_spread_gives_a_point_interval() {
        let one = summarize(&[1.0; 6], 0.95).unwrap();
        let c = relative_change(&one, &one, 0.95).unwrap();
        assert_eq!((c.delta, c.ci_low, c.ci_high, c.df), (0.0, Some(0.0), Some(0.0), None));
        // One arm without spread: ν comes from the other arm alone (n − 1).
        let t = summarize(&[2.0, 2.2, 1.8, 2.1, 1.9, 2.0], 0.95).unwrap();
        let c = relative_change(&t, &one, 0.95).unwrap();
        assert!(rel(c.df.unwrap(), 5.0), "{c:?}");
        assert!(c.ci_low.unwrap() < 1.0 && c.ci_high.unwrap() > 1.0, "{c:?}");
    }

    #[test]
    fn non_positive_means_and_missing_spread() {
        let t = summarize(&[-1.0, 1.0, 0.0], 0.95).unwrap();
        let b = summarize(&[2.0, 2.5, 1.5], 0.95).unwrap();
        let c = relative_change(&t, &b, 0.95).unwrap();
        assert_eq!(c.scale, ChangeScale::Difference);
        assert!(rel(c.delta, -1.0));
        assert!(c.ci_low.unwrap() < -1.0 && c.ci_high.unwrap() > -1.0);
        let zero = summarize(&[0.0, 0.0], 0.95).unwrap();
        assert_eq!(relative_change(&t, &zero, 0.95), None);
        let wild = summarize(&[-1e300, 1e300], 0.95).unwrap();
        let c = relative_change(&wild, &b, 0.95).unwrap();
        assert_eq!((c.delta, c.ci_low, c.ci_high, c.df), (-1.0, None, None, None), "{c:?}");
        let single = summarize(&[3.0], 0.95).unwrap();
        let c = relative_change(&single, &b, 0.95).unwrap();
        assert!(rel(c.delta, 0.5));
        assert_eq!((c.ci_low, c.ci_high), (None, None));
    }
}
