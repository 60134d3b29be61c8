//! Comparisons and verdicts: what each variant is compared with, p-values adjusted
//! within families, and the decision per metric and per variant.

use crate::config::StatsSettings;
use crate::report::model::report::{ComparisonKind, MetricComparison, VariantSummary, VariantVerdict};
use crate::report::model::sequential::LookLevels;
use crate::report::render::format::change_with_ci;
use crate::stats::{
    Comparison, Direction, Summary, Verdict, compare, decide, decide_significance, holm, min_attainable_p,
    relative_change, trials_per_arm,
};

/// Power the sample-size advice aims at.
pub const ADVICE_POWER: f64 = 0.8;

/// One sample: its values and their summary.
#[derive(Clone, Copy)]
pub(crate) struct Arm<'a> {
    pub values: &'a [f64],
    pub stats: &'a Summary,
}

/// A metric measured in both arms.
pub(crate) struct MetricPair<'a> {
    pub metric: &'a str,
    pub treatment: Arm<'a>,
    pub reference: Arm<'a>,
}

/// What `variant` is compared with: the baseline build with the same config (unless it
/// is the baseline build), and the same build with the default config (unless it has
/// the default config). References missing from the plan are skipped.
pub(crate) fn references(v: &VariantSummary, all: &[VariantSummary]) -> Vec<(String, ComparisonKind)> {
    let mut out = Vec::new();
    if !v.baseline_build
        && let Some(b) = all.iter().find(|o| o.baseline_build && o.config == v.config)
    {
        out.push((b.name.clone(), ComparisonKind::BaselineBuild));
    }
    if !v.default_config
        && let Some(d) = all.iter().find(|o| o.build == v.build && o.default_config)
    {
        out.push((d.name.clone(), ComparisonKind::DefaultConfig));
    }
    out
}

/// Compares every pair, adjusts the Welch p-values with Holm — the gating metrics as
/// one family, the other metrics as another — and decides each metric. Results follow
/// the order of `pairs`. With `look` (a sequential campaign) each family's step-down runs
/// at the look's nominal levels instead of α (report/model/sequential.rs).
pub(crate) fn judge(
    pairs: &[MetricPair],
    against: &str,
    kind: ComparisonKind,
    settings: &StatsSettings,
    look: Option<&LookLevels>,
) -> Vec<MetricComparison> {
    let confidence = settings.confidence;
    let comparisons: Vec<_> = pairs
        .iter()
        .map(|p| compare(p.treatment.values, p.treatment.stats, p.reference.values, p.reference.stats, confidence))
        .collect();
    let mut adjusted: Vec<Option<f64>> = vec![None; pairs.len()];
    let mut family_size = vec![0; pairs.len()];
    // Per metric in a sequential look: its step-down level and whether it is significant.
    let mut sequential: Vec<Option<(f64, bool)>> = vec![None; pairs.len()];
    for gating in [true, false] {
        let members: Vec<usize> = (0..pairs.len())
            .filter(|&i| settings.gating.iter().any(|g| g == pairs[i].metric) == gating)
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
                    let equivalence = relative_change(t, r, 1.0 - 2.0 * settings.alpha);
                    let verdict = decide(
                        &stats,
                        adjusted[i],
                        settings.alpha,
                        settings.practical_threshold,
                        Direction::of(pair.metric),
                        equivalence.as_ref(),
                    );
                    (equivalence, verdict)
                }
                Some(look) => {
                    let equivalence = relative_change(t, r, 1.0 - 2.0 * look.same());
                    let verdict = match sequential[i] {
                        Some(_) if too_few(&stats, settings.alpha) => Verdict::TooFewTrials,
                        Some((level, significant)) => {
                            // The change's interval at the level the test was run at.
                            let at_level = Comparison { change: relative_change(t, r, 1.0 - level), ..stats.clone() };
                            decide_significance(
                                &at_level,
                                significant,
                                settings.practical_threshold,
                                Direction::of(pair.metric),
                                equivalence.as_ref(),
                            )
                        }
                        None => Verdict::TooFewTrials,
                    };
                    (equivalence, verdict)
                }
            };
            let advice = advice(pair, settings, family_size[i].max(1));
            MetricComparison {
                against: against.to_string(),
                kind,
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

/// The verdict of a treatment against a reference from their values per metric, decided
/// as a report decides it (the fixed rule, or at a sequential `look`): what simulations
/// of a design need (`benches/decide.rs`, `lab plan`). A metric with no summary in an arm
/// (no finite value) is left out.
pub fn verdict_of(metrics: &[(&str, &[f64], &[f64])], settings: &StatsSettings, look: Option<&LookLevels>) -> Verdict {
    let summaries: Vec<Option<(Summary, Summary)>> = metrics
        .iter()
        .map(|(_, t, r)| {
            Some((crate::stats::summarize(t, settings.confidence)?, crate::stats::summarize(r, settings.confidence)?))
        })
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
    let judged = judge(&pairs, "reference", ComparisonKind::BaselineBuild, settings, look);
    let named: Vec<(&str, &MetricComparison)> = pairs.iter().map(|p| p.metric).zip(&judged).collect();
    overall("treatment", "reference", ComparisonKind::BaselineBuild, &named, &settings.gating).verdict
}

/// The fixed rule's "too few trials": an arm under 2 values, or arms so small that no
/// rank test could reach α (as `stats::decide`).
fn too_few(c: &Comparison, alpha: f64) -> bool {
    c.n_treatment < 2 || c.n_baseline < 2 || min_attainable_p(c.n_treatment, c.n_baseline) > alpha
}

/// Trials per arm for the practical threshold at 80 % power, at α / (family size)
/// (Bonferroni: what Holm's first step demands), from the larger CV of the two arms;
/// never fewer than the rank test needs to reach α at all.
fn advice(pair: &MetricPair, settings: &StatsSettings, family: usize) -> Option<u32> {
    let cv = pair.treatment.stats.cv?.max(pair.reference.stats.cv?);
    let alpha = settings.alpha / family as f64;
    let n = trials_per_arm(cv, settings.practical_threshold, alpha, ADVICE_POWER)?;
    Some(n.max(rank_test_floor(alpha)))
}

/// The fewest trials per arm at which the rank test can reach `alpha` at all.
pub(crate) fn rank_test_floor(alpha: f64) -> u32 {
    (2..=1000u32).find(|&k| min_attainable_p(k as usize, k as usize) <= alpha).unwrap_or(2)
}

/// The overall verdict of `variant` against one reference from its gating metrics.
/// `metrics` holds (metric, comparison) for every compared metric.
pub(crate) fn overall(
    variant: &str,
    against: &str,
    kind: ComparisonKind,
    metrics: &[(&str, &MetricComparison)],
    gating: &[String],
) -> VariantVerdict {
    let gated: Vec<&(&str, &MetricComparison)> =
        metrics.iter().filter(|(m, _)| gating.iter().any(|g| g == m)).collect();
    let names = |v: Verdict| -> Vec<String> {
        gated.iter().filter(|(_, c)| c.verdict == v).map(|(m, _)| m.to_string()).collect()
    };
    let (worse, better, too_few) = (names(Verdict::Worse), names(Verdict::Better), names(Verdict::TooFewTrials));
    let undecided = names(Verdict::Inconclusive);
    let verdict = if !worse.is_empty() {
        Verdict::Worse
    } else if !better.is_empty() {
        Verdict::Better
    } else if !too_few.is_empty() {
        Verdict::TooFewTrials
    } else if gated.is_empty() || !undecided.is_empty() {
        Verdict::Inconclusive
    } else {
        Verdict::Same
    };
    let listed = |v: Verdict| -> String {
        gated
            .iter()
            .filter(|(_, c)| c.verdict == v)
            .map(|(m, c)| format!("{m} {}", change_with_ci(c.stats.change.as_ref())))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let detail = match verdict {
        Verdict::Worse if better.is_empty() => listed(Verdict::Worse),
        Verdict::Worse => format!("{}; better: {}", listed(Verdict::Worse), listed(Verdict::Better)),
        Verdict::Better => listed(Verdict::Better),
        Verdict::TooFewTrials => format!("too few trials for {}", too_few.join(", ")),
        _ if gated.is_empty() => "no gating metric measured".to_string(),
        Verdict::Same => format!(
            "every gating metric shown the same within the practical threshold ({})",
            gated.iter().map(|(m, _)| *m).collect::<Vec<_>>().join(", ")
        ),
        _ => format!(
            "no gating metric changed beyond the practical threshold, and not shown the same within it: {}",
            gated
                .iter()
                .filter(|(_, c)| c.verdict == Verdict::Inconclusive)
                .map(|(m, c)| match c.advice_trials_per_arm {
                    Some(n) => format!("{m} (about {n} trials per arm would decide)"),
                    None => m.to_string(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    VariantVerdict {
        variant: variant.to_string(),
        against: against.to_string(),
        kind,
        verdict,
        worse,
        better,
        too_few_trials: too_few,
        summary: format!("{variant} vs {against}: {} — {detail}", verdict.as_str()),
        sequential: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::summarize;

    fn v(name: &str, build: &str, config: &str, baseline: bool, default: bool) -> VariantSummary {
        VariantSummary::new(name, build, config, baseline, default)
    }

    #[test]
    fn build_and_config_variants_get_their_references() {
        let all = [
            v("a+default", "a", "default", true, true),
            v("a+trace", "a", "trace", true, false),
            v("b+default", "b", "default", false, true),
            v("b+trace", "b", "trace", false, false),
        ];
        let refs: Vec<Vec<(String, ComparisonKind)>> = all.iter().map(|x| references(x, &all)).collect();
        assert!(refs[0].is_empty());
        assert_eq!(refs[1], [("a+default".to_string(), ComparisonKind::DefaultConfig)]);
        assert_eq!(refs[2], [("a+default".to_string(), ComparisonKind::BaselineBuild)]);
        assert_eq!(
            refs[3],
            [
                ("a+trace".to_string(), ComparisonKind::BaselineBuild),
                ("b+default".to_string(), ComparisonKind::DefaultConfig)
            ]
        );
    }

    #[test]
    fn holm_runs_within_the_gating_family_only() {
        let settings = StatsSettings::default();
        const BASE: [f64; 6] = [12.0, 12.5, 11.5, 12.2, 11.8, 12.1];
        const WORSE: [f64; 6] = [185.0, 190.0, 180.0, 186.0, 184.0, 183.0];
        const SAME: [f64; 6] = [12.1, 12.4, 11.6, 12.0, 11.9, 12.2];
        let (base, worse, same) = (&BASE, &WORSE, &SAME);
        let (sb, sw, ss) =
            (summarize(base, 0.95).unwrap(), summarize(worse, 0.95).unwrap(), summarize(same, 0.95).unwrap());
        let arm = |values: &'static [f64], stats| Arm { values, stats };
        let pairs = [
            MetricPair { metric: "cpu_pct", treatment: arm(worse, &sw), reference: arm(base, &sb) },
            MetricPair { metric: "memory_mb", treatment: arm(same, &ss), reference: arm(base, &sb) },
            MetricPair { metric: "requests", treatment: arm(worse, &sw), reference: arm(base, &sb) },
        ];
        let out = judge(&pairs, "control", ComparisonKind::BaselineBuild, &settings, None);
        let raw: Vec<f64> = out.iter().map(|c| c.stats.welch.as_ref().unwrap().p).collect();
        // Two gating tests: Holm multiplies the smaller p by 2. `requests` is alone.
        assert_eq!(out[0].family_size, 2);
        assert!((out[0].p_adjusted.unwrap() - 2.0 * raw[0]).abs() < 1e-15);
        assert_eq!((out[2].family_size, out[2].p_adjusted), (1, Some(raw[2])));
        let verdicts: Vec<Verdict> = out.iter().map(|c| c.verdict).collect();
        assert_eq!(verdicts, [Verdict::Worse, Verdict::Same, Verdict::Changed]);
        // The same shown by its 90 % interval, inside ±5 %.
        let e = out[1].equivalence.as_ref().unwrap();
        assert!(e.ci_low.unwrap() > -0.05 && e.ci_high.unwrap() < 0.05, "{e:?}");
        assert!(out.iter().all(|c| c.advice_trials_per_arm.is_some_and(|n| n >= 4)));

        let named: Vec<(&str, &MetricComparison)> = pairs.iter().map(|p| p.metric).zip(&out).collect();
        let o = overall("envoy-poll", "control", ComparisonKind::BaselineBuild, &named, &settings.gating);
        assert_eq!((o.verdict, o.worse.as_slice()), (Verdict::Worse, ["cpu_pct".to_string()].as_slice()));
        assert!(o.summary.starts_with("envoy-poll vs control: worse — cpu_pct +1"), "{}", o.summary);
        let o = overall("envoy-poll", "control", ComparisonKind::BaselineBuild, &named[1..], &settings.gating);
        assert_eq!(o.verdict, Verdict::Same);
        assert_eq!(
            o.summary,
            "envoy-poll vs control: same — every gating metric shown the same within the practical threshold (memory_mb)"
        );
    }
}
