//! The levels a sequential look's verdicts are judged at (issue 34; docs/statistics.md,
//! "Sequential campaigns").
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

use super::normal;
use super::{Spending, spending_bounds};
use crate::stats::Verdict;

/// The spending function of sequential campaigns: Pocock type, which decides clear cases
/// in about half the fixed design's device-hours where the O'Brien–Fleming type needs
/// about 70 % (docs/statistics.md has the benchmark's figures for both).
pub const SPENDING: Spending = Spending::Pocock;

/// How a design sized from a power spends β on its futility bound.
pub const FUTILITY_SPENDING: Spending = Spending::Linear;

/// The one-sided level of a bound: 1 − Φ(b), none past an infinite bound (a look that
/// spends nothing).
fn level_of(b: f64) -> f64 {
    if b.is_infinite() {
        return 0.0;
    }
    normal::sf(b)
}

/// The nominal levels of one look, from the information fractions of the pair's looks so
/// far (this one last).
#[derive(Debug, Clone)]
pub struct LookLevels {
    pub fractions: Vec<f64>,
    pub alpha: f64,
    pub spending: Spending,
    /// The look's futility test, in a design sized from a power.
    pub futility: Option<Futility>,
}

/// A look's futility test: no change as large as `effect` (the design effect, twice the
/// threshold) when the relative change's (1 − 2·`level`) interval lies within ±`effect`
/// (the β-spending bound as a nominal one-sided level: `Target::futility_level`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Futility {
    pub effect: f64,
    pub level: f64,
}

impl LookLevels {
    /// Two-sided nominal level for `worse`/`better` with `j` hypotheses left in Holm's
    /// step-down (the bound for α / j).
    pub fn change(&self, j: usize) -> f64 {
        let b = spending_bounds(self.spending, &self.fractions, self.alpha / j.max(1) as f64);
        2.0 * level_of(b.last().copied().unwrap_or(f64::INFINITY))
    }

    /// One-sided nominal level of each of the two one-sided tests of equivalence.
    pub fn same(&self) -> f64 {
        let b = spending_bounds(self.spending, &self.fractions, 2.0 * self.alpha);
        level_of(b.last().copied().unwrap_or(f64::INFINITY))
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

/// The fractions of a pair's recorded looks (`recorded`, in the order they were taken),
/// then `now` if it is past the last: a look with no new information is the same look.
pub fn fractions(recorded: impl IntoIterator<Item = f64>, now: f64) -> Vec<f64> {
    let mut out: Vec<f64> = Vec::new();
    for t in recorded {
        if out.last().is_none_or(|&last| t > last) {
            out.push(t);
        }
    }
    if out.last().is_none_or(|&last| now > last) && now > 0.0 {
        out.push(now);
    }
    out
}

/// A decision that ends a variant's trials.
pub fn decided(v: Verdict) -> bool {
    matches!(v, Verdict::Worse | Verdict::Better | Verdict::Same | Verdict::Changed | Verdict::NoLargeChange)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn information_is_the_harmonic_mean_and_repeated_looks_are_one() {
        assert!((information(4, 4, 8) - 0.5).abs() < 1e-12);
        assert!((information(3, 6, 8) - 0.5).abs() < 1e-12, "harmonic mean 4");
        assert_eq!(information(0, 6, 8), 0.0);
        let looks = [0.3, 0.3, 0.5];
        assert_eq!(fractions(looks, 0.5), [0.3, 0.5]);
        assert_eq!(fractions(looks, 0.7), [0.3, 0.5, 0.7]);
        assert_eq!(fractions([], 0.7), [0.7]);
    }

    /// One look at t = 1 is the fixed test; early looks are stricter, and a smaller family
    /// share (Holm's first step) stricter still.
    #[test]
    fn one_look_is_the_fixed_level_and_early_looks_are_stricter() {
        let one = LookLevels { fractions: vec![1.0], alpha: 0.05, spending: SPENDING, futility: None };
        assert!((one.change(1) - 0.05).abs() < 1e-6, "{}", one.change(1));
        assert!((one.same() - 0.05).abs() < 1e-6, "{}", one.same());
        // Pocock type: a first look at t = 0.3 spends 0.05·ln(1 + (e − 1)·0.3) = 0.0208.
        let early = LookLevels { fractions: vec![0.3], alpha: 0.05, spending: SPENDING, futility: None };
        assert!((early.change(1) - 0.020_80).abs() < 1e-4, "{}", early.change(1));
        assert!(early.change(2) < early.change(1));
        let obf = LookLevels { spending: Spending::ObrienFleming, ..early.clone() };
        assert!(obf.change(1) < 0.002, "{}", obf.change(1));
        // The last of several looks is stricter than the fixed test, more so for Pocock's.
        let last = LookLevels { fractions: vec![0.3, 0.6, 1.0], alpha: 0.05, spending: SPENDING, futility: None };
        let obf_last = LookLevels { spending: Spending::ObrienFleming, ..last.clone() };
        assert!(last.change(1) < obf_last.change(1) && obf_last.change(1) < 0.05, "{}", last.change(1));
        assert!(last.change(1) > 0.015, "{}", last.change(1));
    }
}
