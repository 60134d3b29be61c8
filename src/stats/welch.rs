//! Welch's unequal-variances t-test.

use serde::{Deserialize, Serialize};

use super::{mean, sample_variance, t_two_sided_p};

/// Result of Welch's t-test of x against y (two-sided).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Welch {
    /// t = (x̄ − ȳ) / se; `None` when it is infinite (both samples without spread,
    /// different means) or undefined (both without spread, equal means).
    pub t: Option<f64>,
    /// Welch–Satterthwaite degrees of freedom; `None` when both variances are 0.
    pub df: Option<f64>,
    /// Two-sided p-value.
    pub p: f64,
}

/// Welch's t-test of `x` against `y`, two-sided. `None` when either sample has fewer
/// than two values or holds a non-finite value.
///
/// Formulas (Welch, "The generalization of Student's problem when several different
/// population variances are involved", Biometrika 34, 1947; Satterthwaite, Biometrics
/// Bulletin 2(6), 1946): with vₓ = sₓ²/nₓ and v_y = s_y²/n_y,
/// t = (x̄ − ȳ) / √(vₓ + v_y), ν = (vₓ + v_y)² / (vₓ²/(nₓ − 1) + v_y²/(n_y − 1)),
/// p = P(|T_ν| ≥ |t|). The same as `scipy.stats.ttest_ind(x, y, equal_var=False)`.
///
/// Samples without spread (sensors that report a whole-number level, say) are not an
/// error: if both variances are 0, the means either differ — t is infinite, p = 0 — or
/// are equal — nothing separates them, p = 1 (scipy returns NaN there). If only one
/// variance is 0, the formula holds as written (ν = n − 1 of the other sample).
pub fn welch(x: &[f64], y: &[f64]) -> Option<Welch> {
    if x.iter().chain(y).any(|v| !v.is_finite()) {
        return None;
    }
    let (mx, my) = (mean(x)?, mean(y)?);
    let (sx, sy) = (sample_variance(x)?, sample_variance(y)?);
    welch_from_moments((mx, sx, x.len()), (my, sy, y.len()))
}

/// [`welch`] from (mean, sample variance, n) of each sample.
pub fn welch_from_moments(x: (f64, f64, usize), y: (f64, f64, usize)) -> Option<Welch> {
    let ((mx, sx, nx), (my, sy, ny)) = (x, y);
    if nx < 2 || ny < 2 {
        return None;
    }
    let (vx, vy) = (sx / nx as f64, sy / ny as f64);
    let se2 = vx + vy;
    if se2 == 0.0 {
        let p = if mx == my { 1.0 } else { 0.0 };
        return Some(Welch { t: None, df: None, p });
    }
    let t = (mx - my) / se2.sqrt();
    let df = se2 * se2 / (vx * vx / (nx - 1) as f64 + vy * vy / (ny - 1) as f64);
    let p = t_two_sided_p(t, df)?;
    Some(Welch { t: Some(t), df: Some(df), p })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scipy_documented_example() {
        // From the product brief (scipy.stats.ttest_ind, equal_var=False).
        let a = [1.0, 3.0, 4.0, 6.0, 11.0, 13.0, 15.0, 19.0, 22.0, 24.0, 25.0, 26.0, 26.0];
        let b = [2.0, 4.0, 6.0, 9.0, 11.0, 13.0, 14.0, 15.0, 18.0, 19.0, 21.0];
        let w = welch(&a, &b).unwrap();
        let rel = |got: f64, want: f64| (got - want).abs() <= 1e-9 * want.abs();
        assert!(rel(w.t.unwrap(), 0.9358461935556048), "t {:?}", w.t);
        assert!(rel(w.df.unwrap(), 20.984611233429924), "df {:?}", w.df);
        assert!(rel(w.p, 0.35999818693244245), "p {}", w.p);
        // Swapping the samples flips t only.
        let back = welch(&b, &a).unwrap();
        assert!(rel(-back.t.unwrap(), 0.9358461935556048));
        assert_eq!(back.p, w.p);
    }

    #[test]
    fn zero_variance_in_one_or_both_samples() {
        // Energy level 1.0 in every control trial: the other sample carries the spread.
        let control = [1.0; 6];
        let poll = [11.5, 12.0, 12.2, 11.8, 12.4, 12.1];
        let w = welch(&poll, &control).unwrap();
        assert_eq!(w.df, Some(5.0));
        assert!(w.t.unwrap() > 50.0 && w.p < 1e-7, "{w:?}");
        // Both constant: equal means give p = 1, different means p = 0; never NaN.
        assert_eq!(welch(&control, &[1.0; 6]), Some(Welch { t: None, df: None, p: 1.0 }));
        assert_eq!(welch(&control, &[2.0; 4]), Some(Welch { t: None, df: None, p: 0.0 }));
    }

    #[test]
    fn too_small_or_non_finite() {
        assert_eq!(welch(&[1.0], &[1.0, 2.0]), None);
        assert_eq!(welch(&[1.0, f64::NAN], &[1.0, 2.0]), None);
    }
}
