//! Group-sequential boundaries: two-sided critical values for a z statistic looked at K
//! times as trials accumulate, keeping the overall false-positive rate at α across the
//! looks (issue 34; docs/statistics.md).
//!
//! Under H₀ the score statistic Sₖ = Zₖ·√Iₖ (Iₖ the information at look k) is a Brownian
//! motion observed at I₁ < … < I_K: independent normal increments of variance Iₖ − Iₖ₋₁.
//! The probability of first crossing ±bₖ at look k is computed by recursive numerical
//! integration of the sub-density of Sₖ on the continuation region (Armitage, McPherson
//! & Rowe, J. R. Statist. Soc. A 132, 1969; Jennison & Turnbull, *Group Sequential
//! Methods with Applications to Clinical Trials*, 2000, §19.2), with Simpson's rule on a
//! grid of `GRID` points per standard deviation.
//!
//! Two designs: O'Brien & Fleming's (Biometrics 35, 1979), bₖ = C·√(K/k) for equally
//! spaced looks, C found so that the crossing probability is α; and Lan & DeMets' α-spending
//! (Biometrika 70, 1983) with the O'Brien–Fleming-type spending function on each side,
//! α₁(t) = 2 − 2Φ(z₁₋α₁/₂ / √t) at α₁ = α/2 (as `gsDesign`'s `sfLDOF` and `ldbounds`
//! spend a two-sided α), each bₖ found so that the first crossing at look k spends
//! 2·(α₁(tₖ) − α₁(tₖ₋₁)), which allows unequal and unplanned looks.

use statrs::distribution::{ContinuousCDF, Normal};

/// Grid points per standard deviation of an increment (Jennison & Turnbull use ~ 30 for
/// 4-decimal accuracy; more costs only time).
const GRID: f64 = 48.0;

fn std_normal() -> Normal {
    Normal::new(0.0, 1.0).expect("the standard normal")
}

/// A density of Sₖ on the continuation region: grid points and values.
struct SubDensity {
    s: Vec<f64>,
    f: Vec<f64>,
}

/// Simpson weights for `n` (odd) equally spaced points `h` apart.
fn simpson_weights(n: usize, h: f64) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let w = if i == 0 || i == n - 1 {
                1.0
            } else if i % 2 == 1 {
                4.0
            } else {
                2.0
            };
            w * h / 3.0
        })
        .collect()
}

/// An odd number of points spanning [lo, hi], `GRID` points per `sd`, and their spacing.
fn grid(lo: f64, hi: f64, sd: f64) -> (Vec<f64>, f64) {
    let n = (((hi - lo) / sd * GRID).ceil() as usize).max(2) | 1;
    let h = (hi - lo) / (n - 1) as f64;
    ((0..n).map(|i| lo + i as f64 * h).collect(), h)
}

/// The probabilities of first crossing ±`bounds[k]` (z scale) at each look, under H₀, with
/// the information fractions `info` (increasing, the last 1 or anything: only ratios count).
pub fn crossing_probabilities(bounds: &[f64], info: &[f64]) -> Vec<f64> {
    let phi = std_normal();
    let mut out = Vec::with_capacity(bounds.len());
    let mut density: Option<SubDensity> = None;
    let mut prev_info = 0.0;
    for (&b, &i) in bounds.iter().zip(info) {
        let sd = (i - prev_info).sqrt();
        let edge = b * i.sqrt();
        // P(|S| ≥ edge | S_prev = u) for each u of the previous continuation region.
        let cross = |u: f64| phi.cdf((-edge - u) / sd) + phi.sf((edge - u) / sd);
        let (p, next) = match &density {
            None => {
                let p = 2.0 * phi.sf(b);
                let (s, _) = grid(-edge, edge, sd);
                let f = s.iter().map(|&x| normal_pdf(x / sd) / sd).collect();
                (p, SubDensity { s, f })
            }
            Some(d) => {
                let h = d.s.get(1).map_or(0.0, |x| x - d.s[0]);
                let w = simpson_weights(d.s.len(), h);
                let p = d.s.iter().zip(&d.f).zip(&w).map(|((&u, &f), &w)| w * f * cross(u)).sum();
                let (s, _) = grid(-edge, edge, sd);
                let f = s
                    .iter()
                    .map(|&x| {
                        d.s.iter().zip(&d.f).zip(&w).map(|((&u, &f), &w)| w * f * normal_pdf((x - u) / sd) / sd).sum()
                    })
                    .collect();
                (p, SubDensity { s, f })
            }
        };
        out.push(p);
        density = Some(next);
        prev_info = i;
    }
    out
}

fn normal_pdf(z: f64) -> f64 {
    (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// O'Brien & Fleming's two-sided bounds for `k` equally spaced looks at overall level
/// `alpha`: C·√(K/k), C by bisection on the total crossing probability.
pub fn obrien_fleming(k: usize, alpha: f64) -> Vec<f64> {
    let info: Vec<f64> = (1..=k).map(|j| j as f64 / k as f64).collect();
    let bounds = |c: f64| -> Vec<f64> { (1..=k).map(|j| c * (k as f64 / j as f64).sqrt()).collect() };
    let total = |c: f64| crossing_probabilities(&bounds(c), &info).iter().sum::<f64>();
    let (mut lo, mut hi) = (1.0, 6.0);
    for _ in 0..60 {
        let mid = (lo + hi) / 2.0;
        if total(mid) > alpha { lo = mid } else { hi = mid }
    }
    bounds((lo + hi) / 2.0)
}

/// The two-sided α spent by information fraction `t`: both sides' Lan–DeMets
/// O'Brien–Fleming-type spending at α/2 each, 2·(2 − 2Φ(z₁₋α/₄ / √t)); α at t = 1.
pub fn obf_spending(t: f64, alpha: f64) -> f64 {
    let phi = std_normal();
    if t <= 0.0 {
        return 0.0;
    }
    4.0 * phi.sf(phi.inverse_cdf(1.0 - alpha / 4.0) / t.min(1.0).sqrt())
}

/// Two-sided bounds at information fractions `t` (increasing, in (0, 1]) spending α by
/// [`obf_spending`]: each look's bound found by bisection so that the probability of first
/// crossing there is α(tₖ) − α(tₖ₋₁).
pub fn lan_demets_obf(t: &[f64], alpha: f64) -> Vec<f64> {
    let mut bounds: Vec<f64> = Vec::with_capacity(t.len());
    for k in 0..t.len() {
        let spend = obf_spending(t[k], alpha) - if k == 0 { 0.0 } else { obf_spending(t[k - 1], alpha) };
        let (mut lo, mut hi) = (0.5, 40.0);
        for _ in 0..60 {
            let mid = (lo + hi) / 2.0;
            let mut trial = bounds.clone();
            trial.push(mid);
            let p = crossing_probabilities(&trial, &t[..=k])[k];
            if p > spend { lo = mid } else { hi = mid }
        }
        bounds.push((lo + hi) / 2.0);
    }
    bounds
}

#[cfg(test)]
mod tests {
    use super::*;

    /// O'Brien–Fleming's constant C_B(K, α = 0.05, two-sided), Jennison & Turnbull (2000)
    /// Table 2.3; the bounds are C·√(K/k).
    #[test]
    fn obrien_fleming_matches_the_published_constants() {
        for (k, c) in [(2, 1.977), (3, 2.004), (4, 2.024), (5, 2.040)] {
            let b = obrien_fleming(k, 0.05);
            assert!((b[k - 1] - c).abs() < 0.0015, "K = {k}: last bound {} ≠ {c}", b[k - 1]);
            assert!((b[0] - c * (k as f64).sqrt()).abs() < 0.004, "K = {k}: first bound {}", b[0]);
        }
    }

    /// Lan–DeMets O'Brien–Fleming-type bounds for 5 equally spaced looks at α = 0.05
    /// two-sided (0.025 a side), as `gsDesign(k = 5, test.type = 2, alpha = 0.025,
    /// sfu = sfLDOF)` and `ldbounds` publish them: 4.877, 3.357, 2.680, 2.290, 2.031.
    #[test]
    fn lan_demets_spending_matches_the_published_bounds() {
        let t = [0.2, 0.4, 0.6, 0.8, 1.0];
        let b = lan_demets_obf(&t, 0.05);
        for (got, want) in b.iter().zip([4.877, 3.357, 2.680, 2.290, 2.031]) {
            assert!((got - want).abs() < 0.002, "{b:?}");
        }
        // It spends exactly α over the looks.
        let total: f64 = crossing_probabilities(&b, &t).iter().sum();
        assert!((total - 0.05).abs() < 1e-4, "{total}");
    }

    #[test]
    fn one_look_is_the_fixed_test() {
        let b = obrien_fleming(1, 0.05);
        assert!((b[0] - 1.959964).abs() < 1e-4, "{b:?}");
        assert!((crossing_probabilities(&[1.959964], &[1.0])[0] - 0.05).abs() < 1e-6);
        // Two looks at the same bound cross more often than one: the reason for the design.
        let p: f64 = crossing_probabilities(&[1.959964, 1.959964], &[0.5, 1.0]).iter().sum();
        assert!((p - 0.0831).abs() < 0.001, "Armitage et al.'s 8.3 % for two looks: {p}");
    }
}
