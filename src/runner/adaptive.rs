//! Adaptive repeats: more trials until every gating metric is measured precisely enough.
//!
//! The rule is a capped sequential one (docs/statistics.md): after every round, each
//! variant × device model whose gating metrics do not all have a 95 % CI half-width
//! within `target_ci` of their mean gets one more block (one trial per device of the
//! model), until `max` planned trials. Only precision is looked at, never a p-value or a
//! difference between variants, so stopping cannot bias a comparison towards
//! significance.

use std::sync::Arc;

use async_trait::async_trait;

use super::trial::{RunError, blocking};
use crate::device::Device;
use crate::plan::Plan;
use crate::report::{CampaignData, Report, build_report};
use crate::store::{PlannedTrialRow, Store};
use crate::tether::{Tether, TetherError, UntetherMode};

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

/// What one adaptive round added.
#[derive(Debug, Clone, PartialEq)]
pub struct Extension {
    pub trials: Vec<PlannedTrialRow>,
    pub reasons: Vec<String>,
}

/// Which variant × model pairs need more trials, judged from `report` (valid attempts
/// only). Pure. A gating metric the device does not measure (n = 0) cannot improve and
/// is ignored; one with fewer than two values has no interval and needs more; a mean of
/// 0 counts as precise only when the interval has zero width.
pub fn imprecise(report: &Report, plan: &Plan) -> Vec<Imprecise> {
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
            let gating = model
                .rows
                .iter()
                .filter(|r| r.variant == variant && r.n > 0 && plan.statistics.gating.contains(&r.metric));
            let mut reasons = Vec::new();
            for r in gating {
                let half = r.stats.as_ref().and_then(|s| s.ci_half_width().map(|h| (h, s.mean)));
                let relative = match half {
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
                    variant: variant.to_string(),
                    room: rule.max - planned,
                    reasons,
                });
            }
        }
    }
    out
}

fn pct(x: f64) -> String {
    if x.is_finite() { format!("{:.1} %", x * 100.0) } else { "∞".to_string() }
}

/// Reads the campaign from the store and, if some variant × model is imprecise, adds one
/// block per device of that model to `plan` and to the store (trials and plan together).
/// `None` when nothing is added: every gating interval is on target, or at `max`.
pub async fn extend(store: &Store, id: &str, plan: &mut Plan) -> Result<Option<Extension>, RunError> {
    if plan.adaptive.is_none() {
        return Ok(None);
    }
    let (s, i) = (store.clone(), id.to_string());
    let data = blocking(move || {
        let campaign = s.campaign(&i)?;
        Ok::<_, crate::store::StoreError>((campaign, s.trials(&i)?, s.attempts(&i)?))
    })
    .await?;
    let data = CampaignData::new(data.0, data.1, data.2).map_err(|e| RunError::Internal(e.to_string()))?;
    let needs = imprecise(&build_report(&data), plan);
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
    let plan_json = serde_json::to_value(&*plan).map_err(|e| RunError::Internal(format!("plan to JSON: {e}")))?;
    let (s, i, rows) = (store.clone(), id.to_string(), trials.clone());
    blocking(move || s.add_trials(&i, &rows, &plan_json)).await?;
    Ok(Some(Extension { trials, reasons }))
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
    async fn untether(&self, device: &dyn Device) -> Result<(), TetherError> {
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
    use crate::report::test_fixture;

    #[test]
    fn flags_imprecise_variants_below_max_only() {
        let mut data = test_fixture::campaign("c1");
        data.plan.statistics.gating = vec!["cpu_pct".into(), "battery_drop_pct".into(), "memory_mb".into()];
        data.plan.adaptive = Some(AdaptiveRepeats { min: 4, max: 6, target_ci: 0.05 });
        let report = build_report(&data);
        // control: cpu 12.00 ± 1.24 (10.4 %), battery 3.2 ± 0.248 (7.8 %); envoy-poll:
        // cpu 185 ± 12.4 (6.7 %), battery 10.1 ± 0.75 (7.4 %). memory_mb is not measured.
        let needs = imprecise(&report, &data.plan);
        let got: Vec<(&str, u32, usize)> =
            needs.iter().map(|n| (n.variant.as_str(), n.room, n.reasons.len())).collect();
        assert_eq!(got, [("control", 2, 2), ("envoy-poll", 2, 2)]);
        assert!(needs[0].reasons[0].starts_with("battery_drop_pct ±7.8 % > ±5.0 %"), "{:?}", needs[0].reasons);

        // A looser target is met; at max nothing more is asked.
        data.plan.adaptive = Some(AdaptiveRepeats { min: 4, max: 6, target_ci: 0.2 });
        assert!(imprecise(&report, &data.plan).is_empty());
        data.plan.adaptive = Some(AdaptiveRepeats { min: 4, max: 4, target_ci: 0.01 });
        assert!(imprecise(&report, &data.plan).is_empty());
        data.plan.adaptive = None;
        assert!(imprecise(&report, &data.plan).is_empty());
    }

    #[test]
    fn constant_values_are_precise_and_single_values_are_not() {
        let mut data = test_fixture::campaign("c1");
        data.plan.statistics.gating = vec!["requests".into()];
        data.plan.adaptive = Some(AdaptiveRepeats { min: 4, max: 8, target_ci: 0.0001 });
        for a in &mut data.attempts {
            for m in &mut a.measurements {
                m.value = 5.0;
            }
        }
        assert!(imprecise(&build_report(&data), &data.plan).is_empty());
        // Keep one valid control attempt: n = 1 has no interval.
        data.attempts.retain(|a| a.trial_idx != 3 && a.trial_idx != 6);
        let needs = imprecise(&build_report(&data), &data.plan);
        assert_eq!(needs.len(), 1);
        assert_eq!(needs[0].reasons, ["requests has 1 value(s), no interval yet"]);
    }
}
