//! A sequential campaign's look after a round (`repeats = { min, max, stop = "decided" }`):
//! each variant × model × reference decided by `stats::sequential`, from the store's trials
//! and valid values as the report groups them (models with their pools, variants in plan
//! order, metrics in display order, values in trial and attempt order), without building
//! the report. A look stops a pair exactly when the report says it is decided: both ask
//! `stats::sequential::decide_pair` with the same values.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::adaptive::Extension;
use super::trial::{RunError, blocking};
use crate::measure::{UntetherMode, metric_order};
use crate::plan::{LookRecord, Plan};
use crate::report::{VariantSummary, pooled, references};
use crate::runner::Event;
use crate::stats::sequential::{Design, Looked, PairLook, decide_pair, decided};
use crate::stats::{Arm, DecisionRule, MetricPair, Summary, Verdict, summarize};
use crate::store::{LookAttempt, PlannedTrialRow, Store, StoreError, TrialRecord};

/// One variant against one reference on one (reported) model at this look.
#[derive(Debug, Clone)]
pub(super) struct PairState {
    pub model: String,
    pub variant: String,
    pub against: String,
    pub verdict: Verdict,
    pub look: PairLook,
}

/// A variant with references and trials on a model, but no comparison with any of them
/// (no valid value in an arm).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Uncompared {
    pub model: String,
    pub variant: String,
    /// Whether the report shows rows for it (values or not).
    pub has_rows: bool,
    pub references: Vec<String>,
}

/// The campaign as a look reads it: the valid values per reported model, variant and
/// metric, and what the report's grouping needs besides.
struct Values<'a> {
    /// Reported models in report order, each with its number of devices.
    models: Vec<(String, usize)>,
    variants: Vec<VariantSummary>,
    /// Finite values of valid attempts by (model, variant, metric), in trial and attempt
    /// order; models by their name's index in `names`.
    values: HashMap<usize, HashMap<&'a str, HashMap<&'a str, Vec<f64>>>>,
    names: HashMap<String, usize>,
    /// (model, variant) pairs that have trials.
    present: HashSet<(usize, &'a str)>,
    /// Models on which some attempt measured something.
    measured: HashSet<usize>,
    /// Every metric in display order.
    metrics: Vec<String>,
}

impl<'a> Values<'a> {
    fn read(trials: &'a [TrialRecord], attempts: &'a [LookAttempt], plan: &'a Plan) -> Values<'a> {
        let mut rows: Vec<&PlannedTrialRow> = trials.iter().map(|t| &t.row).collect();
        rows.sort_by_key(|r| r.idx);
        let at: HashMap<u32, usize> = rows.iter().enumerate().map(|(i, r)| (r.idx, i)).collect();
        // As the report reads them: attempts of planned trials, by trial then attempt.
        let mut attempts: Vec<&LookAttempt> = attempts.iter().filter(|a| at.contains_key(&a.trial_idx)).collect();
        attempts.sort_by_key(|a| (a.trial_idx, a.attempt));
        let reported = reported_models(&rows, &attempts);
        let mut names: HashMap<String, usize> = HashMap::new();
        let model_of: Vec<usize> = reported
            .iter()
            .map(|m| {
                let next = names.len();
                *names.entry(m.clone()).or_insert(next)
            })
            .collect();
        let present: HashSet<(usize, &str)> =
            rows.iter().zip(&model_of).map(|(r, &m)| (m, r.variant.as_str())).collect();
        let mut values: HashMap<usize, HashMap<&str, HashMap<&str, Vec<f64>>>> = HashMap::new();
        let mut measured = HashSet::new();
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        for a in attempts {
            let t = at[&a.trial_idx];
            let (model, variant) = (model_of[t], rows[t].variant.as_str());
            if !a.values.is_empty() {
                measured.insert(model);
            }
            for (metric, value) in &a.values {
                seen.insert(metric);
                if a.valid && value.is_finite() {
                    let cell = values.entry(model).or_default().entry(variant).or_default();
                    cell.entry(metric).or_default().push(*value);
                }
            }
        }
        Values {
            models: model_devices(plan, &rows, &reported),
            variants: variant_summaries(plan, &rows),
            values,
            names,
            present,
            measured,
            metrics: metric_order(&plan.metrics, seen),
        }
    }

    fn has_trials(&self, model: &str, variant: &str) -> bool {
        self.names.get(model).is_some_and(|&m| self.present.contains(&(m, variant)))
    }

    fn measured_on(&self, model: &str) -> bool {
        self.names.get(model).is_some_and(|m| self.measured.contains(m))
    }

    /// The metrics both variants have values of on `model`, in display order, with their
    /// summaries.
    fn arms(&self, model: &str, variant: &str, against: &str, confidence: f64) -> Vec<(&str, Arms<'_>)> {
        let on_model = self.names.get(model).and_then(|m| self.values.get(m));
        let (Some(ts), Some(rs)) = (on_model.and_then(|v| v.get(variant)), on_model.and_then(|v| v.get(against)))
        else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for metric in &self.metrics {
            let (Some(t), Some(r)) = (ts.get(metric.as_str()), rs.get(metric.as_str())) else { continue };
            let (Some(ts), Some(rs)) = (summarize(t, confidence), summarize(r, confidence)) else { continue };
            out.push((metric.as_str(), (t.as_slice(), ts, r.as_slice(), rs)));
        }
        out
    }
}

/// A metric's two arms: values and summary of each.
type Arms<'v> = (&'v [f64], Summary, &'v [f64], Summary);

/// The model each trial is reported under: its device's model, with the pool label of
/// the attempt that counts (the valid one, else the last), as report/model/input.rs pools
/// them.
fn reported_models(rows: &[&PlannedTrialRow], attempts: &[&LookAttempt]) -> Vec<String> {
    let mut mode: HashMap<u32, (bool, u32, UntetherMode)> = HashMap::new();
    for a in attempts {
        let Some(m) = a.untether else { continue };
        let key = (a.valid, a.attempt, m);
        let e = mode.entry(a.trial_idx).or_insert(key);
        if (key.0, key.1) > (e.0, e.1) {
            *e = key;
        }
    }
    rows.iter()
        .map(|r| match mode.get(&r.idx).and_then(|k| k.2.pool_label()) {
            Some(label) => pooled(&r.device_model, label),
            None => r.device_model.clone(),
        })
        .collect()
}

/// Reported models in the report's order with their devices' count: plan models in plan
/// order (the plan's devices), each followed by its pools (the pool's devices), then
/// models only the trials name, alphabetically. A model all of whose trials are in a pool
/// is left out.
fn model_devices(plan: &Plan, rows: &[&PlannedTrialRow], reported: &[String]) -> Vec<(String, usize)> {
    let mut devices: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (r, m) in rows.iter().zip(reported) {
        devices.entry(m.as_str()).or_default().insert(r.device.as_str());
    }
    let mut planned: Vec<(&str, usize)> = Vec::new();
    for d in &plan.devices {
        match planned.iter_mut().find(|(m, _)| *m == d.model) {
            Some((_, n)) => *n += 1,
            None => planned.push((&d.model, 1)),
        }
    }
    let mut out: Vec<(String, usize)> = Vec::new();
    for (model, n) in planned {
        let pools: Vec<(String, usize)> = UntetherMode::POOLS
            .iter()
            .filter_map(|label| devices.get_key_value(pooled(model, label).as_str()))
            .map(|(&pool, devs)| (pool.to_string(), devs.len()))
            .collect();
        if pools.is_empty() || devices.contains_key(model) {
            out.push((model.to_string(), n));
        }
        out.extend(pools);
    }
    let extra: Vec<(String, usize)> = devices
        .into_iter()
        .filter(|(m, _)| !out.iter().any(|(o, _)| o == m))
        .map(|(m, devs)| (m.to_string(), devs.len()))
        .collect();
    out.extend(extra);
    out
}

/// Variants in plan order, then any the trials name that the plan does not, with the
/// build and config of their first trial, alphabetically.
fn variant_summaries(plan: &Plan, rows: &[&PlannedTrialRow]) -> Vec<VariantSummary> {
    let mut out: Vec<VariantSummary> = plan
        .variants
        .iter()
        .map(|v| VariantSummary::new(&v.name, &v.build, &v.config, v.baseline_build, v.default_config))
        .collect();
    let mut extra: BTreeMap<&str, &PlannedTrialRow> = BTreeMap::new();
    for r in rows.iter().filter(|r| plan.variant(&r.variant).is_none()) {
        extra.entry(&r.variant).or_insert(r);
    }
    out.extend(extra.into_iter().map(|(v, r)| VariantSummary::new(v, &r.build, &r.config, false, false)));
    out
}

/// Every pair's state at this look (models, variants and references in the report's
/// order), and the variants that have no comparison yet.
pub(super) fn pair_states(
    trials: &[TrialRecord],
    attempts: &[LookAttempt],
    plan: &Plan,
) -> (Vec<PairState>, Vec<Uncompared>) {
    let Some(rule) = plan.adaptive.filter(|a| a.sequential()) else { return (Vec::new(), Vec::new()) };
    let s = &plan.statistics;
    let decision =
        DecisionRule { alpha: s.alpha, threshold: s.practical_threshold, confidence: s.confidence, gating: &s.gating };
    let v = Values::read(trials, attempts, plan);
    let mut states = Vec::new();
    let mut uncompared = Vec::new();
    for (model, devices) in &v.models {
        let design = Design {
            min: rule.min,
            max: rule.max,
            devices: *devices,
            alpha: s.alpha,
            threshold: s.practical_threshold,
            target: rule.target(),
        };
        let mut compared: HashSet<&str> = HashSet::new();
        for variant in &v.variants {
            if !v.has_trials(model, &variant.name) {
                continue;
            }
            for (against, _) in references(variant, &v.variants) {
                let arms = v.arms(model, &variant.name, &against, s.confidence);
                let pairs: Vec<MetricPair> = arms
                    .iter()
                    .map(|(metric, (t, ts, r, rs))| MetricPair {
                        metric,
                        treatment: Arm { values: t, stats: ts },
                        reference: Arm { values: r, stats: rs },
                    })
                    .collect();
                let recorded: Vec<_> = plan
                    .looks
                    .iter()
                    .filter(|l| &l.model == model && l.variant == variant.name && l.against == against)
                    .map(LookRecord::recorded)
                    .collect();
                let looked = Looked { design: &design, recorded: &recorded };
                let Some(d) = decide_pair(&pairs, &decision, Some(looked)) else { continue };
                let Some(look) = d.look else { continue };
                compared.insert(&variant.name);
                states.push(PairState {
                    model: model.clone(),
                    variant: variant.name.clone(),
                    against,
                    verdict: d.verdict,
                    look,
                });
            }
        }
        for variant in &v.variants {
            let refs: Vec<String> = references(variant, &v.variants).into_iter().map(|(r, _)| r).collect();
            if refs.is_empty() || compared.contains(variant.name.as_str()) {
                continue;
            }
            let present = v.has_trials(model, &variant.name);
            let shown = !plan.metrics.is_empty() || v.measured_on(model);
            uncompared.push(Uncompared {
                model: model.clone(),
                variant: variant.name.clone(),
                has_rows: present && shown,
                references: refs,
            });
        }
    }
    (states, uncompared)
}

/// A sequential campaign's look after a round: each pair's verdict at this look is
/// recorded in the plan; a variant × model not yet decided and below `max` gets one more
/// block, and so does its reference while any variant compared with it does. The new
/// looks and trials are stored with the plan. `decided` holds a `VariantDecided` event per
/// pair decided (or out of looks) here.
pub(super) async fn look(store: &Store, id: &str, plan: &mut Plan) -> Result<Extension, RunError> {
    let Some(rule) = plan.adaptive else { return Err(RunError::Internal("a look without a sequential rule".into())) };
    let (s, i) = (store.clone(), id.to_string());
    let (trials, attempts) = blocking(move || Ok::<_, StoreError>((s.trials(&i)?, s.look_values(&i)?))).await?;
    let (states, uncompared) = pair_states(&trials, &attempts, plan);
    let trial_hours = (plan.duration_s + plan.cooldown_s) / 3600.0;
    let mut decided_events = Vec::new();
    // Plan model, variant, and why (none for a reference running for its variants).
    let mut more: Vec<(String, String, Option<String>)> = Vec::new();
    for p in &states {
        // A model's pools ("Pixel 5 (soft-untethered)") are judged apart, planned together.
        let model = plan_model(plan, &p.model);
        let key = |l: &&LookRecord| l.model == p.model && l.variant == p.variant && l.against == p.against;
        let earlier: Vec<&LookRecord> = plan.looks.iter().filter(key).collect();
        if earlier.iter().any(|l| l.stopped) {
            continue;
        }
        let room = plan.planned(&model, &p.variant) < rule.max;
        let stopped = decided(p.verdict) || !room;
        if earlier.last().is_none_or(|l| p.look.t > l.t) || stopped {
            plan.looks.push(LookRecord {
                model: p.model.clone(),
                variant: p.variant.clone(),
                against: p.against.clone(),
                n_treatment: p.look.n_treatment,
                n_reference: p.look.n_reference,
                t: p.look.t,
                verdict: p.verdict,
                stopped,
            });
        }
        if stopped {
            decided_events.push(Event::VariantDecided {
                model: p.model.clone(),
                variant: p.variant.clone(),
                against: p.against.clone(),
                verdict: p.verdict,
                look: p.look.look,
                max_looks: p.look.max_looks,
                trials: p.look.n_treatment,
                device_hours: p.look.device_hours(trial_hours),
                fixed_device_hours: p.look.fixed_device_hours(trial_hours),
            });
        } else {
            let why = format!("{} at look {} vs {}", p.verdict.as_str(), p.look.look, p.against);
            more.push((model.clone(), p.variant.clone(), Some(why)));
            more.push((model.clone(), p.against.clone(), None));
        }
    }
    // A variant with trials but no comparison yet (no valid value in an arm) is undecided.
    for u in uncompared {
        let model = plan_model(plan, &u.model);
        if plan.planned(&model, &u.variant) == 0 {
            continue;
        }
        let why = if u.has_rows { "no comparison yet" } else { "no valid values yet" };
        more.push((model.clone(), u.variant, Some(why.to_string())));
        for r in u.references {
            more.push((model.clone(), r, None));
        }
    }
    let mut trials = Vec::new();
    let mut reasons = Vec::new();
    let mut models: Vec<String> = Vec::new();
    for d in &plan.devices {
        if !models.contains(&d.model) && more.iter().any(|m| m.0 == d.model) {
            models.push(d.model.clone());
        }
    }
    for model in models {
        let devices = plan.devices.iter().filter(|d| d.model == model).count() as u32;
        let mut wanted: Vec<(String, u32)> = Vec::new();
        for (_, variant, why) in more.iter().filter(|m| m.0 == model) {
            let planned = plan.planned(&model, variant);
            let room = rule.max.saturating_sub(planned);
            // A design sized from a power looks after its blocks; the other, every round.
            let step = match rule.target() {
                Some(t) => {
                    t.counts(rule.max, rule.min).into_iter().find(|&c| c > planned).map_or(room, |c| c - planned)
                }
                None => devices,
            };
            if room > 0 && !wanted.iter().any(|w| &w.0 == variant) {
                wanted.push((variant.clone(), room.min(step)));
            }
            if let Some(why) = why.as_ref().filter(|_| room > 0) {
                reasons.push(format!("{model} / {variant}: {why}"));
            }
        }
        // Variants in plan order, as a balanced block lists them.
        wanted.sort_by_key(|(v, _)| plan.variants.iter().position(|p| &p.name == v));
        // A round gives each device at most one trial of a variant: a block larger than the
        // model's devices takes several rounds, each balanced.
        while wanted.iter().any(|w| w.1 > 0) {
            let round: Vec<(String, u32)> =
                wanted.iter().filter(|w| w.1 > 0).map(|(v, n)| (v.clone(), (*n).min(devices))).collect();
            trials.extend(plan.add_block(&model, &round));
            for w in &mut wanted {
                w.1 = w.1.saturating_sub(devices);
            }
        }
    }
    let plan_json = serde_json::to_string(&*plan).map_err(|e| RunError::Internal(format!("plan to JSON: {e}")))?;
    let (s, i, rows) = (store.clone(), id.to_string(), trials.clone());
    blocking(move || s.add_trials(&i, &rows, &plan_json)).await?;
    Ok(Extension { trials, reasons, decided: decided_events })
}

/// The plan's model of a report's model or of one of its pools (`Pixel 5 (soft-untethered)`).
fn plan_model(plan: &Plan, reported: &str) -> String {
    plan.devices
        .iter()
        .map(|d| d.model.as_str())
        .find(|m| reported == *m || reported.strip_prefix(*m).is_some_and(|rest| rest.starts_with(" (")))
        .unwrap_or(reported)
        .to_string()
}

#[cfg(test)]
mod tests {
    use rand::RngExt;

    use super::*;
    use crate::config::AdaptiveRepeats;
    use crate::plan::{PlannedDevice, Variant};
    use crate::report::build_report;
    use crate::store::AttemptStatus;
    use crate::testing::fixture::{self, Records};

    /// What a look needs of a pair: names, verdict, and the stop's figures.
    type Seen = (String, String, String, Verdict, usize, usize, Option<usize>, u32, u32, f64, f64, Option<f64>);

    /// The look as it was, read off a built report: the oracle for the direct one.
    fn from_report(data: &Records) -> (Vec<Seen>, Vec<Uncompared>) {
        let report = build_report(&data.data());
        let mut seen = Vec::new();
        let mut uncompared = Vec::new();
        for m in &report.models {
            for v in &m.verdicts {
                let s = v.sequential.as_ref().expect("a sequential campaign's verdict has its stop");
                seen.push((
                    m.model.clone(),
                    v.variant.clone(),
                    v.against.clone(),
                    v.verdict,
                    s.look,
                    s.max_looks,
                    s.decided_at,
                    s.n_treatment,
                    s.n_reference,
                    s.t,
                    s.device_hours,
                    s.fixed_device_hours,
                ));
            }
        }
        for m in &report.models {
            for v in &report.variants {
                let refs = references(v, &report.variants);
                if refs.is_empty() || m.verdicts.iter().any(|x| x.variant == v.name) {
                    continue;
                }
                uncompared.push(Uncompared {
                    model: m.model.clone(),
                    variant: v.name.clone(),
                    has_rows: m.rows.iter().any(|r| r.variant == v.name),
                    references: refs.into_iter().map(|(r, _)| r).collect(),
                });
            }
        }
        (seen, uncompared)
    }

    fn direct(data: &Records) -> (Vec<Seen>, Vec<Uncompared>) {
        let attempts: Vec<LookAttempt> = data.attempts.iter().map(LookAttempt::from).collect();
        let (states, uncompared) = pair_states(&data.trials, &attempts, &data.plan);
        let hours = (data.plan.duration_s + data.plan.cooldown_s) / 3600.0;
        let seen = states
            .into_iter()
            .map(|p| {
                let l = &p.look;
                (
                    p.model,
                    p.variant,
                    p.against,
                    p.verdict,
                    l.look,
                    l.max_looks,
                    l.decided_at,
                    l.n_treatment,
                    l.n_reference,
                    l.t,
                    l.device_hours(hours),
                    l.fixed_device_hours(hours),
                )
            })
            .collect();
        (seen, uncompared)
    }

    /// A random sequential campaign: two planned models and one only the trials name,
    /// a config variant and sometimes one the plan lacks, pools, NaNs, invalid and
    /// retried attempts, and looks recorded before (some stopped).
    fn campaign(round: usize, rng: &mut rand_chacha::ChaCha8Rng) -> Records {
        let mut data = fixture::records("c1");
        let base_trial = data.trials[0].clone();
        let base_attempt = data.attempts[0].clone();
        data.plan.variants.push(Variant {
            name: "control+trace".into(),
            build: "control".into(),
            config: "trace".into(),
            baseline_build: true,
            default_config: false,
        });
        data.plan.devices.push(PlannedDevice {
            name: "px-1".into(),
            model: "Pixel 8".into(),
            ..data.plan.devices[0].clone()
        });
        if round.is_multiple_of(4) {
            data.plan.metrics.clear();
        }
        let gatings: [&[&str]; 3] = [&["cpu_pct", "battery_drop_pct"], &["cpu_pct"], &["memory_mb"]];
        data.plan.statistics.gating = gatings[round % 3].iter().map(|g| g.to_string()).collect();
        let max = 6 + (round % 7) as u32;
        data.plan.adaptive = Some(AdaptiveRepeats::decided(3, max));
        let devices =
            [("sim-iphone-1", fixture::MODEL), ("sim-iphone-2", fixture::MODEL), ("px-1", "Pixel 8"), ("odd-1", "Odd")];
        let mut variants = vec!["control", "envoy-poll", "control+trace"];
        if round.is_multiple_of(5) {
            variants.push("stray");
        }
        data.trials.clear();
        data.attempts.clear();
        let n = 12 + rng.random_range(0..50u32);
        for idx in 0..n {
            let (device, model) = devices[rng.random_range(0..devices.len() - usize::from(!round.is_multiple_of(3)))];
            let variant = variants[rng.random_range(0..variants.len())];
            let mut t = base_trial.clone();
            t.row.idx = idx;
            t.row.key = format!("{idx:04}-{device}-{variant}");
            t.row.device = device.into();
            t.row.device_model = model.into();
            t.row.variant = variant.into();
            t.row.build = variant.split('+').next().unwrap().into();
            t.row.config = if variant.contains('+') { "trace".into() } else { "default".into() };
            data.trials.push(t);
            let tries = rng.random_range(0..3u32);
            for attempt in 0..tries {
                let mut a = base_attempt.clone();
                a.trial_idx = idx;
                a.attempt = attempt;
                a.status = if attempt + 1 < tries || rng.random_range(0..6) == 0 {
                    AttemptStatus::Invalid
                } else {
                    AttemptStatus::Valid
                };
                a.untether = match rng.random_range(0..8) {
                    0 => Some(UntetherMode::SoftUntethered),
                    1 | 2 => Some(UntetherMode::PowerCut),
                    _ => None,
                };
                let shift = if variant == "envoy-poll" { 1.0 + 0.3 * f64::from(round as u32 % 2) } else { 1.0 };
                for m in &mut a.measurements {
                    m.value *= shift * (1.0 + rng.random_range(-0.01..0.01));
                    if rng.random_range(0..25) == 0 {
                        m.value = f64::NAN;
                    }
                }
                if rng.random_range(0..10) == 0 {
                    a.measurements.clear();
                }
                data.attempts.push(a);
            }
        }
        // An attempt of a trial the plan does not have is left out.
        let mut stray = base_attempt.clone();
        stray.trial_idx = 999;
        data.attempts.push(stray);
        // Earlier looks: some pairs looked at once or twice, some stopped.
        for model in [fixture::MODEL, "Pixel 8", "iPhone 6s (soft-untethered)"] {
            for (variant, against) in [("envoy-poll", "control"), ("control+trace", "control")] {
                let mut t = 0.0;
                for _ in 0..rng.random_range(0..3) {
                    t += rng.random_range(0.0..0.4);
                    let verdict = [Verdict::Inconclusive, Verdict::Worse, Verdict::Same][rng.random_range(0..3)];
                    data.plan.looks.push(LookRecord {
                        model: model.into(),
                        variant: variant.into(),
                        against: against.into(),
                        n_treatment: rng.random_range(1..5),
                        n_reference: rng.random_range(1..5),
                        t,
                        verdict,
                        stopped: rng.random_range(0..4) == 0,
                    });
                }
            }
        }
        data
    }

    #[test]
    fn looks_decide_as_the_report_did_on_many_campaigns() {
        let mut rng = crate::seed::rng(11, &["look", "oracle"]);
        let (mut pairs, mut decided_pairs, mut stopped, mut pooled_pairs, mut uncompared) = (0, 0, 0, 0, 0);
        for round in 0..200 {
            let data = campaign(round, &mut rng);
            let (direct, oracle) = (direct(&data), from_report(&data));
            assert_eq!(direct.0, oracle.0, "round {round}");
            assert_eq!(direct.1, oracle.1, "round {round}");
            pairs += direct.0.len();
            decided_pairs += direct.0.iter().filter(|p| decided(p.3)).count();
            stopped += direct.0.iter().filter(|p| p.6.is_some()).count();
            pooled_pairs += direct.0.iter().filter(|p| p.0.contains('(')).count();
            uncompared += direct.1.len();
        }
        // The campaigns exercise every branch: decided, stopped earlier, pools, no comparison.
        assert!(pairs > 500 && decided_pairs > 20 && stopped > 50, "{pairs} {decided_pairs} {stopped}");
        assert!(pooled_pairs > 20 && uncompared > 20, "{pooled_pairs} {uncompared}");
    }
}
