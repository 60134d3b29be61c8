//! Mean and sample variance, accurate for large values with small spread.
//!
//! Battery and energy counters are large numbers that differ in their last digits
//! (NIST StRD NumAcc3/4 are the textbook case), where the one-pass textbook formula
//! Σx² − n·x̄² cancels catastrophically. Both functions here are two-pass.

/// Arithmetic mean with one refinement pass.
///
/// Formula: m₀ = Σxᵢ / n, then m = m₀ + Σ(xᵢ − m₀) / n. The second term recovers the
/// rounding error of the first sum (Björck, "Numerical Methods for Least Squares
/// Problems", 1996, §2.2; the same correction as the corrected two-pass algorithm of
/// Chan, Golub & LeVeque, "Algorithms for computing the sample variance", The American
/// Statistician 37(3), 1983, eq. 1.7). `None` for an empty slice.
pub fn mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let n = xs.len() as f64;
    let m0 = xs.iter().sum::<f64>() / n;
    let correction = xs.iter().map(|x| x - m0).sum::<f64>() / n;
    Some(m0 + correction)
}

/// Sample variance (denominator n − 1), corrected two-pass algorithm.
///
/// Formula: s² = [Σ(xᵢ − x̄)² − (Σ(xᵢ − x̄))² / n] / (n − 1), with x̄ from [`mean`]
/// (Chan, Golub & LeVeque 1983, eq. 1.7). The subtracted term is zero in exact
/// arithmetic and removes the error left in x̄. `None` when n < 2: one value has no spread.
pub fn sample_variance(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let n = xs.len() as f64;
    let m = mean(xs)?;
    let (mut ss, mut s) = (0.0, 0.0);
    for &x in xs {
        let d = x - m;
        ss += d * d;
        s += d;
    }
    // Rounding can take a zero-spread sum a hair below zero; a variance is never negative.
    Some(((ss - s * s / n) / (n - 1.0)).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_single() {
        assert_eq!(mean(&[]), None);
        assert_eq!(mean(&[4.5]), Some(4.5));
        assert_eq!(sample_variance(&[]), None);
        assert_eq!(sample_variance(&[4.5]), None);
    }

    #[test]
    fn small_known_values() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, Σ(x − 5)² = 32, s² = 32 / 7.
        let xs = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert_eq!(mean(&xs), Some(5.0));
        assert!((sample_variance(&xs).unwrap() - 32.0 / 7.0).abs() < 1e-15);
    }

    #[test]
    fn constant_values_have_zero_variance() {
        let xs = [10000000.1; 50];
        assert_eq!(sample_variance(&xs), Some(0.0));
    }
}
