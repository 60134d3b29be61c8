//! The report model: everything a renderer shows, computed once.
//!
//! Serialized as `report.json`; the schema is documented in docs/report.md. Adding a
//! field keeps `schema_version`; renaming or removing one bumps it.

use serde::Serialize;

use crate::config::Order;
use crate::report::model::sequential::SequentialStop;
use crate::stats::{Comparison, RelativeChange, Summary, Verdict};
use crate::store::CampaignStatus;

/// Version of the `report.json` layout. 2: the verdict `~` became `same` (equivalence
/// shown) or `inconclusive`, and each comparison has its `equivalence` interval.
pub const SCHEMA_VERSION: u32 = 2;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Report {
    pub schema_version: u32,
    pub campaign: CampaignMeta,
    pub statistics: StatisticsMeta,
    /// Display order of metrics; every model's rows follow it.
    pub metrics: Vec<String>,
    /// In plan order.
    pub variants: Vec<VariantSummary>,
    /// One per device model, in plan order.
    pub models: Vec<ModelReport>,
    /// Every invalid attempt, by trial then attempt.
    pub invalid_attempts: Vec<InvalidAttempt>,
    /// What operators attested (steps of the runbook, a manual tether), grouped by device,
    /// step and answer. Absent when nobody attested anything.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attested: Vec<AttestedRow>,
    /// The devices' state before, during and after the soaks, each value with its source
    /// (read, set, app, attested, powerlog). Absent when no attempt kept any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub state: Vec<StateRow>,
    /// Inconsistencies found while building (mixed units, unknown trials, non-finite values).
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CampaignMeta {
    pub id: String,
    pub runbook: String,
    pub runbook_path: String,
    pub runbook_sha256: String,
    pub lab_sha256: String,
    pub seed: u64,
    pub created_at: String,
    pub finished_at: Option<String>,
    pub status: CampaignStatus,
    pub note: Option<String>,
    pub tool_version: String,
    /// sha256 of every build artifact and pushed file, by name, as stored.
    pub content_hashes: serde_json::Value,
    /// The campaign this one re-ran (`lab rerun`, `lab run --from-manifest`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerun: Option<RerunMeta>,
    /// The lab's own CPU and wakeups during the campaign, when measured.
    pub footprint: Option<serde_json::Value>,
    pub order: Order,
    pub duration_s: f64,
    pub cooldown_s: f64,
    pub repeats: u32,
    pub max_attempts: u32,
    pub planned_trials: usize,
}

/// Read from the campaign's `content_hashes.rerun`, as the runner stores it (missing
/// fields are empty / false); written out whole.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct RerunMeta {
    pub campaign: String,
    /// `build (platform): campaign had sha256 …, now …`, when run with
    /// `--allow-changed-builds`.
    #[serde(default)]
    pub changed_builds: Vec<String>,
    /// The plan differs from the campaign's (another lab file, or one edited since).
    #[serde(default)]
    pub plan_changed: bool,
}

/// What the provenance says of a re-run: `of <campaign>`, the builds that changed, and
/// whether the plan did.
pub fn rerun_text(r: &RerunMeta) -> String {
    let builds = if r.changed_builds.is_empty() {
        format!("of {}, with the same builds", r.campaign)
    } else {
        format!("of {}, with CHANGED builds: {}", r.campaign, r.changed_builds.join("; "))
    };
    if r.plan_changed {
        format!("{builds}; the plan DIFFERS (other devices or order: the lab file is another, or changed)")
    } else {
        builds
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StatisticsMeta {
    /// Level of every confidence interval (0.95 = 95 %).
    pub confidence: f64,
    pub alpha: f64,
    pub practical_threshold: f64,
    /// The gating family: Holm-adjusted together; their verdicts decide a comparison.
    pub gating: Vec<String>,
    /// The test whose (adjusted) p-value the verdicts use: `welch`.
    pub test: String,
    /// How p-values are adjusted within a family: `holm`.
    pub adjustment: String,
    /// Power the sample-size advice aims at (0.8).
    pub advice_power: f64,
}

impl StatisticsMeta {
    /// The settings a report and a comparison state: a runbook's statistics, with the
    /// test, adjustment and power lab uses.
    pub fn of(s: &crate::config::StatsSettings) -> Self {
        StatisticsMeta {
            confidence: s.confidence,
            alpha: s.alpha,
            practical_threshold: s.practical_threshold,
            gating: s.gating.clone(),
            test: "welch".into(),
            adjustment: "holm".into(),
            advice_power: crate::stats::ADVICE_POWER,
        }
    }
}

/// Trial and attempt counts of one variant over all devices.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct VariantSummary {
    pub name: String,
    pub build: String,
    pub config: String,
    pub baseline_build: bool,
    pub default_config: bool,
    pub planned_trials: usize,
    /// Trials with a valid attempt.
    pub valid_trials: usize,
    /// Trials whose every attempt was invalid and that will not be retried.
    pub failed_trials: usize,
    /// Trials not run yet (or still being retried).
    pub pending_trials: usize,
    pub valid_attempts: usize,
    pub invalid_attempts: usize,
}

impl VariantSummary {
    /// A variant with no trial counted yet.
    pub fn new(name: &str, build: &str, config: &str, baseline_build: bool, default_config: bool) -> Self {
        VariantSummary {
            name: name.to_string(),
            build: build.to_string(),
            config: config.to_string(),
            baseline_build,
            default_config,
            planned_trials: 0,
            valid_trials: 0,
            failed_trials: 0,
            pending_trials: 0,
            valid_attempts: 0,
            invalid_attempts: 0,
        }
    }
}

/// Statistics of one device model: rows are variant × metric.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ModelReport {
    pub model: String,
    /// Devices of this model in the plan.
    pub devices: Vec<String>,
    /// Variants in plan order, each with every metric in display order.
    pub rows: Vec<MetricRow>,
    /// Per variant and reference, in variant order.
    pub verdicts: Vec<VariantVerdict>,
}

/// One variant × metric on one device model, from valid attempts only.
///
/// `(model, variant, metric)` identifies the row.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MetricRow {
    pub variant: String,
    pub metric: String,
    /// Unit as measured; several units joined by ", " (a warning says so).
    pub unit: String,
    /// Where the values came from, distinct, sorted.
    pub sources: Vec<String>,
    /// Values the statistics use (finite values of valid attempts).
    pub n: usize,
    /// Values of valid attempts left out because they were NaN or infinite.
    pub non_finite: usize,
    /// `None` when n = 0.
    pub stats: Option<Summary>,
    /// The metric is in the gating family.
    pub gating: bool,
    /// Trial keys of values with a modified z-score above 3.5: flagged, kept in the statistics.
    pub outliers: Vec<String>,
    /// Against the baseline build with the same config, and against the default config
    /// for a config variant (none for the baseline itself).
    pub comparisons: Vec<MetricComparison>,
    /// The values behind `stats`, by trial (for plots and cross-campaign comparisons;
    /// `results.csv` has them with their trials, so report.json leaves them out).
    #[serde(skip)]
    pub values: Vec<f64>,
}

/// What a comparison is against.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ComparisonKind {
    /// The runbook's baseline build, same config.
    BaselineBuild,
    /// The same build with the default config.
    DefaultConfig,
    /// The same variant in an earlier campaign (`lab compare`).
    EarlierCampaign,
}

/// One metric of a variant against a reference, with its verdict.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MetricComparison {
    /// The reference variant (for `lab compare`: the same variant in campaign A).
    pub against: String,
    pub kind: ComparisonKind,
    /// n, relative change with CI, Welch, Mann–Whitney, Hedges' g.
    #[serde(flatten)]
    pub stats: Comparison,
    /// Welch p adjusted over the metric's family (Holm); `None` without a test.
    pub p_adjusted: Option<f64>,
    /// Tests in that family.
    pub family_size: usize,
    /// The relative change's (1 − 2α) interval: `same` when it lies inside ±threshold.
    pub equivalence: Option<RelativeChange>,
    pub verdict: Verdict,
    /// Trials per arm that would detect the practical threshold with the advised power,
    /// from the larger CV of the two arms; `None` without a CV.
    pub advice_trials_per_arm: Option<u32>,
}

/// The overall verdict of a variant against one reference on one device model, from
/// the gating metrics: `worse` if any is worse, else `better` if any is better, else
/// `too few trials` if any could not be decided, else `same` if every one is the same
/// (equivalence shown), else `inconclusive`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct VariantVerdict {
    pub variant: String,
    pub against: String,
    pub kind: ComparisonKind,
    pub verdict: Verdict,
    pub worse: Vec<String>,
    pub better: Vec<String>,
    pub too_few_trials: Vec<String>,
    /// One line: `envoy-poll vs control: worse — cpu_pct +1442% [+1391%, +1494%], ...`.
    pub summary: String,
    /// In a sequential campaign: the look this verdict is from and what it cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sequential: Option<SequentialStop>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AttestedRow {
    pub device: String,
    pub step: String,
    /// before-campaign, before-trial, untether, re-tether, after-trial.
    pub when: String,
    pub text: String,
    /// Setting → value as answered; empty for a plain confirmation.
    pub values: serde_json::Map<String, serde_json::Value>,
    pub by: String,
    /// Always `attested`: an operator's word, never a reading.
    pub source: &'static str,
    /// Attempts this answer belongs to, and how many of them are valid.
    pub attempts: usize,
    pub valid_attempts: usize,
    /// RFC 3339, first and last answer.
    pub first_at: String,
    pub last_at: String,
}

impl AttestedRow {
    /// `bluetooth=off, brightness=50 %`, or `confirmed`.
    pub fn answer(&self) -> String {
        crate::config::attested_text(&self.values)
    }
}

/// One setting of one device at one moment, from one source, over the attempts that
/// had it so.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StateRow {
    pub device: String,
    /// `before`, `during` (the device's own log of the soak) or `after`.
    pub when: &'static str,
    /// brightness, low_power, thermal_status, charging, external_power, bluetooth, wifi, …
    pub setting: &'static str,
    /// What was seen, as shown: `50 %`, `40–60 %`, `off`, `on, off`.
    pub values: String,
    /// read, set, app, attested or powerlog.
    pub source: &'static str,
    pub attempts: usize,
    pub valid_attempts: usize,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct InvalidAttempt {
    pub trial_idx: u32,
    pub trial_key: String,
    pub device: String,
    pub model: String,
    pub variant: String,
    /// 0 for a trial's first attempt.
    pub attempt: u32,
    pub reasons: Vec<String>,
}
