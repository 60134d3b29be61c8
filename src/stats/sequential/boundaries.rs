//! Group-sequential boundaries: two-sided critical values for a z statistic looked at K
//! times as trials accumulate, keeping the overall false-positive rate at α across the
//! looks (issue 34; docs/statistics.md).
//!
//! Under H₀ the score statistic Sₖ = Zₖ·√Iₖ (Iₖ the information at look k) is a Brownian
//! motion observed at I₁ < … < I_K: independent normal increments of variance Iₖ − Iₖ₋₁
//! (and mean θ·(Iₖ − Iₖ₋₁) under a drift θ). The probability of first crossing ±bₖ at look
//! k is computed by recursive numerical integration of the sub-density of Sₖ on the
//! continuation region (Armitage, McPherson & Rowe, J. R. Statist. Soc. A 132, 1969;
//! Jennison & Turnbull, *Group Sequential Methods with Applications to Clinical Trials*,
//! 2000, §19.2), with Simpson's rule on a grid of `GRID` points per standard deviation.
//!
//! Two designs: O'Brien & Fleming's (Biometrics 35, 1979), bₖ = C·√(K/k) for equally
//! spaced looks, C found so that the crossing probability is α; and Lan & DeMets' α-spending
//! (Biometrika 70, 1983), each bₖ found so that the first crossing at look k spends
//! α(tₖ) − α(tₖ₋₁) of a spending function α(t), which allows unequal and unplanned looks.
//! Two spending functions ([`Spending`]): the O'Brien–Fleming type on each side,
//! α₁(t) = 2 − 2Φ(z₁₋α₁/₂ / √t) at α₁ = α/2 (as `gsDesign`'s `sfLDOF` and `ldbounds` spend a
//! two-sided α), and the Pocock type, α·ln(1 + (e − 1)·t) (Lan & DeMets 1983).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use serde::{Deserialize, Serialize};

use super::normal;

/// Grid points per standard deviation of an increment (Jennison & Turnbull use ~ 30 for
/// 4-decimal accuracy; more costs only time).
const GRID: f64 = 32.0;

/// How a two-sided α is spent over the information fraction t ∈ (0, 1].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Spending {
    /// Lan–DeMets O'Brien–Fleming type: almost nothing early, nearly α at the end.
    ObrienFleming,
    /// Lan–DeMets Pocock type: nearly even over the looks.
    Pocock,
    /// In proportion to the information, α·t: the power family's ρ = 1 (Kim & DeMets,
    /// Biometrics 43, 1987). The futility bound spends β this way: less at the first looks
    /// than the Pocock type, so it costs the design less power.
    Linear,
}

impl Spending {
    /// The two-sided α spent by information fraction `t`; α at t ≥ 1.
    pub fn spent(self, t: f64, alpha: f64) -> f64 {
        if t <= 0.0 {
            return 0.0;
        }
        let t = t.min(1.0);
        match self {
            Spending::ObrienFleming => 4.0 * normal::sf(normal::quantile(1.0 - alpha / 4.0) / t.sqrt()),
            Spending::Pocock => alpha * (1.0 + (std::f64::consts::E - 1.0) * t).ln(),
            Spending::Linear => alpha * t,
        }
    }
}

/// The sub-density of Sₖ on the continuation region after a look: grid points, values
/// and Simpson weights.
struct Walk {
    s: Vec<f64>,
    f: Vec<f64>,
    w: Vec<f64>,
    info: f64,
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

/// One look at information `info` with bound `b` (z scale), after `prev` (`None`: the
/// first look), under drift `theta`.
struct Look<'a> {
    prev: Option<&'a Walk>,
    info: f64,
    theta: f64,
}

impl Look<'_> {
    fn increment(&self) -> (f64, f64) {
        let di = self.info - self.prev.map_or(0.0, |w| w.info);
        (self.theta * di, di.sqrt())
    }

    /// P(first crossing above +b here), P(first crossing below −b here).
    fn crossing(&self, b: f64) -> (f64, f64) {
        self.crossing_between(-b, b)
    }

    /// P(first crossing above `hi` here), P(first crossing below `lo` here), bounds on the
    /// z scale (±∞: no bound on that side).
    fn crossing_between(&self, lo: f64, hi: f64) -> (f64, f64) {
        let (mean, sd) = self.increment();
        let (lo, hi) = (lo * self.info.sqrt(), hi * self.info.sqrt());
        let above = |x: f64| if hi == f64::INFINITY { 0.0 } else { normal::sf((hi - x - mean) / sd) };
        let below = |x: f64| if lo == f64::NEG_INFINITY { 0.0 } else { normal::cdf((lo - x - mean) / sd) };
        match self.prev {
            None => (above(0.0), below(0.0)),
            Some(w) => {
                let (mut up, mut down) = (0.0, 0.0);
                for ((&u, &f), &wt) in w.s.iter().zip(&w.f).zip(&w.w) {
                    up += wt * f * above(u);
                    down += wt * f * below(u);
                }
                (up, down)
            }
        }
    }

    /// The sub-density on (−b, b) after this look.
    fn advance(&self, b: f64) -> Walk {
        self.advance_between(-b, b)
    }

    /// The sub-density on (`lo`, `hi`) (z scale) after this look. An open side is cut
    /// where the walk's own density is negligible: 10 sd of Sₖ from its mean θ·Iₖ.
    fn advance_between(&self, lo: f64, hi: f64) -> Walk {
        let (mean, sd) = self.increment();
        let (centre, reach) = (self.theta * self.info, 10.0 * self.info.sqrt());
        let lo = (lo * self.info.sqrt()).max(centre - reach);
        let hi = (hi * self.info.sqrt()).min(centre + reach);
        let (s, h) = grid(lo, hi.max(lo), sd);
        let f: Vec<f64> = match self.prev {
            None => s.iter().map(|&x| normal::pdf((x - mean) / sd) / sd).collect(),
            Some(w) => s
                .iter()
                .map(|&x| {
                    w.s.iter()
                        .zip(&w.f)
                        .zip(&w.w)
                        .map(|((&u, &f), &wt)| wt * f * normal::pdf((x - u - mean) / sd))
                        .sum::<f64>()
                        / sd
                })
                .collect(),
        };
        let w = simpson_weights(s.len(), h);
        Walk { s, f, w, info: self.info }
    }
}

/// Per look, the probabilities of first crossing above `upper[k]` and below `lower[k]`
/// (z scale, ±∞ for no bound) for a walk that goes on between them, with the information
/// fractions `info` under a drift `theta` per unit of information: what a one-sided design
/// with a futility bound needs (its power, its β-spending).
pub fn crossings_between(lower: &[f64], upper: &[f64], info: &[f64], theta: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(upper.len());
    let mut walk: Option<Walk> = None;
    for k in 0..upper.len() {
        if walk.as_ref().is_some_and(|w| info[k] <= w.info) {
            // No new information: the same look again, nothing more to cross.
            out.push((0.0, 0.0));
            continue;
        }
        let look = Look { prev: walk.as_ref(), info: info[k], theta };
        out.push(look.crossing_between(lower[k], upper[k]));
        if k + 1 < upper.len() {
            walk = Some(look.advance_between(lower[k], upper[k]));
        }
    }
    out
}

/// Per look, the probabilities of first crossing +`bounds[k]` and −`bounds[k]` (z scale),
/// with the information fractions `info` (increasing; only ratios count) under a drift
/// `theta` per unit of information: E[Zₖ] = θ·√Iₖ.
pub fn crossing_probabilities_with_drift(bounds: &[f64], info: &[f64], theta: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(bounds.len());
    let mut walk: Option<Walk> = None;
    for (k, (&b, &i)) in bounds.iter().zip(info).enumerate() {
        let look = Look { prev: walk.as_ref(), info: i, theta };
        out.push(look.crossing(b));
        // An infinite bound (a look that spends nothing) leaves the walk as it was.
        if k + 1 < bounds.len() && b.is_finite() {
            walk = Some(look.advance(b));
        }
    }
    out
}

/// The probabilities of first crossing ±`bounds[k]` (z scale) at each look, under H₀, with
/// the information fractions `info` (increasing, the last 1 or anything: only ratios count).
pub fn crossing_probabilities(bounds: &[f64], info: &[f64]) -> Vec<f64> {
    crossing_probabilities_with_drift(bounds, info, 0.0).into_iter().map(|(u, d)| u + d).collect()
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
    Spending::ObrienFleming.spent(t, alpha)
}

/// Two-sided bounds at information fractions `t` (increasing, in (0, 1]) spending α by
/// [`obf_spending`].
pub fn lan_demets_obf(t: &[f64], alpha: f64) -> Vec<f64> {
    spending_bounds(Spending::ObrienFleming, t, alpha)
}

type Key = (Spending, u64, Vec<u64>);

/// Bounds already computed: a campaign's report and its runner ask for the same looks.
static BOUNDS: LazyLock<Mutex<HashMap<Key, Vec<f64>>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// Two-sided bounds at information fractions `t` (increasing, in (0, 1]) spending the
/// two-sided `alpha` by `spending`: each look's bound found by bisection so that the
/// probability of first crossing there is α(tₖ) − α(tₖ₋₁). A look that spends nothing
/// (t not above the last) gets an infinite bound.
pub fn spending_bounds(spending: Spending, t: &[f64], alpha: f64) -> Vec<f64> {
    let key: Key = (spending, alpha.to_bits(), t.iter().map(|x| x.to_bits()).collect());
    if let Some(b) = BOUNDS.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return b.clone();
    }
    let mut bounds: Vec<f64> = Vec::with_capacity(t.len());
    let mut walk: Option<Walk> = None;
    // The furthest fraction looked at so far: what has been spent.
    let mut reached = 0.0f64;
    for k in 0..t.len() {
        let spend = spending.spent(t[k], alpha) - spending.spent(reached, alpha);
        let look = Look { prev: walk.as_ref(), info: t[k], theta: 0.0 };
        let b = if spend <= 0.0 || t[k] <= reached {
            f64::INFINITY
        } else {
            let (mut lo, mut hi) = (0.0, 40.0);
            for _ in 0..60 {
                let mid = (lo + hi) / 2.0;
                let (up, down) = look.crossing(mid);
                if up + down > spend { lo = mid } else { hi = mid }
            }
            (lo + hi) / 2.0
        };
        bounds.push(b);
        if b.is_finite() {
            reached = t[k];
            if k + 1 < t.len() {
                walk = Some(look.advance(b));
            }
        }
    }
    BOUNDS.lock().unwrap_or_else(|p| p.into_inner()).insert(key, bounds.clone());
    bounds
}

type FutilityKey = (Spending, u64, u64, Vec<u64>, Vec<u64>);

/// Futility bounds already computed: every look of every pair of a campaign asks again.
static FUTILITY: LazyLock<Mutex<HashMap<FutilityKey, Vec<f64>>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// Lower (futility) bounds, z scale, for a one-sided test with upper bounds `upper` at
/// information fractions `t`, spending `beta` by `spending` under the design's drift
/// `theta` (E[Zₖ] = θ·√tₖ): each look's bound found by bisection so that the probability
/// of first crossing below it there, having crossed neither bound before, is
/// β(tₖ) − β(tₖ₋₁) (β-spending, Pampallona, Tsiatis & Kim, Stat. Med. 20, 2001; the
/// non-binding kind of `gsDesign`'s `test.type = 4`: the upper bounds are computed without
/// it, so stopping or not at a futility bound leaves the type-I error as it was). A bound
/// never rises above the upper one; a look that spends nothing has −∞.
pub fn futility_bounds(spending: Spending, upper: &[f64], t: &[f64], theta: f64, beta: f64) -> Vec<f64> {
    let key: FutilityKey = (
        spending,
        theta.to_bits(),
        beta.to_bits(),
        upper.iter().map(|x| x.to_bits()).collect(),
        t.iter().map(|x| x.to_bits()).collect(),
    );
    if let Some(b) = FUTILITY.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return b.clone();
    }
    let mut lower: Vec<f64> = Vec::with_capacity(t.len());
    let mut walk: Option<Walk> = None;
    let mut reached = 0.0f64;
    for k in 0..t.len() {
        let spend = spending.spent(t[k], beta) - spending.spent(reached, beta);
        let look = Look { prev: walk.as_ref(), info: t[k], theta };
        let l = if spend <= 0.0 || t[k] <= reached || !upper[k].is_finite() {
            f64::NEG_INFINITY
        } else if look.crossing_between(upper[k], upper[k]).1 <= spend {
            // Even a bound at the upper one spends no more: the two meet.
            upper[k]
        } else {
            let (mut lo, mut hi) = (-40.0, upper[k]);
            for _ in 0..60 {
                let mid = (lo + hi) / 2.0;
                if look.crossing_between(mid, upper[k]).1 > spend { hi = mid } else { lo = mid }
            }
            (lo + hi) / 2.0
        };
        lower.push(l);
        // A look with no new information is the look before: the walk stays as it was.
        if t[k] > reached {
            reached = t[k];
            if k + 1 < t.len() {
                walk = Some(look.advance_between(l, upper[k]));
            }
        }
    }
    FUTILITY.lock().unwrap_or_else(|p| p.into_inner()).insert(key, lower.clone());
    lower
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
    /// Lan–DeMets Pocock-type bounds for 5 equally spaced looks at α = 0.05 two-sided, as
    /// `gsDesign(k = 5, test.type = 2, alpha = 0.025, sfu = sfLDPocock)` gives them:
    /// 2.438, 2.427, 2.410, 2.397, 2.386.
    #[test]
    fn pocock_type_spending_matches_the_published_bounds() {
        let t = [0.2, 0.4, 0.6, 0.8, 1.0];
        let b = spending_bounds(Spending::Pocock, &t, 0.05);
        for (got, want) in b.iter().zip([2.438, 2.427, 2.410, 2.397, 2.386]) {
            assert!((got - want).abs() < 0.003, "{b:?}");
        }
        let total: f64 = crossing_probabilities(&b, &t).iter().sum();
        assert!((total - 0.05).abs() < 1e-4, "{total}");
    }

    /// Power under a drift: O'Brien–Fleming with K = 5 at α = 0.05 needs R = 1.026 times
    /// the fixed design's information for 90 % power (Jennison & Turnbull 2000, Table 2.4):
    /// a drift of (z₀.₉₇₅ + z₀.₉)·√R at the last look crosses the upper bound 90 % of the time.
    #[test]
    fn a_drift_gives_the_published_power() {
        let t = [0.2, 0.4, 0.6, 0.8, 1.0];
        let b = obrien_fleming(5, 0.05);
        let theta = (1.959964 + 1.281552) * 1.026f64.sqrt();
        let power: f64 = crossing_probabilities_with_drift(&b, &t, theta).iter().map(|c| c.0).sum();
        assert!((power - 0.9).abs() < 0.002, "{power}");
        // One look: the normal tails, shifted: 1 − Φ(0.96) and Φ(−2.96).
        let one = crossing_probabilities_with_drift(&[1.959964], &[1.0], 1.0)[0];
        assert!((one.0 - 0.168_54).abs() < 1e-4 && (one.1 - 0.001_54).abs() < 1e-5, "{one:?}");
    }

    /// A look with no new information (or less) spends nothing: its bound is infinite and
    /// the next look is as if it had not happened.
    #[test]
    fn a_repeated_look_spends_nothing() {
        let b = spending_bounds(Spending::ObrienFleming, &[0.4, 0.4, 1.0], 0.05);
        let without = spending_bounds(Spending::ObrienFleming, &[0.4, 1.0], 0.05);
        assert!(b[1].is_infinite());
        assert!((b[0] - without[0]).abs() < 1e-9 && (b[2] - without[1]).abs() < 1e-9, "{b:?} {without:?}");
        let back = spending_bounds(Spending::Pocock, &[0.5, 0.3, 1.0], 0.05);
        let plain = spending_bounds(Spending::Pocock, &[0.5, 1.0], 0.05);
        assert!(back[1].is_infinite() && (back[2] - plain[1]).abs() < 1e-9, "{back:?} {plain:?}");
        let p: f64 = crossing_probabilities_with_drift(&b, &[0.4, 0.4, 1.0], 1.0).iter().map(|c| c.0 + c.1).sum();
        let q: f64 = crossing_probabilities_with_drift(&without, &[0.4, 1.0], 1.0).iter().map(|c| c.0 + c.1).sum();
        assert!((p - q).abs() < 1e-9, "{p} {q}");
    }
}
