//! Comparisons and verdicts as the report shows them: what each variant is compared with,
//! and each decision of `stats` (per metric, per variant) with its reference and words.

use crate::config::StatsSettings;
use crate::report::model::report::{ComparisonKind, MetricComparison, VariantSummary, VariantVerdict};
use crate::report::render::format::{change_with_ci, percent};
use crate::stats::sequential::LookLevels;
use crate::stats::{DecisionRule, MetricDecision, MetricPair, Verdict, overall_verdict};

/// The lab's statistics settings as the rule `stats` decides by.
pub(crate) fn rule(settings: &StatsSettings) -> DecisionRule<'_> {
    DecisionRule {
        alpha: settings.alpha,
        threshold: settings.practical_threshold,
        confidence: settings.confidence,
        gating: &settings.gating,
    }
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

/// Compares every pair and decides each metric (`stats::judge`: Holm within the gating
/// and the other metrics, at a sequential `look`'s levels where there is one), each
/// against `against`. Results follow the order of `pairs`.
pub(crate) fn judge(
    pairs: &[MetricPair],
    against: &str,
    kind: ComparisonKind,
    settings: &StatsSettings,
    look: Option<&LookLevels>,
) -> Vec<MetricComparison> {
    crate::stats::judge(pairs, &rule(settings), look).into_iter().map(|d| comparison(against, kind, d)).collect()
}

/// One metric's decision against `against`.
pub(crate) fn comparison(against: &str, kind: ComparisonKind, d: MetricDecision) -> MetricComparison {
    MetricComparison {
        against: against.to_string(),
        kind,
        stats: d.stats,
        p_adjusted: d.p_adjusted,
        family_size: d.family_size,
        equivalence: d.equivalence,
        verdict: d.verdict,
        advice_trials_per_arm: d.advice_trials_per_arm,
    }
}

/// The overall verdict of `variant` against one reference from its gating metrics.
/// `metrics` holds (metric, comparison) for every compared metric.
pub(crate) fn overall(
    variant: &str,
    against: &str,
    kind: ComparisonKind,
    metrics: &[(&str, &MetricComparison)],
    settings: &StatsSettings,
) -> VariantVerdict {
    let gating = &settings.gating;
    let gated: Vec<&(&str, &MetricComparison)> =
        metrics.iter().filter(|(m, _)| gating.iter().any(|g| g == m)).collect();
    let names = |v: Verdict| -> Vec<String> {
        gated.iter().filter(|(_, c)| c.verdict == v).map(|(m, _)| m.to_string()).collect()
    };
    let (worse, better, too_few) = (names(Verdict::Worse), names(Verdict::Better), names(Verdict::TooFewTrials));
    let verdict = overall_verdict(metrics.iter().map(|(m, c)| (*m, c.verdict)), gating);
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
        // The futility bound of a design sized from a power: what it rules out, not `same`.
        Verdict::NoLargeChange => format!(
            "no change as large as ±{} (twice the practical threshold) in {}; not shown the same within ±{}",
            percent(2.0 * settings.practical_threshold),
            gated.iter().map(|(m, _)| *m).collect::<Vec<_>>().join(", "),
            percent(settings.practical_threshold)
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
    use crate::stats::{Arm, summarize};

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
        let o = overall("envoy-poll", "control", ComparisonKind::BaselineBuild, &named, &settings);
        assert_eq!((o.verdict, o.worse.as_slice()), (Verdict::Worse, ["cpu_pct".to_string()].as_slice()));
        assert!(o.summary.starts_with("envoy-poll vs control: worse — cpu_pct +1"), "{}", o.summary);
        let o = overall("envoy-poll", "control", ComparisonKind::BaselineBuild, &named[1..], &settings);
        assert_eq!(o.verdict, Verdict::Same);
        assert_eq!(
            o.summary,
            "envoy-poll vs control: same — every gating metric shown the same within the practical threshold (memory_mb)"
        );
    }
}
