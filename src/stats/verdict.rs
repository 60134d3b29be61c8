//! The decision: worse, better, no notable change, or too few trials to say.

use serde::{Deserialize, Serialize};

use super::{Comparison, min_attainable_p};

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
    /// No significant change, or one within the practical threshold.
    #[serde(rename = "~")]
    Same,
    /// The arms are too small for any data to reach significance.
    TooFewTrials,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Worse => "worse",
            Verdict::Better => "better",
            Verdict::Changed => "changed",
            Verdict::Same => "~",
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
/// change beyond ±`threshold`; anything else is `~`. When the baseline mean is 0 (no
/// relative change exists), significance alone decides, since any change is infinitely
/// large relative to 0. `too few trials` when an arm is so small that no data could be
/// significant: the smallest exact two-sided rank-test p-value, 2 / C(nₜ + n_b, nₜ),
/// exceeds `alpha` (with α = 0.05 that is fewer than 4 per arm, benchstat's rule), or
/// when an arm has fewer than 2 values (no spread, no test).
pub fn decide(c: &Comparison, p_adjusted: Option<f64>, alpha: f64, threshold: f64, direction: Direction) -> Verdict {
    if c.n_treatment < 2 || c.n_baseline < 2 || min_attainable_p(c.n_treatment, c.n_baseline) > alpha {
        return Verdict::TooFewTrials;
    }
    let Some(p) = p_adjusted else { return Verdict::TooFewTrials };
    if p > alpha {
        return Verdict::Same;
    }
    let up = match &c.change {
        Some(ch) => match (ch.ci_low, ch.ci_high) {
            (Some(lo), _) if lo > threshold => true,
            (_, Some(hi)) if hi < -threshold => false,
            _ => return Verdict::Same,
        },
        // Baseline mean 0: the sign of the t statistic (or of the means) says which way.
        None => match c.welch.as_ref().and_then(|w| w.t) {
            Some(t) if t != 0.0 => t > 0.0,
            _ => return Verdict::Same,
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
        decide(&c, p, 0.05, 0.05, Direction::of("cpu_pct"))
    }

    #[test]
    fn significant_and_beyond_the_threshold() {
        let base = [12.0, 12.5, 11.5, 12.2, 11.8, 12.1];
        assert_eq!(verdict(&[185.0, 190.0, 180.0, 186.0, 184.0, 183.0], &base), Verdict::Worse);
        assert_eq!(verdict(&[4.0, 4.2, 3.9, 4.1, 4.0, 3.8], &base), Verdict::Better);
        // Significant (tiny spread) but only +2 %: within the practical threshold.
        let plus2: Vec<f64> = base.iter().map(|x| x * 1.02).collect();
        let c = cmp(&plus2, &base);
        assert!(c.welch.as_ref().unwrap().p > 0.0);
        assert_eq!(verdict(&plus2, &base), Verdict::Same);
        // Large but noisy: not significant.
        assert_eq!(verdict(&[10.0, 30.0, 5.0, 25.0], &[12.0, 14.0, 9.0, 16.0]), Verdict::Same);
        // Neutral metric.
        let c = cmp(&[20.0, 21.0, 20.5, 20.2], &[10.0, 10.5, 10.2, 10.1]);
        let p = c.welch.as_ref().map(|w| w.p);
        assert_eq!(decide(&c, p, 0.05, 0.05, Direction::of("requests")), Verdict::Changed);
    }

    #[test]
    fn too_few_trials() {
        assert_eq!(verdict(&[100.0, 101.0, 102.0], &[1.0, 1.1, 1.2]), Verdict::TooFewTrials);
        assert_eq!(verdict(&[100.0], &[1.0, 1.1, 1.2, 1.3]), Verdict::TooFewTrials);
        assert_eq!(verdict(&[100.0, 101.0, 102.0, 103.0], &[1.0, 1.1, 1.2, 1.3]), Verdict::Worse);
    }

    #[test]
    fn zero_spread_samples_decide_without_nan() {
        // Both constant and equal (energy level 1 for control and kqueue): `~`.
        assert_eq!(verdict(&[1.0; 6], &[1.0; 6]), Verdict::Same);
        // Both constant and different: p = 0, zero-width interval far above +5 %.
        assert_eq!(verdict(&[12.0; 6], &[1.0; 6]), Verdict::Worse);
        // Baseline mean 0: significance alone decides, direction from t.
        assert_eq!(verdict(&[1.0, 1.2, 0.9, 1.1], &[0.0; 4]), Verdict::Worse);
        assert_eq!(verdict(&[0.0; 4], &[0.0; 4]), Verdict::Same);
    }
}
