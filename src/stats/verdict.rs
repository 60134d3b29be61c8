//! The decision: worse, better, the same within the practical threshold (equivalence
//! shown), inconclusive, or too few trials to say.

use serde::{Deserialize, Serialize};

use super::{Comparison, RelativeChange, min_attainable_p};

/// What a comparison says about one metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Significant and beyond the practical threshold, in the costly direction.
    Worse,
    /// Significant and beyond the practical threshold, in the cheaper direction.
    Better,
    /// Significant and beyond the threshold for a metric with no good direction (requests).
    Changed,
    /// Equivalence shown: the relative change's (1 − 2α) interval lies inside
    /// ±threshold (two one-sided tests at α, Schuirmann 1987).
    Same,
    /// Neither a change beyond the threshold nor equivalence within it was shown. (Reports
    /// of lab before issue 34 wrote `~` for this and for `same` alike: read as this.)
    #[serde(alias = "~")]
    Inconclusive,
    /// A sequential look of a design sized from a power ruled out a change as large as its
    /// design effect (twice the threshold) without showing equivalence within the
    /// threshold: the futility bound (docs/statistics.md, "Designs sized from a power").
    NoLargeChange,
    /// The arms are too small for any data to reach significance.
    TooFewTrials,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Worse => "worse",
            Verdict::Better => "better",
            Verdict::Changed => "changed",
            Verdict::Same => "same",
            Verdict::Inconclusive => "inconclusive",
            Verdict::NoLargeChange => "no large change",
            Verdict::TooFewTrials => "too few trials",
        }
    }
}

/// Which way a metric costs more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Battery, charge, power, energy, CPU, memory: more is worse.
    LowerIsBetter,
    /// Neither way is better (the request count is fixed by the workload).
    Neutral,
}

impl Direction {
    /// `requests` is set by the workload; every other metric `lab` records is a cost.
    pub fn of(metric: &str) -> Direction {
        if metric == "requests" { Direction::Neutral } else { Direction::LowerIsBetter }
    }
}

/// The verdict for one metric, given the comparison and its p-value after adjustment
/// over the metric's family (`None` when the test does not exist).
///
/// In the spirit of criterion's noise threshold: `worse`/`better` need both
/// significance (adjusted p ≤ `alpha`) and the whole confidence interval of the relative
/// change beyond ±`threshold`. When the baseline mean is 0 (no relative change exists),
/// significance alone decides, since any change is infinitely large relative to 0.
/// Otherwise `same` when `equivalence`, the relative change's (1 − 2α) interval, lies
/// within ±`threshold`: the two one-sided tests of Schuirmann (1987) at level α, each
/// rejecting "the change is at least the threshold" in its direction; and
/// `inconclusive` when it does not. `too few trials` when an arm is so small that no data
/// could be significant: the smallest exact two-sided rank-test p-value,
/// 2 / C(nₜ + n_b, nₜ), exceeds `alpha` (with α = 0.05 that is fewer than 4 per arm,
/// benchstat's rule), or when an arm has fewer than 2 values (no spread, no test).
pub fn decide(
    c: &Comparison,
    p_adjusted: Option<f64>,
    alpha: f64,
    threshold: f64,
    direction: Direction,
    equivalence: Option<&RelativeChange>,
) -> Verdict {
    if c.n_treatment < 2 || c.n_baseline < 2 || min_attainable_p(c.n_treatment, c.n_baseline) > alpha {
        return Verdict::TooFewTrials;
    }
    let Some(p) = p_adjusted else { return Verdict::TooFewTrials };
    decide_significance(c, p <= alpha, threshold, direction, equivalence)
}

/// The verdict once significance is settled (a fixed test's p ≤ α, or a sequential
/// look's p within its boundary): `worse`/`better` when significant and the relative
/// change's interval in `c` (at the level that goes with the test) lies beyond
/// ±`threshold`, else `same` when `equivalence` lies within ±`threshold` (or both arms
/// are constant and equal), else `inconclusive`.
pub fn decide_significance(
    c: &Comparison,
    significant: bool,
    threshold: f64,
    direction: Direction,
    equivalence: Option<&RelativeChange>,
) -> Verdict {
    let not_beyond = || -> Verdict {
        let inside = equivalence
            .and_then(|e| Some((e.ci_low?, e.ci_high?)))
            .is_some_and(|(lo, hi)| lo >= -threshold && hi <= threshold);
        // Both arms constant and equal (t undefined, p = 1): the same, whatever the
        // relative change can say (none, when both are 0).
        let identical = c.welch.as_ref().is_some_and(|w| w.t.is_none()) && !significant;
        if inside || identical { Verdict::Same } else { Verdict::Inconclusive }
    };
    if !significant {
        return not_beyond();
    }
    let up = match &c.change {
        Some(ch) => match (ch.ci_low, ch.ci_high) {
            (Some(lo), _) if lo > threshold => true,
            (_, Some(hi)) if hi < -threshold => false,
            _ => return not_beyond(),
        },
        // Baseline mean 0: the sign of the t statistic (or of the means) says which way.
        None => match c.welch.as_ref().and_then(|w| w.t) {
            Some(t) if t != 0.0 => t > 0.0,
            _ => return not_beyond(),
        },
    };
    match (direction, up) {
        (Direction::Neutral, _) => Verdict::Changed,
        (Direction::LowerIsBetter, true) => Verdict::Worse,
        (Direction::LowerIsBetter, false) => Verdict::Better,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{compare, summarize};

    fn cmp(t: &[f64], b: &[f64]) -> Comparison {
        compare(t, &summarize(t, 0.95).unwrap(), b, &summarize(b, 0.95).unwrap(), 0.95)
    }

    fn verdict(t: &[f64], b: &[f64]) -> Verdict {
        let c = cmp(t, b);
        let p = c.welch.as_ref().map(|w| w.p);
        // The equivalence interval at 1 − 2α = 90 %.
        let e = crate::stats::relative_change(&summarize(t, 0.9).unwrap(), &summarize(b, 0.9).unwrap(), 0.9);
        decide(&c, p, 0.05, 0.05, Direction::of("cpu_pct"), e.as_ref())
    }

    #[test]
    fn significant_and_beyond_the_threshold() {
        let base = [12.0, 12.5, 11.5, 12.2, 11.8, 12.1];
        assert_eq!(verdict(&[185.0, 190.0, 180.0, 186.0, 184.0, 183.0], &base), Verdict::Worse);
        assert_eq!(verdict(&[4.0, 4.2, 3.9, 4.1, 4.0, 3.8], &base), Verdict::Better);
        // +1 %: its 90 % interval (about [−2 %, +4 %] with this spread) inside ±5 %: the same.
        let plus1: Vec<f64> = base.iter().map(|x| x * 1.01).collect();
        assert_eq!(verdict(&plus1, &base), Verdict::Same);
        // +2 %: not beyond the threshold either, but its interval reaches past +5 %: no
        // equivalence shown with six trials a side.
        let plus2: Vec<f64> = base.iter().map(|x| x * 1.02).collect();
        let c = cmp(&plus2, &base);
        assert!(c.welch.as_ref().unwrap().p > 0.0);
        assert_eq!(verdict(&plus2, &base), Verdict::Inconclusive);
        // Large but noisy: neither a change nor the same shown.
        assert_eq!(verdict(&[10.0, 30.0, 5.0, 25.0], &[12.0, 14.0, 9.0, 16.0]), Verdict::Inconclusive);
        // Neutral metric.
        let c = cmp(&[20.0, 21.0, 20.5, 20.2], &[10.0, 10.5, 10.2, 10.1]);
        let p = c.welch.as_ref().map(|w| w.p);
        assert_eq!(decide(&c, p, 0.05, 0.05, Direction::of("requests"), None), Verdict::Changed);
    }

    #[test]
    fn too_few_trials() {
        assert_eq!(verdict(&[100.0, 101.0, 102.0], &[1.0, 1.1, 1.2]), Verdict::TooFewTrials);
        assert_eq!(verdict(&[100.0], &[1.0, 1.1, 1.2, 1.3]), Verdict::TooFewTrials);
        assert_eq!(verdict(&[100.0, 101.0, 102.0, 103.0], &[1.0, 1.1, 1.2, 1.3]), Verdict::Worse);
    }

    #[test]
    fn zero_spread_samples_decide_without_nan() {
        // Both constant and equal (energy level 1 for control and kqueue): the same.
        assert_eq!(verdict(&[1.0; 6], &[1.0; 6]), Verdict::Same);
        // Both constant and different: p = 0, zero-width interval far above +5 %.
        assert_eq!(verdict(&[12.0; 6], &[1.0; 6]), Verdict::Worse);
        // Baseline mean 0: significance alone decides, direction from t.
        assert_eq!(verdict(&[1.0, 1.2, 0.9, 1.1], &[0.0; 4]), Verdict::Worse);
        assert_eq!(verdict(&[0.0; 4], &[0.0; 4]), Verdict::Same);
        // Baseline 0 and a noisy treatment: nothing relative to show the same with.
        assert_eq!(verdict(&[0.0, 1.0, 0.0, 0.5], &[0.0; 4]), Verdict::Inconclusive);
    }

    /// TOST at α = 0.05 is the 90 % interval inside ±threshold: checked against the two
    /// one-sided Welch t-tests on the log scale computed by hand, for a case on each side.
    #[test]
    fn same_needs_the_90_percent_interval_inside_the_threshold() {
        let base = [100.0, 102.0, 98.0, 101.0, 99.0, 100.5, 99.5, 100.0];
        // +1 % with 1–2 % noise: the 90 % interval is about [−0.2 %, +2.2 %]: inside ±5 %.
        let near: Vec<f64> = base.iter().map(|x| x * 1.01).collect();
        assert_eq!(verdict(&near, &base), Verdict::Same);
        // +4 % with the same noise: not significant beyond 5 %, and its interval reaches
        // past +5 %: inconclusive. At ±10 % the same data are the same.
        let four = [104.0, 107.0, 101.0, 105.0, 103.0, 104.5, 102.5, 106.0];
        assert_eq!(verdict(&four, &base), Verdict::Inconclusive);
        let c = cmp(&four, &base);
        let e = crate::stats::relative_change(&summarize(&four, 0.9).unwrap(), &summarize(&base, 0.9).unwrap(), 0.9);
        let p = c.welch.as_ref().map(|w| w.p);
        assert_eq!(decide(&c, p, 0.05, 0.10, Direction::of("cpu_pct"), e.as_ref()), Verdict::Same);
    }
}
