//! Starting a campaign: validate, open every device, take the campaign's turn on them,
//! create (or reopen) the campaign, run it, write its report files. One library call for
//! every caller: `lab run`, a schedule's slot, and whatever else starts campaigns.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tokio::sync::watch;

use super::campaign::{Campaign, CampaignSummary, new_id, new_record, tether_for};
use super::desk::OperatorDesk;
use super::event::EventSink;
use super::manifest::{Manifest, RerunOf};
use super::monitored::{MonitorPlace, monitor_place};
use super::start_gate::StartGate;
use super::trial::RunError;
use super::turns::{StartWhen, Turns};
use crate::config::{self, ConfigError, Lab, Runbook};
use crate::device::{Device, DeviceError};
use crate::plan::{self, Plan, PlanError};
use crate::report::{ReportError, write_campaign_files};
use crate::store::{CampaignStatus, LeaseRequest, NewCampaign, OpenError, Store, StoreError};
use crate::transport::Hosts;

/// What a campaign starts from.
#[derive(Debug)]
pub enum Start {
    /// A new campaign of a runbook; `id`: the id it gets (else a new one from the runbook's
    /// name); `seed`: the seed it runs with instead of the runbook's (a scheduled slot's).
    Runbook { path: PathBuf, id: Option<String>, seed: Option<u64> },
    /// A new campaign of a runbook the lab wrote itself (a confirmation), read as if it
    /// were the file `source` (relative paths in it resolve from there).
    Generated { text: String, source: PathBuf, id: String },
    /// An interrupted campaign, with the runbook it was started with.
    Resume(String),
    /// A new campaign that runs a manifest's runbook with its seed, refused when a build's
    /// hashes changed unless `allow_changed_builds`.
    Manifest { manifest: Box<Manifest>, allow_changed_builds: bool },
    /// An agent's part of a submitted campaign: the trials of its devices.
    Part { id: String, part: AgentPart },
}

/// An agent's part of a submitted campaign (docs/agents.md): its devices' trials, with the
/// campaign's stored runbook and plan, alongside other agents' parts.
#[derive(Debug, Clone)]
pub struct AgentPart {
    /// The lab host the agent serves.
    pub host: String,
    /// The agent's devices with trials in the campaign.
    pub devices: Vec<String>,
    /// Turns `true` when the agent drains: trials in progress finish, no new one starts.
    pub drain: watch::Receiver<bool>,
}

/// How a campaign takes its turn on its devices (docs/shared-lab.md).
#[derive(Debug, Clone, Copy)]
pub struct Queueing {
    pub priority: i32,
    pub start: StartWhen,
}

/// How a campaign that ran ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Every trial done and valid.
    Complete,
    /// Every trial done, some failed (used up their retries).
    TrialsFailed,
    /// Trials left pending: devices went offline. Resumable.
    Pending,
    /// Stopped (the stop channel) with trials pending. Resumable.
    Interrupted,
}

/// A campaign that ran (to its end, or until stopped) and its report files.
#[derive(Debug)]
pub struct Launched {
    pub id: String,
    pub summary: CampaignSummary,
    /// The report files, in the order they are listed to people.
    pub files: Vec<PathBuf>,
    /// The report's terminal tables.
    pub tables: String,
    pub ending: Ending,
}

impl Launched {
    /// What `lab run` shows after the progress: the tables, the report files and, for an
    /// interrupted campaign, how to continue it.
    pub fn text(&self) -> String {
        let mut text = String::from("\n");
        text.push_str(&self.tables);
        text.push_str("\nreport files:\n");
        for f in &self.files {
            text.push_str(&format!("  {}\n", crate::fs::display_path(f)));
        }
        if self.summary.status == CampaignStatus::Interrupted {
            let id = &self.id;
            text.push_str(&format!("\ncampaign {id} is interrupted; continue it with: lab run --resume {id}\n"));
        }
        text
    }
}

/// What kind of failure kept a campaign from running, for exit codes and slot outcomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchFailure {
    /// The runbook, the lab file or the request is wrong; nothing was changed.
    BadInput,
    /// A device or host cannot be used (not reachable, not paired, not checked in time).
    Unavailable,
    /// Its devices stayed held by others as long as it could wait.
    Busy,
    /// Stopped while waiting for its devices; nothing was recorded.
    Interrupted,
    /// A fault of the lab itself (the store, the artifacts folder, a stored plan).
    Internal,
}

/// Why a campaign did not run (or ran but its report could not be written).
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    OpenStore(#[from] OpenError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error("no store at {store}; nothing to resume")]
    NothingToResume { store: String },
    #[error("campaign {id} is being run by process {pid}; fix: wait for it, or stop it first")]
    BeingRun { id: String, pid: u32 },
    #[error(
        "campaign {id} is being run by process {pid} (it started while this one waited for devices); fix: wait for it"
    )]
    StartedMeanwhile { id: String, pid: u32 },
    #[error("campaign {id}: stored plan unreadable: {source}")]
    PlanUnreadable { id: String, source: serde_json::Error },
    #[error(
        "campaign {campaign}: {changed}; fix: put the campaign's build files back, or pass --allow-changed-builds \
(the new campaign's manifest and report then say which builds changed)"
    )]
    BuildsChanged { campaign: String, changed: String },
    #[error("{lab}: device {device} of the campaign is not in the lab; fix: add it back or use another --lab")]
    NotInLab { lab: String, device: String },
    /// A `{ uhubctl = "auto" }` tether whose port could not be found.
    #[error(transparent)]
    HubPort(Box<crate::tether::AutoPortError>),
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error("{device}: checking the device did not finish within 2 minutes")]
    PreflightTimeout { device: String },
    #[error("device {device} has no tether")]
    NoTether { device: String },
    #[error("stopped while waiting for devices; campaign {id} did not start, nothing was recorded")]
    StoppedWaiting { id: String },
    /// Devices held by others: `holders` says which and by whom.
    #[error("{holders}; fix: {fix}")]
    Busy { holders: String, fix: &'static str },
    #[error("{0}")]
    Json(#[from] serde_json::Error),
}

impl LaunchError {
    pub fn failure(&self) -> LaunchFailure {
        use LaunchError as E;
        match self {
            E::Config(_)
            | E::Plan(_)
            | E::NothingToResume { .. }
            | E::BeingRun { .. }
            | E::StartedMeanwhile { .. }
            | E::BuildsChanged { .. }
            | E::NotInLab { .. }
            | E::OpenStore(OpenError::Password(_)) => LaunchFailure::BadInput,
            E::Store(e) | E::OpenStore(OpenError::Store(e)) | E::Report(ReportError::Store(e)) => store_failure(e),
            E::HubPort(_) | E::Device(_) | E::PreflightTimeout { .. } => LaunchFailure::Unavailable,
            E::Busy { .. } => LaunchFailure::Busy,
            E::StoppedWaiting { .. } => LaunchFailure::Interrupted,
            E::Run(_) | E::Report(_) | E::PlanUnreadable { .. } | E::NoTether { .. } | E::Json(_) => {
                LaunchFailure::Internal
            }
        }
    }
}

/// An unknown campaign is the caller's to fix; an unreachable server is unavailable.
fn store_failure(e: &StoreError) -> LaunchFailure {
    match e {
        StoreError::NoCampaign(_) | StoreError::Missing { .. } => LaunchFailure::BadInput,
        StoreError::Unreachable(_) => LaunchFailure::Unavailable,
        _ => LaunchFailure::Internal,
    }
}

/// Runs a campaign from `start` on `lab` until done or until `stop` becomes true (the way
/// a first Ctrl-C stops it: trials in flight wind down, nothing partial is recorded), and
/// writes its report files. Everything is validated, and every device opened, before the
/// store is touched: bad input changes nothing. `events` gets every runner event; the
/// sink is dropped when this returns.
pub async fn launch(
    lab: Lab,
    start: Start,
    queueing: Queueing,
    events: EventSink,
    stop: watch::Receiver<bool>,
) -> Result<Launched, LaunchError> {
    let lab = Arc::new(lab);
    let mut rerun_of = None;
    let mut agent = None;
    let mut fresh_part = false;
    let (runbook, plan, resume, new_id_given) = match start {
        Start::Runbook { path, id, seed } => {
            let mut runbook = config::load_runbook(&path, &lab)?;
            if let Some(seed) = seed {
                runbook.seed = seed;
            }
            let plan = plan_with_noise(&runbook, &lab)?;
            (runbook, plan, None, id)
        }
        Start::Generated { text, source, id } => {
            let runbook = config::parse_runbook(&text, &source, &lab)?;
            let plan = plan_with_noise(&runbook, &lab)?;
            (runbook, plan, None, Some(id))
        }
        Start::Manifest { manifest, allow_changed_builds } => {
            let (runbook, plan, rerun) = from_manifest(&lab, &manifest, allow_changed_builds)?;
            rerun_of = Some(rerun);
            (runbook, plan, None, None)
        }
        Start::Resume(id) => {
            let store = Store::open_existing_at(&lab.store)?
                .ok_or_else(|| LaunchError::NothingToResume { store: crate::store::shown_location(&lab.store) })?;
            let c = store.campaign(&id)?;
            if c.status == CampaignStatus::Running && c.runner().is_some_and(|p| p.alive()) {
                return Err(LaunchError::BeingRun { id, pid: c.runner_pid.unwrap_or_default() });
            }
            // The campaign goes on with the runbook it was started with, not today's file.
            let mut runbook = config::parse_runbook(&c.runbook_text, Path::new(&c.runbook_path), &lab)?;
            // … and its own seed (a scheduled slot's is not the one in the file).
            runbook.seed = c.seed;
            let plan = Plan::deserialize(&c.plan_json)
                .map_err(|source| LaunchError::PlanUnreadable { id: id.clone(), source })?;
            (runbook, plan, Some((store, id)), None)
        }
        Start::Part { id, part } => {
            // Off the async threads: a store's connections, the campaign's row and its plan
            // (thousands of trials) held up the agent's running devices behind them.
            let l = lab.clone();
            let read = tokio::task::spawn_blocking(move || {
                let store = Store::open_existing_at(&l.store)?
                    .ok_or_else(|| LaunchError::NothingToResume { store: crate::store::shown_location(&l.store) })?;
                let c = store.campaign(&id)?;
                let mut runbook = config::parse_runbook(&c.runbook_text, Path::new(&c.runbook_path), &l)?;
                runbook.seed = c.seed;
                let plan = Plan::deserialize(&c.plan_json)
                    .map_err(|source| LaunchError::PlanUnreadable { id: id.clone(), source })?;
                Ok::<_, LaunchError>((store, id, runbook, plan, c.status))
            });
            let (store, id, runbook, plan, status) = read.await.map_err(|e| {
                LaunchError::Run(RunError::Internal(format!("reading the campaign's part stopped: {e}")))
            })??;
            // The first part of a queued campaign starts it; later ones go on with it.
            fresh_part = status == CampaignStatus::Queued;
            agent = Some(part);
            (runbook, plan, Some((store, id)), None)
        }
    };
    // One transport per host, shared by its devices and their tethers.
    let hosts = Hosts::for_lab(&lab);
    // `{ uhubctl = "auto" }` tethers become the port the phone is on, before anything runs.
    let mut resolved = (*lab).clone();
    // An agent opens only its own devices; the other agents open theirs.
    let ours = |name: &str| agent.as_ref().is_none_or(|a: &AgentPart| a.devices.iter().any(|d| d == name));
    let names: Vec<String> = plan.devices.iter().map(|d| d.name.clone()).filter(|d| ours(d)).collect();
    crate::tether::hubs::resolve_auto(&mut resolved, &names, &hosts)
        .await
        .map_err(|e| LaunchError::HubPort(Box::new(e)))?;
    let lab = Arc::new(resolved);
    let devices = open_devices(&lab, &plan, &hosts, &names)?;
    preflight(&devices).await?;
    let opening = match resume {
        Some((store, id)) => Opening { store, id, new: None, fresh_part },
        None => {
            let store = Store::open_at(&lab.store)?;
            let id = match new_id_given {
                Some(id) => id,
                None => new_id(&runbook.name, &store)?,
            };
            let mut record = new_record(&id, &lab, &runbook, &plan);
            if let (Some(r), Some(hashes)) = (&rerun_of, record.content_hashes.as_object_mut()) {
                hashes.insert("rerun".into(), serde_json::to_value(r)?);
            }
            Opening { store, id, new: Some(Box::new(record)), fresh_part: false }
        }
    };
    let parts = Parts { lab, hosts, runbook, plan, devices, agent };
    execute(parts, opening, queueing, events, stop).await
}

/// The campaign about to run: in `store` under `id`, created once its first device is its
/// own (`new`), or there already (a resume).
struct Opening {
    store: Store,
    id: String,
    new: Option<Box<NewCampaign>>,
    /// An agent's first part of a queued campaign: it starts the campaign, it does not resume it.
    fresh_part: bool,
}

type Devices = BTreeMap<String, Arc<dyn Device>>;

/// What a validated campaign runs with.
struct Parts {
    lab: Arc<Lab>,
    hosts: Hosts,
    runbook: Runbook,
    plan: Plan,
    devices: Devices,
    /// An agent's part, else the whole campaign in this process.
    agent: Option<AgentPart>,
}

/// The plan of `runbook`, a design sized from a power without a `cv` sized at the lab's
/// noise floor (`report::design_noise`).
pub fn plan_with_noise(runbook: &Runbook, lab: &Lab) -> Result<Plan, PlanError> {
    plan::build_with(runbook, lab, Some(&|models: &[String]| crate::report::design_noise(lab, runbook, models)))
}

/// The runbook and plan a manifest describes, on `lab`, and what the new campaign records
/// of where it came from. Refused (bad input) when a build's files changed, unless allowed.
fn from_manifest(lab: &Lab, m: &Manifest, allow_changed_builds: bool) -> Result<(Runbook, Plan, RerunOf), LaunchError> {
    // Relative paths in the runbook (its build files) resolve from where it was read.
    let mut runbook = config::parse_runbook(&m.runbook.text, Path::new(&m.runbook.path), lab)?;
    runbook.seed = m.seed;
    let plan = plan_with_noise(&runbook, lab)?;
    let changed = m.changed_builds(&runbook, &super::campaign::content_hashes(&runbook));
    if !changed.is_empty() && !allow_changed_builds {
        return Err(LaunchError::BuildsChanged { campaign: m.campaign.clone(), changed: changed.join("; ") });
    }
    // Adaptive repeats grow a plan as it runs: its first round cannot be compared with the
    // manifest's final one.
    let plan_changed = plan.adaptive.is_none() && crate::seed::sha256_hex_json(&plan) != m.plan_sha256;
    Ok((runbook, plan, RerunOf { campaign: m.campaign.clone(), changed_builds: changed, plan_changed }))
}

fn open_devices(lab: &Lab, plan: &Plan, hosts: &Hosts, names: &[String]) -> Result<Devices, LaunchError> {
    let mut out = BTreeMap::new();
    for d in plan.devices.iter().filter(|d| names.contains(&d.name)) {
        let spec = lab
            .device(&d.name)
            .ok_or_else(|| LaunchError::NotInLab { lab: lab.source.display().to_string(), device: d.name.clone() })?;
        out.insert(d.name.clone(), crate::device::open(spec, lab, hosts)?);
    }
    Ok(out)
}

/// What would fail every trial of a device (an unauthorized phone) stops the run here,
/// before the store is touched.
async fn preflight(devices: &Devices) -> Result<(), LaunchError> {
    for d in devices.values() {
        match tokio::time::timeout(Duration::from_secs(120), d.preflight()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => return Err(LaunchError::PreflightTimeout { device: d.name().to_string() }),
        }
    }
    Ok(())
}

async fn execute(
    parts: Parts,
    opening: Opening,
    queueing: Queueing,
    events: EventSink,
    stop_rx: watch::Receiver<bool>,
) -> Result<Launched, LaunchError> {
    let Parts { lab, hosts, runbook, plan, devices, agent } = parts;
    let Opening { store, id, new, fresh_part } = opening;
    let resumed = new.is_none() && !fresh_part;
    let desk =
        Arc::new(OperatorDesk::new(store.clone(), &id, events.clone(), runbook.timeouts.operator, stop_rx.clone()));
    let operator: Arc<dyn crate::tether::Operator> = desk.clone();
    let mut opened = BTreeMap::new();
    let monitors: BTreeMap<String, MonitorPlace> =
        devices.keys().filter_map(|name| Some((name.clone(), monitor_place(&lab, &hosts, name)?))).collect();
    for (name, dev) in devices {
        let slot = monitors.get(&name).map(|m| m.slot.clone());
        let tether = tether_for(&lab, &hosts, &name, operator.clone(), slot)
            .ok_or_else(|| LaunchError::NoTether { device: name.clone() })?;
        opened.insert(name, (dev, tether));
    }
    // The caller's event reader ends when the last sender is gone: the desk's go with the campaign.
    drop(operator);
    // The campaign's turn on its devices: it starts once one is its own (all, for
    // `--no-wait` and a schedule slot); the others are waited for by their workers.
    let req = LeaseRequest {
        purpose: "campaign".into(),
        campaign: Some(id.clone()),
        runbook: Some(runbook.name.clone()),
        host: crate::store::this_host(),
        priority: queueing.priority,
        expect_s: None,
    };
    // Only the devices with trials left (a resumed campaign's done ones are not held).
    let pending: Option<Vec<String>> = match resumed {
        true => {
            Some(store.pending_queue(&id)?.into_iter().filter(|q| !q.pending.is_empty()).map(|q| q.device).collect())
        }
        false => None,
    };
    let expect: Vec<(String, f64)> = plan
        .devices
        .iter()
        .filter(|d| opened.contains_key(&d.name))
        .filter(|d| pending.as_ref().is_none_or(|p| p.contains(&d.name)))
        .map(|d| (d.name.clone(), d.device_time_s))
        .collect();
    // An agent's part gets ready while its devices are others' (`start_gate.rs`): it
    // starts with its first device, and its other devices begin as each is free.
    let gate = match (&agent, queueing.start) {
        (Some(_), StartWhen::AnyFree) => Some(Arc::new(StartGate::new(store.clone(), id.clone(), events.clone()))),
        _ => None,
    };
    let got = match queueing.start {
        StartWhen::All(deadline) => {
            Turns::join_all_in_order(&store, &expect, &req, &events, deadline, &mut stop_rx.clone()).await?
        }
        _ if gate.is_some() => Ok(Turns::join(&store, &expect, &req, &events).await?),
        start => {
            let mut turns = Turns::join(&store, &expect, &req, &events).await?;
            match turns.until(start, &mut stop_rx.clone(), &events).await? {
                true => Ok(turns),
                false => Err(turns.waiting().into_iter().map(|(d, b)| (d.to_string(), b.to_string())).collect()),
            }
        }
    };
    let turns = match got {
        Ok(turns) => turns,
        Err(waiting) => {
            // Not started: nothing of the campaign is left behind (a resumed one stays as it was).
            let busy: Vec<String> = waiting.iter().map(|(d, b)| format!("{d} is {b}")).collect();
            if *stop_rx.borrow() {
                return Err(LaunchError::StoppedWaiting { id });
            }
            let fix = match queueing.start {
                StartWhen::AllNow => "run it without --no-wait to wait its turn, or name other devices",
                _ => "it waited as long as it may; it runs at its next slot, or start it by hand with `lab run`",
            };
            return Err(LaunchError::Busy { holders: busy.join("; "), fix });
        }
    };
    match new {
        Some(record) => store.create_campaign(&record, plan.max_attempts, std::process::id())?,
        // The gate starts it (or finds it cancelled) when its first device is free.
        None if gate.is_some() => {}
        None if agent.is_some() => {
            // Cancelled while this agent waited for its devices: it does not start.
            if !store.start_submitted(&id)? {
                return Err(LaunchError::StoppedWaiting { id });
            }
        }
        None => {
            // Another resume of it may have started while this one waited for devices.
            let c = store.campaign_without_plan(&id)?;
            if c.status == CampaignStatus::Running
                && c.runner().is_some_and(|p| p.alive() && p.pid != std::process::id())
            {
                return Err(LaunchError::StartedMeanwhile { id, pid: c.runner_pid.unwrap_or_default() });
            }
            store.set_running(&id, std::process::id())?
        }
    }
    let campaign = Campaign {
        id: id.clone(),
        lab: lab.clone(),
        runbook: Arc::new(runbook),
        plan: Arc::new(plan),
        store: store.clone(),
        devices: opened,
        events,
        shutdown: stop_rx.clone(),
        desk,
        turns,
        monitors,
        instruments: Default::default(),
        agent: agent.clone(),
        gate: gate.clone(),
    };
    let summary = campaign.run(resumed).await?;
    if gate.is_some_and(|g| !g.is_open()) {
        // Stopped (or cancelled) before any of its devices was free: nothing ran.
        return Err(LaunchError::StoppedWaiting { id });
    }
    if agent.is_some() && summary.status != CampaignStatus::Done {
        // Not this agent's to end: others run the rest, or its devices come back.
        let ending = if summary.pending > 0 { Ending::Pending } else { Ending::Complete };
        return Ok(Launched { id, summary, files: Vec::new(), tables: String::new(), ending });
    }
    let written = write_campaign_files(&store, &id, &summary.artifacts)?;
    let ending = if *stop_rx.borrow() && summary.pending > 0 {
        Ending::Interrupted
    } else if summary.pending > 0 {
        Ending::Pending
    } else if summary.failed > 0 {
        Ending::TrialsFailed
    } else {
        Ending::Complete
    };
    Ok(Launched { id, summary, files: written.paths, tables: written.tables, ending })
}
