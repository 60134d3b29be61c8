//! A runbook's history: one series per variant × model × metric, one point per campaign
//! (its stored summary), with the series' change points and what the schedule's reviews
//! made of them (findings, confirmations, alerts). Pure: the store rows go in, `History`
//! comes out (`history_load` reads the store).

use serde::Serialize;

use crate::stats::{ChangePoint, ChangePointOptions, change_points};
use crate::store::{AlertRow, AlertState, CampaignStatus, FindingRow, FindingState, HistoryRow};

/// Bumped when a field of the JSON output changes meaning or goes away.
pub const HISTORY_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct History {
    pub schema_version: u32,
    pub runbook: String,
    /// The options the change points were found with.
    pub options: ChangePointOptions,
    pub series: Vec<HistorySeries>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistorySeries {
    pub model: String,
    pub variant: String,
    pub metric: String,
    pub unit: String,
    pub gating: bool,
    /// In time order: the slot's due time, else when the campaign was created.
    pub points: Vec<HistoryPoint>,
    pub change_points: Vec<HistoryChange>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryPoint {
    pub campaign: String,
    /// `due_utc` for a scheduled campaign, else `created_at`: what the order is by.
    pub at: String,
    pub schedule: Option<String>,
    pub due_utc: Option<String>,
    pub status: CampaignStatus,
    pub n: usize,
    pub mean: Option<f64>,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    pub confidence: f64,
    pub build: String,
    pub build_sha256: Option<String>,
    pub runbook_sha256: String,
    pub marks: Vec<Mark>,
}

/// A change point of a series; `index` is into `points` (the first point of the new level).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryChange {
    pub index: usize,
    pub campaign: String,
    #[serde(flatten)]
    pub point: ChangePoint,
    /// The state of the review's finding at this campaign, if a review made one.
    pub state: Option<FindingState>,
}

/// What a schedule's review recorded at a point.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Mark {
    /// The review of this slot flagged the series.
    Finding { state: FindingState, direction: String },
    /// The finding's confirmation campaign and how it came out.
    Confirmation { campaign: String, state: FindingState },
    /// The slot's alert on one channel.
    Alert { channel: String, state: AlertState },
}

/// Which series to keep; empty / `None` keeps all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistoryFilter {
    pub metrics: Vec<String>,
    pub model: Option<String>,
    pub variant: Option<String>,
}

impl HistoryFilter {
    fn keeps(&self, model: &str, variant: &str, metric: &str) -> bool {
        (self.metrics.is_empty() || self.metrics.iter().any(|m| m == metric))
            && self.model.as_deref().is_none_or(|m| m == model)
            && self.variant.as_deref().is_none_or(|v| v == variant)
    }
}

/// Groups `rows` (in time order, as `Store::history_rows` returns them) into series, finds
/// each series' change points and attaches the findings and alerts of the runbook's
/// schedules. Series are in plan order: by variant, then model, gating metrics first.
pub fn build_history(
    runbook: &str,
    rows: &[HistoryRow],
    findings: &[FindingRow],
    alerts: &[AlertRow],
    options: &ChangePointOptions,
    filter: &HistoryFilter,
) -> History {
    let mut warnings = Vec::new();
    let mut series: Vec<HistorySeries> = Vec::new();
    // First appearance fixes the order of variants, models and metrics.
    let (mut variants, mut models, mut metrics) = (Vec::new(), Vec::new(), Vec::new());
    for h in rows {
        let r = &h.row;
        for (list, name) in [(&mut variants, &r.variant), (&mut models, &r.model), (&mut metrics, &r.metric)] {
            if !list.contains(name) {
                list.push(name.clone());
            }
        }
        if !filter.keeps(&r.model, &r.variant, &r.metric) {
            continue;
        }
        let point = HistoryPoint {
            campaign: r.campaign.clone(),
            at: h.due_utc.clone().unwrap_or_else(|| h.created_at.clone()),
            schedule: h.schedule.clone(),
            due_utc: h.due_utc.clone(),
            status: h.status,
            n: r.n,
            mean: r.mean,
            ci_low: r.ci_low,
            ci_high: r.ci_high,
            confidence: r.confidence,
            build: r.build.clone(),
            build_sha256: r.build_sha256.clone(),
            runbook_sha256: h.runbook_sha256.clone(),
            marks: Vec::new(),
        };
        match series.iter_mut().find(|s| s.model == r.model && s.variant == r.variant && s.metric == r.metric) {
            Some(s) => s.points.push(point),
            None => series.push(HistorySeries {
                model: r.model.clone(),
                variant: r.variant.clone(),
                metric: r.metric.clone(),
                unit: r.unit.clone(),
                gating: r.gating,
                points: vec![point],
                change_points: Vec::new(),
            }),
        }
    }
    let at = |list: &[String], name: &str| list.iter().position(|n| n == name).unwrap_or(usize::MAX);
    series.sort_by_key(|s| (at(&variants, &s.variant), at(&models, &s.model), !s.gating, at(&metrics, &s.metric)));
    for s in &mut series {
        let own: Vec<&FindingRow> =
            findings.iter().filter(|f| f.model == s.model && f.variant == s.variant && f.metric == s.metric).collect();
        match series_changes(s, options, &own) {
            Ok(changes) => s.change_points = changes,
            Err(e) => warnings.push(format!("{} × {} × {}: no change points: {e}", s.variant, s.model, s.metric)),
        }
        attach_marks(s, &own, alerts);
    }
    if rows.is_empty() {
        warnings.push(format!("runbook `{runbook}` has no campaign with a stored summary yet"));
    } else if series.is_empty() {
        warnings.push("no series matches the filter".into());
    }
    History { schema_version: HISTORY_SCHEMA_VERSION, runbook: runbook.into(), options: *options, series, warnings }
}

/// The change points of the series' means; points without a mean (n = 0) are left out of
/// the series, and the indices map back to `points`.
fn series_changes(
    s: &HistorySeries,
    options: &ChangePointOptions,
    findings: &[&FindingRow],
) -> Result<Vec<HistoryChange>, crate::stats::ChangePointError> {
    let (at, means): (Vec<usize>, Vec<f64>) =
        s.points.iter().enumerate().filter_map(|(i, p)| p.mean.filter(|m| m.is_finite()).map(|m| (i, m))).unzip();
    Ok(change_points(&means, options)?
        .into_iter()
        .map(|c| {
            let index = at[c.index];
            let campaign = s.points[index].campaign.clone();
            // The newest review that named this campaign as its change point.
            let state =
                findings.iter().rev().find(|f| f.change_point.as_deref() == Some(campaign.as_str())).map(|f| f.state);
            HistoryChange { index, campaign, point: ChangePoint { index, ..c }, state }
        })
        .collect())
}

/// A finding and its confirmation go on its slot's campaign, and so do the slot's alerts.
fn attach_marks(s: &mut HistorySeries, findings: &[&FindingRow], alerts: &[AlertRow]) {
    for f in findings {
        let Some(p) = s.points.iter_mut().find(|p| p.campaign == f.campaign) else { continue };
        p.marks.push(Mark::Finding { state: f.state, direction: f.direction.clone() });
        if let Some(c) = &f.confirm_campaign {
            p.marks.push(Mark::Confirmation { campaign: c.clone(), state: f.state });
        }
        for a in alerts.iter().filter(|a| a.schedule == f.schedule && a.due_utc == f.due_utc) {
            let mark = Mark::Alert { channel: a.channel.clone(), state: a.state };
            if !p.marks.contains(&mark) {
                p.marks.push(mark);
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::store::summary_row_fixture as row;

    pub(crate) fn hrow(campaign: &str, variant: &str, metric: &str, values: &[f64], week: usize) -> HistoryRow {
        HistoryRow {
            row: row(campaign, variant, metric, values),
            created_at: "2026-03-01T00:00:00Z".into(),
            status: CampaignStatus::Done,
            runbook_sha256: "ab".into(),
            seed: 1,
            schedule: Some("weekly".into()),
            due_utc: Some(format!("2026-01-{:02}T03:00:00Z", 1 + week)),
        }
    }

    pub(crate) fn finding(campaign: &str, week: usize, change_point: &str, state: FindingState) -> FindingRow {
        FindingRow {
            id: 1,
            schedule: "weekly".into(),
            due_utc: format!("2026-01-{:02}T03:00:00Z", 1 + week),
            campaign: campaign.into(),
            model: "iPhone 6s".into(),
            variant: "envoy-poll".into(),
            metric: "cpu_pct".into(),
            direction: "worse".into(),
            by_verdict: true,
            change_point: Some(change_point.into()),
            baseline: serde_json::json!({}),
            screen: serde_json::json!({}),
            state,
            confirm_campaign: Some("confirm-1".into()),
            confirm: None,
            decided_at: None,
            note: None,
        }
    }

    /// 12 weeks; envoy-poll's cpu steps from 185 to 203.5 in week 8 (index 7).
    pub(crate) fn step_rows() -> Vec<HistoryRow> {
        let mut rows = Vec::new();
        for w in 0..12 {
            let id = format!("c{w:02}");
            let wobble = [0.3, -0.2, 0.1, -0.4, 0.2, 0.0][w % 6];
            let level = if w >= 7 { 203.5 } else { 185.0 };
            rows.push(hrow(&id, "control", "memory_mb", &[6.0, 6.1], w));
            rows.push(hrow(&id, "control", "cpu_pct", &[12.0 + wobble, 12.1], w));
            rows.push(hrow(&id, "envoy-poll", "cpu_pct", &[level + wobble, level - wobble + 0.1], w));
        }
        rows
    }

    fn alert(week: usize) -> AlertRow {
        AlertRow {
            schedule: "weekly".into(),
            due_utc: format!("2026-01-{:02}T03:00:00Z", 1 + week),
            channel: "webhook".into(),
            target: "http://x".into(),
            payload: "{}".into(),
            state: AlertState::Sent,
            tries: 1,
            response: None,
            error: None,
            at: "t".into(),
        }
    }

    #[test]
    fn series_are_grouped_in_plan_order_with_gating_first() {
        let h = build_history("rb", &step_rows(), &[], &[], &ChangePointOptions::default(), &HistoryFilter::default());
        let keys: Vec<(&str, &str)> = h.series.iter().map(|s| (s.variant.as_str(), s.metric.as_str())).collect();
        assert_eq!(keys, [("control", "cpu_pct"), ("control", "memory_mb"), ("envoy-poll", "cpu_pct")]);
        assert!(h.series.iter().all(|s| s.points.len() == 12));
        assert_eq!(h.schema_version, HISTORY_SCHEMA_VERSION);
        assert!(h.warnings.is_empty(), "{:?}", h.warnings);
    }

    #[test]
    fn points_follow_the_rows_time_order() {
        // Rows come ordered by due time; the campaign ids run the other way round.
        let rows: Vec<HistoryRow> =
            (0..4).map(|w| hrow(&format!("z{}", 9 - w), "control", "cpu_pct", &[1.0], w)).collect();
        let h = build_history("rb", &rows, &[], &[], &ChangePointOptions::default(), &HistoryFilter::default());
        let ats: Vec<&str> = h.series[0].points.iter().map(|p| p.at.as_str()).collect();
        assert_eq!(
            ats,
            ["2026-01-01T03:00:00Z", "2026-01-02T03:00:00Z", "2026-01-03T03:00:00Z", "2026-01-04T03:00:00Z"]
        );
        assert_eq!(h.series[0].points[0].campaign, "z9");
    }

    #[test]
    fn the_step_is_found_at_its_first_new_point_with_the_review_marks() {
        let findings = [finding("c07", 7, "c07", FindingState::Confirmed)];
        let filter = HistoryFilter { variant: Some("envoy-poll".into()), ..Default::default() };
        let h = build_history("rb", &step_rows(), &findings, &[alert(7)], &ChangePointOptions::default(), &filter);
        assert_eq!(h.series.len(), 1);
        let s = &h.series[0];
        assert_eq!(s.change_points.len(), 1, "{:?}", s.change_points);
        let c = &s.change_points[0];
        assert_eq!((c.index, c.campaign.as_str(), c.state), (7, "c07", Some(FindingState::Confirmed)));
        assert!(c.point.relative_change().unwrap() > 0.09);
        assert_eq!(
            s.points[7].marks,
            [
                Mark::Finding { state: FindingState::Confirmed, direction: "worse".into() },
                Mark::Confirmation { campaign: "confirm-1".into(), state: FindingState::Confirmed },
                Mark::Alert { channel: "webhook".into(), state: AlertState::Sent },
            ]
        );
        assert!(s.points.iter().enumerate().all(|(i, p)| i == 7 || p.marks.is_empty()));
    }

    #[test]
    fn filters_and_empty_histories_warn() {
        let filter = HistoryFilter { metrics: vec!["memory_mb".into()], ..Default::default() };
        let h = build_history("rb", &step_rows(), &[], &[], &ChangePointOptions::default(), &filter);
        assert_eq!(h.series.len(), 1);
        assert!(h.series[0].change_points.is_empty());
        let filter = HistoryFilter { model: Some("Pixel 7".into()), ..Default::default() };
        let h = build_history("rb", &step_rows(), &[], &[], &ChangePointOptions::default(), &filter);
        assert_eq!(h.warnings, ["no series matches the filter"]);
        let h = build_history("rb", &[], &[], &[], &ChangePointOptions::default(), &HistoryFilter::default());
        assert_eq!(h.warnings, ["runbook `rb` has no campaign with a stored summary yet"]);
    }

    #[test]
    fn a_point_without_values_is_kept_but_left_out_of_the_change_points() {
        let mut rows: Vec<HistoryRow> = step_rows().into_iter().filter(|r| r.row.variant == "envoy-poll").collect();
        rows.insert(3, hrow("empty", "envoy-poll", "cpu_pct", &[], 3));
        let h = build_history("rb", &rows, &[], &[], &ChangePointOptions::default(), &HistoryFilter::default());
        let s = &h.series[0];
        assert_eq!((s.points.len(), s.points[3].mean), (13, None));
        assert_eq!(s.change_points.iter().map(|c| c.index).collect::<Vec<_>>(), [8], "index into points");
    }
}
