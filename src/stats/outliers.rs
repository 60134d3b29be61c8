//! Outlier flags (never removal).

use super::median;

/// Modified z-scores above this are flagged (Iglewicz & Hoaglin).
pub const MODIFIED_Z_LIMIT: f64 = 3.5;

/// Indices of the values whose modified z-score exceeds 3.5, in order.
///
/// Formula (Iglewicz & Hoaglin, "How to Detect and Handle Outliers", ASQC 1993, §3.3):
/// Mᵢ = 0.6745 · (xᵢ − x̃) / MAD with MAD = median |xᵢ − x̃|. When MAD = 0 (more than half
/// the values equal) the mean absolute deviation stands in: Mᵢ = (xᵢ − x̃) / (1.253314 ·
/// MeanAD) (the scaling that makes both estimate σ for normal data; IBM SPSS uses the
/// same fallback). When that is 0 too, every value equals the median: nothing is flagged.
/// Fewer than 3 values are never flagged: there is no majority to deviate from.
pub fn modified_z_outliers(xs: &[f64]) -> Vec<usize> {
    if xs.len() < 3 {
        return Vec::new();
    }
    let Some(med) = median(xs) else { return Vec::new() };
    let dev: Vec<f64> = xs.iter().map(|x| (x - med).abs()).collect();
    let mad = median(&dev).unwrap_or(0.0);
    let scale = if mad > 0.0 { mad / 0.6745 } else { 1.253314 * dev.iter().sum::<f64>() / dev.len() as f64 };
    if scale.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return Vec::new();
    }
    dev.iter().enumerate().filter(|&(_, d)| d / scale > MODIFIED_Z_LIMIT).map(|(i, _)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_the_far_value_only() {
        // median 10, MAD 0.5 → M = 0.6745 · 10 / 0.5 = 13.5 for 20; 1.35 for 11.
        assert_eq!(modified_z_outliers(&[10.0, 9.5, 10.5, 10.0, 20.0, 11.0, 9.0]), [4]);
        assert!(modified_z_outliers(&[1.0, 2.0, 3.0, 4.0, 5.0]).is_empty());
    }

    #[test]
    fn zero_mad_falls_back_to_mean_absolute_deviation() {
        // Five equal values and one far one: MAD = 0, MeanAD = 5/6, M = 5 / (1.2533 · 0.833) = 4.79.
        assert_eq!(modified_z_outliers(&[1.0, 1.0, 1.0, 1.0, 1.0, 6.0]), [5]);
        // All equal: nothing to flag, no NaN.
        assert!(modified_z_outliers(&[1.0; 6]).is_empty());
        assert!(modified_z_outliers(&[1.0, 100.0]).is_empty());
    }
}
