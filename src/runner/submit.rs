//! `lab submit` (docs/agents.md): a campaign validated and planned here, stored `queued`
//! for the lab's agents, which run it; nothing runs in this process.

use std::path::Path;

use serde::Serialize;

use super::campaign::{new_id, new_record};
use super::launch::LaunchError;
use crate::config::{self, Lab};
use crate::plan;
use crate::store::{Channel, Store};

/// A campaign stored for the agents.
#[derive(Debug, Clone, Serialize)]
pub struct Submitted {
    pub id: String,
    pub runbook: String,
    pub trials: usize,
    pub priority: i32,
    /// The lab hosts its devices are on.
    pub hosts: Vec<String>,
    /// Of those, the ones no agent serves now: their trials wait for one.
    pub hosts_without_agent: Vec<String>,
}

/// The lab hosts of a runbook's planned devices, validated and planned as `lab run`
/// would (bad input changes nothing).
pub fn planned_hosts(lab: &Lab, runbook: &Path) -> Result<Vec<String>, LaunchError> {
    let rb = config::load_runbook(runbook, lab)?;
    let plan = super::launch::plan_with_noise(&rb, lab)?;
    Ok(hosts_of(lab, plan.devices.iter().map(|d| d.name.as_str())))
}

fn hosts_of<'a>(lab: &Lab, devices: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut hosts: Vec<String> = devices.filter_map(|d| lab.device(d)).map(|d| d.host.clone()).collect();
    hosts.sort();
    hosts.dedup();
    hosts
}

/// Validates and plans `runbook` on `lab`, and stores it queued with `priority`.
pub fn submit(lab: &Lab, runbook: &Path, priority: i32) -> Result<Submitted, LaunchError> {
    let rb = config::load_runbook(runbook, lab)?;
    let plan = super::launch::plan_with_noise(&rb, lab)?;
    let store = Store::open_at(&lab.store)?;
    let id = new_id(&rb.name, &store)?;
    let record = new_record(&id, lab, &rb, &plan);
    store.submit_campaign(&record, plan.max_attempts, priority)?;
    store.notify(Channel::Work)?;
    let hosts = hosts_of(lab, plan.devices.iter().map(|d| d.name.as_str()));
    let serving = store.serving_hosts()?;
    let hosts_without_agent = hosts.iter().filter(|h| !serving.contains(h)).cloned().collect();
    Ok(Submitted { id, runbook: rb.name.clone(), trials: plan.trials.len(), priority, hosts, hosts_without_agent })
}

/// Stores an already planned campaign queued for the agents under `id`: a schedule's slot
/// or its confirmation, whose id, seed and (generated) runbook the schedule chose.
/// Validated and planned by the caller as [`submit`] does itself.
pub fn submit_planned(
    lab: &Lab,
    rb: &config::Runbook,
    plan: &plan::Plan,
    id: &str,
    priority: i32,
) -> Result<(), LaunchError> {
    let store = Store::open_at(&lab.store)?;
    store.submit_campaign(&new_record(id, lab, rb, plan), plan.max_attempts, priority)?;
    store.notify(Channel::Work)?;
    Ok(())
}
