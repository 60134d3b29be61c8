//! The lab's noise floor from the store: per device model and metric, the arms that
//! measured nothing but noise — every campaign's baseline arm, and both arms of an A/A
//! comparison — pooled by `stats::NoiseFloor`. `lab noise` shows it; `lab plan` asks
//! [`noise_floor`] for one model and metric.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{Datelike, NaiveDate};
use serde::Serialize;

use crate::config::{Lab, Runbook};
use crate::plan::Variant;
use crate::report::model::build_report::build_report;
use crate::report::model::input::{ReportError, load, load_head};
use crate::report::model::summaries::summary_rows;
use crate::stats::{NoiseArm, NoiseFloor};
use crate::store::{CampaignStatus, Store, StoreError, SummaryRow};

/// `lab noise --json`'s `schema`.
pub const NOISE_SCHEMA_VERSION: u32 = 1;

/// The powers `lab noise` gives the smallest detectable change at.
pub const NOISE_POWERS: [f64; 2] = [0.8, 0.9];

/// Trials per arm `lab noise` shows without `--trials`.
pub const NOISE_TRIALS: [u32; 4] = [5, 10, 20, 30];

#[derive(Debug, thiserror::Error)]
pub enum NoiseError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error(
        "no finished campaign in the store yet: the noise floor comes from campaigns' baseline arms; fix: run one first (`lab run runbooks/quickstart.toml`)"
    )]
    NoCampaigns,
    #[error("no device model `{model}` in the store's campaigns (known: {}); fix: pass one of those to --model", .known.join(", "))]
    UnknownModel { model: String, known: Vec<String> },
    #[error("no metric `{metric}` in the store's campaigns{} (known: {}); fix: pass one of those to --metric", .model.as_ref().map(|m| format!(" on {m}")).unwrap_or_default(), .known.join(", "))]
    UnknownMetric { metric: String, model: Option<String>, known: Vec<String> },
    #[error("no arm with 2 or more valid trials in {campaigns} campaigns{}: there is no noise to measure; fix: run campaigns with `repeats` of 2 or more per model", .what)]
    NoArms { campaigns: usize, what: String },
}

impl NoiseError {
    /// Whether the fix is the user's (an unknown name, nothing measured yet).
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, NoiseError::Store(_) | NoiseError::Report(_))
    }
}

/// Which models and metrics, and what to compute for them.
#[derive(Debug, Clone)]
pub struct NoiseOptions {
    pub model: Option<String>,
    pub metric: Option<String>,
    /// Trials per arm to give the smallest detectable change for.
    pub trials: Vec<u32>,
    /// The test's level.
    pub alpha: f64,
    /// The CV interval's level.
    pub confidence: f64,
}

/// The smallest relative change `trials_per_arm` trials detect, at each of [`NOISE_POWERS`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Detectable {
    pub trials_per_arm: u32,
    pub power: f64,
    pub change: Option<f64>,
}

/// One week's pooled CV, with its ISO week (`2026-W03`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NoiseWeek {
    pub iso_week: String,
    pub arms: usize,
    pub df: u64,
    pub cv: f64,
}

/// The noise floor of one device model and metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NoiseSeries {
    pub model: String,
    pub metric: String,
    pub unit: String,
    pub gating: bool,
    pub cv: f64,
    pub df: u64,
    pub cv_low: f64,
    pub cv_high: f64,
    pub arms: usize,
    /// Of `arms`, those of A/A comparisons that are not a baseline arm.
    pub aa_arms: usize,
    pub trials: usize,
    pub skipped_arms: usize,
    pub campaigns: Vec<String>,
    pub weeks: Vec<NoiseWeek>,
    pub drift_per_week: Option<f64>,
    pub detectable: Vec<Detectable>,
}

/// `lab noise`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NoiseReport {
    pub schema: u32,
    pub confidence: f64,
    pub alpha: f64,
    /// Campaigns read (running ones are left out).
    pub campaigns_read: usize,
    pub series: Vec<NoiseSeries>,
}

/// One arm of the store, with what it is.
struct StoredArm {
    model: String,
    metric: String,
    unit: String,
    gating: bool,
    aa_only: bool,
    arm: NoiseArm,
}

/// The noise floor of `metric` on device model `model` over every campaign in `store`,
/// with its interval at `confidence`; `None` when no arm of theirs has a CV. What `lab
/// plan` sizes repeats from: `floor.cv`, `floor.df`, `floor.cv_low`/`cv_high` and
/// `floor.campaigns` (the campaigns it comes from).
pub fn noise_floor(
    store: &Store,
    model: &str,
    metric: &str,
    confidence: f64,
) -> Result<Option<NoiseFloor>, NoiseError> {
    let (arms, _) = stored_arms(store)?;
    let arms: Vec<NoiseArm> =
        arms.into_iter().filter(|a| a.model == model && a.metric == metric).map(|a| a.arm).collect();
    Ok(NoiseFloor::pool(&arms, confidence))
}

/// The noise floor a design sized from a power is sized at (`plan::build_with`): the
/// largest CV of `runbook`'s gating metrics on `models`, and the campaigns it pools.
/// `None` when the lab has no store or no figure for them; nothing is created or written.
pub fn design_noise(lab: &Lab, runbook: &Runbook, models: &[String]) -> Result<Option<(f64, Vec<String>)>, String> {
    let Some(store) = Store::open_existing_at(&lab.store).map_err(|e| e.to_string())? else { return Ok(None) };
    let mut worst: Option<(f64, Vec<String>)> = None;
    for model in models {
        for metric in &runbook.statistics.gating {
            let floor = noise_floor(&store, model, metric, runbook.statistics.confidence).map_err(|e| e.to_string())?;
            if let Some(f) = floor
                && worst.as_ref().is_none_or(|w| f.cv > w.0)
            {
                worst = Some((f.cv, f.campaigns));
            }
        }
    }
    Ok(worst)
}

/// The noise floor per model × metric (`lab noise`). Nothing is written: a campaign whose
/// stored summaries are stale is summarized in memory.
pub fn build_noise(store: &Store, options: &NoiseOptions) -> Result<NoiseReport, NoiseError> {
    let (arms, campaigns_read) = stored_arms(store)?;
    if campaigns_read == 0 {
        return Err(NoiseError::NoCampaigns);
    }
    let names = |of: &dyn Fn(&StoredArm) -> Option<&String>| -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for a in &arms {
            if let Some(n) = of(a).filter(|n| !out.contains(n)) {
                out.push(n.clone());
            }
        }
        out
    };
    if let Some(model) = &options.model {
        let known = names(&|a| Some(&a.model));
        if !known.contains(model) {
            return Err(NoiseError::UnknownModel { model: model.clone(), known });
        }
    }
    if let Some(metric) = &options.metric {
        let known = names(&|a| options.model.as_ref().is_none_or(|m| &a.model == m).then_some(&a.metric));
        if !known.contains(metric) {
            return Err(NoiseError::UnknownMetric { metric: metric.clone(), model: options.model.clone(), known });
        }
    }
    let keeps = |a: &StoredArm| {
        options.model.as_ref().is_none_or(|m| &a.model == m) && options.metric.as_ref().is_none_or(|m| &a.metric == m)
    };
    // Models and metrics in the order they first appear, oldest campaign first.
    let mut groups: Vec<((String, String), Vec<&StoredArm>)> = Vec::new();
    for a in arms.iter().filter(|a| keeps(a)) {
        let key = (a.model.clone(), a.metric.clone());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, list)) => list.push(a),
            None => groups.push((key, vec![a])),
        }
    }
    let series: Vec<NoiseSeries> = groups.iter().filter_map(|(_, list)| series_of(list, options)).collect();
    if series.is_empty() {
        let what = match (&options.model, &options.metric) {
            (Some(m), Some(x)) => format!(" for {x} on {m}"),
            (Some(m), None) => format!(" on {m}"),
            (None, Some(x)) => format!(" for {x}"),
            (None, None) => String::new(),
        };
        return Err(NoiseError::NoArms { campaigns: campaigns_read, what });
    }
    Ok(NoiseReport {
        schema: NOISE_SCHEMA_VERSION,
        confidence: options.confidence,
        alpha: options.alpha,
        campaigns_read,
        series,
    })
}

fn series_of(list: &[&StoredArm], options: &NoiseOptions) -> Option<NoiseSeries> {
    let arms: Vec<NoiseArm> = list.iter().map(|a| a.arm.clone()).collect();
    let floor = NoiseFloor::pool(&arms, options.confidence)?;
    let first = list[0];
    let aa_arms = list.iter().filter(|a| a.aa_only && a.arm.values.len() >= 2).count();
    let detectable = options
        .trials
        .iter()
        .flat_map(|&n| {
            NOISE_POWERS.map(|power| Detectable {
                trials_per_arm: n,
                power,
                change: floor.detectable_change(n, options.alpha, power),
            })
        })
        .collect();
    Some(NoiseSeries {
        model: first.model.clone(),
        metric: first.metric.clone(),
        unit: first.unit.clone(),
        gating: first.gating,
        cv: floor.cv,
        df: floor.df,
        cv_low: floor.cv_low,
        cv_high: floor.cv_high,
        arms: floor.arms,
        aa_arms: aa_arms.min(floor.arms),
        trials: floor.trials,
        skipped_arms: floor.skipped_arms,
        campaigns: floor.campaigns.clone(),
        weeks: floor
            .weeks
            .iter()
            .map(|w| NoiseWeek { iso_week: iso_week_label(w.week), arms: w.arms, df: w.df, cv: w.cv })
            .collect(),
        drift_per_week: floor.drift_per_week,
        detectable,
    })
}

/// Every noise arm of every campaign that is not running, oldest campaign first, and how
/// many campaigns were read.
fn stored_arms(store: &Store) -> Result<(Vec<StoredArm>, usize), NoiseError> {
    let mut campaigns = store.campaign_list()?;
    campaigns.retain(|c| !matches!(c.status, CampaignStatus::Running | CampaignStatus::Queued));
    campaigns.reverse();
    // A scheduled campaign belongs to its slot's week, as in `lab history`.
    let due: HashMap<String, String> =
        store.slots(None)?.into_iter().filter_map(|s| Some((s.campaign?, s.due_utc))).collect();
    let mut out = Vec::new();
    for c in &campaigns {
        let at = due.get(&c.id).unwrap_or(&c.created_at);
        let week = week_index(at);
        let (_, plan) = load_head(store, &c.id)?;
        let rows = if store.summaries_current(&c.id)? {
            store.summaries(&c.id)?
        } else {
            let data = load(store, &c.id)?;
            summary_rows(&build_report(&data), &data)
        };
        for (row, aa_only) in noise_rows(&rows, &plan.variants) {
            out.push(StoredArm {
                model: row.model.clone(),
                metric: row.metric.clone(),
                unit: row.unit.clone(),
                gating: row.gating,
                aa_only,
                arm: NoiseArm { campaign: c.id.clone(), week, values: row.values.clone() },
            });
        }
    }
    Ok((out, campaigns.len()))
}

/// The rows of one campaign that measure noise, each with whether it counts only as an
/// A/A arm. A baseline arm is the baseline build with the default config. An A/A pair is
/// a variant and the baseline build with the same config whose builds have the same
/// content hash on the model's platform (`content_hashes.builds`: the artifact's sha256,
/// or the sim or host definition's); both arms count. The store keeps configs by name
/// only, so two configs of different names never make an A/A pair, even if identical.
fn noise_rows<'a>(rows: &'a [SummaryRow], variants: &[Variant]) -> Vec<(&'a SummaryRow, bool)> {
    let variant = |name: &str| variants.iter().find(|v| v.name == name);
    let by_key: HashMap<(&str, &str, &str), &SummaryRow> =
        rows.iter().map(|r| ((r.model.as_str(), r.variant.as_str(), r.metric.as_str()), r)).collect();
    let mut chosen: BTreeMap<(&str, &str, &str), bool> = BTreeMap::new();
    for r in rows {
        let Some(v) = variant(&r.variant) else { continue };
        if v.baseline_build && v.default_config {
            chosen.insert((&r.model, &r.variant, &r.metric), false);
            continue;
        }
        if v.baseline_build {
            continue;
        }
        let Some(reference) = variants.iter().find(|o| o.baseline_build && o.config == v.config) else { continue };
        let Some(other) = by_key.get(&(r.model.as_str(), reference.name.as_str(), r.metric.as_str())) else {
            continue;
        };
        let same_build = r.build_sha256.is_some() && r.build_sha256 == other.build_sha256;
        if same_build {
            chosen.entry((&r.model, &r.variant, &r.metric)).or_insert(true);
            let reference_is_baseline = reference.default_config;
            chosen.entry((&other.model, &other.variant, &other.metric)).or_insert(!reference_is_baseline);
        }
    }
    // In the campaign's row order.
    let keep: BTreeSet<(&str, &str, &str)> = chosen.keys().copied().collect();
    rows.iter()
        .filter(|r| keep.contains(&(r.model.as_str(), r.variant.as_str(), r.metric.as_str())))
        .map(|r| (r, chosen[&(r.model.as_str(), r.variant.as_str(), r.metric.as_str())]))
        .collect()
}

/// The Monday of 1970-01-05 is week 0.
fn week_origin() -> NaiveDate {
    NaiveDate::from_ymd_opt(1970, 1, 5).expect("a valid date")
}

/// The week of an RFC 3339 time, counted from [`week_origin`] (weeks start on Monday, as
/// ISO weeks do); a time that does not parse counts as week 0.
fn week_index(at: &str) -> i64 {
    let Ok(t) = chrono::DateTime::parse_from_rfc3339(at) else { return 0 };
    let day = t.with_timezone(&chrono::Utc).date_naive();
    let monday = day - chrono::Days::new(u64::from(day.weekday().num_days_from_monday()));
    (monday - week_origin()).num_days().div_euclid(7)
}

/// `2026-W03` for a week index.
fn iso_week_label(week: i64) -> String {
    let monday = week_origin() + chrono::Duration::days(week * 7);
    let iso = monday.iso_week();
    format!("{}-W{:02}", iso.year(), iso.week())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::summary_row_fixture as row;

    fn variant(name: &str, build: &str, config: &str, baseline_build: bool, default_config: bool) -> Variant {
        Variant { name: name.into(), build: build.into(), config: config.into(), baseline_build, default_config }
    }

    #[test]
    fn weeks_are_mondays_counted_and_labelled_as_iso_weeks() {
        assert_eq!(week_index("1970-01-05T00:00:00Z"), 0);
        assert_eq!(week_index("1970-01-11T23:59:59Z"), 0);
        let (a, b) = (week_index("2026-01-04T12:00:00Z"), week_index("2026-01-05T00:00:00+00:00"));
        assert_eq!(b - a, 1, "Sunday and the next Monday are a week apart");
        assert_eq!(iso_week_label(a), "2026-W01");
        assert_eq!(iso_week_label(b), "2026-W02");
        assert_eq!(iso_week_label(week_index("2024-12-30T08:00:00Z")), "2025-W01");
    }

    #[test]
    fn baseline_arms_count_and_aa_pairs_count_both_arms() {
        let variants = [
            variant("control", "control", "default", true, false),
            variant("copy", "copy", "default", false, true),
            variant("other", "other", "default", false, true),
        ];
        // `row` gives control no hash and the others `bb02`: give control and copy the same.
        let mut rows = vec![
            row("c", "control", "cpu_pct", &[1.0, 1.1]),
            row("c", "copy", "cpu_pct", &[1.0, 1.2]),
            row("c", "other", "cpu_pct", &[2.0, 2.1]),
        ];
        let pick = |rows: &[SummaryRow], variants: &[Variant]| -> Vec<(String, bool)> {
            noise_rows(rows, variants).into_iter().map(|(r, aa)| (r.variant.clone(), aa)).collect()
        };
        // control is the baseline build but not the default config here: nothing counts.
        assert!(pick(&rows, &variants).is_empty());
        let variants = [
            variant("control", "control", "default", true, true),
            variant("copy", "copy", "default", false, true),
            variant("other", "other", "default", false, true),
        ];
        assert_eq!(pick(&rows, &variants), [("control".to_string(), false)], "hashes differ: the baseline only");
        rows[0].build_sha256 = Some("bb02".into());
        rows[2].build_sha256 = Some("cc03".into());
        assert_eq!(pick(&rows, &variants), [("control".to_string(), false), ("copy".to_string(), true)]);
        // No hash on either side is not the same build.
        rows[0].build_sha256 = None;
        rows[1].build_sha256 = None;
        assert_eq!(pick(&rows, &variants), [("control".to_string(), false)]);
    }
}
