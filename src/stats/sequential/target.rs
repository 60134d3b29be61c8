//! A sequential design sized from a target power (`repeats = { stop = "decided",
//! power = 0.9 }`, issue 48; docs/statistics.md, "Designs sized from a power"): a few
//! looks after equal blocks, efficacy bounds spending α as every sequential campaign does
//! ([`SPENDING`]), and a non-binding futility bound spending β = 1 − power, with the most
//! trials per arm found so that a change of twice the threshold is called with the target
//! power.
//!
//! The `worse` statistic is W = (d − Δ)/se (d the relative change, Δ the threshold): 0 at
//! a true change of Δ, drifting by Δ/se at 2Δ, the design effect. With n trials per arm
//! and a coefficient of variation c, se = c·√(2/n), so at information fraction t = n/max
//! E[W] = θ·√t with θ = Δ·√(max/2)/c. The fixed design with the same α and power needs
//! θ_f = z₁₋α/₂ + z_power; the sequential one R·n_fix trials at most, R found by bisection
//! on its power computed by recursive integration (Jennison & Turnbull 2000, §4.2 and
//! §7.2, the inflation factor R), the futility bound included. The most trials per arm is
//! R times the fixed design's exact noncentral-t size (`stats::trials_per_arm`), which
//! carries the small-sample correction over to the sequential design; the benchmark
//! (`benches/decide.rs`) checks the power that results with the real tests.

use serde::{Deserialize, Serialize};

use super::design::Design;
use super::levels::{FUTILITY_SPENDING, SPENDING};
use super::normal;
use super::{crossings_between, futility_bounds, spending_bounds};
use crate::stats::{rank_test_floor, trials_per_arm};

/// Looks of a design sized from a power when the runbook names none: few enough that
/// each spends a useful share of α, enough to stop early (docs/statistics.md has the
/// benchmark's figures for 3 to 8).
pub const DEFAULT_LOOKS: u32 = 5;

/// The most looks a runbook may ask for: each look past a few spends α for little.
pub const MAX_LOOKS: u32 = 20;

/// How far the design effect, a change of 2Δ, lies beyond the threshold Δ where `worse`
/// is judged: on the log scale the relative change's interval is computed on, ln((1 + 2Δ)
/// / (1 + Δ)), a little less than Δ (0.0465 for Δ = 5 %), so a design sized on Δ alone
/// would miss its power for `worse` (the benchmark showed 87 % for 90 %).
pub fn distance(threshold: f64) -> f64 {
    ((1.0 + 2.0 * threshold) / (1.0 + threshold)).ln()
}

/// What a design sized from a power aims at.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// Power to call a change of twice the threshold `worse` (or `better`).
    pub power: f64,
    /// Looks, each after an equal block of trials.
    pub looks: u32,
    /// The coefficient of variation the design is sized for.
    pub cv: f64,
}

/// A design sized: trials per arm at each look, and the fixed design's trials per arm.
/// (Jennison & Turnbull's inflation factor R, the z scale's view of the most trials, is
/// [`Target::inflation`]; sizing does not need it.)
#[derive(Debug, Clone, PartialEq)]
pub struct Sizing {
    pub counts: Vec<u32>,
    pub fixed: u32,
}

impl Target {
    /// β: the error spent by the futility bound.
    fn beta(&self) -> f64 {
        1.0 - self.power
    }

    /// Equally spaced information fractions of the planned looks.
    fn fractions(&self) -> Vec<f64> {
        let k = self.looks.max(1);
        (1..=k).map(|j| f64::from(j) / f64::from(k)).collect()
    }

    /// θ of the `worse` statistic at the last look under the design effect, for `max`
    /// trials per arm.
    pub fn theta(&self, threshold: f64, max: u32) -> f64 {
        distance(threshold) * (f64::from(max) / 2.0).sqrt() / self.cv
    }

    /// The design's power on the z scale with drift `theta` at the last look.
    fn power_at(&self, alpha: f64, theta: f64) -> f64 {
        let t = self.fractions();
        let upper = spending_bounds(SPENDING, &t, alpha);
        let lower = futility_bounds(FUTILITY_SPENDING, &upper, &t, theta, self.beta());
        crossings_between(&lower, &upper, &t, theta).iter().map(|c| c.0).sum()
    }

    /// R, the inflation factor: the information at the last look over the fixed
    /// design's, found by bisection on the power (which rises with it).
    pub fn inflation(&self, alpha: f64) -> f64 {
        let fixed = normal::quantile(1.0 - alpha / 2.0) + normal::quantile(self.power);
        let (mut lo, mut hi) = (1.0f64, 4.0f64);
        for _ in 0..40 {
            let mid = (lo + hi) / 2.0;
            if self.power_at(alpha, fixed * mid.sqrt()) >= self.power { hi = mid } else { lo = mid }
        }
        hi
    }

    /// The design for two-sided `alpha` and `threshold`: the fixed design's trials per arm
    /// (exact noncentral t), and the fewest trials per arm at most whose power, each look
    /// judged on the t scale (`Design::power`), reaches the target, in `looks` equal
    /// blocks, the first at least what the rank test needs to reach α. `None` for a CV or
    /// power out of range.
    pub fn size(&self, alpha: f64, threshold: f64) -> Option<Sizing> {
        if !(self.cv > 0.0 && self.cv.is_finite() && self.power > 0.5 && self.power < 1.0 && self.looks >= 1) {
            return None;
        }
        let floor = rank_test_floor(alpha);
        let fixed = trials_per_arm(self.cv, distance(threshold), alpha, self.power)?.max(floor);
        // The fewest trials per arm at most whose power on the t scale reaches the target.
        let design = |max: u32| Design { min: floor, max, devices: 1, alpha, threshold, target: Some(*self) };
        let max = (fixed..=fixed.saturating_mul(4)).find(|&m| design(m).power(self.cv) >= self.power)?;
        Some(Sizing { counts: self.counts(max, floor), fixed })
    }

    /// Trials per arm at each look of a design of `max` per arm: `looks` equal blocks,
    /// none below `first` (what the rank test needs, or the plan's `min`).
    pub fn counts(&self, max: u32, first: u32) -> Vec<u32> {
        let k = self.looks.clamp(1, max.max(1));
        let mut counts: Vec<u32> = (1..=k)
            .map(|j| (u64::from(max) * u64::from(j)).div_ceil(u64::from(k)) as u32)
            .map(|n| n.max(first).min(max))
            .collect();
        counts.dedup();
        counts
    }

    /// The nominal one-sided level of the futility test at the last of `fractions` (the
    /// pair's looks so far), for a design of `max` trials per arm: the β-spending bound
    /// on W, moved to the statistic (d − 2Δ)/se, as a tail probability. The pair has no
    /// change as large as 2Δ when the relative change's (1 − 2·level) interval lies within
    /// ±2Δ. 0 when the look spends no β.
    pub fn futility_level(&self, fractions: &[f64], alpha: f64, threshold: f64, max: u32) -> f64 {
        let Some(&t) = fractions.last() else { return 0.0 };
        let theta = self.theta(threshold, max);
        let upper = spending_bounds(SPENDING, fractions, alpha);
        let lower = futility_bounds(FUTILITY_SPENDING, &upper, fractions, theta, self.beta());
        match lower.last() {
            Some(&l) if l.is_finite() => normal::cdf(l - theta * t.sqrt()).min(0.5),
            _ => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(power: f64, looks: u32) -> Target {
        Target { power, looks, cv: 0.05 }
    }

    /// One look is the fixed design: R = 1 (its futility bound is the efficacy bound).
    #[test]
    fn one_look_is_the_fixed_design() {
        let r = target(0.9, 1).inflation(0.05);
        assert!((r - 1.0).abs() < 1e-3, "{r}");
        let s = target(0.9, 1).size(0.05, 0.05).unwrap();
        assert_eq!(s.counts, [s.fixed]);
    }

    /// The power the design is sized for is the power it has, and more looks cost more
    /// trials at most: R rises with K (Jennison & Turnbull 2000, Tables 2.2 and 7.6: for
    /// K = 5 Pocock-type efficacy with a β-spending futility bound, R ≈ 1.2–1.35).
    #[test]
    fn the_inflation_gives_the_target_power() {
        for (power, looks) in [(0.8, 3), (0.9, 5), (0.9, 8)] {
            let t = target(power, looks);
            let r = t.inflation(0.05);
            let theta = (normal::quantile(0.975) + normal::quantile(power)) * r.sqrt();
            assert!((t.power_at(0.05, theta) - power).abs() < 1e-3, "{power} {looks}: {r}");
            assert!(r > 1.05 && r < 1.6, "{power} {looks}: {r}");
        }
        assert!(target(0.9, 3).inflation(0.05) < target(0.9, 8).inflation(0.05));
    }

    /// Blocks are equal, the first is what the rank test needs at least, and the fixed
    /// design is the noncentral-t one for the design effect's distance on the log scale
    /// (26 per arm at 90 % for cv = threshold = 5 %: `design::tests`).
    #[test]
    fn a_sizing_has_equal_blocks() {
        let s = target(0.9, 5).size(0.05, 0.05).unwrap();
        assert_eq!(s.fixed, 26);
        assert_eq!(s.counts.len(), 5);
        let max = *s.counts.last().unwrap();
        // At least R times the fixed design (the z scale's inflation), a little more for
        // the t scale's small samples at the early looks.
        let r = target(0.9, 5).inflation(0.05);
        assert!(f64::from(max) >= r * f64::from(s.fixed) - 1.0, "{max} {r} {s:?}");
        assert!(f64::from(max) <= 1.25 * r * f64::from(s.fixed), "{max} {r} {s:?}");
        let steps: Vec<u32> = s.counts.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(steps.iter().all(|&d| d + 1 >= max / 5 && d <= max / 5 + 1), "{:?}", s.counts);
        let tiny = Target { cv: 0.005, ..target(0.9, 5) }.size(0.05, 0.05).unwrap();
        assert!(tiny.counts[0] >= rank_test_floor(0.05), "{:?}", tiny.counts);
        assert_eq!(Target { cv: 0.0, ..target(0.9, 5) }.size(0.05, 0.05), None);
        assert_eq!(target(1.0, 5).size(0.05, 0.05), None);
    }

    /// The futility level: small early (β is spent slowly), larger later, and none for
    /// a look with no new information.
    #[test]
    fn futility_levels_rise_over_the_looks() {
        let t = target(0.9, 5);
        let s = t.size(0.05, 0.05).unwrap();
        let max = *s.counts.last().unwrap();
        let levels: Vec<f64> = (1..=5)
            .map(|k| {
                let f: Vec<f64> = (1..=k).map(|j| f64::from(j) / 5.0).collect();
                t.futility_level(&f, 0.05, 0.05, max)
            })
            .collect();
        assert!(levels.iter().all(|&l| l > 0.0 && l <= 0.5), "{levels:?}");
        assert!(levels.windows(2).all(|w| w[1] > w[0]), "{levels:?}");
        assert_eq!(t.futility_level(&[], 0.05, 0.05, max), 0.0);
    }
}
