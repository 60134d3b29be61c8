//! Matrix expansion and run order.
//!
//! builds × configs = variants; variants × selected devices × repeats = trials.
//! `repeats` counts trials per variant per device model; they are spread over the
//! devices of that model (repeat r runs on device r mod D), so every device runs
//! whole blocks and a model's devices share the work.

use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use crate::config::{AdaptiveRepeats, Lab, Order, Platform, Runbook, StatsSettings};
use crate::stats::Verdict;
use crate::store::PlannedTrialRow;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Variant {
    pub name: String,
    pub build: String,
    pub config: String,
    pub baseline_build: bool,
    pub default_config: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PlannedDevice {
    pub name: String,
    pub model: String,
    pub platform: Platform,
    pub trials: u32,
    /// Soak plus cool-down for this device's trials, seconds.
    pub device_time_s: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Plan {
    pub runbook: String,
    pub seed: u64,
    pub order: Order,
    pub duration_s: f64,
    pub cooldown_s: f64,
    pub repeats: u32,
    /// Attempts a trial gets before it is given up (1 + retries).
    pub max_attempts: u32,
    pub variants: Vec<Variant>,
    pub devices: Vec<PlannedDevice>,
    pub trials: Vec<PlannedTrialRow>,
    pub metrics: Vec<String>,
    pub statistics: StatsSettings,
    pub expected_requests: Option<u64>,
    /// Adaptive repeats; `repeats` is then the first round (`min`). Absent in plans
    /// stored before adaptive repeats existed.
    #[serde(default)]
    pub adaptive: Option<AdaptiveRepeats>,
    /// The looks a sequential campaign took so far (`stop = "decided"`), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub looks: Vec<LookRecord>,
}

/// One look of a sequential campaign at a variant × model against one reference: the
/// information it had and what it decided. The report takes the earlier looks' fractions
/// from these to know how much α they spent (docs/statistics.md).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LookRecord {
    pub model: String,
    pub variant: String,
    pub against: String,
    /// Valid values of the variant and of its reference (the fewest of the gating metrics).
    pub n_treatment: u32,
    pub n_reference: u32,
    /// Information fraction: the harmonic mean of the two counts over `max`, at most 1.
    pub t: f64,
    pub verdict: Verdict,
    /// This look stopped the pair: decided, or its variant at `max`. The pair is judged on
    /// the data of this look from then on, and looked at no more.
    #[serde(default)]
    pub stopped: bool,
}

impl LookRecord {
    /// The look as `stats::sequential` reads it, without the pair's names.
    pub fn recorded(&self) -> crate::stats::sequential::Recorded {
        crate::stats::sequential::Recorded {
            t: self.t,
            n_treatment: self.n_treatment,
            n_reference: self.n_reference,
            verdict: self.verdict,
            stopped: self.stopped,
        }
    }
}

/// [`Plan`] without its trials: serde skips the `trials` array of the stored text
/// without building it.
#[derive(Deserialize)]
struct PlanHead {
    runbook: String,
    seed: u64,
    order: Order,
    duration_s: f64,
    cooldown_s: f64,
    repeats: u32,
    max_attempts: u32,
    variants: Vec<Variant>,
    devices: Vec<PlannedDevice>,
    metrics: Vec<String>,
    statistics: StatsSettings,
    expected_requests: Option<u64>,
    #[serde(default)]
    adaptive: Option<AdaptiveRepeats>,
    #[serde(default)]
    looks: Vec<LookRecord>,
}

impl Plan {
    /// The plan stored as `text`, with `trials` left empty: what a report needs (its
    /// trials come from the store's rows), at a fraction of the memory.
    pub fn head_from_json(text: &str) -> serde_json::Result<Plan> {
        let h: PlanHead = serde_json::from_str(text)?;
        Ok(Plan {
            runbook: h.runbook,
            seed: h.seed,
            order: h.order,
            duration_s: h.duration_s,
            cooldown_s: h.cooldown_s,
            repeats: h.repeats,
            max_attempts: h.max_attempts,
            variants: h.variants,
            devices: h.devices,
            trials: Vec::new(),
            metrics: h.metrics,
            statistics: h.statistics,
            expected_requests: h.expected_requests,
            adaptive: h.adaptive,
            looks: h.looks,
        })
    }

    /// Sum of every device's busy time, seconds.
    pub fn total_device_time_s(&self) -> f64 {
        self.devices.iter().map(|d| d.device_time_s).sum()
    }

    /// Wall time if devices run in parallel: the busiest device's time, seconds.
    pub fn makespan_s(&self) -> f64 {
        self.devices.iter().map(|d| d.device_time_s).fold(0.0, f64::max)
    }

    pub fn variant(&self, name: &str) -> Option<&Variant> {
        self.variants.iter().find(|v| v.name == name)
    }

    /// Planned trials of `variant` on devices of `model`.
    pub fn planned(&self, model: &str, variant: &str) -> u32 {
        self.trials.iter().filter(|t| t.device_model == model && t.variant == variant).count() as u32
    }

    /// Appends one block on each device of `model` (adaptive repeats). `wanted` gives, per
    /// variant, how many devices get one more trial of it: the first `count` devices of
    /// the model in plan order. Each device's new block is shuffled with the same seeded
    /// scheme as a balanced block, so drift is not confounded with the variant. Returns
    /// the new rows (also added to `trials`, with the devices' counts and times updated).
    pub fn add_block(&mut self, model: &str, wanted: &[(String, u32)]) -> Vec<PlannedTrialRow> {
        let per_trial = self.duration_s + self.cooldown_s;
        let mut next_idx = self.trials.iter().map(|t| t.idx + 1).max().unwrap_or(0);
        let mut next_repeat: Vec<u32> = wanted.iter().map(|(v, _)| self.planned(model, v)).collect();
        let devices: Vec<String> = self.devices.iter().filter(|d| d.model == model).map(|d| d.name.clone()).collect();
        let mut added = Vec::new();
        for (d_i, dev) in devices.iter().enumerate() {
            let mine = self.trials.iter().filter(|t| &t.device == dev);
            let (block, order) = mine.fold((0, 0), |(b, o), t| (b.max(t.block + 1), o.max(t.device_order + 1)));
            let mut queue: Vec<(usize, &str)> = wanted
                .iter()
                .enumerate()
                .filter(|(_, (_, count))| (d_i as u32) < *count)
                .map(|(i, (v, _))| (i, v.as_str()))
                .collect();
            let mut rng = crate::seed::rng(self.seed, &["order", dev, &block.to_string()]);
            queue.shuffle(&mut rng);
            for (pos, (i, variant)) in queue.into_iter().enumerate() {
                let Some(v) = self.variant(variant) else { continue };
                let repeat = next_repeat[i];
                next_repeat[i] += 1;
                added.push(PlannedTrialRow {
                    idx: next_idx,
                    key: format!("{next_idx:04}-{dev}-{variant}-r{repeat}"),
                    device: dev.clone(),
                    device_model: model.to_string(),
                    variant: variant.to_string(),
                    build: v.build.clone(),
                    config: v.config.clone(),
                    repeat,
                    block,
                    device_order: order + pos as u32,
                });
                next_idx += 1;
            }
        }
        for d in self.devices.iter_mut().filter(|d| d.model == model) {
            let n = added.iter().filter(|t| t.device == d.name).count() as u32;
            d.trials += n;
            d.device_time_s += per_trial * f64::from(n);
        }
        self.trials.extend(added.iter().cloned());
        added
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PlanError {
    #[error(
        "{runbook}: no device in the lab matches `devices` {selectors:?}; fix: name devices from `lab status` or use tag:/model: selectors"
    )]
    NoDevices { runbook: String, selectors: Vec<String> },
    #[error(
        "{runbook}: no build can run on {device} ({platform}); fix: add a [builds.NAME.{platform}] table or deselect the device"
    )]
    NothingRunsOn { runbook: String, device: String, platform: String },
    #[error(
        "{runbook}: `repeats` asks for power {power} but names no `cv`, and the lab has no noise figure for {models} yet; fix: write the coefficient of variation you expect, e.g. `cv = \"5%\"`, in `repeats`, or run an A/A campaign first (`lab noise` shows the lab's figures)"
    )]
    NoDesignCv { runbook: String, power: f64, models: String },
    #[error(
        "{runbook}: the lab's noise floor could not be read ({error}); fix: check the store (`lab noise`), or write `cv = \"5%\"` in `repeats`"
    )]
    NoiseUnreadable { runbook: String, error: String },
    #[error(
        "{runbook}: `repeats` cannot be sized for power {power} at cv {cv}; fix: check `power` (between 0.5 and 1) and `cv`"
    )]
    Unsizable { runbook: String, power: f64, cv: f64 },
}

/// Trials per variant per model in the first round, and the adaptive rule, with a design
/// sized from a power given its looks and its most trials (`stats::sequential::Target`),
/// at the runbook's `cv` or else the lab's noise floor on `models` from `noise`.
fn sized_repeats(
    runbook: &Runbook,
    noise: Option<NoiseLookup>,
    models: &[String],
) -> Result<(u32, Option<AdaptiveRepeats>), PlanError> {
    let Some(mut rule) = runbook.adaptive else { return Ok((runbook.repeats, None)) };
    let Some(mut asked) = rule.power else { return Ok((runbook.repeats, Some(rule))) };
    let source = runbook.source.display().to_string();
    let cv = match asked.cv {
        Some(cv) => cv,
        None => {
            let unreadable = |error: String| PlanError::NoiseUnreadable { runbook: source.clone(), error };
            let floor = match noise {
                Some(lookup) => lookup(models).map_err(unreadable)?,
                None => None,
            };
            let Some((cv, campaigns)) = floor else {
                return Err(PlanError::NoDesignCv { runbook: source, power: asked.power, models: models.join(", ") });
            };
            asked.noise_campaigns = campaigns.len() as u32;
            cv
        }
    };
    asked.cv = Some(cv);
    let target = crate::stats::sequential::Target { power: asked.power, looks: asked.looks, cv };
    let s = &runbook.statistics;
    let sizing = target.size(s.alpha, s.practical_threshold).ok_or(PlanError::Unsizable {
        runbook: source,
        power: asked.power,
        cv,
    })?;
    rule.min = sizing.counts[0];
    rule.max = *sizing.counts.last().unwrap_or(&rule.min);
    rule.power = Some(asked);
    Ok((rule.min, Some(rule)))
}

pub fn variant_name(build: &str, config: &str, single_config: bool) -> String {
    if single_config { build.to_string() } else { format!("{build}+{config}") }
}

/// Where a design sized from a power finds the lab's noise floor: for the models a runbook
/// selects, the CV to size for and the campaigns it pools (`report::design_noise`, the
/// figure `lab noise` shows), or `None` when the lab has none; an error says why it could
/// not be read.
pub type NoiseLookup<'a> = &'a dyn Fn(&[String]) -> Result<Option<(f64, Vec<String>)>, String>;

/// The plan of `runbook` on `lab`; a design sized from a power must name its `cv` (see
/// [`build_with`]).
pub fn build(runbook: &Runbook, lab: &Lab) -> Result<Plan, PlanError> {
    build_with(runbook, lab, None)
}

/// The plan of `runbook` on `lab`, a design sized from a power without a `cv` sized at the
/// lab's noise floor from `noise`.
pub fn build_with(runbook: &Runbook, lab: &Lab, noise: Option<NoiseLookup>) -> Result<Plan, PlanError> {
    let single = runbook.configs.len() == 1;
    let variants: Vec<Variant> = runbook
        .builds
        .iter()
        .flat_map(|b| {
            runbook.configs.iter().map(move |c| Variant {
                name: variant_name(&b.name, &c.name, single),
                build: b.name.clone(),
                config: c.name.clone(),
                baseline_build: b.baseline,
                default_config: single || c.name == "default",
            })
        })
        .collect();

    let selected: Vec<&crate::config::DeviceSpec> =
        lab.devices.iter().filter(|d| runbook.devices.iter().any(|s| s.matches(d))).collect();
    if selected.is_empty() {
        return Err(PlanError::NoDevices {
            runbook: runbook.source.display().to_string(),
            selectors: runbook.devices.iter().map(|s| s.to_string()).collect(),
        });
    }

    // Group by (model, platform), keeping lab order.
    let mut groups: Vec<((String, Platform), Vec<&crate::config::DeviceSpec>)> = Vec::new();
    for d in &selected {
        let key = (d.model.clone(), d.platform());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(d),
            None => groups.push((key, vec![d])),
        }
    }

    let mut models: Vec<String> = Vec::new();
    for ((model, _), _) in &groups {
        if !models.contains(model) {
            models.push(model.clone());
        }
    }
    let (repeats, adaptive) = sized_repeats(runbook, noise, &models)?;
    let per_trial = runbook.duration + runbook.cooldown;
    let mut trials = Vec::new();
    let mut devices = Vec::new();
    for ((model, platform), devs) in &groups {
        let runnable: Vec<&Variant> = variants
            .iter()
            .filter(|v| runbook.builds.iter().any(|b| b.name == v.build && b.runs_on(*platform)))
            .collect();
        if runnable.is_empty() {
            return Err(PlanError::NothingRunsOn {
                runbook: runbook.source.display().to_string(),
                device: devs[0].name.clone(),
                platform: platform.to_string(),
            });
        }
        let n_dev = devs.len() as u32;
        for (d_i, dev) in devs.iter().enumerate() {
            let d_i = d_i as u32;
            // Repeats r with r mod D == d_i run here; block b holds repeat b*D + d_i.
            let blocks: Vec<u32> = (0..repeats).filter(|r| r % n_dev == d_i).collect();
            let mut queue: Vec<(&Variant, u32, u32)> = Vec::new(); // (variant, repeat, block)
            match runbook.order {
                Order::Balanced => {
                    for (b, &r) in blocks.iter().enumerate() {
                        let mut block: Vec<&Variant> = runnable.clone();
                        let mut rng = crate::seed::rng(runbook.seed, &["order", &dev.name, &b.to_string()]);
                        block.shuffle(&mut rng);
                        queue.extend(block.into_iter().map(|v| (v, r, b as u32)));
                    }
                }
                Order::Sequential => {
                    for v in &runnable {
                        for (b, &r) in blocks.iter().enumerate() {
                            queue.push((v, r, b as u32));
                        }
                    }
                }
                Order::Random => {
                    for (b, &r) in blocks.iter().enumerate() {
                        for v in &runnable {
                            queue.push((v, r, b as u32));
                        }
                    }
                    let mut rng = crate::seed::rng(runbook.seed, &["order", &dev.name]);
                    queue.shuffle(&mut rng);
                }
            }
            let n = queue.len() as u32;
            for (pos, (v, r, b)) in queue.into_iter().enumerate() {
                let idx = trials.len() as u32;
                trials.push(PlannedTrialRow {
                    idx,
                    key: format!("{idx:04}-{}-{}-r{r}", dev.name, v.name),
                    device: dev.name.clone(),
                    device_model: model.clone(),
                    variant: v.name.clone(),
                    build: v.build.clone(),
                    config: v.config.clone(),
                    repeat: r,
                    block: b,
                    device_order: pos as u32,
                });
            }
            devices.push(PlannedDevice {
                name: dev.name.clone(),
                model: model.clone(),
                platform: *platform,
                trials: n,
                device_time_s: per_trial.as_secs_f64() * n as f64,
            });
        }
    }

    Ok(Plan {
        runbook: runbook.name.clone(),
        seed: runbook.seed,
        order: runbook.order,
        duration_s: runbook.duration.as_secs_f64(),
        cooldown_s: runbook.cooldown.as_secs_f64(),
        repeats,
        max_attempts: runbook.retries + 1,
        variants,
        devices,
        trials,
        metrics: runbook.metrics.clone(),
        statistics: runbook.statistics.clone(),
        expected_requests: runbook.workload.expected_requests(runbook.duration),
        adaptive,
        looks: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use crate::testing::fixture;

    #[test]
    fn the_head_of_a_stored_plan_is_the_plan_without_its_trials() {
        let mut plan = fixture::campaign("c1").plan;
        plan.adaptive = Some(crate::config::AdaptiveRepeats::precise(2, 6, 0.05));
        assert!(!plan.trials.is_empty());
        let head = super::Plan::head_from_json(&serde_json::to_string(&plan).unwrap()).unwrap();
        // Every field but the trials: a field added to Plan but not to PlanHead fails here.
        assert_eq!(head, super::Plan { trials: Vec::new(), ..plan });
    }

    #[test]
    fn add_block_appends_a_shuffled_block_per_device() {
        let mut plan = fixture::campaign("c1").plan;
        assert_eq!(plan.planned("iPhone 6s", "envoy-poll"), 4);
        let wanted = [("envoy-poll".to_string(), 2), ("control".to_string(), 1)];
        let added = plan.add_block("iPhone 6s", &wanted);
        let mut rows: Vec<(u32, &str, &str, u32, u32)> =
            added.iter().map(|t| (t.idx, t.device.as_str(), t.variant.as_str(), t.repeat, t.block)).collect();
        rows.sort_by_key(|r| (r.1.to_string(), r.2.to_string()));
        assert_eq!(added.len(), 3);
        let shape: Vec<(&str, &str, u32, u32)> = rows.iter().map(|r| (r.1, r.2, r.3, r.4)).collect();
        assert_eq!(
            shape,
            [
                ("sim-iphone-1", "control", 4, 2),
                ("sim-iphone-1", "envoy-poll", 4, 2),
                ("sim-iphone-2", "envoy-poll", 5, 2)
            ]
        );
        // New indices follow the plan's; each device's queue continues where it ended.
        let mut idx: Vec<u32> = added.iter().map(|t| t.idx).collect();
        idx.sort();
        assert_eq!(idx, [8, 9, 10]);
        let orders: Vec<u32> = added.iter().filter(|t| t.device == "sim-iphone-1").map(|t| t.device_order).collect();
        assert_eq!(orders.iter().copied().min(), Some(4));
        assert!(added.iter().all(|t| t.key == format!("{:04}-{}-{}-r{}", t.idx, t.device, t.variant, t.repeat)));
        assert_eq!(plan.trials.len(), 11);
        assert_eq!(plan.devices[0].trials, 6);
        assert_eq!(plan.devices[1].trials, 5);
        assert_eq!(plan.devices[1].device_time_s, 5.0 * 3900.0);
        // Deterministic: the same plan and request give the same block.
        let mut again = fixture::campaign("c2").plan;
        assert_eq!(again.add_block("iPhone 6s", &wanted), added);
    }

    // The plan heads the store writes (migration 11) read back as this plan's head (was a
    // store test; the store may not import the plan).
    #[test]
    fn a_version_10_store_gains_plan_heads_that_report_the_same_plan() {
        let data = crate::testing::fixture::campaign("old");
        let plan_text = serde_json::to_string(&data.plan).unwrap();
        assert!(!data.plan.trials.is_empty());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lab.db");
        {
            let conn = crate::store::open_at_version(&path, 10);
            for (id, plan) in [("old", plan_text.as_str()), ("odd", "not json")] {
                conn.execute(
                    "INSERT INTO campaigns (id, runbook_name, runbook_path, runbook_text, runbook_sha256, lab_text,
                        lab_sha256, content_hashes, tool_version, seed, created_at, status, plan_json, max_attempts)
                     VALUES (?1,'rb','rb.toml','','','','','{}','0',1,'t','done',?2,3)",
                    [id, plan],
                )
                .unwrap();
            }
        }
        let s = crate::store::Store::open(&path).unwrap();
        let (record, head) = s.campaign_head("old").unwrap();
        assert_eq!(record.id, "old");
        let value: serde_json::Value = serde_json::from_str(&head).unwrap();
        assert!(value.get("trials").is_none() && value.get("variants").is_some(), "the head is stored: {head}");
        let from_head = crate::plan::Plan::head_from_json(&head).unwrap();
        assert_eq!(from_head, crate::plan::Plan::head_from_json(&plan_text).unwrap());
        assert_eq!(from_head.variants, data.plan.variants);
        // What the store writes for a new campaign is the same head.
        let written: serde_json::Value = serde_json::from_str(&crate::store::plan_head(&plan_text).unwrap()).unwrap();
        assert_eq!(written, value);
        assert_eq!(crate::store::plan_head("not json"), None);
        assert_eq!(crate::store::plan_head("[1, 2]"), None);
        // Not JSON: no head, the plan's text as it is.
        assert_eq!(s.campaign_head("odd").unwrap().1, "not json");
        // The whole plan is still there for whoever needs its trials.
        let full: crate::plan::Plan = serde_json::from_value(s.campaign("old").unwrap().plan_json).unwrap();
        assert_eq!(full, data.plan);
    }
}
