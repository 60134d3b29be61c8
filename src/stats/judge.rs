//! The decision on one treatment against one reference: every metric compared, Welch's
//! p-values adjusted with Holm within families (the gating metrics one, the others
//! another), each metric decided, and the pair's verdict from its gating metrics. The
//! fixed rule, or a sequential campaign's look at its nominal levels
//! ([`LookLevels`]); the report, the runner's looks and the benchmark all decide here.

use super::sequential::LookLevels;
use super::{
    Comparison, Direction, RelativeChange, Summary, Verdict, compare, decide, decide_significance, holm,
    min_attainable_p, rank_test_floor, relative_change, summarize, trials_per_arm, welch,
};

/// Power the sample-size advice aims at.
pub const ADVICE_POWER: f64 = 0.8;

/// What a decision is made with: the lab's statistics settings as plain values.
#[derive(Debug, Clone, Copy)]
pub struct DecisionRule<'a> {
    pub alpha: f64,
    /// The practical threshold: the smallest relative change that matters.
    pub threshold: f64,
    /// The confidence of the summaries' intervals.
    pub confidence: f64,
    /// The metrics the pair's verdict is made from.
    pub gating: &'a [String],
}

impl DecisionRule<'_> {
    pub fn gates(&self, metric: &str) -> bool {
        self.gating.iter().any(|g| g == metric)
    }
}

/// One sample: its values and their summary.
#[derive(Debug, Clone, Copy)]
pub struct Arm<'a> {
    pub values: &'a [f64],
    pub stats: &'a Summary,
}

/// A metric measured in both arms.
#[derive(Debug, Clone, Copy)]
pub struct MetricPair<'a> {
    pub metric: &'a str,
    pub treatment: Arm<'a>,
    pub reference: Arm<'a>,
}

/// One metric's comparison, adjusted p-value and verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricDecision {
    pub stats: Comparison,
    pub p_adjusted: Option<f64>,
    pub family_size: usize,
    /// The relative change's (1 − 2α) interval (at a look: at its one-sided level).
    pub equivalence: Option<RelativeChange>,
    pub verdict: Verdict,
    /// Trials per arm that would detect the threshold at [`ADVICE_POWER`].
    pub advice_trials_per_arm: Option<u32>,
}

/// Compares every pair, adjusts the Welch p-values with Holm — the gating metrics as
/// one family, the other metrics as another — and decides each metric. Results follow
/// the order of `pairs`. With `look` (a sequential campaign) each family's step-down runs
/// at the look's nominal levels instead of α.
pub fn judge(pairs: &[MetricPair], rule: &DecisionRule, look: Option<&LookLevels>) -> Vec<MetricDecision> {
    judge_as(pairs, rule, look, Shown::All)
}

/// What a judgement computes beyond the verdicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    /// Everything the report shows: the rank test, Hedges' g, the sample-size advice.
    All,
    /// Only what the verdicts are made of (Welch's test, the relative change's intervals):
    /// what simulated campaigns need, thousands of times.
    Verdicts,
}

fn judge_as(pairs: &[MetricPair], rule: &DecisionRule, look: Option<&LookLevels>, shown: Shown) -> Vec<MetricDecision> {
    let comparisons: Vec<_> = pairs
        .iter()
        .map(|p| {
            let (t, r) = (&p.treatment, &p.reference);
            match shown {
                Shown::All => compare(t.values, t.stats, r.values, r.stats, rule.confidence),
                Shown::Verdicts => Comparison {
                    n_treatment: t.values.len(),
                    n_baseline: r.values.len(),
                    change: relative_change(t.stats, r.stats, rule.confidence),
                    welch: welch(t.values, r.values),
                    mann_whitney: None,
                    hedges_g: None,
                },
            }
        })
        .collect();
    let mut adjusted: Vec<Option<f64>> = vec![None; pairs.len()];
    let mut family_size = vec![0; pairs.len()];
    // Per metric in a sequential look: its step-down level and whether it is significant.
    let mut sequential: Vec<Option<(f64, bool)>> = vec![None; pairs.len()];
    for gating in [true, false] {
        let members: Vec<usize> = (0..pairs.len())
            .filter(|&i| rule.gates(pairs[i].metric) == gating)
            .filter(|&i| comparisons[i].welch.is_some())
            .collect();
        let p: Vec<f64> = members.iter().filter_map(|&i| comparisons[i].welch.as_ref().map(|w| w.p)).collect();
        for (&i, q) in members.iter().zip(holm(&p)) {
            adjusted[i] = Some(q);
            family_size[i] = members.len();
        }
        if let Some(look) = look {
            // Holm's step-down at the look's levels: the j-th smallest p against the
            // bound for α / (m − j + 1), until one fails.
            let mut order: Vec<(usize, f64)> = members.iter().copied().zip(p.iter().copied()).collect();
            order.sort_by(|a, b| a.1.total_cmp(&b.1));
            let mut going = true;
            for (rank, &(i, p)) in order.iter().enumerate() {
                let level = look.change(order.len() - rank);
                going = going && p <= level;
                sequential[i] = Some((level, going));
            }
        }
    }
    pairs
        .iter()
        .zip(comparisons)
        .enumerate()
        .map(|(i, (pair, stats))| {
            // Equivalence by two one-sided tests at α: the (1 − 2α) interval (Schuirmann
            // 1987), per metric (an intersection–union test needs no adjustment for "all
            // gating metrics the same": Berger 1982).
            let (t, r) = (pair.treatment.stats, pair.reference.stats);
            let (equivalence, verdict) = match look {
                None => {
                    let equivalence = relative_change(t, r, 1.0 - 2.0 * rule.alpha);
                    let verdict = decide(
                        &stats,
                        adjusted[i],
                        rule.alpha,
                        rule.threshold,
                        Direction::of(pair.metric),
                        equivalence.as_ref(),
                    );
                    (equivalence, verdict)
                }
                Some(look) => {
                    let equivalence = relative_change(t, r, 1.0 - 2.0 * look.same());
                    let verdict = match sequential[i] {
                        Some(_) if too_few(&stats, rule.alpha) => Verdict::TooFewTrials,
                        Some((_, significant)) => {
                            // The change's interval at the look's level for α, as the fixed
                            // rule's is at α whatever Holm asks of the p-value: `worse` at the
                            // threshold stays within α/2 a metric.
                            let at_level =
                                Comparison { change: relative_change(t, r, 1.0 - look.change(1)), ..stats.clone() };
                            let v = decide_significance(
                                &at_level,
                                significant,
                                rule.threshold,
                                Direction::of(pair.metric),
                                equivalence.as_ref(),
                            );
                            futile(v, look, t, r)
                        }
                        None => Verdict::TooFewTrials,
                    };
                    (equivalence, verdict)
                }
            };
            let advice = if shown == Shown::All { advice(pair, rule, family_size[i].max(1)) } else { None };
            MetricDecision {
                stats,
                p_adjusted: adjusted[i],
                family_size: family_size[i],
                equivalence,
                verdict,
                advice_trials_per_arm: advice,
            }
        })
        .collect()
}

/// The pair's verdict from its metrics' verdicts (metric, verdict), the gating ones
/// counting: `worse` if any is worse, else `better` if any is better, else `too few
/// trials` if any could not be decided, else `same` if every one is the same, else
/// `inconclusive` (also with no gating metric).
pub fn overall_verdict<'m>(metrics: impl IntoIterator<Item = (&'m str, Verdict)>, gating: &[String]) -> Verdict {
    let gated: Vec<Verdict> =
        metrics.into_iter().filter(|(m, _)| gating.iter().any(|g| g == m)).map(|(_, v)| v).collect();
    let any = |v: Verdict| gated.contains(&v);
    if any(Verdict::Worse) {
        Verdict::Worse
    } else if any(Verdict::Better) {
        Verdict::Better
    } else if any(Verdict::TooFewTrials) {
        Verdict::TooFewTrials
    } else if gated.is_empty() || any(Verdict::Inconclusive) {
        Verdict::Inconclusive
    } else if any(Verdict::NoLargeChange) {
        Verdict::NoLargeChange
    } else {
        Verdict::Same
    }
}

/// `NoLargeChange` for an inconclusive metric whose relative change's interval at the
/// look's futility level lies within ±the design effect.
fn futile(v: Verdict, look: &LookLevels, t: &Summary, r: &Summary) -> Verdict {
    let Some(f) = look.futility.filter(|f| f.level > 0.0 && v == Verdict::Inconclusive) else { return v };
    let within = relative_change(t, r, 1.0 - 2.0 * f.level)
        .and_then(|c| Some((c.ci_low?, c.ci_high?)))
        .is_some_and(|(lo, hi)| lo >= -f.effect && hi <= f.effect);
    if within { Verdict::NoLargeChange } else { v }
}

/// The verdict of a treatment against a reference from their values per metric (metric,
/// treatment, reference), decided by the fixed rule or at a sequential `look`: what
/// simulations of a design need (`benches/decide.rs`). A metric with no summary in an
/// arm (no finite value) is left out.
pub fn verdict_of(metrics: &[(&str, &[f64], &[f64])], rule: &DecisionRule, look: Option<&LookLevels>) -> Verdict {
    let summaries: Vec<Option<(Summary, Summary)>> = metrics
        .iter()
        .map(|(_, t, r)| Some((summarize(t, rule.confidence)?, summarize(r, rule.confidence)?)))
        .collect();
    let pairs: Vec<MetricPair> = metrics
        .iter()
        .zip(&summaries)
        .filter_map(|((metric, t, r), s)| {
            let (ts, rs) = s.as_ref()?;
            Some(MetricPair {
                metric,
                treatment: Arm { values: t, stats: ts },
                reference: Arm { values: r, stats: rs },
            })
        })
        .collect();
    let judged = judge_as(&pairs, rule, look, Shown::Verdicts);
    overall_verdict(pairs.iter().map(|p| p.metric).zip(judged.iter().map(|d| d.verdict)), rule.gating)
}

/// The fixed rule's "too few trials": an arm under 2 values, or arms so small that no
/// rank test could reach α (as `stats::decide`).
fn too_few(c: &Comparison, alpha: f64) -> bool {
    c.n_treatment < 2 || c.n_baseline < 2 || min_attainable_p(c.n_treatment, c.n_baseline) > alpha
}

/// Trials per arm for the practical threshold at 80 % power, at α / (family size)
/// (Bonferroni: what Holm's first step demands), from the larger CV of the two arms;
/// never fewer than the rank test needs to reach α at all.
fn advice(pair: &MetricPair, rule: &DecisionRule, family: usize) -> Option<u32> {
    let cv = pair.treatment.stats.cv?.max(pair.reference.stats.cv?);
    let alpha = rule.alpha / family as f64;
    let n = trials_per_arm(cv, rule.threshold, alpha, ADVICE_POWER)?;
    Some(n.max(rank_test_floor(alpha)))
}
