//! The lab as `lab status` and `lab serve` show it: hosts, devices, campaigns, queues,
//! batteries and operator steps, read from the store so it works from any terminal while
//! campaigns run.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::Serialize;
use tabled::settings::Style;
use tabled::{Table, Tabled};

use super::agents;
use super::batteries::{self, BatteryView};
use super::operator_steps;
use super::queues;
use crate::cli::context::{self, display_path};
use crate::cli::exit::CliError;
use crate::config::Lab;
use crate::store::{CampaignRecord, CampaignStatus, DeviceStatusRow, Store};

#[derive(Debug, Serialize, Tabled)]
pub struct DeviceLine {
    pub device: String,
    pub platform: String,
    pub model: String,
    pub host: String,
    pub tether: String,
    pub state: String,
    pub battery: String,
    pub campaign: String,
    pub trial: String,
    pub phase: String,
}

#[derive(Debug, Serialize, Tabled)]
pub struct CampaignLine {
    pub campaign: String,
    pub runbook: String,
    pub status: String,
    pub progress: String,
    pub valid: u32,
    pub failed: u32,
    #[tabled(rename = "invalid attempts")]
    pub invalid_attempts: u32,
    pub eta: String,
    pub note: String,
}

#[derive(Debug, Serialize, Tabled)]
pub struct HostLine {
    pub host: String,
    pub address: String,
    pub devices: usize,
    /// Devices of this host that their last campaign found offline.
    pub offline: usize,
}

#[derive(Debug, Serialize)]
pub struct StatusView {
    pub lab: String,
    pub store: String,
    pub hosts: Vec<HostLine>,
    pub devices: Vec<DeviceLine>,
    pub campaigns: Vec<CampaignLine>,
    /// Operator steps running campaigns wait on.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<operator_steps::WaitingStep>,
    /// The newest attestation per device and step.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attested: Vec<operator_steps::AttestedLine>,
    /// Battery health from `lab care`'s readings.
    pub batteries: BatteryView,
    /// Who holds each device, and who waits for it in order, with estimated starts.
    pub queues: Vec<queues::QueueLine>,
    /// The lab's agents (`lab agent`).
    pub agents: Vec<agents::AgentLine>,
}

pub fn collect(lab: &Lab, store: Option<&Store>) -> Result<StatusView, CliError> {
    let statuses: BTreeMap<String, DeviceStatusRow> = match store {
        Some(s) => s.device_statuses()?.into_iter().map(|r| (r.device.clone(), r)).collect(),
        None => BTreeMap::new(),
    };
    let campaigns = match store {
        Some(s) => s.campaign_list()?,
        None => Vec::new(),
    };
    let agents = agents::collect(store)?;
    // A campaign the agents run has no runner process: it runs while it is `running` and a
    // live agent serves one of its devices. One whose agents are all gone (killed, their
    // host down) is resumed when one is back, and until then nothing runs it.
    let served: BTreeSet<&str> =
        agents.iter().filter(|a| a.alive()).flat_map(|a| a.device_names.iter().map(String::as_str)).collect();
    let mut unserved = BTreeSet::new();
    if let Some(s) = store {
        for c in campaigns.iter().filter(|c| c.status == CampaignStatus::Running && c.runner_pid.is_none()) {
            if !s.campaign_devices(&c.id)?.iter().any(|d| served.contains(d.as_str())) {
                unserved.insert(c.id.clone());
            }
        }
    }
    let live = |c: &CampaignRecord| {
        c.status == CampaignStatus::Running
            && match c.runner_pid {
                None => !unserved.contains(&c.id),
                Some(_) => c.runner().is_some_and(|p| p.alive()),
            }
    };
    let devices: Vec<DeviceLine> = lab
        .devices
        .iter()
        .map(|d| {
            let st = statuses.get(&d.name);
            // A device row of a campaign whose runner died is stale: say so.
            let running = st
                .and_then(|s| s.campaign.as_ref())
                .and_then(|id| campaigns.iter().find(|c| &c.id == id))
                .is_some_and(live);
            let state = match st {
                None => "idle".to_string(),
                Some(s) if s.state == "busy" && !running => "idle (last run stopped)".to_string(),
                // The run that waited for it is gone: nobody knows if it is back.
                Some(s) if s.state == "reconnecting" && !running => "unknown (was reconnecting)".to_string(),
                Some(s) => s.state.clone(),
            };
            let busy = running && st.is_some_and(|s| s.state == "busy" || s.state == "reconnecting");
            DeviceLine {
                device: d.name.clone(),
                platform: d.platform().to_string(),
                model: d.model.clone(),
                host: d.host.clone(),
                tether: d.tether.label(),
                state,
                battery: st.and_then(|s| s.battery_pct).map(|b| format!("{b:.0} %")).unwrap_or_else(|| "-".into()),
                campaign: st.and_then(|s| s.campaign.clone()).unwrap_or_else(|| "-".into()),
                trial: if busy { st.and_then(|s| s.trial_key.clone()).unwrap_or_default() } else { "-".into() },
                phase: if busy { st.and_then(|s| s.phase.clone()).unwrap_or_default() } else { "-".into() },
            }
        })
        .collect();
    let mut lines = Vec::new();
    for c in &campaigns {
        // One aggregate query a campaign: no copy of its trials (`lab serve` draws this every
        // second the store moves while someone watches).
        let counts = store.map(|s| s.outcome_counts(&c.id)).transpose()?.unwrap_or_default();
        let planned = counts.valid + counts.failed + counts.pending;
        let (valid, failed, attempts) = (counts.valid, counts.failed, counts.attempts);
        let done = valid + failed;
        let status = match c.status {
            CampaignStatus::Running if live(c) => "running".to_string(),
            CampaignStatus::Running if unserved.contains(&c.id) => {
                "running, no agent serves its devices (it goes on when one does)".to_string()
            }
            CampaignStatus::Running => "interrupted (runner gone)".to_string(),
            s => s.as_str().to_string(),
        };
        let eta = if live(c) && done > 0 && done < planned {
            chrono::DateTime::parse_from_rfc3339(&c.created_at)
                .ok()
                .map(|t| {
                    let elapsed = (chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_seconds().max(0) as f64;
                    crate::text::duration::compact(elapsed / done as f64 * (planned - done) as f64)
                })
                .unwrap_or_else(|| "-".into())
        } else {
            "-".into()
        };
        lines.push(CampaignLine {
            campaign: c.id.clone(),
            runbook: c.runbook_name.clone(),
            status,
            progress: format!("{done}/{planned}"),
            valid,
            failed,
            invalid_attempts: attempts - valid,
            eta,
            note: c.note.clone().unwrap_or_default(),
        });
    }
    let hosts = lab
        .hosts
        .iter()
        .map(|h| HostLine {
            host: h.name.clone(),
            address: match &h.kind {
                crate::config::HostKind::Local => "this machine".into(),
                crate::config::HostKind::Ssh(s) => format!("{}@{}", s.user, s.address),
            },
            devices: lab.devices.iter().filter(|d| d.host == h.name).count(),
            offline: devices.iter().filter(|d| d.host == h.name && d.state == "offline").count(),
        })
        .collect();
    let (waiting, attested) = operator_steps::collect(store, &campaigns, live)?;
    Ok(StatusView {
        waiting,
        attested,
        lab: format!("{} ({})", lab.name, display_path(&lab.source)),
        store: context::display_store(lab),
        hosts,
        devices,
        campaigns: lines,
        batteries: batteries::collect(lab, store)?,
        queues: queues::collect(store, chrono::Utc::now())?,
        agents,
    })
}

pub fn render(v: &StatusView) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "lab {}; store {}", v.lab, v.store);
    let _ =
        writeln!(s, "\nhosts (`lab hosts check` connects to them):\n{}", Table::new(&v.hosts).with(Style::rounded()));
    let _ = writeln!(s, "\ndevices:\n{}", Table::new(&v.devices).with(Style::rounded()));
    agents::render(&mut s, &v.agents);
    queues::render(&mut s, &v.queues);
    batteries::render(&v.batteries, &mut s);
    if v.campaigns.is_empty() {
        let _ = writeln!(s, "\nno campaigns yet; start one with: lab run runbooks/quickstart.toml");
    } else {
        let _ = writeln!(s, "\ncampaigns (newest first):\n{}", Table::new(&v.campaigns).with(Style::rounded()));
    }
    operator_steps::render(&mut s, &v.waiting, &v.attested);
    s
}
