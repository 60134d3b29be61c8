//! Builds the [`Report`] model from a campaign's rows.
//!
//! Linear in the number of measurements: rows are grouped by hash lookups, never by
//! scanning (a year of weekly campaigns is hundreds of thousands of rows).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::config::{AdaptiveRepeats, StatsSettings};
use crate::measure::UntetherMode;
use crate::measure::metric_order;
use crate::plan::LookRecord;
use crate::report::model::input::{CampaignData, pooled};
use crate::report::model::report::{
    AttestedRow, CampaignMeta, InvalidAttempt, MetricComparison, MetricRow, ModelReport, Report, RerunMeta,
    SCHEMA_VERSION, StatisticsMeta, VariantSummary, VariantVerdict,
};
use crate::report::model::sequential::SequentialStop;
use crate::report::model::verdicts::{comparison, overall, references, rule};
use crate::stats::sequential::{Design, Looked, Recorded, decide_pair};
use crate::stats::{Arm, MetricPair, modified_z_outliers, summarize};
use crate::store::{CampaignColumns, Kept, OPERATOR, SETTINGS, Sym, TrialOutcome};

/// Values of one (model, variant, metric) from valid attempts.
#[derive(Default)]
struct Cell {
    values: Vec<f64>,
    /// Trial row of each value, to name outliers.
    trials: Vec<u32>,
    non_finite: usize,
    units: Vec<Sym>,
    sources: Vec<Sym>,
}

/// Adds `x` to a short list of distinct symbols.
fn once(list: &mut Vec<Sym>, x: Sym) {
    if !list.contains(&x) {
        list.push(x);
    }
}

/// Computes the report. Statistics use valid attempts only; invalid attempts are
/// counted and listed with their reasons. One pass over the columns: the values are
/// pushed in (trial, attempt, measurement) order, which fixes the summation order.
pub fn build_report(data: &CampaignData) -> Report {
    let (plan, c) = (&data.plan, &data.cols);
    let names = &c.names;
    let mut warnings: Vec<String> = c
        .unplanned
        .iter()
        .map(|(idx, attempt)| {
            format!(
                "attempt {attempt} of trial {idx} has no planned trial in this campaign; it is left out (the store is inconsistent)"
            )
        })
        .collect();

    let mut variants = variant_summaries(data);
    let variant_at: HashMap<&str, usize> = variants.iter().enumerate().map(|(i, v)| (v.name.as_str(), i)).collect();
    // The variant of each symbol (every trial's variant is a summary).
    let mut variant_of: Vec<usize> = vec![usize::MAX; names.len()];
    for &v in &c.t_variant {
        if variant_of[v as usize] == usize::MAX {
            variant_of[v as usize] = variant_at[names.name(v)];
        }
    }
    for (t, &v) in c.t_variant.iter().enumerate() {
        let v = &mut variants[variant_of[v as usize]];
        v.planned_trials += 1;
        match c.t_outcome[t] {
            TrialOutcome::Valid => v.valid_trials += 1,
            TrialOutcome::Failed => v.failed_trials += 1,
            TrialOutcome::Pending => v.pending_trials += 1,
        }
    }

    let width = names.len();
    let mut cells: Vec<Cell> = Vec::new();
    let mut cell_at: HashMap<(Sym, Sym, Sym), usize> = HashMap::new();
    let mut by_pair: HashMap<(Sym, Sym), Vec<u32>> = HashMap::new();
    let mut observed = vec![false; width];
    let mut observed_on_model = vec![false; width * width];
    let mut valid_per_trial = vec![0u32; c.t_idx.len()];
    let mut invalid_attempts = Vec::new();
    let mut reasons = c.reasons.iter().peekable();
    for a in 0..c.attempts() {
        let t = c.a_trial[a] as usize;
        let (model, variant) = (c.t_model[t], c.t_variant[t]);
        let ms = c.measurements_of(a);
        for &m in &c.m_metric[ms.clone()] {
            observed[m as usize] = true;
            observed_on_model[model as usize * width + m as usize] = true;
        }
        let v = &mut variants[variant_of[variant as usize]];
        if c.a_valid[a] {
            v.valid_attempts += 1;
            valid_per_trial[t] += 1;
            // One hash lookup per attempt: the pair's cells by metric symbol.
            let slots = by_pair.entry((model, variant)).or_insert_with(|| vec![u32::MAX; width]);
            for i in ms {
                let metric = c.m_metric[i];
                if slots[metric as usize] == u32::MAX {
                    slots[metric as usize] = cells.len() as u32;
                    cell_at.insert((model, variant, metric), cells.len());
                    cells.push(Cell::default());
                }
                let cell = &mut cells[slots[metric as usize] as usize];
                let x = c.m_value[i];
                if x.is_finite() {
                    cell.values.push(x);
                    cell.trials.push(t as u32);
                } else {
                    cell.non_finite += 1;
                }
                once(&mut cell.units, c.m_unit[i]);
                once(&mut cell.sources, c.m_source[i]);
            }
        } else {
            v.invalid_attempts += 1;
            while reasons.next_if(|(row, _)| (*row as usize) < a).is_some() {}
            let said = reasons.next_if(|(row, _)| *row as usize == a).map(|(_, r)| r.clone()).unwrap_or_default();
            invalid_attempts.push(InvalidAttempt {
                trial_idx: c.t_idx[t],
                trial_key: c.t_key[t].to_string(),
                device: names.name(c.t_device[t]).to_string(),
                model: names.name(model).to_string(),
                variant: names.name(variant).to_string(),
                attempt: c.a_attempt[a],
                reasons: said,
            });
        }
    }
    for (t, n) in valid_per_trial.into_iter().enumerate().filter(|&(_, n)| n > 1) {
        warnings.push(format!(
            "trial {}: {n} valid attempts, all counted (a trial should have one; the store is inconsistent)",
            c.t_key[t]
        ));
    }

    warnings.extend(label_warnings(c));
    warnings.extend(attestation_conflicts(c));
    let seen = (0..width as Sym).filter(|&m| observed[m as usize]).map(|m| names.name(m));
    let metrics = metric_order(&plan.metrics, seen);
    let present: HashSet<(Sym, Sym)> = c.t_model.iter().copied().zip(c.t_variant.iter().copied()).collect();
    let models = model_devices(data)
        .into_iter()
        .map(|(model, devices)| {
            let model_sym = names.get(model);
            let mut rows = Vec::new();
            for v in &variants {
                let variant_sym = names.get(&v.name);
                let (Some(ms), Some(vs)) = (model_sym, variant_sym) else { continue };
                if !present.contains(&(ms, vs)) {
                    continue;
                }
                let shown = metrics.iter().filter(|m| {
                    plan.metrics.contains(m)
                        || names.get(m).is_some_and(|s| observed_on_model[ms as usize * width + s as usize])
                });
                for metric in shown {
                    let at = names.get(metric).and_then(|m| cell_at.remove(&(ms, vs, m)));
                    let cell = at.map(|i| std::mem::take(&mut cells[i])).unwrap_or_default();
                    rows.push(metric_row(c, model, &v.name, metric, cell, &plan.statistics, &mut warnings));
                }
            }
            let sequential = plan.adaptive.filter(|a| a.sequential()).map(|rule| Sequential {
                rule,
                looks: &plan.looks,
                model,
                devices: devices.len(),
                trial_hours: (plan.duration_s + plan.cooldown_s) / 3600.0,
            });
            let verdicts = compare_variants(&variants, &mut rows, &plan.statistics, sequential.as_ref());
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
        statistics: StatisticsMeta::of(&plan.statistics),
        metrics,
        variants,
        models,
        invalid_attempts,
        attested: attested_rows(c),
        state: crate::report::model::state_rows::state_rows(c),
        warnings,
    }
}

/// The device an attempt ran on: its own, else its trial's.
pub(in crate::report) fn attempt_device(c: &CampaignColumns, a: usize) -> Sym {
    let own = c.a_device[a];
    if c.names.name(own).is_empty() { c.t_device[c.a_trial[a] as usize] } else { own }
}

/// Where an operator attested one thing and the lab read another before or after the
/// soak (brightness more than 5 points apart, a switch the other way): said once per
/// device, step and setting. The reading is what the preconditions checked.
fn attestation_conflicts(c: &CampaignColumns) -> Vec<String> {
    let mut seen: BTreeMap<(String, String, String), (usize, String)> = BTreeMap::new();
    for (row, x) in &c.attestations {
        let moment = match x.when.as_str() {
            "before-campaign" | "before-trial" => 0,
            "re-tether" | "after-trial" => 2,
            _ => continue,
        };
        let Ok(at) = c.attested_states.binary_search_by_key(row, |(r, _)| *r) else { continue };
        let state = &c.attested_states[at].1;
        for (key, said) in &x.values {
            let field = match key.as_str() {
                "brightness" => "brightness_pct",
                "bluetooth" => "bluetooth_on",
                "wifi" => "wifi_on",
                other => other,
            };
            let Some(setting) = SETTINGS.iter().position(|(f, _, _)| *f == field) else { continue };
            let Some(read) = state.get(moment, setting).filter(|r| r.source != OPERATOR) else { continue };
            let differs = match (said.as_f64(), read.value, said.as_bool()) {
                (Some(s), Kept::Float(v) | Kept::Integer(v), _) => (s - v).abs() > 5.0,
                (_, Kept::Switch(v), Some(s)) => s != v,
                _ => false,
            };
            if differs {
                let shown_said = match said.as_bool() {
                    Some(true) => "on".to_string(),
                    Some(false) => "off".to_string(),
                    None => format!("{said} %"),
                };
                let shown_read = match read.value {
                    Kept::Switch(true) => "on".to_string(),
                    Kept::Switch(false) => "off".to_string(),
                    v => format!("{} %", v.json_text()),
                };
                let device = c.names.name(c.a_device[*row as usize]).to_string();
                let e = seen
                    .entry((device, x.step.clone(), key.clone()))
                    .or_insert((0, format!("{shown_said} but the lab read {shown_read}")));
                e.0 += 1;
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
fn attested_rows(c: &CampaignColumns) -> Vec<AttestedRow> {
    let mut out: Vec<AttestedRow> = Vec::new();
    for (row, x) in &c.attestations {
        let a = *row as usize;
        let device = c.names.name(attempt_device(c, a)).to_string();
        let same = |r: &&mut AttestedRow| {
            r.device == device && r.step == x.step && r.values == x.values && r.by == x.by && r.when == x.when
        };
        let valid = usize::from(c.a_valid[a]);
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
    out
}

fn metric_row(
    c: &CampaignColumns,
    model: &str,
    variant: &str,
    metric: &str,
    cell: Cell,
    settings: &StatsSettings,
    warnings: &mut Vec<String>,
) -> MetricRow {
    // By name, as listed everywhere.
    let sorted = |syms: &[Sym]| syms.iter().map(|&s| c.names.name(s)).collect::<BTreeSet<&str>>();
    let (units, sources) = (sorted(&cell.units), sorted(&cell.sources));
    if units.len() > 1 {
        warnings.push(format!(
            "{model} / {variant} / {metric}: values in several units ({}) are pooled; fix the collector so the metric has one unit",
            units.iter().copied().collect::<Vec<_>>().join(", ")
        ));
    }
    if cell.non_finite > 0 {
        warnings.push(format!(
            "{model} / {variant} / {metric}: {} NaN or infinite value(s) of valid attempts left out of the statistics",
            cell.non_finite
        ));
    }
    let outliers =
        modified_z_outliers(&cell.values).into_iter().map(|i| c.t_key[cell.trials[i] as usize].to_string()).collect();
    MetricRow {
        variant: variant.to_string(),
        metric: metric.to_string(),
        unit: units.iter().copied().collect::<Vec<_>>().join(", "),
        sources: sources.iter().map(|s| s.to_string()).collect(),
        n: cell.values.len(),
        non_finite: cell.non_finite,
        stats: summarize(&cell.values, settings.confidence),
        gating: settings.gating.iter().any(|g| g == metric),
        outliers,
        comparisons: Vec::new(),
        values: cell.values,
    }
}

/// What a sequential campaign's verdicts on one model need besides the rows.
struct Sequential<'a> {
    rule: AdaptiveRepeats,
    looks: &'a [LookRecord],
    model: &'a str,
    devices: usize,
    trial_hours: f64,
}

impl Sequential<'_> {
    /// The design on this model, deciding by `settings`.
    fn design(&self, settings: &StatsSettings) -> Design {
        Design {
            min: self.rule.min,
            max: self.rule.max,
            devices: self.devices,
            alpha: settings.alpha,
            threshold: settings.practical_threshold,
            target: self.rule.target(),
        }
    }

    /// The looks the plan recorded for `variant` against `against`, in order.
    fn recorded(&self, variant: &str, against: &str) -> Vec<Recorded> {
        self.looks
            .iter()
            .filter(|l| l.model == self.model && l.variant == variant && l.against == against)
            .map(LookRecord::recorded)
            .collect()
    }
}

/// Compares every variant of one model with its references (see
/// [`references`](crate::report::model::verdicts::references)), fills the rows' comparisons and returns
/// the per-variant verdicts. In a sequential campaign a pair that a look stopped is judged
/// on the data of that look (`stats::sequential::decide_pair`).
fn compare_variants(
    variants: &[VariantSummary],
    rows: &mut [MetricRow],
    settings: &StatsSettings,
    sequential: Option<&Sequential>,
) -> Vec<VariantVerdict> {
    let at: HashMap<(&str, &str), usize> =
        rows.iter().enumerate().map(|(i, r)| ((r.variant.as_str(), r.metric.as_str()), i)).collect();
    let design = sequential.map(|s| s.design(settings));
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
            let recorded = sequential.map(|s| s.recorded(&v.name, &against)).unwrap_or_default();
            let looked = design.as_ref().map(|design| Looked { design, recorded: &recorded });
            let Some(decision) = decide_pair(&pairs, &rule(settings), looked) else { continue };
            let judged: Vec<(usize, MetricComparison)> =
                decision.judged.into_iter().map(|(k, d)| (k, comparison(&against, kind, d))).collect();
            let named: Vec<(&str, &MetricComparison)> = judged.iter().map(|(k, c)| (pairs[*k].metric, c)).collect();
            let mut verdict = overall(&v.name, &against, kind, &named, settings);
            if let (Some(look), Some(s)) = (&decision.look, sequential) {
                verdict.sequential = Some(SequentialStop::of(look, s.trial_hours));
            }
            verdicts.push(verdict);
            found.extend(judged.into_iter().map(|(k, c)| (idx[k].0, c)));
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
    let (c, summary) = (&data.cols, VariantSummary::new);
    let mut out: Vec<VariantSummary> = data
        .plan
        .variants
        .iter()
        .map(|v| summary(&v.name, &v.build, &v.config, v.baseline_build, v.default_config))
        .collect();
    let mut first_of: HashMap<Sym, usize> = HashMap::new();
    for (t, &v) in c.t_variant.iter().enumerate() {
        first_of.entry(v).or_insert(t);
    }
    let extra: BTreeMap<&str, usize> = first_of
        .into_iter()
        .map(|(v, t)| (c.names.name(v), t))
        .filter(|(name, _)| data.plan.variant(name).is_none())
        .collect();
    let name = |s: Sym| c.names.name(s);
    out.extend(extra.into_iter().map(|(v, t)| summary(v, name(c.t_build[t]), name(c.t_config[t]), false, false)));
    out
}

/// Device models in plan order with their devices, each followed by its pools of trials
/// reported apart (`Pixel 8 (soft-untethered)`), then models only the trials name. A
/// model all of whose trials are in a pool is left out.
fn model_devices(data: &CampaignData) -> Vec<(&str, Vec<&str>)> {
    let c = &data.cols;
    let pairs: HashSet<(Sym, Sym)> = c.t_model.iter().copied().zip(c.t_device.iter().copied()).collect();
    let mut devices: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (m, d) in pairs {
        devices.entry(c.names.name(m)).or_default().insert(c.names.name(d));
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
fn label_warnings(c: &CampaignColumns) -> Vec<String> {
    let mut by_label: BTreeMap<(&str, &str), (usize, &str)> = BTreeMap::new();
    for (row, labels) in c.labels.iter().filter(|(a, _)| c.a_valid[*a as usize]) {
        let model = c.names.name(c.t_model[c.a_trial[*row as usize] as usize]);
        for l in labels {
            // Figures vary; the kind of label is what is said once ("charged for 12 s …" → "charged for … s …").
            let kind = l.split_once(" for ").map_or(l.as_str(), |(k, _)| k);
            let e = by_label.entry((model, kind)).or_insert((0, l));
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
        content_hashes: {
            let mut h = c.content_hashes.clone();
            if let Some(o) = h.as_object_mut() {
                o.remove("rerun");
            }
            h
        },
        rerun: c.content_hashes.get("rerun").and_then(|r| serde_json::from_value::<RerunMeta>(r.clone()).ok()),
        footprint: c.footprint_json.clone(),
        order: p.order,
        duration_s: p.duration_s,
        cooldown_s: p.cooldown_s,
        repeats: p.repeats,
        max_attempts: p.max_attempts,
        planned_trials: data.cols.t_idx.len(),
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::measure::Measurement;
    use crate::testing::fixture::{self, MODEL};

    fn row<'a>(r: &'a Report, variant: &str, metric: &str) -> &'a MetricRow {
        r.models[0].rows.iter().find(|x| x.variant == variant && x.metric == metric).expect("row exists")
    }

    #[test]
    fn soft_untethered_trials_are_reported_apart_never_pooled_with_power_cut_ones() {
        let base = fixture::records("c1");
        let mut attempts = base.attempts.clone();
        for a in &mut attempts {
            a.untether = Some(UntetherMode::PowerCut);
            // sim-iphone-2 was only told it is unplugged: trials 2, 3 and 6 (and pending 7).
            if [2, 3, 6].contains(&a.trial_idx) {
                a.untether = Some(UntetherMode::SoftUntethered);
                a.labels = vec!["charged for 3412 s during the soak (soft-untethered: USB power stays on)".into()];
            }
        }
        let data = fixture::Records { attempts, ..base.clone() }.data();
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
        assert_eq!(build_report(&base.data()).models.len(), 1);
    }

    #[test]
    fn statistics_use_valid_attempts_only() {
        let r = build_report(&fixture::campaign("c1"));
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
        let r = build_report(&fixture::campaign("c1"));
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
        let r = build_report(&fixture::campaign("c1"));
        assert_eq!(r.schema_version, 2);
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
        let mut data = fixture::records("c1");
        // A measurement in another unit, a NaN, and an attempt of an unplanned trial.
        data.attempts[1].measurements.push(Measurement::new("cpu_pct", 0.12, "fraction", "sim model"));
        data.attempts[1].measurements.push(Measurement::new("battery_drop_pct", f64::NAN, "%", "sim model"));
        data.attempts.push(fixture::attempt("c1", 99, 0, &[], &[("cpu_pct", 1.0, "%")]));
        let r = build_report(&data.data());
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
        let mut data = fixture::campaign("c1");
        data.plan.metrics.push("memory_mb".into());
        let r = build_report(&data);
        let mem = row(&r, "envoy-poll", "memory_mb");
        assert_eq!((mem.n, mem.stats.is_none(), mem.unit.as_str()), (0, true, ""));
    }

    /// 100 000 measurements (10 000 attempts × 10 metrics, 2 models, 5 variants) are all
    /// counted. (Speed is measured by `cargo bench --bench sim_lab`, not asserted here.)
    #[test]
    fn builds_100k_measurements() {
        let base = fixture::records("big");
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
            attempts.push(fixture::attempt("big", i, 0, &[], &refs));
        }
        let mut data = base;
        data.plan.variants = variants.iter().map(|v| fixture::variant(v, *v == "a")).collect();
        data.plan.devices.clear();
        data.plan.metrics.clear();
        data.trials = trials;
        data.attempts = attempts;

        let r = build_report(&data.data());
        let total: usize = r.models.iter().flat_map(|m| &m.rows).map(|row| row.n).sum();
        assert_eq!(total, 100_000);
        assert_eq!(r.models.len(), 2);
        assert_eq!(r.models[0].rows.len(), 5 * 10);
        assert_eq!(r.variants.iter().map(|v| v.valid_attempts).sum::<usize>(), 10_000);
    }
}
