//! Builds the [`Report`] model from a campaign's rows.
//!
//! Linear in the number of measurements: rows are grouped by hash lookups, never by
//! scanning (a year of weekly campaigns is hundreds of thousands of rows).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::input::{CampaignData, pooled};
use super::metric_order::metric_order;
use super::model::{
    AttestedRow, CampaignMeta, InvalidAttempt, MetricRow, ModelReport, Report, SCHEMA_VERSION, StatisticsMeta,
    VariantSummary, VariantVerdict,
};
use super::verdicts::{ADVICE_POWER, Arm, MetricPair, judge, overall, references};
use crate::config::StatsSettings;
use crate::measure::UntetherMode;
use crate::stats::{modified_z_outliers, summarize};
use crate::store::{AttemptRecord, AttemptStatus, PlannedTrialRow, TrialOutcome};

/// Values of one (model, variant, metric) from valid attempts.
#[derive(Default)]
struct Cell<'a> {
    values: Vec<f64>,
    /// Trial key of each value, to name outliers.
    keys: Vec<&'a str>,
    non_finite: usize,
    units: BTreeSet<&'a str>,
    sources: BTreeSet<&'a str>,
}

/// Computes the report. Statistics use valid attempts only; invalid attempts are
/// counted and listed with their reasons.
pub fn build_report(data: &CampaignData) -> Report {
    let plan = &data.plan;
    let mut warnings = Vec::new();

    let trial_rows: HashMap<u32, &PlannedTrialRow> = data.trials.iter().map(|t| (t.row.idx, &t.row)).collect();
    let mut attempts: Vec<&AttemptRecord> = data.attempts.iter().collect();
    attempts.sort_by_key(|a| (a.trial_idx, a.attempt));

    let mut variants = variant_summaries(data);
    let variant_at: HashMap<String, usize> = variants.iter().enumerate().map(|(i, v)| (v.name.clone(), i)).collect();
    for t in &data.trials {
        let v = &mut variants[variant_at[&t.row.variant]];
        v.planned_trials += 1;
        match t.outcome {
            TrialOutcome::Valid => v.valid_trials += 1,
            TrialOutcome::Failed => v.failed_trials += 1,
            TrialOutcome::Pending => v.pending_trials += 1,
        }
    }

    let mut cells: HashMap<(&str, &str, &str), Cell> = HashMap::new();
    let mut observed: HashSet<&str> = HashSet::new();
    let mut observed_on_model: HashSet<(&str, &str)> = HashSet::new();
    let mut valid_per_trial: BTreeMap<u32, usize> = BTreeMap::new();
    let mut invalid_attempts = Vec::new();
    for a in &attempts {
        let Some(row) = trial_rows.get(&a.trial_idx) else {
            warnings.push(format!(
                "attempt {} of trial {} has no planned trial in this campaign; it is left out (the store is inconsistent)",
                a.attempt, a.trial_idx
            ));
            continue;
        };
        let model = row.device_model.as_str();
        for m in &a.measurements {
            observed.insert(&m.metric);
            observed_on_model.insert((model, m.metric.as_str()));
        }
        let v = &mut variants[variant_at[&row.variant]];
        match a.status {
            AttemptStatus::Valid => {
                v.valid_attempts += 1;
                *valid_per_trial.entry(a.trial_idx).or_default() += 1;
                for m in &a.measurements {
                    let cell = cells.entry((model, row.variant.as_str(), m.metric.as_str())).or_default();
                    if m.value.is_finite() {
                        cell.values.push(m.value);
                        cell.keys.push(&row.key);
                    } else {
                        cell.non_finite += 1;
                    }
                    cell.units.insert(&m.unit);
                    cell.sources.insert(&m.source);
                }
            }
            AttemptStatus::Invalid => {
                v.invalid_attempts += 1;
                invalid_attempts.push(InvalidAttempt {
                    trial_idx: a.trial_idx,
                    trial_key: row.key.clone(),
                    device: row.device.clone(),
                    model: row.device_model.clone(),
                    variant: row.variant.clone(),
                    attempt: a.attempt,
                    reasons: a.reasons.clone(),
                });
            }
        }
    }
    for (idx, n) in valid_per_trial.into_iter().filter(|&(_, n)| n > 1) {
        warnings.push(format!(
            "trial {}: {n} valid attempts, all counted (a trial should have one; the store is inconsistent)",
            trial_rows[&idx].key
        ));
    }

    warnings.extend(label_warnings(data, &trial_rows));
    warnings.extend(attestation_conflicts(data));
    let metrics = metric_order(&plan.metrics, observed.iter().copied());
    let present: HashSet<(&str, &str)> =
        data.trials.iter().map(|t| (t.row.device_model.as_str(), t.row.variant.as_str())).collect();
    let models = model_devices(data)
        .into_iter()
        .map(|(model, devices)| {
            let mut rows = Vec::new();
            for v in variants.iter().filter(|v| present.contains(&(model, v.name.as_str()))) {
                let shown = metrics
                    .iter()
                    .filter(|m| plan.metrics.contains(m) || observed_on_model.contains(&(model, m.as_str())));
                for metric in shown {
                    let cell = cells.remove(&(model, v.name.as_str(), metric.as_str())).unwrap_or_default();
                    rows.push(metric_row(model, &v.name, metric, cell, &plan.statistics, &mut warnings));
                }
            }
            let verdicts = compare_variants(&variants, &mut rows, &plan.statistics);
            ModelReport {
                model: model.to_string(),
                devices: devices.into_iter().map(str::to_string).collect(),
                rows,
                verdicts,
            }
        })
        .collect();

    Report {
        schema_version: SCHEMA_VERSION,
        campaign: campaign_meta(data),
        statistics: StatisticsMeta {
            confidence: plan.statistics.confidence,
            alpha: plan.statistics.alpha,
            practical_threshold: plan.statistics.practical_threshold,
            gating: plan.statistics.gating.clone(),
            test: "welch".into(),
            adjustment: "holm".into(),
            advice_power: ADVICE_POWER,
        },
        metrics,
        variants,
        models,
        invalid_attempts,
        attested: attested_rows(data, &trial_rows),
        state: super::state_rows::state_rows(data, &trial_rows),
        warnings,
    }
}

/// Where an operator attested one thing and the lab read another before or after the
/// soak (brightness more than 5 points apart, a switch the other way): said once per
/// device, step and setting. The reading is what the preconditions checked.
fn attestation_conflicts(data: &CampaignData) -> Vec<String> {
    let mut seen: BTreeMap<(String, String, String), (usize, String)> = BTreeMap::new();
    for a in &data.attempts {
        for x in &a.attestations {
            let state = match x.when.as_str() {
                "before-campaign" | "before-trial" => &a.state_before,
                "re-tether" | "after-trial" => &a.state_after,
                _ => continue,
            };
            for (key, said) in &x.values {
                let field = match key.as_str() {
                    "brightness" => "brightness_pct",
                    "bluetooth" => "bluetooth_on",
                    "wifi" => "wifi_on",
                    other => other,
                };
                let r = &state[field];
                if r["state"] != "known" || r["from"] == "operator" {
                    continue;
                }
                let read = &r["value"];
                let differs = match (said.as_f64(), read.as_f64(), said.as_bool(), read.as_bool()) {
                    (Some(s), Some(v), ..) => (s - v).abs() > 5.0,
                    (_, _, Some(s), Some(v)) => s != v,
                    _ => false,
                };
                if differs {
                    let shown = |v: &serde_json::Value| match v.as_bool() {
                        Some(true) => "on".to_string(),
                        Some(false) => "off".to_string(),
                        None => format!("{v} %"),
                    };
                    let e = seen
                        .entry((a.device.clone(), x.step.clone(), key.clone()))
                        .or_insert((0, format!("{} but the lab read {}", shown(said), shown(read))));
                    e.0 += 1;
                }
            }
        }
    }
    seen.into_iter()
        .map(|((device, step, key), (n, what))| {
            format!("{device}: step {step} attested {key} {what} ({n} attempt(s)); the reading is what was checked")
        })
        .collect()
}

/// Operators' answers, one row per (device, step, answer, who), in the order first given.
fn attested_rows(data: &CampaignData, trial_rows: &HashMap<u32, &PlannedTrialRow>) -> Vec<AttestedRow> {
    let mut out: Vec<AttestedRow> = Vec::new();
    for a in &data.attempts {
        let device = if a.device.is_empty() {
            trial_rows.get(&a.trial_idx).map(|r| r.device.clone()).unwrap_or_default()
        } else {
            a.device.clone()
        };
        for x in &a.attestations {
            let same = |r: &&mut AttestedRow| {
                r.device == device && r.step == x.step && r.values == x.values && r.by == x.by && r.when == x.when
            };
            let valid = usize::from(a.status == AttemptStatus::Valid);
            match out.iter_mut().find(same) {
                Some(r) => {
                    r.attempts += 1;
                    r.valid_attempts += valid;
                    r.first_at = r.first_at.clone().min(x.at.clone());
                    r.last_at = r.last_at.clone().max(x.at.clone());
                }
                None => out.push(AttestedRow {
                    device: device.clone(),
                    step: x.step.clone(),
                    when: x.when.clone(),
                    text: x.text.clone(),
                    values: x.values.clone(),
                    by: x.by.clone(),
                    source: "attested",
                    attempts: 1,
                    valid_attempts: valid,
                    first_at: x.at.clone(),
                    last_at: x.at.clone(),
                }),
            }
        }
    }
    out
}

fn metric_row(
    model: &str,
    variant: &str,
    metric: &str,
    cell: Cell,
    settings: &StatsSettings,
    warnings: &mut Vec<String>,
) -> MetricRow {
    if cell.units.len() > 1 {
        warnings.push(format!(
            "{model} / {variant} / {metric}: values in several units ({}) are pooled; fix the collector so the metric has one unit",
            cell.units.iter().copied().collect::<Vec<_>>().join(", ")
        ));
    }
    if cell.non_finite > 0 {
        warnings.push(format!(
            "{model} / {variant} / {metric}: {} NaN or infinite value(s) of valid attempts left out of the statistics",
            cell.non_finite
        ));
    }
    let outliers = modified_z_outliers(&cell.values).into_iter().map(|i| cell.keys[i].to_string()).collect();
    MetricRow {
        variant: variant.to_string(),
        metric: metric.to_string(),
        unit: cell.units.iter().copied().collect::<Vec<_>>().join(", "),
        sources: cell.sources.iter().map(|s| s.to_string()).collect(),
        n: cell.values.len(),
        non_finite: cell.non_finite,
        stats: summarize(&cell.values, settings.confidence),
        gating: settings.gating.iter().any(|g| g == metric),
        outliers,
        comparisons: Vec::new(),
        values: cell.values,
    }
}

/// Compares every variant of one model with its references (see
/// [`references`](super::verdicts::references)), fills the rows' comparisons and returns
/// the per-variant verdicts.
fn compare_variants(
    variants: &[VariantSummary],
    rows: &mut [MetricRow],
    settings: &StatsSettings,
) -> Vec<VariantVerdict> {
    let at: HashMap<(&str, &str), usize> =
        rows.iter().enumerate().map(|(i, r)| ((r.variant.as_str(), r.metric.as_str()), i)).collect();
    let mut found = Vec::new();
    let mut verdicts = Vec::new();
    for v in variants {
        for (against, kind) in references(v, variants) {
            // Metrics with values in both arms, in row order.
            let mut idx: Vec<(usize, usize)> = rows
                .iter()
                .enumerate()
                .filter(|(_, r)| r.variant == v.name && r.stats.is_some())
                .filter_map(|(i, r)| {
                    let j = *at.get(&(against.as_str(), r.metric.as_str()))?;
                    rows[j].stats.is_some().then_some((i, j))
                })
                .collect();
            idx.sort_unstable();
            if idx.is_empty() {
                continue;
            }
            let pairs: Vec<MetricPair> = idx
                .iter()
                .filter_map(|&(i, j)| {
                    Some(MetricPair {
                        metric: rows[i].metric.as_str(),
                        treatment: Arm { values: &rows[i].values, stats: rows[i].stats.as_ref()? },
                        reference: Arm { values: &rows[j].values, stats: rows[j].stats.as_ref()? },
                    })
                })
                .collect();
            let judged = judge(&pairs, &against, kind, settings);
            let named: Vec<(&str, &_)> = pairs.iter().map(|p| p.metric).zip(&judged).collect();
            verdicts.push(overall(&v.name, &against, kind, &named, &settings.gating));
            found.extend(idx.iter().map(|&(i, _)| i).zip(judged));
        }
    }
    for (i, c) in found {
        rows[i].comparisons.push(c);
    }
    verdicts
}

/// Variants in plan order, then any variant the trials name that the plan does not
/// (a plan from another lab version), alphabetically.
fn variant_summaries(data: &CampaignData) -> Vec<VariantSummary> {
    let summary = VariantSummary::new;
    let mut out: Vec<VariantSummary> = data
        .plan
        .variants
        .iter()
        .map(|v| summary(&v.name, &v.build, &v.config, v.baseline_build, v.default_config))
        .collect();
    let extra: BTreeMap<&str, &PlannedTrialRow> = data
        .trials
        .iter()
        .filter(|t| data.plan.variant(&t.row.variant).is_none())
        .map(|t| (t.row.variant.as_str(), &t.row))
        .collect();
    out.extend(extra.into_values().map(|r| summary(&r.variant, &r.build, &r.config, false, false)));
    out
}

/// Device models in plan order with their devices, each followed by its pools of trials
/// reported apart (`Pixel 8 (soft-untethered)`), then models only the trials name. A
/// model all of whose trials are in a pool is left out.
fn model_devices(data: &CampaignData) -> Vec<(&str, Vec<&str>)> {
    let mut devices: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for t in &data.trials {
        devices.entry(&t.row.device_model).or_default().insert(&t.row.device);
    }
    let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
    for d in &data.plan.devices {
        match out.iter_mut().find(|(m, _)| *m == d.model) {
            Some((_, devs)) => devs.push(&d.name),
            None => out.push((&d.model, vec![&d.name])),
        }
    }
    let planned: Vec<(&str, Vec<&str>)> = std::mem::take(&mut out);
    for (model, devs) in planned {
        let pools: Vec<(&str, Vec<&str>)> = UntetherMode::POOLS
            .iter()
            .filter_map(|label| devices.get_key_value(pooled(model, label).as_str()))
            .map(|(&pool, devs)| (pool, devs.iter().copied().collect()))
            .collect();
        if pools.is_empty() || devices.contains_key(model) {
            out.push((model, devs));
        }
        out.extend(pools);
    }
    let extra: Vec<(&str, Vec<&str>)> = devices
        .into_iter()
        .filter(|(m, _)| !out.iter().any(|(o, _)| o == m))
        .map(|(m, devs)| (m, devs.into_iter().collect()))
        .collect();
    out.extend(extra);
    out
}

/// One line per pool of labelled valid attempts: what their figures must be read with.
fn label_warnings(data: &CampaignData, trial_rows: &HashMap<u32, &PlannedTrialRow>) -> Vec<String> {
    let mut by_label: BTreeMap<(&str, &str), (usize, &str)> = BTreeMap::new();
    for a in data.attempts.iter().filter(|a| a.status == AttemptStatus::Valid) {
        let Some(row) = trial_rows.get(&a.trial_idx) else { continue };
        for l in &a.labels {
            // Figures vary; the kind of label is what is said once ("charged for 12 s …" → "charged for … s …").
            let kind = l.split_once(" for ").map_or(l.as_str(), |(k, _)| k);
            let e = by_label.entry((row.device_model.as_str(), kind)).or_insert((0, l));
            e.0 += 1;
        }
    }
    by_label
        .into_iter()
        .map(|((model, _), (n, example))| {
            format!("{model}: {n} valid attempt(s) labelled \"{example}\"; reported apart, never pooled with power-cut trials")
        })
        .collect()
}

fn campaign_meta(data: &CampaignData) -> CampaignMeta {
    let (c, p) = (&data.campaign, &data.plan);
    CampaignMeta {
        id: c.id.clone(),
        runbook: c.runbook_name.clone(),
        runbook_path: c.runbook_path.clone(),
        runbook_sha256: c.runbook_sha256.clone(),
        lab_sha256: c.lab_sha256.clone(),
        seed: c.seed,
        created_at: c.created_at.clone(),
        finished_at: c.finished_at.clone(),
        status: c.status,
        note: c.note.clone(),
        tool_version: c.tool_version.clone(),
        content_hashes: c.content_hashes.clone(),
        footprint: c.footprint_json.clone(),
        order: p.order,
        duration_s: p.duration_s,
        cooldown_s: p.cooldown_s,
        repeats: p.repeats,
        max_attempts: p.max_attempts,
        planned_trials: data.trials.len(),
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::device::Measurement;
    use crate::report::test_fixture::{self, MODEL};

    fn row<'a>(r: &'a Report, variant: &str, metric: &str) -> &'a MetricRow {
        r.models[0].rows.iter().find(|x| x.variant == variant && x.metric == metric).expect("row exists")
    }

    #[test]
    fn soft_untethered_trials_are_reported_apart_never_pooled_with_power_cut_ones() {
        let base = test_fixture::campaign("c1");
        let mut attempts = base.attempts.clone();
        for a in &mut attempts {
            a.untether = Some(UntetherMode::PowerCut);
            // sim-iphone-2 was only told it is unplugged: trials 2, 3 and 6 (and pending 7).
            if [2, 3, 6].contains(&a.trial_idx) {
                a.untether = Some(UntetherMode::SoftUntethered);
                a.labels = vec!["charged for 3412 s during the soak (soft-untethered: USB power stays on)".into()];
            }
        }
        let data = CampaignData::new(base.campaign.clone(), base.trials.clone(), attempts).unwrap();
        let r = build_report(&data);
        let names: Vec<&str> = r.models.iter().map(|m| m.model.as_str()).collect();
        assert_eq!(names, [MODEL.to_string(), format!("{MODEL} (soft-untethered)")]);
        let n =
            |m: usize, v: &str| r.models[m].rows.iter().find(|x| x.variant == v && x.metric == "cpu_pct").unwrap().n;
        // Power-cut: control 0 (4 failed), envoy 1 and 5; soft: control 3 and 6, envoy 2.
        assert_eq!((n(0, "control"), n(0, "envoy-poll")), (1, 2));
        assert_eq!((n(1, "control"), n(1, "envoy-poll")), (2, 1));
        assert_eq!(r.models[1].devices, ["sim-iphone-2"]);
        // Verdicts are made within each pool.
        let against: Vec<&str> = r.models[1].verdicts.iter().map(|v| v.against.as_str()).collect();
        assert_eq!(against, ["control"], "{:?}", r.models[1].verdicts);
        let said: Vec<&String> = r.warnings.iter().filter(|w| w.contains("labelled")).collect();
        assert_eq!(
            said,
            [&format!(
                "{MODEL} (soft-untethered): 3 valid attempt(s) labelled \"charged for 3412 s during the soak (soft-untethered: USB power stays on)\"; reported apart, never pooled with power-cut trials"
            )]
        );
        // Without untether modes (stores from before), nothing moves.
        assert_eq!(build_report(&base).models.len(), 1);
    }

    #[test]
    fn statistics_use_valid_attempts_only() {
        let r = build_report(&test_fixture::campaign("c1"));
        // control: trials 0, 3, 6 are valid; trial 4's invalid attempt (1.0 %) is left out.
        let b = row(&r, "control", "battery_drop_pct");
        let s = b.stats.as_ref().unwrap();
        assert_eq!((b.n, s.n), (3, 3));
        assert!((s.mean - 3.2).abs() < 1e-12, "mean {}", s.mean);
        assert!((s.sd.unwrap() - 0.1).abs() < 1e-12);
        assert_eq!((s.min, s.max), (3.1, 3.3));
        assert_eq!(b.unit, "%");
        assert_eq!(b.sources, ["sim model"]);
        // envoy-poll: trials 1, 2 (second attempt), 5; trial 2's invalid 0.4 % is left out.
        let e = row(&r, "envoy-poll", "battery_drop_pct").stats.as_ref().unwrap();
        assert_eq!(e.n, 3);
        assert!((e.mean - 10.1).abs() < 1e-12, "mean {}", e.mean);
        assert_eq!(e.min, 9.8);
        let req = row(&r, "envoy-poll", "requests").stats.as_ref().unwrap();
        assert_eq!((req.mean, req.min), (18000.0, 17995.0));
        // n = 3 → df = 2: half-width = t(0.975, 2) · sd / √3, t = 4.302652729911275.
        let half = row(&r, "control", "cpu_pct").stats.as_ref().unwrap().ci_half_width().unwrap();
        assert!((half - 4.302652729911275 * 0.5 / 3f64.sqrt()).abs() < 1e-9, "half {half}");
    }

    #[test]
    fn invalid_attempts_are_listed_and_counted() {
        let r = build_report(&test_fixture::campaign("c1"));
        let listed: Vec<(u32, u32, &str)> =
            r.invalid_attempts.iter().map(|a| (a.trial_idx, a.attempt, a.device.as_str())).collect();
        assert_eq!(listed, [(2, 0, "sim-iphone-2"), (4, 0, "sim-iphone-1"), (4, 1, "sim-iphone-1")]);
        assert_eq!(r.invalid_attempts[0].trial_key, "0002-sim-iphone-2-envoy-poll-r1");
        assert_eq!(r.invalid_attempts[0].reasons.len(), 2);
        assert_eq!(r.invalid_attempts[1].reasons, ["app died during the soak"]);

        let counts: Vec<_> = r
            .variants
            .iter()
            .map(|v| {
                (
                    v.name.as_str(),
                    v.planned_trials,
                    v.valid_trials,
                    v.failed_trials,
                    v.pending_trials,
                    v.valid_attempts,
                    v.invalid_attempts,
                )
            })
            .collect();
        assert_eq!(counts, [("control", 4, 3, 1, 0, 3, 2), ("envoy-poll", 4, 3, 0, 1, 3, 1)]);
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    }

    #[test]
    fn rows_follow_variant_and_metric_order() {
        let r = build_report(&test_fixture::campaign("c1"));
        assert_eq!(r.schema_version, 1);
        assert_eq!(r.models.len(), 1);
        assert_eq!(r.models[0].model, MODEL);
        assert_eq!(r.models[0].devices, ["sim-iphone-1", "sim-iphone-2"]);
        let order: Vec<(&str, &str)> =
            r.models[0].rows.iter().map(|x| (x.variant.as_str(), x.metric.as_str())).collect();
        assert_eq!(
            order,
            [
                ("control", "battery_drop_pct"),
                ("control", "cpu_pct"),
                ("control", "requests"),
                ("envoy-poll", "battery_drop_pct"),
                ("envoy-poll", "cpu_pct"),
                ("envoy-poll", "requests"),
            ]
        );
    }

    #[test]
    fn inconsistencies_become_warnings() {
        let mut data = test_fixture::campaign("c1");
        // A measurement in another unit, a NaN, and an attempt of an unplanned trial.
        data.attempts[1].measurements.push(Measurement::new("cpu_pct", 0.12, "fraction", "sim model"));
        data.attempts[1].measurements.push(Measurement::new("battery_drop_pct", f64::NAN, "%", "sim model"));
        data.attempts.push(test_fixture::attempt("c1", 99, 0, &[], &[("cpu_pct", 1.0, "%")]));
        let r = build_report(&data);
        let cpu = row(&r, "control", "cpu_pct");
        assert_eq!(cpu.unit, "%, fraction");
        assert_eq!(cpu.n, 4);
        let battery = row(&r, "control", "battery_drop_pct");
        assert_eq!((battery.n, battery.non_finite), (3, 1));
        assert!((battery.stats.as_ref().unwrap().mean - 3.2).abs() < 1e-12);
        assert_eq!(r.warnings.len(), 3, "{:?}", r.warnings);
        assert!(r.warnings[0].contains("trial 99"), "{}", r.warnings[0]);
        assert!(r.warnings.iter().any(|w| w.contains("several units (%, fraction)")));
        assert!(r.warnings.iter().any(|w| w.contains("1 NaN or infinite")));
    }

    #[test]
    fn unmeasured_metric_shows_an_empty_row() {
        let mut data = test_fixture::campaign("c1");
        data.plan.metrics.push("memory_mb".into());
        let r = build_report(&data);
        let mem = row(&r, "envoy-poll", "memory_mb");
        assert_eq!((mem.n, mem.stats.is_none(), mem.unit.as_str()), (0, true, ""));
    }

    /// 100 000 measurements (10 000 attempts × 10 metrics, 2 models, 5 variants) are all
    /// counted. (Speed is measured by `cargo bench --bench sim_lab`, not asserted here.)
    #[test]
    fn builds_100k_measurements() {
        let base = test_fixture::campaign("big");
        let variants = ["a", "b", "c", "d", "e"];
        let models = ["m1", "m2"];
        let mut trials = Vec::new();
        let mut attempts = Vec::new();
        for i in 0..10_000u32 {
            let (variant, model) = (variants[i as usize % 5], models[(i as usize / 5) % 2]);
            let mut t = base.trials[0].clone();
            t.row.idx = i;
            t.row.key = format!("{i:05}");
            t.row.variant = variant.into();
            t.row.device_model = model.into();
            t.row.device = format!("{model}-dev");
            trials.push(t);
            let values: Vec<(String, f64)> =
                (0..10).map(|k| (format!("metric_{k}"), f64::from(i % 97) + f64::from(k))).collect();
            let refs: Vec<(&str, f64, &str)> = values.iter().map(|(m, v)| (m.as_str(), *v, "u")).collect();
            attempts.push(test_fixture::attempt("big", i, 0, &[], &refs));
        }
        let mut data = base;
        data.plan.variants = variants.iter().map(|v| test_fixture::variant(v, *v == "a")).collect();
        data.plan.devices.clear();
        data.plan.metrics.clear();
        data.trials = trials;
        data.attempts = attempts;

        let r = build_report(&data);
        let total: usize = r.models.iter().flat_map(|m| &m.rows).map(|row| row.n).sum();
        assert_eq!(total, 100_000);
        assert_eq!(r.models.len(), 2);
        assert_eq!(r.models[0].rows.len(), 5 * 10);
        assert_eq!(r.variants.iter().map(|v| v.valid_attempts).sum::<usize>(), 10_000);
    }
}
