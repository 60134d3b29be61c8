//! The noncentral t distribution's CDF, and the exact power of the two-sample t-test.

use statrs::distribution::{ContinuousCDF, Normal};
use statrs::function::beta::beta_reg;
use statrs::function::gamma::ln_gamma;

use super::t_quantile;

/// P(T ≤ t) for T noncentral t with `df` degrees of freedom and noncentrality `nc`.
///
/// Formula (Lenth, "Cumulative distribution function of the non-central t distribution",
/// Applied Statistics 38(1), 1989, algorithm AS 243): for t ≥ 0, with x = t²/(t² + ν) and
/// μ = δ²/2,
/// F(t; ν, δ) = Φ(−δ) + ½ Σⱼ [Pⱼ · I_x(j + ½, ν/2) + (δ/√2) · Qⱼ · I_x(j + 1, ν/2)],
/// Pⱼ = e^(−μ) μʲ / j!, Qⱼ = e^(−μ) μʲ / Γ(j + 3/2), I the regularized incomplete beta
/// function (statrs `beta_reg`); for t < 0, F(t; ν, δ) = 1 − F(−t; ν, −δ). AS 243 builds
/// the weights by recurrence from e^(−μ), which underflows for δ > 38; here each weight is
/// computed in logarithms, and the sum runs from j = 0 to μ + 12√μ + 12, past which the
/// Poisson weights are negligible. `None` when df is not positive or an input is not finite.
pub fn noncentral_t_cdf(t: f64, df: f64, nc: f64) -> Option<f64> {
    let ok = df > 0.0 && t.is_finite() && df.is_finite() && nc.is_finite();
    if !ok {
        return None;
    }
    let p = if t < 0.0 { 1.0 - upper_half(-t, df, -nc) } else { upper_half(t, df, nc) };
    p.is_finite().then_some(p.clamp(0.0, 1.0))
}

/// F(t; ν, δ) for t ≥ 0 (see [`noncentral_t_cdf`]).
fn upper_half(t: f64, df: f64, nc: f64) -> f64 {
    let normal = Normal::standard();
    let base = normal.cdf(-nc);
    if t == 0.0 {
        return base;
    }
    let x = t * t / (t * t + df);
    let b = df / 2.0;
    let mu = nc * nc / 2.0;
    if mu == 0.0 {
        // Only P₀ = 1 is left; the Q terms carry a factor δ = 0.
        return base + 0.5 * beta_reg(0.5, b, x);
    }
    let last = (mu + 12.0 * mu.sqrt() + 12.0).ceil() as u64;
    let (ln_mu, scale) = (mu.ln(), nc / std::f64::consts::SQRT_2);
    let mut sum = 0.0;
    for j in 0..=last {
        let jf = j as f64;
        let ln_w = -mu + jf * ln_mu;
        let p = (ln_w - ln_gamma(jf + 1.0)).exp();
        let q = (ln_w - ln_gamma(jf + 1.5)).exp();
        if p > 0.0 {
            sum += p * beta_reg(jf + 0.5, b, x);
        }
        if q > 0.0 {
            sum += scale * q * beta_reg(jf + 1.0, b, x);
        }
    }
    base + 0.5 * sum
}

/// Power of the two-sided two-sample t-test at level `alpha` with `n` values per arm,
/// when the arms' means differ by the noncentrality `nc` = Δ / (σ·√(2/n)):
/// 1 − F(t₁₋α/₂,ν; ν, nc) + F(−t₁₋α/₂,ν; ν, nc), ν = 2n − 2: the exact power under
/// normality with equal variances, both tails counted (R's `power.t.test(strict = TRUE)`).
/// `None` for n < 2 or α outside (0, 1).
pub fn two_sample_t_power(nc: f64, n: u32, alpha: f64) -> Option<f64> {
    if n < 2 {
        return None;
    }
    let df = 2.0 * f64::from(n) - 2.0;
    let crit = t_quantile(1.0 - alpha / 2.0, df)?;
    let upper = 1.0 - noncentral_t_cdf(crit, df, nc)?;
    let lower = noncentral_t_cdf(-crit, df, nc)?;
    Some((upper + lower).min(1.0))
}

/// The noncentrality at which [`two_sample_t_power`] reaches `power`: the root of
/// power(nc) = `power`, found by bisection (the power grows with nc ≥ 0) to 1e-12
/// relative. `None` when `power` is not between α and 1, or for n < 2.
pub fn noncentrality_for_power(n: u32, alpha: f64, power: f64) -> Option<f64> {
    let ok = power > alpha && power < 1.0 && alpha > 0.0 && alpha < 1.0;
    if !ok {
        return None;
    }
    let reaches = |nc: f64| two_sample_t_power(nc, n, alpha).map(|p| p >= power);
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    while !reaches(hi)? {
        (lo, hi) = (hi, hi * 2.0);
        if hi > 1e6 {
            return None;
        }
    }
    while hi - lo > 1e-12 * hi {
        let mid = 0.5 * (lo + hi);
        if reaches(mid)? {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(0.5 * (lo + hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: f64, want: f64, rel: f64) -> bool {
        (got - want).abs() <= rel * want.abs()
    }

    #[test]
    fn cdf_matches_scipy() {
        // scipy 1.17.1 `stats.nct.cdf(t, df, nc)`: (t, df, nc, cdf). Within 5e-12: statrs's
        // Φ alone is 1e-12 off at −2 (the last case), its incomplete beta about as much; a
        // lower tail (t < 0) is 1 − F(−t; ν, −δ), so its digits are absolute too.
        let cases = [
            (2.0, 8.0, 1.5, 0.651853872894671),
            (-1.0, 8.0, 1.5, 0.008179331095979181),
            (2.1009, 18.0, 3.0, 0.19028797200323863),
            (-2.1009, 18.0, 3.0, 7.428350475553822e-07),
            (0.5, 2.0, -0.7, 0.8673550330496884),
            (45.0, 58.0, 40.0, 0.8695612835361539),
            (3.0, 30.0, 0.0, 0.9973050179671741),
            (0.0, 10.0, 2.0, 0.02275013194817922),
        ];
        for (t, df, nc, want) in cases {
            let got = noncentral_t_cdf(t, df, nc).unwrap();
            assert!((got - want).abs() < 5e-12, "F({t}; {df}, {nc}) = {got}, want {want}");
        }
    }

    #[test]
    fn a_far_tail_keeps_its_digits_where_scipy_does_not() {
        // F(1.96; 58, 40): scipy 1.17.1 says 2.0416e-56; the series summed in mpmath at 60
        // digits (and a quadrature of P(Z ≤ t·√(V/ν) − δ) over V ~ χ²₅₈) say 4.0786e-305.
        let got = noncentral_t_cdf(1.96, 58.0, 40.0).unwrap();
        assert!(close(got, 4.078571984463256e-305, 1e-9), "{got:e}");
    }

    #[test]
    fn zero_noncentrality_is_students_t() {
        for (t, df) in [(1.3, 4.0), (-2.2, 11.0), (0.4, 1.0)] {
            let central = 1.0 - super::super::t_two_sided_p(t, df).unwrap() / 2.0;
            let want = if t < 0.0 { 1.0 - central } else { central };
            assert!(close(noncentral_t_cdf(t, df, 0.0).unwrap(), want, 1e-12), "t {t}, df {df}");
        }
    }

    #[test]
    fn power_is_alpha_at_zero_and_matches_scipy() {
        assert!(close(two_sample_t_power(0.0, 10, 0.05).unwrap(), 0.05, 1e-12));
        // scipy 1.17.1: δ = 5 %, CV 5 %, n = 10: nc = 1/√(2/10);
        // stats.nct.sf(tc, 18, nc) + stats.nct.sf(tc, 18, −nc), tc = stats.t.ppf(0.975, 18).
        let p = two_sample_t_power(1.0 / (0.2f64).sqrt(), 10, 0.05).unwrap();
        assert!(close(p, 0.5620066465861494, 1e-10), "power {p}");
    }

    #[test]
    fn the_noncentrality_found_has_the_power_asked() {
        for (n, power) in [(3, 0.8), (10, 0.9), (30, 0.8)] {
            let nc = noncentrality_for_power(n, 0.05, power).unwrap();
            assert!(close(two_sample_t_power(nc, n, 0.05).unwrap(), power, 1e-9), "n {n}");
        }
        assert_eq!(noncentrality_for_power(10, 0.05, 0.04), None, "below α no change is needed");
        assert_eq!(noncentrality_for_power(1, 0.05, 0.8), None);
        assert_eq!(noncentral_t_cdf(1.0, 0.0, 1.0), None);
        assert_eq!(noncentral_t_cdf(f64::NAN, 3.0, 1.0), None);
    }
}
