//! A sequential design (`repeats = { min, max, stop = "decided" }`) on one model: its
//! planned looks, its power next to the fixed design's, the CV it is sized for, and what
//! a pair is expected to cost until it stops.

use rand::RngExt;
use rand_distr::StandardNormal;

use super::levels::SPENDING;
use super::normal;
use super::{crossing_probabilities_with_drift, spending_bounds};
use crate::stats::{rank_test_floor, trials_per_arm};

/// A sequential rule on a model with `devices` devices, decided at two-sided `alpha`
/// against a practical `threshold` (a relative change).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Design {
    pub min: u32,
    pub max: u32,
    pub devices: usize,
    pub alpha: f64,
    pub threshold: f64,
}

impl Design {
    /// Planned trials per variant at each look: `min`, then one more per device per
    /// round, up to `max`.
    pub fn planned_counts(&self) -> Vec<u32> {
        let step = self.devices.max(1) as u32;
        let mut out = vec![self.min.min(self.max)];
        while let Some(&last) = out.last()
            && last < self.max
        {
            out.push((last + step).min(self.max));
        }
        out
    }

    /// The design's power to call a change of twice the threshold (the "worse" statistic
    /// (d − Δ)/se drifts by Δ/se), for a CV of `cv`, at level α / `family`, with a look
    /// after every planned round; and the trials per arm of the fixed design with the
    /// same α and that power (`stats::trials_per_arm`, Julious 2004), at least as many as
    /// the rank test needs to reach α.
    pub fn fixed_equivalent(&self, cv: f64, family: usize) -> Option<(f64, u32)> {
        if !(cv > 0.0 && cv.is_finite()) {
            return None;
        }
        let counts = self.planned_counts();
        let t: Vec<f64> = counts.iter().map(|&n| f64::from(n) / f64::from(self.max)).collect();
        let alpha = self.alpha / family.max(1) as f64;
        let bounds = spending_bounds(SPENDING, &t, alpha);
        let theta = self.threshold * (f64::from(self.max) / 2.0).sqrt() / cv;
        let power: f64 = crossing_probabilities_with_drift(&bounds, &t, theta).iter().map(|c| c.0).sum();
        let power = power.clamp(0.5, 0.9999);
        // Never fewer than the rank test needs to reach the level at all (as the advice).
        Some((power, trials_per_arm(cv, self.threshold, alpha, power)?.max(rank_test_floor(alpha))))
    }

    /// The CV the design is sized for: the one at which the fixed design of `max` trials
    /// per arm has 90 % power to call a change of twice the threshold at α.
    pub fn design_cv(&self) -> f64 {
        self.threshold * (f64::from(self.max) / 2.0).sqrt()
            / (normal::quantile(1.0 - self.alpha / 2.0) + normal::quantile(0.9))
    }

    /// Trials per arm until a pair stops, under a true relative change `effect`, in the
    /// normal model with a known `cv` (the difference of the arms' means after n trials
    /// each is N(effect, 2·cv²/n)): `worse`/`better` when (d − ±Δ)/se crosses the look's
    /// bound, `same` when |d| + z·se ≤ Δ at the look's one-sided level. What `lab plan`
    /// expects a sequential runbook to cost; the benchmark (`benches/decide.rs`) runs the
    /// real tests.
    pub fn trials_to_stop(&self, cv: f64, effect: f64, rng: &mut impl rand::Rng) -> u32 {
        let counts = self.planned_counts();
        let levels = look_bounds(&counts, self.max, self.alpha);
        let (mut sum_t, mut sum_b, mut n) = (0.0, 0.0, 0u32);
        let delta = self.threshold;
        for (&target, &(change, same)) in counts.iter().zip(&levels) {
            while n < target {
                let (zt, zb): (f64, f64) = (rng.sample(StandardNormal), rng.sample(StandardNormal));
                sum_t += effect + cv * zt;
                sum_b += cv * zb;
                n += 1;
            }
            let d = (sum_t - sum_b) / f64::from(n);
            let se = cv * (2.0 / f64::from(n)).sqrt();
            if (d - delta) / se >= change || (d + delta) / se <= -change || d.abs() + same * se <= delta {
                return n;
            }
        }
        n
    }
}

/// Per planned look: the z bound of `worse`/`better` (two-sided α) and of each side of
/// `same` (α a side).
fn look_bounds(counts: &[u32], max: u32, alpha: f64) -> Vec<(f64, f64)> {
    let t: Vec<f64> = counts.iter().map(|&n| f64::from(n) / f64::from(max)).collect();
    let change = spending_bounds(SPENDING, &t, alpha);
    let same = spending_bounds(SPENDING, &t, 2.0 * alpha);
    change.into_iter().zip(same).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn design(min: u32, max: u32, devices: usize) -> Design {
        Design { min, max, devices, alpha: 0.05, threshold: 0.05 }
    }

    #[test]
    fn looks_follow_rounds() {
        assert_eq!(design(3, 10, 1).planned_counts(), [3, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!(design(3, 10, 3).planned_counts(), [3, 6, 9, 10]);
        assert_eq!(design(4, 4, 2).planned_counts(), [4]);
    }

    /// In the normal model a null pair mostly stops `same` before `max` at the design's CV,
    /// and a change of 4× the threshold stops at the first looks.
    #[test]
    fn trials_to_stop_fall_with_the_evidence() {
        let design = design(3, 30, 1);
        let cv = design.design_cv();
        assert!((cv - 0.05 * 15f64.sqrt() / 3.2415).abs() < 1e-3, "{cv}");
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(1);
        let mean = |effect: f64, rng: &mut rand_chacha::ChaCha8Rng| {
            (0..400).map(|_| f64::from(design.trials_to_stop(cv, effect, rng))).sum::<f64>() / 400.0
        };
        let (null, four) = (mean(0.0, &mut rng), mean(0.2, &mut rng));
        assert!(null < 30.0 && null > 8.0, "{null}");
        assert!(four < 8.0, "{four}");
    }

    #[test]
    fn the_fixed_equivalent_has_the_designs_power() {
        let design = design(3, 30, 1);
        let (power, n) = design.fixed_equivalent(0.05, 1).unwrap();
        // θ = 0.05·√15 / 0.05 = 3.87 at t = 1: a power near 96 %, a fixed design just under 30.
        assert!(power > 0.9 && power < 0.99, "{power}");
        assert!((24..=30).contains(&n), "{n}");
        assert_eq!(design.fixed_equivalent(0.0, 1), None);
    }
}
