//! The alert's JSON: what a webhook receives as its body and a command on its stdin.
//! These are plain values (ids, figures, paths) so that the schema is all here; the
//! review (`schedule/review.rs`) fills them from its findings. Adding a field is
//! compatible; renaming or removing one bumps [`ALERT_SCHEMA_VERSION`].

use serde::{Deserialize, Serialize};

use crate::stats::{ChangeScale, Verdict};

/// The version of this schema, sent as `schema_version`.
/// 2: a verdict `~` became `same` or `inconclusive`.
pub const ALERT_SCHEMA_VERSION: u32 = 2;

/// One alert: the regressions one scheduled slot confirmed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    /// [`ALERT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `<schedule>/<slot_due_utc>`: the same for every resend of this slot's alert (a
    /// runner taking over a slot resends it), so receivers deduplicate on it. Also sent
    /// as the `X-Lab-Alert-Id` header.
    pub alert_id: String,
    /// Always `regression` in version 1 (improvements are recorded, not sent).
    pub kind: String,
    /// The `[[schedule]]` name.
    pub schedule: String,
    /// The slot's due instant, RFC 3339 UTC (`2025-03-02T01:30:00Z`).
    pub slot_due_utc: String,
    /// The runbook's `name`.
    pub runbook: String,
    /// The slot's campaign id (the screened one).
    pub campaign: String,
    /// The `lab` version that sent it.
    pub lab_version: String,
    /// One entry per regressed model × variant × gating metric.
    pub regressions: Vec<Regression>,
    /// Where the reports are, on the lab machine.
    pub reports: Reports,
}

impl Alert {
    /// The alert id of a slot: `<schedule>/<due_utc>`.
    pub fn id(schedule: &str, slot_due_utc: &str) -> String {
        format!("{schedule}/{slot_due_utc}")
    }

    /// The JSON body, as sent (compact).
    pub fn body(&self) -> Vec<u8> {
        // Only strings, numbers and Options: serialization cannot fail (NaN becomes null).
        serde_json::to_vec(self).expect("an alert serializes")
    }
}

/// One regressed metric. Δ, its interval and p at this level are the decisive run's:
/// the confirmation's when there is one, else (confirmation off) the screening's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Regression {
    pub variant: String,
    /// Device model.
    pub model: String,
    /// Gating metric name (`cpu_pct`, `battery_drain_pct_per_h`, ...).
    pub metric: String,
    /// Its unit (`%`, `mAh`, ...).
    pub unit: String,
    /// `confirmed` (a confirmation run agreed) or `unconfirmed` (`[schedule.confirm]
    /// enabled = false`: the screening alone).
    pub state: String,
    /// The decisive figures (Δ, its interval, p), flattened into this object.
    #[serde(flatten)]
    pub figures: Figures,
    /// The screened campaign's figures.
    pub current: CurrentRef,
    /// What it was screened against.
    pub baseline: BaselineRef,
    /// The new change point that triggered the screening; `null` when the verdict
    /// against the baseline did alone.
    pub change_point: Option<ChangePointRef>,
    /// The A/B confirmation run; `null` when confirmation is off.
    pub confirmation: Option<Confirmation>,
    /// The screening's own figures (the first look, before any confirmation).
    pub screening: Screening,
    /// The confirmation's other gating metrics of this model and variant that came out
    /// worse too; empty without a confirmation.
    pub also_worse: Vec<AlsoWorse>,
}

/// The current campaign's side of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurrentRef {
    /// Mean of the metric over its valid trials.
    pub mean: f64,
    /// Valid trials.
    pub n: usize,
}

/// The baseline a campaign was screened against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineRef {
    /// `last-change-point`, `previous` or `campaign` (pinned; the campaign is in `campaigns`).
    pub policy: String,
    /// The campaigns pooled, oldest first.
    pub campaigns: Vec<String>,
    /// Mean over their valid trials.
    pub mean: f64,
    /// Valid trials pooled.
    pub n: usize,
}

/// A change point in the series of campaign means (E-divisive, as `lab changes`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangePointRef {
    /// The first campaign after the change.
    pub campaign: String,
    /// Its index in the series (0 = the schedule's oldest campaign).
    pub index: usize,
    /// The t-test's p between the segments before and after.
    pub p: f64,
    pub mean_before: f64,
    pub mean_after: f64,
}

/// The confirmation campaign: both builds interleaved on the same devices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Confirmation {
    /// Its campaign id (`<runbook>-confirm-...`).
    pub campaign: String,
    /// Trials per build it ran (planned: sample-size advice, clamped).
    pub trials_per_arm: u32,
    /// Current build against the reference build, flattened into this object.
    #[serde(flatten)]
    pub figures: Figures,
    /// Its verdict under the runbook's rule (`worse` for a confirmed regression).
    pub verdict: Verdict,
}

/// The screening comparison: the current campaign against the pooled baseline (or,
/// for a change point alone, against the reference campaign).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Screening {
    /// Flattened into this object.
    #[serde(flatten)]
    pub figures: Figures,
    /// Its verdict (`worse`; `~` when only a change point triggered).
    pub verdict: Verdict,
}

/// Another gating metric the confirmation found worse.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlsoWorse {
    pub metric: String,
    pub unit: String,
    /// Flattened into this object.
    #[serde(flatten)]
    pub figures: Figures,
}

/// One comparison's figures, flattened into each object that has them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Relative change, current / baseline − 1 (0.101 = +10.1 %).
    pub delta: f64,
    /// Its confidence interval `[low, high]`; `null` when an arm had fewer than two values.
    pub delta_ci: Option<[f64; 2]>,
    /// How the interval was computed: `log_ratio` (both means > 0) or `difference`.
    pub delta_scale: Option<ChangeScale>,
    /// Welch p before adjustment; `null` without a test.
    pub p: Option<f64>,
    /// p after Holm over `family_size` tests (the variant's gating metrics).
    pub p_adjusted: Option<f64>,
    pub family_size: usize,
}

/// Report files, as absolute paths on the lab machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reports {
    /// `artifacts/<campaign>/report.html`.
    pub campaign: String,
    /// `artifacts/<confirmation>/report.html`, one per confirmation campaign.
    pub confirmations: Vec<String>,
    /// `artifacts/_history/<runbook>.html`.
    pub history: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a receiver gets for a regression confirmed on one model, with a second
    /// metric worse too.
    fn representative() -> Alert {
        let artifacts = "/srv/lab/artifacts";
        let confirmed = Figures {
            delta: 0.094,
            delta_ci: Some([0.071, 0.118]),
            delta_scale: Some(ChangeScale::LogRatio),
            p: Some(0.00012),
            p_adjusted: Some(0.00036),
            family_size: 3,
        };
        Alert {
            schema_version: ALERT_SCHEMA_VERSION,
            alert_id: Alert::id("weekly-envoy", "2025-03-09T01:30:00Z"),
            kind: "regression".into(),
            schedule: "weekly-envoy".into(),
            slot_due_utc: "2025-03-09T01:30:00Z".into(),
            runbook: "weekly".into(),
            campaign: "20250309-013000-weekly".into(),
            lab_version: "0.1.0".into(),
            regressions: vec![Regression {
                variant: "envoy-poll".into(),
                model: "pixel-8".into(),
                metric: "cpu_pct".into(),
                unit: "%".into(),
                state: "confirmed".into(),
                figures: confirmed.clone(),
                current: CurrentRef { mean: 12.7, n: 8 },
                baseline: BaselineRef {
                    policy: "last-change-point".into(),
                    campaigns: vec!["20250223-013000-weekly".into(), "20250302-013000-weekly".into()],
                    mean: 11.5,
                    n: 16,
                },
                change_point: Some(ChangePointRef {
                    campaign: "20250309-013000-weekly".into(),
                    index: 7,
                    p: 0.004,
                    mean_before: 11.5,
                    mean_after: 12.7,
                }),
                confirmation: Some(Confirmation {
                    campaign: "weekly-confirm-20250309-031500".into(),
                    trials_per_arm: 14,
                    figures: confirmed,
                    verdict: Verdict::Worse,
                }),
                screening: Screening {
                    figures: Figures {
                        delta: 0.101,
                        delta_ci: Some([0.094, 0.108]),
                        delta_scale: Some(ChangeScale::LogRatio),
                        p: Some(0.0002),
                        p_adjusted: Some(0.0006),
                        family_size: 3,
                    },
                    verdict: Verdict::Worse,
                },
                also_worse: vec![AlsoWorse {
                    metric: "wakeups_per_min".into(),
                    unit: "1/min".into(),
                    figures: Figures {
                        delta: 0.062,
                        delta_ci: Some([0.031, 0.094]),
                        delta_scale: Some(ChangeScale::LogRatio),
                        p: Some(0.0013),
                        p_adjusted: Some(0.004),
                        family_size: 3,
                    },
                }],
            }],
            reports: Reports {
                campaign: format!("{artifacts}/20250309-013000-weekly/report.html"),
                confirmations: vec![format!("{artifacts}/weekly-confirm-20250309-031500/report.html")],
                history: format!("{artifacts}/_history/weekly.html"),
            },
        }
    }

    #[test]
    fn an_alert_survives_its_json_and_receivers_see_this() {
        let alert = representative();
        let back: Alert = serde_json::from_slice(&alert.body()).unwrap();
        assert_eq!(back, alert);
        insta::assert_snapshot!(serde_json::to_string_pretty(&alert).unwrap());
    }

    #[test]
    fn an_unconfirmed_regression_sends_nulls_not_missing_keys() {
        let mut alert = representative();
        let r = &mut alert.regressions[0];
        r.state = "unconfirmed".into();
        r.confirmation = None;
        r.change_point = None;
        r.also_worse.clear();
        let json: serde_json::Value = serde_json::from_slice(&alert.body()).unwrap();
        let r = &json["regressions"][0];
        assert!(r["confirmation"].is_null() && r.get("confirmation").is_some());
        assert!(r["change_point"].is_null() && r.get("change_point").is_some());
        assert_eq!(serde_json::from_value::<Alert>(json).unwrap(), alert);
    }
}
