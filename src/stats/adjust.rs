//! Multiple-comparison adjustment of p-values.

/// Holm's step-down adjusted p-values, in the order given.
///
/// Formula (Holm, "A simple sequentially rejective multiple test procedure", Scand. J.
/// Stat. 6, 1979): with p₍₁₎ ≤ … ≤ p₍ₘ₎, p̃₍ᵢ₎ = max_{j ≤ i} min(1, (m − j + 1) · p₍ⱼ₎).
/// Rejecting p̃ ≤ α controls the family-wise error rate at α under any dependence. The
/// same as R's `p.adjust(p, "holm")`.
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut out = vec![0.0; m];
    let mut running: f64 = 0.0;
    for (rank, &i) in ascending(p).iter().enumerate() {
        running = running.max(((m - rank) as f64 * p[i]).min(1.0));
        out[i] = running;
    }
    out
}

/// Benjamini–Hochberg adjusted p-values (false discovery rate), in the order given.
///
/// Formula (Benjamini & Hochberg, JRSS B 57(1), 1995): p̃₍ᵢ₎ = min_{j ≥ i} min(1, m/j · p₍ⱼ₎).
/// The same as R's `p.adjust(p, "BH")` and `scipy.stats.false_discovery_control`.
pub fn benjamini_hochberg(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut out = vec![0.0; m];
    let mut running: f64 = 1.0;
    for (rank, &i) in ascending(p).iter().enumerate().rev() {
        running = running.min((m as f64 / (rank + 1) as f64 * p[i]).min(1.0));
        out[i] = running;
    }
    out
}

/// Indices of `p` in ascending order of value (stable, NaN last).
fn ascending(p: &[f64]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..p.len()).collect();
    idx.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12)
    }

    #[test]
    fn holm_textbook_example() {
        // p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm") in R: sorted 0.005·4, 0.01·3,
        // 0.03·2, 0.04·1 → 0.02, 0.03, 0.06, max(0.04, 0.06) = 0.06.
        assert!(close(&holm(&[0.01, 0.04, 0.03, 0.005]), &[0.03, 0.06, 0.06, 0.02]));
        // Monotone step: 0.01·5 = 0.05, 0.02·4 = 0.08, 0.03·3 = 0.09, then held at 0.09.
        assert!(close(&holm(&[0.01, 0.02, 0.03, 0.04, 0.05]), &[0.05, 0.08, 0.09, 0.09, 0.09]));
        // Capped at 1; the empty family is empty.
        assert!(close(&holm(&[0.6, 0.7]), &[1.0, 1.0]));
        assert!(holm(&[]).is_empty());
    }

    #[test]
    fn bh_matches_scipy_false_discovery_control() {
        // scipy.stats.false_discovery_control(p, method="bh"), scipy 1.17.
        let p = [0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205, 0.212, 0.216];
        let want = [0.01, 0.04, 0.084, 0.084, 0.084, 0.1, 0.1057142857142857, 0.216, 0.216, 0.216];
        assert!(close(&benjamini_hochberg(&p), &want), "{:?}", benjamini_hochberg(&p));
        assert!(close(&benjamini_hochberg(&[0.05, 0.04, 0.03, 0.02, 0.01]), &[0.05; 5]));
    }
}
