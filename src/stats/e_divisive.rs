//! The E-divisive q̂ search (α = 1): where one segment of a window splits best.
//!
//! Matteson & James, "A Nonparametric Approach for Multiple Change Point Analysis of
//! Multivariate Data", JASA 109(505), 2014, eq. 5–6, as Apache Otava 0.8.0 computes it
//! (`otava/change_point_divisive/calculator.py`, `PairDistanceCalculator`, lines 25-190).
//! For a segment `[s, e)`, X = y[s..τ] (n values) and Y = y[τ..κ] (m values), s < τ < κ ≤ e:
//!
//! ```text
//! Q(τ, κ) = 2/(n+m)·Σᵢⱼ|Xᵢ − Yⱼ| − [n>1]·2m/((n+m)(n−1))·Σ_{i<k}|Xᵢ − Xₖ|
//!                                − [m>1]·2n/((n+m)(m−1))·Σ_{j<k}|Yⱼ − Yₖ|
//! ```
//!
//! The candidate is the τ of the first maximum in (τ, κ) order (numpy's `argmax` over the
//! row-major matrix, calculator.py:189): the first point of the right part.
//!
//! The sums are formed in numpy's order (row cumsums `H`, column sums `V`, differences of
//! prefix sums; calculator.py:82-150), not as the direct double loop: cells that tie in
//! exact arithmetic then tie, or not, to the last bit as they do in Otava, so the argmax —
//! and the change points — are the same.

/// Pairwise distances of one window, precomputed as Otava's calculator does.
pub(super) struct PairDistances<'a> {
    y: &'a [f64],
    /// `v[c] = Σ_{r ≤ c} |y_r − y_{c+1}|`, summed from r = 0 (calculator.py:84).
    v: Vec<f64>,
    /// Row-major (n−1)², `h[r][c] = Σ_{t=r+1}^{c+1} |y_r − y_t|`, 0 when c < r (calculator.py:85).
    h: Vec<f64>,
}

impl<'a> PairDistances<'a> {
    pub(super) fn new(y: &'a [f64]) -> Self {
        let m = y.len().saturating_sub(1);
        let d = |i: usize, j: usize| (y[i] - y[j]).abs();
        let v = (0..m).map(|c| (0..=c).fold(0.0, |acc, r| acc + d(r, c + 1))).collect();
        let mut h = vec![0.0; m * m];
        for r in 0..m {
            let mut acc = 0.0;
            for c in r..m {
                acc += d(r, c + 1);
                h[r * m + c] = acc;
            }
        }
        PairDistances { y, v, h }
    }

    fn hs(&self, r: usize, c: usize) -> f64 {
        self.h[r * (self.y.len() - 1) + c]
    }

    /// The best split of `y[start..end]` (end − start ≥ 2): (τ, q̂), τ absolute in the window.
    pub(super) fn best(&self, start: usize, end: usize) -> (usize, f64) {
        debug_assert!(end - start >= 2 && end <= self.y.len());
        let size = end - 1 - start;
        // V for this start: V(0, τ) minus the distances to the points before `start`
        // (calculator.py:121), then its running sum: the within-X sum for τ = start + 1 + i.
        let vs: Vec<f64> = (0..size)
            .map(|k| {
                let tau = start + 1 + k;
                let before = (0..start).fold(0.0, |acc, r| acc + (self.y[r] - self.y[tau]).abs());
                self.v[start + k] - before
            })
            .collect();
        let mut within_x = vec![0.0; size];
        for i in 1..size {
            within_x[i] = within_x[i - 1] + vs[i - 1];
        }
        let hs = |i: usize, j: usize| self.hs(start + i, start + j);
        let mut q = vec![0.0; size * size];
        for j in 0..size {
            // Column j: κ = start + 2 + j. `top` sums rows 0..=i downward (numpy cumsum,
            // axis 0): all pairs from X, within X and across. `bottom[i]` sums rows
            // i+1..size upward (numpy's flipud-cumsum-flipud, line 146): within Y.
            let mut bottom = vec![0.0; size];
            for i in (0..size.saturating_sub(1)).rev() {
                bottom[i] = if i + 2 == size { hs(i + 1, j) } else { bottom[i + 1] + hs(i + 1, j) };
            }
            let mut top = 0.0;
            for i in 0..=j {
                top = if i == 0 { hs(0, j) } else { top + hs(i, j) };
                let a = 2.0 / (j + 2) as f64 * (top - within_x[i]);
                let b = if i >= 1 { (2 * (j - i + 1)) as f64 / ((j + 2) * i) as f64 * within_x[i] } else { 0.0 };
                let c = if j > i { (2 * (i + 1)) as f64 / ((j + 2) * (j - i)) as f64 * bottom[i] } else { 0.0 };
                q[i * size + j] = a - b - c;
            }
        }
        // First maximum in row-major order (np.argmax). Cells with κ ≤ τ hold 0 there; the
        // first cell, |y_s − y_{s+1}| ≥ 0, precedes them all, so they can never win.
        let mut best = (0, q[0]);
        for i in 0..size {
            for j in i..size {
                if q[i * size + j] > best.1 {
                    best = (i, q[i * size + j]);
                }
            }
        }
        (start + 1 + best.0, best.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Q(τ, κ) straight from the definition (O(n⁴) overall), as Otava's own test checks
    /// its matrix (tests/change_point_divisive_test.py:34-75).
    fn naive_q(y: &[f64], s: usize, tau: usize, kappa: usize) -> f64 {
        let (x, z) = (&y[s..tau], &y[tau..kappa]);
        let (n, m) = (x.len() as f64, z.len() as f64);
        let cross: f64 = x.iter().flat_map(|a| z.iter().map(move |b| (a - b).abs())).sum();
        let within =
            |v: &[f64]| -> f64 { (0..v.len()).flat_map(|i| (i + 1..v.len()).map(move |k| (v[i] - v[k]).abs())).sum() };
        let mut q = 2.0 / (n + m) * cross;
        if x.len() > 1 {
            q -= 2.0 * m / ((n + m) * (n - 1.0)) * within(x);
        }
        if z.len() > 1 {
            q -= 2.0 * n / ((n + m) * (m - 1.0)) * within(z);
        }
        q
    }

    const BRIEF: [f64; 14] = [0.3, 2.4, 1.5, -0.9, -0.5, 99.7, 98.3, 99.1, 149.0, 149.7, 149.5, 149.1, 148.8, 150.0];

    #[test]
    fn best_split_is_the_naive_maximum_for_every_segment() {
        let calc = PairDistances::new(&BRIEF);
        for s in 0..BRIEF.len() - 1 {
            for e in s + 2..=BRIEF.len() {
                let (tau, q) = calc.best(s, e);
                // First maximum, allowing for rounding: a later cell must beat it clearly.
                let mut naive = (s + 1, naive_q(&BRIEF, s, s + 1, s + 2));
                for t in s + 1..e {
                    for k in t + 1..=e {
                        let v = naive_q(&BRIEF, s, t, k);
                        if v > naive.1 + 1e-9 * naive.1.abs().max(1.0) {
                            naive = (t, v);
                        }
                    }
                }
                assert_eq!(tau, naive.0, "segment [{s}, {e})");
                assert!((q - naive.1).abs() <= 1e-9 * naive.1.abs().max(1.0), "[{s}, {e}): {q} vs {}", naive.1);
            }
        }
    }

    #[test]
    fn the_brief_series_splits_first_at_its_largest_jump() {
        // Otava's trace (research notes §2): τ = 5, q̂ = 761.28, then τ = 8 (q̂ 198.27) in [5, 14).
        let calc = PairDistances::new(&BRIEF);
        let (tau, q) = calc.best(0, 14);
        assert_eq!(tau, 5);
        assert!((q - 761.28).abs() < 0.01, "{q}");
        let (tau, q) = calc.best(5, 14);
        assert_eq!(tau, 8);
        assert!((q - 198.27).abs() < 0.01, "{q}");
    }

    #[test]
    fn ties_go_to_the_smallest_split() {
        // A constant segment: every Q is 0, the first cell wins (τ = s + 1).
        let flat = [3.0; 6];
        assert_eq!(PairDistances::new(&flat).best(0, 6), (1, 0.0));
        assert_eq!(PairDistances::new(&flat).best(2, 5), (3, 0.0));
        // Two points: the only split.
        assert_eq!(PairDistances::new(&[1.0, 4.0]).best(0, 2), (1, 3.0));
    }
}
