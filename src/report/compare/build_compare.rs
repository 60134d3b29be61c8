//! `lab compare A B`: two campaigns of one runbook (last week and this week), every
//! variant × device model × metric of B against the same in A.

use serde::Serialize;

use crate::config::StatsSettings;
use crate::plan::Plan;
use crate::report::model::pooled::pooled_models;
use crate::report::model::report::{
    ComparisonKind, MetricComparison, ModelReport, Report, StatisticsMeta, VariantVerdict,
};
use crate::report::model::verdicts::{judge, overall};
use crate::stats::{Arm, MetricPair, Summary, Verdict};
use crate::store::{CampaignRecord, SummaryRow};

/// Version of the `lab compare --format json` layout.
/// 2: the verdict `~` became `same` or `inconclusive`.
pub const COMPARE_SCHEMA_VERSION: u32 = 2;

/// One campaign, as `lab compare` names it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CampaignRef {
    pub id: String,
    pub runbook: String,
    pub runbook_sha256: String,
    pub seed: u64,
    pub created_at: String,
    pub tool_version: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CompareReport {
    pub schema_version: u32,
    /// Campaign A, the reference.
    pub before: CampaignRef,
    /// Campaign B, compared with A.
    pub after: CampaignRef,
    /// The runbook text differs between the two (same name).
    pub runbook_changed: bool,
    /// Settings used (campaign B's runbook).
    pub statistics: StatisticsMeta,
    pub models: Vec<CompareModel>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CompareModel {
    pub model: String,
    pub rows: Vec<CompareRow>,
    /// Per variant, against the same variant in A.
    pub verdicts: Vec<VariantVerdict>,
}

/// One variant × metric in both campaigns.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CompareRow {
    pub variant: String,
    pub metric: String,
    pub unit: String,
    pub gating: bool,
    pub before: Option<Summary>,
    pub after: Option<Summary>,
    /// `None` when either campaign has no value.
    pub comparison: Option<MetricComparison>,
}

impl CompareReport {
    /// Whether any variant is worse than in A on a gating metric (`lab compare` exits 5).
    pub fn regression(&self) -> bool {
        self.models.iter().flat_map(|m| &m.verdicts).any(|v| v.verdict == Verdict::Worse)
    }
}

/// Compares campaign `after` with campaign `before`, metric by metric, with `settings`
/// (Holm within each variant's gating family, as in a campaign report).
pub fn compare_reports(before: &Report, after: &Report, settings: &StatsSettings) -> CompareReport {
    let (models, warnings) =
        compare_models(&before.models, &after.models, &before.campaign.id, &after.campaign.id, settings);
    let campaign_ref = |r: &Report| CampaignRef {
        id: r.campaign.id.clone(),
        runbook: r.campaign.runbook.clone(),
        runbook_sha256: r.campaign.runbook_sha256.clone(),
        seed: r.campaign.seed,
        created_at: r.campaign.created_at.clone(),
        tool_version: r.campaign.tool_version.clone(),
    };
    CompareReport {
        schema_version: COMPARE_SCHEMA_VERSION,
        before: campaign_ref(before),
        after: campaign_ref(after),
        runbook_changed: before.campaign.runbook_sha256 != after.campaign.runbook_sha256,
        statistics: after.statistics.clone(),
        models,
        warnings,
    }
}

/// [`compare_reports`] from the two campaigns' stored summaries (`lab compare` reads no
/// measurement): each side's rows pooled within its campaign give the values and
/// statistics its report has, so the comparison is the same. `plan` is `after`'s.
pub fn compare_summaries(
    before: (&CampaignRecord, &[SummaryRow]),
    after: (&CampaignRecord, &Plan, &[SummaryRow]),
) -> CompareReport {
    let (a, a_rows) = before;
    let (b, plan, b_rows) = after;
    let settings = &plan.statistics;
    let models = |rows: &[SummaryRow]| {
        let rows: Vec<&SummaryRow> = rows.iter().collect();
        let confidence = rows.first().map_or(settings.confidence, |r| r.confidence);
        pooled_models(&rows, confidence)
    };
    let (models, warnings) = compare_models(&models(a_rows), &models(b_rows), &a.id, &b.id, settings);
    CompareReport {
        schema_version: COMPARE_SCHEMA_VERSION,
        before: campaign_ref(a),
        after: campaign_ref(b),
        runbook_changed: a.runbook_sha256 != b.runbook_sha256,
        statistics: StatisticsMeta::of(settings),
        models,
        warnings,
    }
}

fn campaign_ref(c: &CampaignRecord) -> CampaignRef {
    CampaignRef {
        id: c.id.clone(),
        runbook: c.runbook_name.clone(),
        runbook_sha256: c.runbook_sha256.clone(),
        seed: c.seed,
        created_at: c.created_at.clone(),
        tool_version: c.tool_version.clone(),
    }
}

/// Compares the models of `after` with those of `before`, variant × metric, with
/// `settings` (Holm within each variant's gating family). `against` names `before` in
/// comparisons, verdicts and warnings (a campaign id, or "baseline" for pooled weeks);
/// `current` names `after` in warnings. Returns the models of `after` found in `before`,
/// and warnings for what only one side has.
pub fn compare_models(
    before: &[ModelReport],
    after: &[ModelReport],
    against: &str,
    current: &str,
    settings: &StatsSettings,
) -> (Vec<CompareModel>, Vec<String>) {
    let mut warnings = Vec::new();
    let mut models = Vec::new();
    for m in after {
        let Some(old) = before.iter().find(|o| o.model == m.model) else {
            warnings.push(format!("device model {} is only in campaign {current}", m.model));
            continue;
        };
        let mut variants: Vec<&str> = m.rows.iter().map(|r| r.variant.as_str()).collect();
        variants.dedup();
        let mut rows = Vec::new();
        let mut verdicts = Vec::new();
        for variant in variants {
            let pairs_idx: Vec<(usize, Option<usize>)> = m
                .rows
                .iter()
                .enumerate()
                .filter(|(_, r)| r.variant == variant)
                .map(|(i, r)| (i, old.rows.iter().position(|o| o.variant == r.variant && o.metric == r.metric)))
                .collect();
            if pairs_idx.iter().all(|(_, j)| j.is_none()) {
                warnings.push(format!("{} / {variant} is only in campaign {current}", m.model));
            }
            let comparable: Vec<(usize, usize)> = pairs_idx
                .iter()
                .filter_map(|&(i, j)| {
                    let j = j?;
                    (m.rows[i].stats.is_some() && old.rows[j].stats.is_some()).then_some((i, j))
                })
                .collect();
            let pairs: Vec<MetricPair> = comparable
                .iter()
                .filter_map(|&(i, j)| {
                    Some(MetricPair {
                        metric: &m.rows[i].metric,
                        treatment: Arm { values: &m.rows[i].values, stats: m.rows[i].stats.as_ref()? },
                        reference: Arm { values: &old.rows[j].values, stats: old.rows[j].stats.as_ref()? },
                    })
                })
                .collect();
            let judged = judge(&pairs, against, ComparisonKind::EarlierCampaign, settings, None);
            if !pairs.is_empty() {
                let named: Vec<(&str, &MetricComparison)> = pairs.iter().map(|p| p.metric).zip(&judged).collect();
                let mut v = overall(variant, against, ComparisonKind::EarlierCampaign, &named, settings);
                v.summary = v.summary.replacen(&format!(" vs {against}"), "", 1);
                verdicts.push(v);
            }
            let mut by_row: std::collections::HashMap<usize, MetricComparison> =
                comparable.iter().map(|&(i, _)| i).zip(judged).collect();
            for (i, j) in pairs_idx {
                let r = &m.rows[i];
                rows.push(CompareRow {
                    variant: r.variant.clone(),
                    metric: r.metric.clone(),
                    unit: r.unit.clone(),
                    gating: r.gating,
                    before: j.and_then(|j| old.rows[j].stats.clone()),
                    after: r.stats.clone(),
                    comparison: by_row.remove(&i),
                });
            }
        }
        models.push(CompareModel { model: m.model.clone(), rows, verdicts });
    }
    for o in before.iter().filter(|o| !after.iter().any(|m| m.model == o.model)) {
        warnings.push(format!("device model {} is only in campaign {against}", o.model));
    }
    (models, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::build_report;
    use crate::testing::fixture;

    /// Campaign B: the fixture with envoy-poll's CPU up by `factor`, and a fourth valid
    /// trial per variant so that comparisons can reach significance.
    fn week(id: &str, factor: f64) -> Report {
        build_report(&week_data(id, factor))
    }

    fn week_data(id: &str, factor: f64) -> crate::report::CampaignData {
        let mut data = fixture::records(id);
        for a in &mut data.attempts {
            let variant = &data.trials[a.trial_idx as usize].row.variant;
            for m in &mut a.measurements {
                if m.metric == "cpu_pct" && variant == "envoy-poll" {
                    m.value *= factor;
                }
            }
        }
        // Trial 7 (envoy-poll) gets a valid attempt, trial 4 (control) a valid retry.
        data.attempts.push(fixture::attempt(id, 7, 0, &[], &[("cpu_pct", 186.0 * factor, "%")]));
        data.attempts.push(fixture::attempt(id, 4, 2, &[], &[("cpu_pct", 12.2, "%")]));
        data.data()
    }

    #[test]
    fn same_data_is_unchanged_and_a_cpu_jump_is_worse() {
        let settings = StatsSettings::default();
        let a = week("week-1", 1.0);
        let same = compare_reports(&a, &week("week-2", 1.0), &settings);
        assert!(!same.regression());
        assert!(same.models[0].verdicts.iter().all(|v| v.verdict == Verdict::Same), "{:?}", same.models[0].verdicts);
        let worse = compare_reports(&a, &week("week-2", 1.3), &settings);
        assert!(worse.regression());
        let poll = worse.models[0].verdicts.iter().find(|v| v.variant == "envoy-poll").unwrap();
        assert_eq!((poll.verdict, poll.worse.as_slice()), (Verdict::Worse, ["cpu_pct".to_string()].as_slice()));
        assert!(poll.summary.starts_with("envoy-poll: worse — cpu_pct +30% ["), "{}", poll.summary);
        let row = worse.models[0].rows.iter().find(|r| r.variant == "envoy-poll" && r.metric == "cpu_pct").unwrap();
        let c = row.comparison.as_ref().unwrap();
        assert_eq!((c.kind, c.against.as_str()), (ComparisonKind::EarlierCampaign, "week-1"));
        assert_eq!(row.before.as_ref().unwrap().n, 4);
        assert!(!worse.runbook_changed);
        insta::assert_snapshot!("compare_table", crate::report::render_compare_table(&worse));
        insta::assert_snapshot!("compare_markdown", crate::report::render_compare_markdown(&worse));
        let json: serde_json::Value = serde_json::from_str(&crate::report::render_compare_json(&worse)).unwrap();
        assert_eq!(json["schema_version"], 2);
        assert_eq!(json["models"][0]["verdicts"][1]["verdict"], "worse");
    }

    #[test]
    fn a_comparison_from_stored_summaries_is_the_comparison_of_the_reports() {
        let settings = StatsSettings::default();
        for factor in [1.0, 1.3] {
            let (a, b) = (week_data("week-1", 1.0), week_data("week-2", factor));
            let (ra, rb) = (build_report(&a), build_report(&b));
            let (sa, sb) = (crate::report::summary_rows(&ra, &a), crate::report::summary_rows(&rb, &b));
            let from_summaries = compare_summaries((&a.campaign, &sa), (&b.campaign, &b.plan, &sb));
            assert_eq!(from_summaries, compare_reports(&ra, &rb, &settings), "factor {factor}");
        }
    }

    #[test]
    fn pooled_weeks_are_one_baseline_arm() {
        let settings = StatsSettings::default();
        let weeks = [week("week-1", 1.0), week("week-2", 1.0)];
        let stored: Vec<_> =
            weeks.iter().flat_map(|w| crate::report::summary_rows(w, &fixture::campaign(&w.campaign.id))).collect();
        let baseline = crate::report::pooled_models(&stored.iter().collect::<Vec<_>>(), 0.95);
        let now = week("week-3", 1.3);
        let (models, warnings) = compare_models(&baseline, &now.models, "baseline", "week-3", &settings);
        assert!(warnings.is_empty(), "{warnings:?}");
        let poll = models[0].verdicts.iter().find(|v| v.variant == "envoy-poll").unwrap();
        assert_eq!((poll.verdict, poll.against.as_str()), (Verdict::Worse, "baseline"));
        assert!(!poll.summary.contains("vs baseline"), "{}", poll.summary);
        let row = models[0].rows.iter().find(|r| r.variant == "envoy-poll" && r.metric == "cpu_pct").unwrap();
        assert_eq!((row.before.as_ref().unwrap().n, row.after.as_ref().unwrap().n), (8, 4), "two weeks in one arm");
        assert_eq!(row.comparison.as_ref().unwrap().against, "baseline");

        let (_, warnings) = compare_models(&[], &now.models, "baseline", "week-3", &settings);
        assert_eq!(warnings, ["device model iPhone 6s is only in campaign week-3"]);
    }
}
