//! Sequential campaigns (`repeats = { min, max, stop = "decided" }`, issue 34): the
//! levels a look's verdicts are judged at, and what a variant's stop cost next to the
//! fixed design (docs/statistics.md, "Sequential campaigns").
//!
//! Each variant × model against each reference is a group-sequential test looked at after
//! every round, with the information fraction t = n̄ / `max` (n̄ the harmonic mean of the
//! two arms' valid trials, the information of a difference of means). `worse`/`better` is
//! the fixed rule (significant, and the relative change's interval beyond ±threshold) at
//! the look's nominal two-sided level 2·(1 − Φ(bₖ)), bₖ from Lan–DeMets α-spending at α
//! ([`SPENDING`]);
//! Holm's step-down runs within the look, the j-th smallest p at the level of α / (m − j + 1)
//! (the graphical approach of Maurer & Bretz, Stat. Biopharm. Res. 5, 2013, with Holm's
//! weights). `same` is the two one-sided tests with each side at the look's one-sided level
//! 1 − Φ(bₖ) for a spending of α per side, i.e. the relative change's (1 − 2·level)
//! interval inside ±threshold; it needs no adjustment across metrics (intersection–union,
//! Berger 1982).

use crate::config::{AdaptiveRepeats, StatsSettings};
use crate::plan::LookRecord;
use crate::report::model::verdicts::rank_test_floor;
use crate::stats::{Spending, Verdict, crossing_probabilities_with_drift, spending_bounds, trials_per_arm};
use rand::RngExt;
use rand_distr::StandardNormal;
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, Normal};

/// The spending function of sequential campaigns: Pocock type, which decides clear cases
/// in about half the fixed design's device-hours where the O'Brien–Fleming type needs
/// about 70 % (docs/statistics.md has the benchmark's figures for both).
pub const SPENDING: Spending = Spending::Pocock;

fn sf(z: f64) -> f64 {
    if z.is_infinite() {
        return 0.0;
    }
    Normal::new(0.0, 1.0).expect("the standard normal").sf(z)
}

/// The nominal levels of one look, from the information fractions of the pair's looks so
/// far (this one last).
#[derive(Debug, Clone)]
pub struct LookLevels {
    pub fractions: Vec<f64>,
    pub alpha: f64,
    pub spending: Spending,
}

impl LookLevels {
    /// Two-sided nominal level for `worse`/`better` with `j` hypotheses left in Holm's
    /// step-down (the bound for α / j).
    pub fn change(&self, j: usize) -> f64 {
        let b = spending_bounds(self.spending, &self.fractions, self.alpha / j.max(1) as f64);
        2.0 * sf(b.last().copied().unwrap_or(f64::INFINITY))
    }

    /// One-sided nominal level of each of the two one-sided tests of equivalence.
    pub fn same(&self) -> f64 {
        let b = spending_bounds(self.spending, &self.fractions, 2.0 * self.alpha);
        sf(b.last().copied().unwrap_or(f64::INFINITY))
    }
}

/// The information fraction of arms with `n_t` and `n_b` values, at most 1.
pub fn information(n_t: usize, n_b: usize, max: u32) -> f64 {
    if n_t == 0 || n_b == 0 || max == 0 {
        return 0.0;
    }
    let harmonic = 2.0 / (1.0 / n_t as f64 + 1.0 / n_b as f64);
    (harmonic / f64::from(max)).min(1.0)
}

/// The fractions of the pair's recorded looks, then `now` if it is past the last: a look
/// with no new information is the same look.
pub fn fractions(looks: &[LookRecord], model: &str, variant: &str, against: &str, now: f64) -> Vec<f64> {
    let mut out: Vec<f64> = Vec::new();
    for l in looks.iter().filter(|l| l.model == model && l.variant == variant && l.against == against) {
        if out.last().is_none_or(|&last| l.t > last) {
            out.push(l.t);
        }
    }
    if out.last().is_none_or(|&last| now > last) && now > 0.0 {
        out.push(now);
    }
    out
}

/// Planned trials per variant at each look of a model with `devices` devices: `min`, then
/// one more per device per round, up to `max`.
pub fn planned_counts(rule: &AdaptiveRepeats, devices: usize) -> Vec<u32> {
    let step = devices.max(1) as u32;
    let mut out = vec![rule.min.min(rule.max)];
    while let Some(&last) = out.last()
        && last < rule.max
    {
        out.push((last + step).min(rule.max));
    }
    out
}

/// A decision that ends a variant's trials.
pub fn decided(v: Verdict) -> bool {
    matches!(v, Verdict::Worse | Verdict::Better | Verdict::Same | Verdict::Changed)
}

/// The design's power to call a change of twice the threshold (the "worse" statistic
/// (d − Δ)/se drifts by Δ/se), for a CV of `cv`, at level α / `family`, with a look after
/// every planned round; and the trials per arm of the fixed design with the same α and
/// that power (`stats::trials_per_arm`, Julious 2004), at least as many as the rank test
/// needs to reach α.
pub fn fixed_equivalent(
    rule: &AdaptiveRepeats,
    devices: usize,
    cv: f64,
    settings: &StatsSettings,
    family: usize,
) -> Option<(f64, u32)> {
    if !(cv > 0.0 && cv.is_finite()) {
        return None;
    }
    let counts = planned_counts(rule, devices);
    let t: Vec<f64> = counts.iter().map(|&n| f64::from(n) / f64::from(rule.max)).collect();
    let alpha = settings.alpha / family.max(1) as f64;
    let bounds = spending_bounds(SPENDING, &t, alpha);
    let theta = settings.practical_threshold * (f64::from(rule.max) / 2.0).sqrt() / cv;
    let power: f64 = crossing_probabilities_with_drift(&bounds, &t, theta).iter().map(|c| c.0).sum();
    let power = power.clamp(0.5, 0.9999);
    // Never fewer than the rank test needs to reach the level at all (as the advice).
    Some((power, trials_per_arm(cv, settings.practical_threshold, alpha, power)?.max(rank_test_floor(alpha))))
}

/// The CV the design is sized for: the one at which the fixed design of `max` trials per
/// arm has 90 % power to call a change of twice the threshold at α.
pub fn design_cv(rule: &AdaptiveRepeats, settings: &StatsSettings) -> f64 {
    let z = |p: f64| Normal::new(0.0, 1.0).expect("the standard normal").inverse_cdf(p);
    settings.practical_threshold * (f64::from(rule.max) / 2.0).sqrt() / (z(1.0 - settings.alpha / 2.0) + z(0.9))
}

/// Trials per arm until a pair stops, under a true relative change `effect`, in the normal
/// model with a known `cv` (the difference of the arms' means after n trials each is
/// N(effect, 2·cv²/n)): `worse`/`better` when (d − ±Δ)/se crosses the look's bound,
/// `same` when |d| + z·se ≤ Δ at the look's one-sided level. What `lab plan` expects a
/// sequential runbook to cost; the benchmark (`benches/decide.rs`) runs the real tests.
pub fn trials_to_stop(
    rule: &AdaptiveRepeats,
    devices: usize,
    cv: f64,
    settings: &StatsSettings,
    effect: f64,
    rng: &mut impl rand::Rng,
) -> u32 {
    let counts = planned_counts(rule, devices);
    let levels = look_bounds(&counts, rule.max, settings.alpha);
    let (mut sum_t, mut sum_b, mut n) = (0.0, 0.0, 0u32);
    let delta = settings.practical_threshold;
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

/// Per planned look: the z bound of `worse`/`better` (two-sided α) and of each side of
/// `same` (α a side).
fn look_bounds(counts: &[u32], max: u32, alpha: f64) -> Vec<(f64, f64)> {
    let t: Vec<f64> = counts.iter().map(|&n| f64::from(n) / f64::from(max)).collect();
    let change = spending_bounds(SPENDING, &t, alpha);
    let same = spending_bounds(SPENDING, &t, 2.0 * alpha);
    change.into_iter().zip(same).collect()
}

/// Why a sequential variant stopped, or where it stands (report, `variant_decided`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SequentialStop {
    /// Looks at this pair so far (the verdict is the last one's) and at most.
    pub look: usize,
    pub max_looks: usize,
    /// The look at which it was first decided, if it was.
    pub decided_at: Option<usize>,
    /// Valid values of the variant and of its reference at this look, and the fraction.
    pub n_treatment: u32,
    pub n_reference: u32,
    pub t: f64,
    /// The variant's device-hours on this model (its own trials).
    pub device_hours: f64,
    /// The fixed design with the same α and the same power at twice the threshold, for
    /// the noisiest gating metric's CV: trials per arm, device-hours, and that power.
    pub fixed_trials: Option<u32>,
    pub fixed_device_hours: Option<f64>,
    pub power_at_twice_threshold: Option<f64>,
}

impl SequentialStop {
    /// `decided at look 3 of at most 10 (12 trials, 6.0 device-hours; the fixed design: 20
    /// trials, 10.0 device-hours)`.
    pub fn line(&self) -> String {
        let at = match self.decided_at {
            Some(k) => format!("decided at look {k} of at most {}", self.max_looks),
            None if self.look >= self.max_looks => format!("undecided after all {} looks", self.max_looks),
            None => format!("undecided at look {} of at most {}", self.look, self.max_looks),
        };
        let fixed = match (self.fixed_trials, self.fixed_device_hours) {
            (Some(n), Some(h)) => format!("; the fixed design: {n} trials, {h:.1} device-hours"),
            _ => String::new(),
        };
        format!("{at} ({} trials, {:.1} device-hours{fixed})", self.n_treatment, self.device_hours)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_follow_rounds_and_repeated_looks_are_one() {
        let rule = AdaptiveRepeats::decided(3, 10);
        assert_eq!(planned_counts(&rule, 1), [3, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!(planned_counts(&rule, 3), [3, 6, 9, 10]);
        assert_eq!(planned_counts(&AdaptiveRepeats::decided(4, 4), 2), [4]);
        assert!((information(4, 4, 8) - 0.5).abs() < 1e-12);
        assert!((information(3, 6, 8) - 0.5).abs() < 1e-12, "harmonic mean 4");
        assert_eq!(information(0, 6, 8), 0.0);
        let rec = |t: f64| LookRecord {
            model: "m".into(),
            variant: "v".into(),
            against: "b".into(),
            n_treatment: 0,
            n_reference: 0,
            t,
            verdict: Verdict::Inconclusive,
            stopped: false,
        };
        let looks = [rec(0.3), rec(0.3), rec(0.5)];
        assert_eq!(fractions(&looks, "m", "v", "b", 0.5), [0.3, 0.5]);
        assert_eq!(fractions(&looks, "m", "v", "b", 0.7), [0.3, 0.5, 0.7]);
        assert_eq!(fractions(&looks, "m", "other", "b", 0.7), [0.7]);
    }

    /// One look at t = 1 is the fixed test; early looks are stricter, and a smaller family
    /// share (Holm's first step) stricter still.
    #[test]
    fn one_look_is_the_fixed_level_and_early_looks_are_stricter() {
        let one = LookLevels { fractions: vec![1.0], alpha: 0.05, spending: SPENDING };
        assert!((one.change(1) - 0.05).abs() < 1e-6, "{}", one.change(1));
        assert!((one.same() - 0.05).abs() < 1e-6, "{}", one.same());
        // Pocock type: a first look at t = 0.3 spends 0.05·ln(1 + (e − 1)·0.3) = 0.0208.
        let early = LookLevels { fractions: vec![0.3], alpha: 0.05, spending: SPENDING };
        assert!((early.change(1) - 0.020_80).abs() < 1e-4, "{}", early.change(1));
        assert!(early.change(2) < early.change(1));
        let obf = LookLevels { spending: Spending::ObrienFleming, ..early.clone() };
        assert!(obf.change(1) < 0.002, "{}", obf.change(1));
        // The last of several looks is stricter than the fixed test, more so for Pocock's.
        let last = LookLevels { fractions: vec![0.3, 0.6, 1.0], alpha: 0.05, spending: SPENDING };
        let obf_last = LookLevels { spending: Spending::ObrienFleming, ..last.clone() };
        assert!(last.change(1) < obf_last.change(1) && obf_last.change(1) < 0.05, "{}", last.change(1));
        assert!(last.change(1) > 0.015, "{}", last.change(1));
    }

    /// In the normal model a null pair mostly stops `same` before `max` at the design's CV,
    /// and a change of 4× the threshold stops at the first looks.
    #[test]
    fn trials_to_stop_fall_with_the_evidence() {
        let settings = StatsSettings { gating: vec!["cpu_pct".into()], ..StatsSettings::default() };
        let rule = AdaptiveRepeats::decided(3, 30);
        let cv = design_cv(&rule, &settings);
        assert!((cv - 0.05 * 15f64.sqrt() / 3.2415).abs() < 1e-3, "{cv}");
        let mut rng = crate::seed::rng(1, &["trials_to_stop"]);
        let mean = |effect: f64, rng: &mut rand_chacha::ChaCha8Rng| {
            (0..400).map(|_| f64::from(trials_to_stop(&rule, 1, cv, &settings, effect, rng))).sum::<f64>() / 400.0
        };
        let (null, four) = (mean(0.0, &mut rng), mean(0.2, &mut rng));
        assert!(null < 30.0 && null > 8.0, "{null}");
        assert!(four < 8.0, "{four}");
    }

    #[test]
    fn the_fixed_equivalent_has_the_designs_power() {
        let settings = StatsSettings { gating: vec!["cpu_pct".into()], ..StatsSettings::default() };
        let rule = AdaptiveRepeats::decided(3, 30);
        let (power, n) = fixed_equivalent(&rule, 1, 0.05, &settings, 1).unwrap();
        // θ = 0.05·√15 / 0.05 = 3.87 at t = 1: a power near 96 %, a fixed design just under 30.
        assert!(power > 0.9 && power < 0.99, "{power}");
        assert!((24..=30).contains(&n), "{n}");
        assert_eq!(fixed_equivalent(&rule, 1, 0.0, &settings, 1), None);
    }
}
