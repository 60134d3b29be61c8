//! Quantiles of Student's t distribution.

use statrs::distribution::{ContinuousCDF, Normal, StudentsT};
use statrs::function::beta::beta_reg;

/// From this many degrees of freedom on, the Cornish–Fisher expansion is used: its
/// error is below 1e-15 there, while statrs's inverse loses digits as df grows (1e-5
/// off at df = 10⁵) and does not return at df = 10⁹.
const EXPANSION_MIN_DF: f64 = 1000.0;

/// The p-quantile of Student's t with `df` degrees of freedom: t such that P(T ≤ t) = p.
///
/// For df < 1000, statrs (`StudentsT::inverse_cdf`: t = √(df·(1 − y)/y) with
/// y = I⁻¹(df/2, ½, 2·min(p, 1 − p)), the inverse regularized incomplete beta function;
/// Abramowitz & Stegun 26.7.1). For df ≥ 1000, the Cornish–Fisher expansion around the
/// normal quantile z (Abramowitz & Stegun 26.7.5):
/// t = z + g₁/ν + g₂/ν² + g₃/ν³ + g₄/ν⁴ with g₁ = (z³ + z)/4,
/// g₂ = (5z⁵ + 16z³ + 3z)/96, g₃ = (3z⁷ + 19z⁵ + 17z³ − 15z)/384,
/// g₄ = (79z⁹ + 776z⁷ + 1482z⁵ − 1920z³ − 945z)/92160.
///
/// `None` when p is not strictly between 0 and 1 or df is not positive.
pub fn t_quantile(p: f64, df: f64) -> Option<f64> {
    // Written as positive comparisons so NaN fails them too.
    let in_range = p > 0.0 && p < 1.0 && df > 0.0;
    if !in_range {
        return None;
    }
    let q = if df >= EXPANSION_MIN_DF {
        cornish_fisher(Normal::standard().inverse_cdf(p), df)
    } else {
        StudentsT::new(0.0, 1.0, df).ok()?.inverse_cdf(p)
    };
    q.is_finite().then_some(q)
}

/// Two-sided tail probability of Student's t: P(|T| ≥ |t|) with `df` degrees of freedom.
///
/// Formula: p = I_x(ν/2, ½) with x = ν / (ν + t²), the regularized incomplete beta
/// function (Abramowitz & Stegun 26.7.1; statrs `beta_reg`, a Lentz continued
/// fraction). Computed directly from the tail, never as 1 − CDF, so a p-value of 1e-12
/// keeps its digits. Near p = 1 (ν > 2t², as Boost's `students_t` cdf splits) it is
/// 1 − I_y(½, ν/2) with y = t² / (ν + t²) instead, so p = 1 − 4e-16 is not rounded to 1;
/// ν = 1 and ν = 2 use their closed forms (A&S 26.7.3, 26.7.4): p = (2/π)·atan(1/|t|) and
/// p = 2 / (s·(s + |t|)) with s = √(2 + t²); t = 0 gives 1 exactly. The change-point merge compares such
/// p-values with each other, so their last digits matter (see `change_points`).
/// An infinite |t| gives 0. `None` when df is not positive or t is NaN.
pub fn t_two_sided_p(t: f64, df: f64) -> Option<f64> {
    let ok = df > 0.0 && !t.is_nan();
    if !ok {
        return None;
    }
    if t.is_infinite() {
        return Some(0.0);
    }
    let (a, t2) = (t.abs(), t * t);
    let p = if t == 0.0 {
        1.0
    } else if df == 1.0 {
        std::f64::consts::FRAC_2_PI * (1.0 / a).atan()
    } else if df == 2.0 {
        // 2 / (s·(s + |t|)) with s·s written as 2 + t², so t → 0 gives 1 exactly.
        2.0 / (2.0 + t2 + a * (2.0 + t2).sqrt())
    } else if df > 2.0 * t2 {
        1.0 - beta_reg(0.5, df / 2.0, t2 / (df + t2))
    } else {
        beta_reg(df / 2.0, 0.5, df / (df + t2))
    };
    p.is_finite().then_some(p.clamp(0.0, 1.0))
}

/// A&S 26.7.5, in Horner form.
fn cornish_fisher(z: f64, nu: f64) -> f64 {
    let z2 = z * z;
    let g1 = z * (z2 + 1.0) / 4.0;
    let g2 = z * ((5.0 * z2 + 16.0) * z2 + 3.0) / 96.0;
    let g3 = z * (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) / 384.0;
    let g4 = z * ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) / 92160.0;
    z + (g1 + (g2 + (g3 + g4 / nu) / nu) / nu) / nu
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (df, t(0.975), t(0.995)), computed with mpmath 1.3 at 40 digits as the root of the
    /// regularized incomplete beta form of the t CDF (A&S 26.7.1), rounded to f64.
    const REFERENCE: [(f64, f64, f64); 12] = [
        (1.0, 12.706204736174705, 63.65674116287158),
        (2.0, 4.302652729749464, 9.924843200918293),
        (3.0, 3.1824463052837095, 5.840909309733357),
        (5.0, 2.5705818356363155, 4.032142983555228),
        (10.0, 2.228138851986275, 3.1692726726169513),
        (30.0, 2.042272456301238, 2.7499956535672254),
        (100.0, 1.9839715185235522, 2.6258905214380177),
        (1000.0, 1.9623390808264085, 2.580754698065951),
        (10000.0, 1.9602012398906263, 2.5763210466685287),
        (99999.0, 1.9599877077718448, 2.5758784704000526),
        (1e6, 1.959966356814107, 2.5758342201053344),
        (1e9, 1.9599639869123255, 2.5758293084654484),
    ];

    #[test]
    fn brief_known_answer() {
        // From the product brief: t₀.₉₇₅ at df 4 (scipy.stats.t.ppf(0.975, 4)).
        let q = t_quantile(0.975, 4.0).unwrap();
        assert!((q - 2.7764451051977934).abs() < 1e-9, "t(0.975, 4) = {q}");
    }

    #[test]
    fn matches_reference_from_small_to_huge_df() {
        for (df, q975, q995) in REFERENCE {
            let (a, b) = (t_quantile(0.975, df).unwrap(), t_quantile(0.995, df).unwrap());
            assert!((a - q975).abs() < 1e-9 * q975, "t(0.975, {df}) = {a}, want {q975}");
            assert!((b - q995).abs() < 1e-9 * q995, "t(0.995, {df}) = {b}, want {q995}");
        }
    }

    #[test]
    fn closed_forms_and_symmetry() {
        // df = 1 is the Cauchy distribution: t(p) = tan(π(p − ½)).
        let q1 = t_quantile(0.9, 1.0).unwrap();
        assert!((q1 - (0.4 * std::f64::consts::PI).tan()).abs() < 1e-9, "t(0.9, 1) = {q1}");
        // df = 2: t(p) = (2p − 1)·√(2 / (4p(1 − p))).
        let p: f64 = 0.95;
        let exact2 = (2.0 * p - 1.0) * (2.0 / (4.0 * p * (1.0 - p))).sqrt();
        assert!((t_quantile(p, 2.0).unwrap() - exact2).abs() < 1e-9);
        // Lower quantiles are negated upper ones, on both sides of the method switch.
        for df in [4.0, 5000.0] {
            assert!((t_quantile(0.025, df).unwrap() + t_quantile(0.975, df).unwrap()).abs() < 1e-9);
        }
    }

    #[test]
    fn two_sided_p_matches_scipy() {
        // scipy 1.17: 2 * stats.t.sf(3.0, 10), 2 * stats.t.sf(50.0, 5.3).
        let p = t_two_sided_p(3.0, 10.0).unwrap();
        assert!((p - 0.01334365502256957).abs() < 1e-9 * 0.0134, "p {p}");
        let tiny = t_two_sided_p(-50.0, 5.3).unwrap();
        assert!((tiny - 2.704705118450397e-08).abs() < 1e-9 * 2.7e-8, "p {tiny}");
        assert_eq!(t_two_sided_p(0.0, 4.0), Some(1.0));
        assert_eq!(t_two_sided_p(f64::INFINITY, 4.0), Some(0.0));
        assert_eq!(t_two_sided_p(f64::NAN, 4.0), None);
        assert_eq!(t_two_sided_p(1.0, 0.0), None);
    }

    #[test]
    fn two_sided_p_keeps_its_last_digits_near_one_and_for_one_or_two_df() {
        // scipy 1.16.3 `2 * special.stdtr(df, -|t|)`: (t, df, p). Within 4 ulps for one or
        // two df and for p within 1e-15 of 1 (the change-point merge orders p-values like
        // 0.9999999999999992 against 1); elsewhere statrs's continued fraction is good to
        // about 1e-13.
        let ulps = 4.0 * f64::EPSILON;
        let cases = [
            (1e-15, 5.0, 0.9999999999999992, ulps),
            (0.5, 1.0, 0.7048327646991336, ulps),
            (1.0606601717798194, 2.0, 0.4000000000000007, ulps),
            (0.3, 7.0, 0.7728900504021343, ulps),
            (0.01, 30.0, 0.9920874925731777, 1e-13),
            (2.5, 3.0, 0.08770664700806555, 1e-13),
        ];
        for (t, df, expected, rel) in cases {
            let p = t_two_sided_p(t, df).unwrap();
            assert!((p - expected).abs() <= rel * expected, "t {t}, df {df}: {p} vs {expected}");
        }
    }

    #[test]
    fn rejects_out_of_range() {
        assert_eq!(t_quantile(0.0, 4.0), None);
        assert_eq!(t_quantile(1.0, 4.0), None);
        assert_eq!(t_quantile(f64::NAN, 4.0), None);
        assert_eq!(t_quantile(0.975, 0.0), None);
        assert_eq!(t_quantile(0.975, f64::NAN), None);
    }
}
