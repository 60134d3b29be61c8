//! How many trials a comparison needs.

use super::{min_attainable_p, t_quantile};

/// Trials per arm for a two-sided two-sample t-test at level `alpha` to detect a
/// relative change of `threshold` with probability `power`, given the coefficient of
/// variation `cv` of a trial's value. `None` for non-positive or non-finite inputs.
///
/// Formula (Julious, "Sample sizes for clinical trials with Normal data", Stat. Med. 23,
/// 2004, eq. 3, with the relative change standing in for the standardized difference
/// through the CV): n = 2 (t₁₋α/₂,ν + t_power,ν)² (cv / threshold)², ν = 2n − 2, solved
/// by fixed-point iteration from the normal-quantile value and rounded up. Checked
/// against the exact noncentral-t power (scipy.stats.nct): the n returned reaches the
/// power, n − 1 does not, for the cases in the tests.
pub fn trials_per_arm(cv: f64, threshold: f64, alpha: f64, power: f64) -> Option<u32> {
    let ok = cv >= 0.0 && threshold > 0.0 && alpha > 0.0 && alpha < 1.0 && power > 0.0 && power < 1.0;
    if !ok || !cv.is_finite() {
        return None;
    }
    let ratio = cv / threshold;
    let quantiles = |df: f64| Some(t_quantile(1.0 - alpha / 2.0, df)? + t_quantile(power, df)?);
    let mut n: f64 = 2.0 * (quantiles(1e9)? * ratio).powi(2);
    for _ in 0..200 {
        let df = 2.0 * n.max(2.0) - 2.0;
        let next = 2.0 * (quantiles(df)? * ratio).powi(2);
        let done = (next - n).abs() < 1e-9;
        n = next;
        if done {
            break;
        }
    }
    let n = n.ceil().max(2.0);
    (n <= f64::from(u32::MAX)).then_some(n as u32)
}

/// The fewest trials per arm at which the rank test can reach `alpha` at all: what the
/// advice and the fixed design never go below.
pub fn rank_test_floor(alpha: f64) -> u32 {
    (2..=1000u32).find(|&k| min_attainable_p(k as usize, k as usize) <= alpha).unwrap_or(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reaches_the_power_exactly_at_the_returned_n() {
        // (cv, threshold, alpha, want); exact power at n and n − 1 from scipy.stats.nct:
        // 64: 0.8015 / 0.7952; 6: 0.871 / 0.748; 805: 0.80033 / 0.79974; 17: 0.807 / 0.781.
        for (cv, thr, alpha, want) in
            [(0.1, 0.05, 0.05, 64), (0.02, 0.05, 0.0125, 6), (0.3, 0.05, 0.0125, 805), (0.05, 0.05, 0.05, 17)]
        {
            assert_eq!(trials_per_arm(cv, thr, alpha, 0.8), Some(want), "cv {cv}, alpha {alpha}");
        }
    }

    #[test]
    fn degenerate_inputs() {
        assert_eq!(trials_per_arm(0.0, 0.05, 0.05, 0.8), Some(2));
        assert_eq!(trials_per_arm(0.1, 0.0, 0.05, 0.8), None);
        assert_eq!(trials_per_arm(f64::NAN, 0.05, 0.05, 0.8), None);
        assert_eq!(trials_per_arm(0.1, 0.05, 1.0, 0.8), None);
    }
}
