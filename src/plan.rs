//! Matrix expansion and run order.
//!
//! builds × configs = variants; variants × selected devices × repeats = trials.
//! `repeats` counts trials per variant per device model; they are spread over the
//! devices of that model (repeat r runs on device r mod D), so every device runs
//! whole blocks and a model's devices share the work.

use std::time::Duration;

use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use crate::config::{Lab, Order, Platform, Runbook, StatsSettings};
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
}

impl Plan {
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
}

pub fn variant_name(build: &str, config: &str, single_config: bool) -> String {
    if single_config { build.to_string() } else { format!("{build}+{config}") }
}

pub fn build(runbook: &Runbook, lab: &Lab) -> Result<Plan, PlanError> {
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
        let key = (d.model.clone(), d.platform);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(d),
            None => groups.push((key, vec![d])),
        }
    }

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
            let blocks: Vec<u32> = (0..runbook.repeats).filter(|r| r % n_dev == d_i).collect();
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
        repeats: runbook.repeats,
        max_attempts: runbook.retries + 1,
        variants,
        devices,
        trials,
        metrics: runbook.metrics.clone(),
        statistics: runbook.statistics.clone(),
        expected_requests: runbook.workload.expected_requests(runbook.duration),
    })
}

/// Formats seconds as `1h 05m`, `4m 10s`, `12s`.
pub fn human_duration(secs: f64) -> String {
    let d = Duration::from_secs_f64(secs.max(0.0));
    let s = d.as_secs();
    let (h, m, s) = (s / 3600, (s % 3600) / 60, s % 60);
    if h > 0 {
        format!("{h}h {m:02}m")
    } else if m > 0 {
        format!("{m}m {s:02}s")
    } else {
        format!("{}s", s)
    }
}
