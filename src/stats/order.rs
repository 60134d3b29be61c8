//! Order statistics.

use statrs::distribution::{Binomial, DiscreteCDF};

/// Median: the middle value of the sorted sample, or the mean of the two middle values
/// when n is even (Hyndman & Fan, "Sample Quantiles in Statistical Packages", The
/// American Statistician 50(4), 1996: definition 7 at p = 0.5, R's default).
/// `None` for an empty slice or one holding NaN (NaN has no place in an order).
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|x| x.is_nan()) {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[mid]
    } else {
        // Halve before adding so two values near f64::MAX do not overflow.
        v[mid - 1] / 2.0 + v[mid] / 2.0
    })
}

/// A distribution-free confidence interval for the median: two order statistics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MedianCi {
    pub low: f64,
    pub high: f64,
    /// The interval's exact coverage, at least the level asked for (order statistics
    /// give only discrete levels: 96.9 % for n = 6 at 95 %).
    pub coverage: f64,
}

/// Confidence interval for the median from order statistics, at `confidence` (0.95) or
/// more. `None` when n is too small for that level (n < 6 at 95 %) or a value is NaN.
///
/// Formula (Conover, "Practical Nonparametric Statistics", 3rd ed., 1999, §3.2): with
/// B ~ Binomial(n, ½), take the largest k with P(B ≤ k − 1) ≤ (1 − c)/2; then
/// [x₍ₖ₎, x₍ₙ₋ₖ₊₁₎] covers the median with probability 1 − 2·P(B ≤ k − 1).
pub fn median_ci(xs: &[f64], confidence: f64) -> Option<MedianCi> {
    let n = xs.len();
    let in_range = confidence > 0.0 && confidence < 1.0;
    if n < 2 || !in_range || xs.iter().any(|x| x.is_nan()) {
        return None;
    }
    let b = Binomial::new(0.5, n as u64).ok()?;
    let tail = (1.0 - confidence) / 2.0;
    // P(B ≤ k − 1) grows with k: binary search for the largest k (1 ≤ k ≤ n/2) within the tail.
    let (mut lo, mut hi) = (0u64, (n / 2) as u64);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if b.cdf(mid - 1) <= tail { lo = mid } else { hi = mid - 1 }
    }
    if lo == 0 {
        return None;
    }
    let k = lo as usize;
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    Some(MedianCi { low: v[k - 1], high: v[n - k], coverage: 1.0 - 2.0 * b.cdf(lo - 1) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn median_interval_from_order_statistics() {
        // n = 6: P(B ≤ 0) = 1/64 ≤ 0.025 < P(B ≤ 1) → [x(1), x(6)], coverage 1 − 2/64.
        let ci = median_ci(&[6.0, 1.0, 5.0, 2.0, 4.0, 3.0], 0.95).unwrap();
        assert_eq!((ci.low, ci.high), (1.0, 6.0));
        assert!((ci.coverage - 0.96875).abs() < 1e-12);
        // n = 5 cannot reach 95 % (2/32 > 0.05).
        assert_eq!(median_ci(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.95), None);
        // n = 10: P(B ≤ 1) = 0.0107 ≤ 0.025 < P(B ≤ 2) = 0.0547 → [x(2), x(9)], coverage 0.9785.
        let xs: Vec<f64> = (1..=10).map(f64::from).collect();
        let ci = median_ci(&xs, 0.95).unwrap();
        assert_eq!((ci.low, ci.high), (2.0, 9.0));
        assert!((ci.coverage - (1.0 - 2.0 * 0.0107421875)).abs() < 1e-12);
        // Large n: the interval narrows around the median.
        let big: Vec<f64> = (0..10_001).map(f64::from).collect();
        let ci = median_ci(&big, 0.95).unwrap();
        assert!(ci.low > 4890.0 && ci.high < 5110.0 && ci.coverage >= 0.95, "{ci:?}");
        assert_eq!(median_ci(&[1.0, f64::NAN, 2.0, 3.0, 4.0, 5.0], 0.95), None);
    }
}
