//! The Mann–Whitney U test (Wilcoxon rank-sum), exact with ties for small samples.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};

/// Largest sample size (each arm) for which the exact null distribution is used.
/// Above it the normal approximation is within a few percent of the exact p-value;
/// the exact count stays well under a millisecond here (Klotz-style counting, below).
pub const EXACT_MAX_N: usize = 25;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MwuMethod {
    /// The exact permutation distribution of U given the observed ties.
    Exact,
    /// Normal approximation with tie and continuity correction.
    Normal,
}

/// Result of a two-sided Mann–Whitney U test of x against y.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MannWhitney {
    /// U of x: pairs (xᵢ, yⱼ) with xᵢ > yⱼ, plus half the tied pairs (scipy's statistic).
    pub u: f64,
    pub p: f64,
    pub method: MwuMethod,
    /// Some values are tied (across or within the samples).
    pub ties: bool,
}

/// Two-sided Mann–Whitney U test of `x` against `y`. `None` when a sample is empty or
/// holds a non-finite value.
///
/// U = R₁ − n₁(n₁ + 1)/2 with R₁ the sum of x's ranks, tied values getting the mean of
/// their ranks (Mann & Whitney, Ann. Math. Stat. 18, 1947).
///
/// **Exact** (both n ≤ [`EXACT_MAX_N`]): the null distribution of R₁ conditional on the
/// observed tie pattern, i.e. over all C(N, n₁) ways to pick x's ranks from the N
/// mid-ranks (Klotz, "The Wilcoxon, Ties, and the Computer", JASA 61, 1966). Doubled
/// mid-ranks are integers, so the counts are exact: tie group j of size tⱼ contributes
/// C(tⱼ, c) ways to put c of its members in x, and a dynamic programme over groups
/// counts subsets by size and rank sum. p = min(1, 2·min(P(R ≤ r₁), P(R ≥ r₁))) — the
/// two-sided rule of `scipy.stats.permutation_test`; without ties it equals scipy's
/// `mannwhitneyu(method="exact")`, and on benchstat's gob example (ties) it gives
/// benchstat's 0.4461018857.
///
/// **Normal** (larger samples): z = (|U − n₁n₂/2| − ½) / σ with
/// σ² = n₁n₂/12 · ((N + 1) − Σ(tⱼ³ − tⱼ)/(N(N − 1))), p = min(1, 2·(1 − Φ(z))) — the tie
/// and continuity corrected form of `scipy.stats.mannwhitneyu(method="asymptotic")`
/// (Lehmann, "Nonparametrics", 1975, §1.4).
///
/// When every value is the same, nothing separates the samples: p = 1 (scipy returns NaN).
pub fn mann_whitney(x: &[f64], y: &[f64]) -> Option<MannWhitney> {
    let (n1, n2) = (x.len(), y.len());
    if n1 == 0 || n2 == 0 || x.iter().chain(y).any(|v| !v.is_finite()) {
        return None;
    }
    let ranks = Ranks::new(x, y);
    let u = ranks.r1_doubled as f64 / 2.0 - (n1 * (n1 + 1)) as f64 / 2.0;
    let ties = ranks.groups.iter().any(|g| g.size > 1);
    if ranks.groups.len() == 1 {
        return Some(MannWhitney { u, p: 1.0, method: MwuMethod::Exact, ties });
    }
    let (p, method) = if n1 <= EXACT_MAX_N && n2 <= EXACT_MAX_N {
        (ranks.exact_p(n1), MwuMethod::Exact)
    } else {
        (normal_p(u, n1, n2, &ranks), MwuMethod::Normal)
    };
    Some(MannWhitney { u, p, method, ties })
}

/// The smallest two-sided exact p-value samples of these sizes can give: 2 / C(n₁ + n₂, n₁)
/// (complete separation, no ties). Above `alpha` no data can be significant.
pub fn min_attainable_p(n1: usize, n2: usize) -> f64 {
    if n1 == 0 || n2 == 0 {
        return 1.0;
    }
    // C(N, k) = Π (N − k + i) / i, in floating point (only its size matters here).
    let (n, k) = (n1 + n2, n1.min(n2));
    let c = (1..=k).fold(1.0, |acc, i| acc * (n - k + i) as f64 / i as f64);
    (2.0 / c).min(1.0)
}

struct TieGroup {
    size: usize,
    /// 2 × the group's mid-rank: first + last rank (1-based), an integer.
    rank_doubled: u64,
}

struct Ranks {
    groups: Vec<TieGroup>,
    /// 2 × R₁, the doubled rank sum of x.
    r1_doubled: u64,
}

impl Ranks {
    fn new(x: &[f64], y: &[f64]) -> Ranks {
        let mut all: Vec<(f64, bool)> = x.iter().map(|&v| (v, true)).chain(y.iter().map(|&v| (v, false))).collect();
        all.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (mut groups, mut r1_doubled) = (Vec::new(), 0u64);
        let mut i = 0;
        while i < all.len() {
            let mut j = i;
            // -0.0 and 0.0 are one value: compare with ==, not by bits.
            while j + 1 < all.len() && all[j + 1].0 == all[i].0 {
                j += 1;
            }
            let rank_doubled = (i + 1 + j + 1) as u64;
            let in_x = all[i..=j].iter().filter(|v| v.1).count() as u64;
            r1_doubled += rank_doubled * in_x;
            groups.push(TieGroup { size: j - i + 1, rank_doubled });
            i = j + 1;
        }
        Ranks { groups, r1_doubled }
    }

    /// Exact two-sided p: counts of n₁-subsets of the mid-ranks by doubled rank sum.
    fn exact_p(&self, n1: usize) -> f64 {
        let max_sum: u64 = self.groups.iter().map(|g| g.rank_doubled * g.size as u64).sum();
        let width = max_sum as usize + 1;
        // counts[k * width + s]: ways to choose k values (so far) with doubled rank sum s.
        let mut counts = vec![0.0f64; (n1 + 1) * width];
        counts[0] = 1.0;
        let mut seen = 0usize;
        for g in &self.groups {
            seen += g.size;
            let binom = binomials(g.size);
            // Descending k: row k − c still holds the previous groups' counts.
            for k in (1..=n1.min(seen)).rev() {
                for c in 1..=g.size.min(k) {
                    let shift = c * g.rank_doubled as usize;
                    let (lo, hi) = counts.split_at_mut(k * width);
                    let from = &lo[(k - c) * width..(k - c + 1) * width];
                    let to = &mut hi[..width];
                    for s in shift..width {
                        let v = from[s - shift];
                        if v != 0.0 {
                            to[s] += v * binom[c];
                        }
                    }
                }
            }
        }
        let row = &counts[n1 * width..(n1 + 1) * width];
        let total: f64 = row.iter().sum();
        let obs = self.r1_doubled as usize;
        let lower: f64 = row[..=obs].iter().sum::<f64>() / total;
        let upper: f64 = row[obs..].iter().sum::<f64>() / total;
        (2.0 * lower.min(upper)).min(1.0)
    }
}

/// C(t, c) for c = 0..=t.
fn binomials(t: usize) -> Vec<f64> {
    let mut row = vec![1.0; t + 1];
    for c in 1..=t {
        row[c] = row[c - 1] * (t - c + 1) as f64 / c as f64;
    }
    row
}

fn normal_p(u: f64, n1: usize, n2: usize, ranks: &Ranks) -> f64 {
    let (a, b, n) = (n1 as f64, n2 as f64, (n1 + n2) as f64);
    let tie_term: f64 = ranks.groups.iter().map(|g| (g.size as f64).powi(3) - g.size as f64).sum();
    let sigma = (a * b / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)))).sqrt();
    if sigma.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return 1.0;
    }
    let z = ((u - a * b / 2.0).abs() - 0.5) / sigma;
    (2.0 * Normal::standard().sf(z)).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: f64, want: f64) -> bool {
        (got - want).abs() <= 1e-9 * want.abs().max(1e-300)
    }

    #[test]
    fn brief_example_exact_without_ties() {
        // scipy.stats.mannwhitneyu([19,22,16,29,24], [20,11,17,12], method="exact").
        let r = mann_whitney(&[19.0, 22.0, 16.0, 29.0, 24.0], &[20.0, 11.0, 17.0, 12.0]).unwrap();
        assert_eq!((r.u, r.method, r.ties), (17.0, MwuMethod::Exact, false));
        assert!(close(r.p, 0.1111111111111111), "p {}", r.p);
    }

    #[test]
    fn benchstat_gob_example_with_ties() {
        // golang.org/x/perf cmd/benchstat testdata old.txt / new.txt, Encode/format=gob-48
        // (ns/op). benchstat reports p=0.446; its exact tie-aware value is 0.4461018857.
        // The normal approximation (what statrs alone offers) gives 0.4487, and scipy's
        // exact method, which ignores ties, 0.4813.
        let old = [3069.0, 3075.0, 3069.0, 3067.0, 3207.0, 3064.0, 3064.0, 3058.0, 3059.0, 3062.0];
        let new = [3075.0, 3065.0, 3059.0, 3065.0, 3060.0, 3081.0, 3186.0, 3135.0, 3087.0, 3062.0];
        let r = mann_whitney(&old, &new).unwrap();
        assert_eq!((r.u, r.method, r.ties), (39.5, MwuMethod::Exact, true));
        assert!((r.p - 0.4461018857).abs() < 1e-10, "p {}", r.p);
        assert!(close(r.p, 0.4461018857303687), "p {}", r.p);
        // Symmetric in the order of the samples.
        let back = mann_whitney(&new, &old).unwrap();
        assert_eq!(back.u, 60.5);
        assert!(close(back.p, r.p));
    }

    #[test]
    fn small_tied_samples_match_exact_permutation_counts() {
        // go-moremath's s1 vs s4 (0.7142857142857143 there too) and s1 vs s5, checked with
        // scipy.stats.permutation_test(..., n_resamples=inf) over U.
        let s1 = [2.0, 1.0, 3.0, 5.0];
        let r = mann_whitney(&s1, &[2.0; 4]).unwrap();
        assert_eq!(r.u, 10.0);
        assert!(close(r.p, 0.7142857142857143), "p {}", r.p);
        let r = mann_whitney(&s1, &[1.0; 5]).unwrap();
        assert!(close(r.p, 0.09523809523809523), "p {}", r.p);
    }

    #[test]
    fn normal_approximation_with_ties() {
        // scipy.stats.mannwhitneyu(x, y, method="asymptotic"), 28 values each, with ties.
        let x: Vec<f64> =
            [1, 2, 2, 3, 4, 5, 5, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25]
                .iter()
                .map(|&v| f64::from(v))
                .collect();
        let y: Vec<f64> =
            [3, 3, 4, 6, 6, 7, 8, 9, 9, 10, 12, 14, 15, 15, 16, 18, 20, 21, 22, 24, 25, 26, 27, 28, 29, 30, 31, 32]
                .iter()
                .map(|&v| f64::from(v))
                .collect();
        let r = mann_whitney(&x, &y).unwrap();
        assert_eq!((r.u, r.method), (274.5, MwuMethod::Normal));
        assert!(close(r.p, 0.055063484061455045), "p {}", r.p);
    }

    #[test]
    fn all_tied_and_degenerate() {
        let r = mann_whitney(&[1.0; 6], &[1.0; 6]).unwrap();
        assert_eq!((r.u, r.p, r.ties), (18.0, 1.0, true));
        let big = vec![7.0; 40];
        assert_eq!(mann_whitney(&big, &big).unwrap().p, 1.0);
        assert_eq!(mann_whitney(&[], &[1.0]), None);
        assert_eq!(mann_whitney(&[f64::NAN], &[1.0]), None);
        // Complete separation reaches the smallest attainable p.
        let r = mann_whitney(&[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0]).unwrap();
        assert!(close(r.p, min_attainable_p(4, 4)));
        assert!(close(min_attainable_p(4, 4), 2.0 / 70.0));
        assert!(close(min_attainable_p(3, 3), 0.1));
        assert_eq!(min_attainable_p(0, 3), 1.0);
    }
}
