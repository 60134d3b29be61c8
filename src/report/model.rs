//! The report model: everything a renderer shows, computed once.
//!
//! Serialized as `report.json`; the schema is documented in docs/report.md. Adding a
//! field keeps `schema_version`; renaming or removing one bumps it.

use serde::Serialize;

use crate::config::Order;
use crate::stats::Summary;
use crate::store::CampaignStatus;

/// Version of the `report.json` layout.
pub const SCHEMA_VERSION: u32 = 1;

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
    /// The lab's own CPU and wakeups during the campaign, when measured.
    pub footprint: Option<serde_json::Value>,
    pub order: Order,
    pub duration_s: f64,
    pub cooldown_s: f64,
    pub repeats: u32,
    pub max_attempts: u32,
    pub planned_trials: usize,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StatisticsMeta {
    /// Level of every confidence interval (0.95 = 95 %).
    pub confidence: f64,
    pub alpha: f64,
    pub practical_threshold: f64,
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

/// Statistics of one device model: rows are variant × metric.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ModelReport {
    pub model: String,
    /// Devices of this model in the plan.
    pub devices: Vec<String>,
    /// Variants in plan order, each with every metric in display order.
    pub rows: Vec<MetricRow>,
}

/// One variant × metric on one device model, from valid attempts only.
///
/// `(model, variant, metric)` identifies the row; comparisons against the baseline
/// (a later schema addition) attach to it.
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
