//! The standard normal distribution, as the group-sequential code uses it: one place for
//! Φ, its tail, its quantile and its density.

use statrs::distribution::{ContinuousCDF, Normal};

fn standard() -> Normal {
    Normal::new(0.0, 1.0).expect("the standard normal")
}

/// Φ(z).
pub(super) fn cdf(z: f64) -> f64 {
    standard().cdf(z)
}

/// 1 − Φ(z), computed without cancellation in the tail.
pub(super) fn sf(z: f64) -> f64 {
    standard().sf(z)
}

/// Φ⁻¹(p).
pub(super) fn quantile(p: f64) -> f64 {
    standard().inverse_cdf(p)
}

/// φ(z), by its formula (the recursive integration's kernel).
pub(super) fn pdf(z: f64) -> f64 {
    (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use statrs::distribution::Continuous as _;

    #[test]
    fn the_formula_is_the_distributions_density() {
        for z in [-3.0, -0.5, 0.0, 1.2, 4.0] {
            assert!((pdf(z) - standard().pdf(z)).abs() < 1e-15, "{z}");
        }
        assert!((quantile(0.975) - 1.959_963_984_540_054).abs() < 1e-9);
        assert!((cdf(1.959_963_984_540_054) + sf(1.959_963_984_540_054) - 1.0).abs() < 1e-15);
    }
}
