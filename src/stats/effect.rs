//! Standardized effect size.

use statrs::function::gamma::ln_gamma;

use super::Summary;

/// Hedges' g of `treatment` against `baseline`: the bias-corrected standardized mean
/// difference.
///
/// Formula (Hedges, "Distribution theory for Glass's estimator of effect size", J. Educ.
/// Stat. 6(2), 1981, eq. 6e): g = J(ν) · (x̄ₜ − x̄_b) / s_p with pooled
/// s_p = √(((nₜ − 1)sₜ² + (n_b − 1)s_b²) / ν), ν = nₜ + n_b − 2 and the exact correction
/// J(ν) = Γ(ν/2) / (√(ν/2) · Γ((ν − 1)/2)).
///
/// `None` when ν < 2 (J needs it) or s_p = 0: with no spread at all a standardized
/// difference is infinite or undefined, and the report says so rather than print NaN.
pub fn hedges_g(treatment: &Summary, baseline: &Summary) -> Option<f64> {
    let (vt, vb) = (treatment.variance?, baseline.variance?);
    let nu = (treatment.n + baseline.n) as f64 - 2.0;
    if nu < 2.0 {
        return None;
    }
    let pooled = (((treatment.n as f64 - 1.0) * vt + (baseline.n as f64 - 1.0) * vb) / nu).sqrt();
    if pooled == 0.0 {
        return None;
    }
    let j = (ln_gamma(nu / 2.0) - (nu / 2.0).sqrt().ln() - ln_gamma((nu - 1.0) / 2.0)).exp();
    let g = j * (treatment.mean - baseline.mean) / pooled;
    g.is_finite().then_some(g)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::summarize;

    #[test]
    fn matches_an_independent_computation() {
        // numpy/scipy.special.gammaln with the same formula: J(10) = 0.922745608053087.
        let t = summarize(&[11.5, 12.0, 12.2, 11.8, 12.4, 12.1], 0.95).unwrap();
        let b = summarize(&[1.02, 0.98, 1.01, 0.99, 1.0, 1.03], 0.95).unwrap();
        let g = hedges_g(&t, &b).unwrap();
        assert!((g - 45.29325474135036).abs() < 1e-9 * 45.3, "g {g}");
        assert!((hedges_g(&b, &t).unwrap() + g).abs() < 1e-9);
    }

    #[test]
    fn no_pooled_spread_or_too_few() {
        let one = summarize(&[1.0; 6], 0.95).unwrap();
        assert_eq!(hedges_g(&one, &one), None);
        let pair = summarize(&[1.0, 2.0], 0.95).unwrap();
        assert_eq!(hedges_g(&pair, &summarize(&[3.0], 0.95).unwrap()), None);
        assert!(hedges_g(&pair, &pair).is_some());
    }
}
