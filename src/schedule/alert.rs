//! The alert a slot's review sends: its confirmed regressions as `notify::Alert`, with
//! the figures taken from the stored findings (what was decided, not recomputed).

use super::ScheduleError;
use super::review::{Review, history_path, policy_text};
use crate::notify::{self, Alert};
use crate::stats::Verdict;
use crate::store::{FindingRow, SummaryRow};

pub(super) fn alert_of(review: &Review<'_>, alerting: &[&FindingRow]) -> Result<Alert, ScheduleError> {
    let record = review.store.campaign(review.campaign)?;
    let artifacts = &review.lab.artifacts_dir;
    let report_of = |id: &str| artifacts.join(id).join("report.html").display().to_string();
    let current = review.store.summaries(review.campaign)?;
    let mut regressions = Vec::new();
    let mut confirmations = Vec::new();
    for f in alerting {
        // The finding's series: the same model, variant and metric.
        let same = |r: &SummaryRow| (&r.model, &r.variant, &r.metric) == (&f.model, &f.variant, &f.metric);
        let row = current.iter().find(|r| same(r));
        // The comparisons as stored (JSON): what was decided, whatever this version computes.
        let screen = Some(&f.screen["comparison"]).filter(|c| c.is_object());
        let confirm = f.confirm.as_ref().map(|c| &c["comparison"]).filter(|c| c.is_object());
        let baseline_campaigns: Vec<String> =
            serde_json::from_value(f.baseline["campaigns"].clone()).unwrap_or_default();
        let mut base_mean = 0.0;
        let mut base_n = 0;
        for c in &baseline_campaigns {
            if let Some(r) = review.store.summaries(c)?.into_iter().find(|r| same(r)) {
                base_mean += r.mean.unwrap_or(0.0) * r.n as f64;
                base_n += r.n;
            }
        }
        if base_n > 0 {
            base_mean /= base_n as f64;
        }
        if let Some(c) = &f.confirm_campaign {
            confirmations.push(report_of(c));
        }
        let decisive = confirm.or(screen);
        let point = &f.screen["change_point"];
        regressions.push(notify::Regression {
            variant: f.variant.clone(),
            model: f.model.clone(),
            metric: f.metric.clone(),
            unit: row.map(|r| r.unit.clone()).unwrap_or_default(),
            state: f.state.as_str().into(),
            figures: decisive.map(figures).unwrap_or_else(empty_figures),
            current: notify::CurrentRef {
                mean: row.and_then(|r| r.mean).unwrap_or(f64::NAN),
                n: row.map_or(0, |r| r.n),
            },
            baseline: notify::BaselineRef {
                policy: policy_text(&review.schedule.baseline).into(),
                campaigns: baseline_campaigns,
                mean: base_mean,
                n: base_n,
            },
            change_point: (!point.is_null()).then(|| notify::ChangePointRef {
                campaign: point["campaign"].as_str().unwrap_or_default().into(),
                index: point["index"].as_u64().unwrap_or_default() as usize,
                p: point["pvalue"].as_f64().unwrap_or(f64::NAN),
                mean_before: point["mean_before"].as_f64().unwrap_or(f64::NAN),
                mean_after: point["mean_after"].as_f64().unwrap_or(f64::NAN),
            }),
            confirmation: match (&f.confirm_campaign, confirm) {
                (Some(id), Some(c)) => Some(notify::Confirmation {
                    campaign: id.clone(),
                    trials_per_arm: f.confirm.as_ref().and_then(|j| j["trials_per_arm"].as_u64()).unwrap_or(0) as u32,
                    figures: figures(c),
                    verdict: verdict_of(c),
                }),
                _ => None,
            },
            screening: notify::Screening {
                figures: screen.map(figures).unwrap_or_else(empty_figures),
                verdict: screen.map_or(Verdict::Inconclusive, verdict_of),
            },
            also_worse: f
                .confirm
                .as_ref()
                .and_then(|j| j["also_worse"].as_array().cloned())
                .unwrap_or_default()
                .into_iter()
                .filter_map(|a| {
                    Some(notify::AlsoWorse {
                        metric: a["metric"].as_str()?.into(),
                        unit: a["unit"].as_str()?.into(),
                        figures: figures(&a["comparison"]),
                    })
                })
                .collect(),
        });
    }
    confirmations.dedup();
    Ok(Alert {
        schema_version: notify::ALERT_SCHEMA_VERSION,
        alert_id: Alert::id(&review.schedule.name, review.due_utc),
        kind: "regression".into(),
        schedule: review.schedule.name.clone(),
        slot_due_utc: review.due_utc.to_string(),
        runbook: record.runbook_name.clone(),
        campaign: review.campaign.to_string(),
        lab_version: env!("CARGO_PKG_VERSION").into(),
        regressions,
        reports: notify::Reports {
            campaign: report_of(review.campaign),
            confirmations,
            history: history_path(review.lab, &record.runbook_name).display().to_string(),
        },
    })
}

/// Δ with its CI and p from a stored `MetricComparison` (its JSON).
fn figures(c: &serde_json::Value) -> notify::Figures {
    let ch = &c["change"];
    notify::Figures {
        delta: ch["delta"].as_f64().unwrap_or(f64::NAN),
        delta_ci: ch["ci_low"].as_f64().zip(ch["ci_high"].as_f64()).map(|(lo, hi)| [lo, hi]),
        delta_scale: serde_json::from_value(ch["scale"].clone()).ok(),
        p: c["welch"]["p"].as_f64(),
        p_adjusted: c["p_adjusted"].as_f64(),
        family_size: c["family_size"].as_u64().unwrap_or(0) as usize,
    }
}

fn verdict_of(c: &serde_json::Value) -> Verdict {
    serde_json::from_value(c["verdict"].clone()).unwrap_or(Verdict::Inconclusive)
}

fn empty_figures() -> notify::Figures {
    notify::Figures { delta: f64::NAN, delta_ci: None, delta_scale: None, p: None, p_adjusted: None, family_size: 0 }
}
