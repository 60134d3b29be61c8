//! Adaptive repeats: more trials until every gating metric is measured precisely enough.
//!
//! The rule is a capped sequential one (docs/statistics.md): after every round, each
//! variant × device model whose gating metrics do not all have a 95 % CI half-width
//! within `target_ci` of their mean gets one more block (one trial per device of the
//! model), until `max` planned trials. Only precision is looked at, never a p-value or a
//! difference between variants, so stopping cannot bias a comparison towards
//! significance.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use async_trait::async_trait;

use super::trial::{RunError, blocking};
use crate::device::Device;
use crate::measure::UntetherMode;
use crate::measure::metric_order;
use crate::plan::Plan;
use crate::runner::Event;
use crate::stats::summarize;
use crate::store::{AttemptRecord, AttemptStatus, PlannedTrialRow, Store, TrialRecord};
use crate::tether::{Tether, TetherError};

/// A variant × model whose gating metrics are not precise enough yet.
#[derive(Debug, Clone, PartialEq)]
pub struct Imprecise {
    pub model: String,
    pub variant: String,
    /// How many more trials it may get before `max` (at most one per device per round).
    pub room: u32,
    /// `cpu_pct ±4.1 % > ±3 %`, one per metric off target.
    pub reasons: Vec<String>,
}

/// What one adaptive round added, and (sequential) what its look decided.
#[derive(Debug, Clone)]
pub struct Extension {
    pub trials: Vec<PlannedTrialRow>,
    pub reasons: Vec<String>,
    pub decided: Vec<Event>,
}

/// Which variant × model pairs need more trials, judged from the finite values of valid
/// attempts with `stats::summarize` (the interval the report shows, without building
/// one). Pure. Pairs come in the report's order: models as the plan lists its devices,
/// variants as the plan lists them (others alphabetically after), metrics in display
/// order. A gating metric the device does not measure (n = 0) cannot improve and is
/// ignored; one with fewer than two values has no interval and needs more; a mean of 0
/// counts as precise only when the interval has zero width.
pub fn imprecise(trials: &[TrialRecord], attempts: &[AttemptRecord], plan: &Plan) -> Vec<Imprecise> {
    let Some(rule) = plan.adaptive.filter(|a| !a.sequential()) else { return Vec::new() };
    let gating = &plan.statistics.gating;
    let rows: HashMap<u32, &PlannedTrialRow> = trials.iter().map(|t| (t.row.idx, &t.row)).collect();
    // In trial and attempt order, as the report sums them: the same intervals to the bit.
    let mut valid: Vec<&AttemptRecord> = attempts.iter().filter(|a| a.status == AttemptStatus::Valid).collect();
    valid.sort_by_key(|a| (a.trial_idx, a.attempt));
    let mut values: HashMap<(&str, &str, &str), Vec<f64>> = HashMap::new();
    for a in valid {
        let Some(row) = rows.get(&a.trial_idx) else { continue };
        for m in a.measurements.iter().filter(|m| m.value.is_finite() && gating.contains(&m.metric)) {
            values.entry((&row.device_model, &row.variant, &m.metric)).or_default().push(m.value);
        }
    }
    let mut out = Vec::new();
    for (model, variant) in pairs(trials, plan) {
        let planned = plan.planned(model, variant);
        if planned >= rule.max {
            continue;
        }
        let measured = gating.iter().filter(|g| values.contains_key(&(model, variant, g.as_str())));
        let mut reasons = Vec::new();
        for metric in metric_order(&plan.metrics, measured.map(String::as_str)) {
            let Some(xs) = values.get(&(model, variant, metric.as_str())) else { continue };
            let half = summarize(xs, plan.statistics.confidence).and_then(|s| s.ci_half_width().map(|h| (h, s.mean)));
            let relative = match half {
                None => {
                    reasons.push(format!("{metric} has {} value(s), no interval yet", xs.len()));
                    continue;
                }
                Some((0.0, _)) => 0.0,
                Some((_, 0.0)) => f64::INFINITY,
                Some((h, m)) => h / m.abs(),
            };
            if relative > rule.target_ci {
                reasons.push(format!("{metric} ±{} > ±{}", pct(relative), pct(rule.target_ci)));
            }
        }
        if !reasons.is_empty() {
            out.push(Imprecise { model: model.into(), variant: variant.into(), room: rule.max - planned, reasons });
        }
    }
    out
}

/// The model × variant pairs that have trials: models in the order the plan lists its
/// devices, then models only the trials name; variants in plan order, then the others;
/// both extras alphabetically.
fn pairs<'a>(trials: &'a [TrialRecord], plan: &'a Plan) -> Vec<(&'a str, &'a str)> {
    let present: BTreeSet<(&str, &str)> =
        trials.iter().map(|t| (t.row.device_model.as_str(), t.row.variant.as_str())).collect();
    let in_order = |planned: Vec<&'a str>, all: BTreeSet<&'a str>| {
        let mut out: Vec<&str> = Vec::new();
        for x in planned.into_iter().chain(all) {
            if !out.contains(&x) {
                out.push(x);
            }
        }
        out
    };
    let models =
        in_order(plan.devices.iter().map(|d| d.model.as_str()).collect(), present.iter().map(|p| p.0).collect());
    let variants =
        in_order(plan.variants.iter().map(|v| v.name.as_str()).collect(), present.iter().map(|p| p.1).collect());
    models.iter().flat_map(|&m| variants.iter().map(move |&v| (m, v))).filter(|p| present.contains(p)).collect()
}

fn pct(x: f64) -> String {
    if x.is_finite() { format!("{:.1} %", x * 100.0) } else { "∞".to_string() }
}

/// Reads the campaign from the store and, if some variant × model is imprecise, adds one
/// block per device of that model to `plan` and to the store (trials and plan together).
/// `None` when nothing is added: every gating interval is on target, or at `max`.
pub async fn extend(store: &Store, id: &str, plan: &mut Plan) -> Result<Option<Extension>, RunError> {
    match plan.adaptive {
        None => return Ok(None),
        Some(a) if a.sequential() => return super::look::look(store, id, plan).await.map(Some),
        Some(_) => {}
    }
    let (s, i) = (store.clone(), id.to_string());
    let (trials, attempts) =
        blocking(move || Ok::<_, crate::store::StoreError>((s.trials(&i)?, s.attempts(&i)?))).await?;
    let needs = imprecise(&trials, &attempts, plan);
    if needs.is_empty() {
        return Ok(None);
    }
    let mut trials = Vec::new();
    let mut reasons = Vec::new();
    let mut models: Vec<&str> = needs.iter().map(|n| n.model.as_str()).collect();
    models.dedup();
    for model in models {
        let wanted: Vec<(String, u32)> =
            needs.iter().filter(|n| n.model == model).map(|n| (n.variant.clone(), n.room)).collect();
        trials.extend(plan.add_block(model, &wanted));
    }
    for n in &needs {
        reasons.push(format!("{} / {}: {}", n.model, n.variant, n.reasons.join(", ")));
    }
    let plan_json = serde_json::to_string(&*plan).map_err(|e| RunError::Internal(format!("plan to JSON: {e}")))?;
    let (s, i, rows) = (store.clone(), id.to_string(), trials.clone());
    blocking(move || s.add_trials(&i, &rows, &plan_json)).await?;
    Ok(Some(Extension { trials, reasons, decided: Vec::new() }))
}

/// One tether shared by the rounds of a campaign (a worker takes its tether by value).
pub struct SharedTether(pub Arc<dyn Tether>);

#[async_trait]
impl Tether for SharedTether {
    fn label(&self) -> String {
        self.0.label()
    }
    fn mode(&self) -> UntetherMode {
        self.0.mode()
    }
    fn cut_question(&self) -> String {
        self.0.cut_question()
    }
    async fn untether(&self, device: &dyn Device) -> Result<UntetherMode, TetherError> {
        self.0.untether(device).await
    }
    async fn retether(&self, device: &dyn Device) -> Result<(), TetherError> {
        self.0.retether(device).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AdaptiveRepeats;
    use crate::report::build_report;
    use crate::testing::fixture::{self, Records};

    fn needs(data: &Records) -> Vec<Imprecise> {
        imprecise(&data.trials, &data.attempts, &data.plan)
    }

    #[test]
    fn flags_imprecise_variants_below_max_only() {
        let mut data = fixture::records("c1");
        data.plan.statistics.gating = vec!["cpu_pct".into(), "battery_drop_pct".into(), "memory_mb".into()];
        data.plan.adaptive = Some(AdaptiveRepeats::precise(4, 6, 0.05));
        // control: cpu 12.00 ± 1.24 (10.4 %), battery 3.2 ± 0.248 (7.8 %); envoy-poll:
        // cpu 185 ± 12.4 (6.7 %), battery 10.1 ± 0.75 (7.4 %). memory_mb is not measured.
        let needs_now = needs(&data);
        let got: Vec<(&str, u32, usize)> =
            needs_now.iter().map(|n| (n.variant.as_str(), n.room, n.reasons.len())).collect();
        assert_eq!(got, [("control", 2, 2), ("envoy-poll", 2, 2)]);
        assert!(needs_now[0].reasons[0].starts_with("battery_drop_pct ±7.8 % > ±5.0 %"), "{:?}", needs_now[0].reasons);

        // A looser target is met; at max nothing more is asked.
        data.plan.adaptive = Some(AdaptiveRepeats::precise(4, 6, 0.2));
        assert!(needs(&data).is_empty());
        data.plan.adaptive = Some(AdaptiveRepeats::precise(4, 4, 0.01));
        assert!(needs(&data).is_empty());
        data.plan.adaptive = None;
        assert!(needs(&data).is_empty());
    }

    #[test]
    fn constant_values_are_precise_and_single_values_are_not() {
        let mut data = fixture::records("c1");
        data.plan.statistics.gating = vec!["requests".into()];
        data.plan.adaptive = Some(AdaptiveRepeats::precise(4, 8, 0.0001));
        for a in &mut data.attempts {
            for m in &mut a.measurements {
                m.value = 5.0;
            }
        }
        assert!(needs(&data).is_empty());
        // Keep one valid control attempt: n = 1 has no interval.
        data.attempts.retain(|a| a.trial_idx != 3 && a.trial_idx != 6);
        let needs_now = needs(&data);
        assert_eq!(needs_now.len(), 1);
        assert_eq!(needs_now[0].reasons, ["requests has 1 value(s), no interval yet"]);
    }

    /// The rule as it was, read off a built report: the oracle for the direct one.
    fn from_report(data: &Records) -> Vec<Imprecise> {
        let (report, plan) = (build_report(&data.data()), &data.plan);
        let Some(rule) = plan.adaptive else { return Vec::new() };
        let mut out = Vec::new();
        for model in &report.models {
            let mut variants: Vec<&str> = model.rows.iter().map(|r| r.variant.as_str()).collect();
            variants.dedup();
            for variant in variants {
                let planned = plan.planned(&model.model, variant);
                if planned >= rule.max {
                    continue;
                }
                let mut reasons = Vec::new();
                for r in model
                    .rows
                    .iter()
                    .filter(|r| r.variant == variant && r.n > 0 && plan.statistics.gating.contains(&r.metric))
                {
                    let relative = match r.stats.as_ref().and_then(|s| s.ci_half_width().map(|h| (h, s.mean))) {
                        None => {
                            reasons.push(format!("{} has {} value(s), no interval yet", r.metric, r.n));
                            continue;
                        }
                        Some((0.0, _)) => 0.0,
                        Some((_, 0.0)) => f64::INFINITY,
                        Some((h, m)) => h / m.abs(),
                    };
                    if relative > rule.target_ci {
                        reasons.push(format!("{} ±{} > ±{}", r.metric, pct(relative), pct(rule.target_ci)));
                    }
                }
                if !reasons.is_empty() {
                    out.push(Imprecise {
                        model: model.model.clone(),
                        variant: variant.into(),
                        room: rule.max - planned,
                        reasons,
                    });
                }
            }
        }
        out
    }

    #[test]
    fn decides_as_the_report_did_on_many_campaigns() {
        let mut rng = crate::seed::rng(7, &["adaptive", "oracle"]);
        let gatings: [&[&str]; 4] = [
            &["cpu_pct", "battery_drop_pct", "memory_mb"],
            &["requests", "cpu_pct"],
            &["battery_drop_pct"],
            &["memory_mb"],
        ];
        let mut flagged = 0;
        for round in 0..200 {
            let mut data = fixture::records("c1");
            data.plan.statistics.gating = gatings[round % gatings.len()].iter().map(|g| g.to_string()).collect();
            // Listing metrics changes the reasons' order; so does a metric the report orders by name.
            if round % 3 == 0 {
                data.plan.metrics = vec!["requests".into(), "battery_drop_pct".into(), "cpu_pct".into()];
            }
            let target = [0.0, 0.001, 0.01, 0.05, 0.075, 0.1, 0.2, 1.0][round % 8];
            data.plan.adaptive = Some(AdaptiveRepeats::precise(2, 4 + (round % 5) as u32, target));
            for a in &mut data.attempts {
                for m in &mut a.measurements {
                    match rand::RngExt::random_range(&mut rng, 0..10) {
                        0 => m.value = f64::NAN,
                        1 => m.value = 0.0,
                        2..=5 => m.value *= 1.0 + rand::RngExt::random_range(&mut rng, -0.2..0.2),
                        _ => {}
                    }
                }
                if rand::RngExt::random_range(&mut rng, 0..8) == 0 {
                    a.status = AttemptStatus::Invalid;
                }
            }
            if round % 4 == 1 {
                data.attempts.retain(|a| a.trial_idx % 3 != 0);
            }
            let (direct, oracle) = (needs(&data), from_report(&data));
            assert_eq!(direct, oracle, "round {round}");
            flagged += direct.len();
        }
        assert!(flagged > 50, "the campaigns exercise the rule: {flagged} pairs flagged");
    }
}
