//! `lab run RUNBOOK` and `lab run --resume CAMPAIGN`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use tokio::sync::{mpsc, watch};

use super::args::{MessageFormat, QueueArgs, RunArgs};
use super::context;
use super::exit::{self, CliError};
use super::operator;
use super::report_cmd;
use super::reporter::{Output, Reporter};
use crate::config::{self, Lab, Runbook};
use crate::plan::{self, Plan};
use crate::runner::{self, Campaign, EventSink, Turns};
use crate::store::{CampaignStatus, LeaseRequest, Store};

pub const NO_RUNBOOK: &str = "no runbook given; fix: `lab run runbooks/quickstart.toml` (a first campaign in seconds) \
or `lab run runbooks/envoy-battery-audit.toml` (the Envoy Mobile battery audit), or `lab run --resume CAMPAIGN`";

/// What the command printed and its exit code.
pub struct RunOutcome {
    pub output: String,
    pub code: u8,
    /// The campaign it ran.
    pub campaign: String,
    /// The event stream, when it was asked for: a caller may add lines after the run's.
    pub stream: Option<super::event_lines::EventLines>,
}

pub async fn run(lab_arg: Option<&Path>, args: &RunArgs) -> Result<RunOutcome, CliError> {
    let lab = context::load_lab(lab_arg)?;
    let start = match (&args.runbook, &args.resume, &args.from_manifest) {
        (Some(path), _, _) => Start::Runbook { path: path.clone(), id: None, seed: None },
        (None, Some(id), _) => Start::Resume(id.clone()),
        (None, None, Some(file)) => {
            let mut manifest = runner::Manifest::read(file).map_err(|e| CliError::bad_input(e.to_string()))?;
            // Copied off another lab, its runbook's folder may not be here: its build files
            // are then looked for next to the manifest.
            let recorded = PathBuf::from(&manifest.runbook.path);
            if !recorded.parent().is_some_and(|p| p.as_os_str().is_empty() || p.is_dir()) {
                let name = recorded.file_name().map(PathBuf::from).unwrap_or_else(|| "runbook.toml".into());
                manifest.runbook.path = file.parent().unwrap_or(Path::new(".")).join(name).display().to_string();
            }
            Start::Manifest { manifest: Box::new(manifest), allow_changed_builds: args.allow_changed_builds }
        }
        (None, None, None) => return Err(CliError::bad_input(NO_RUNBOOK)),
    };
    let output = match (args.message_format, args.json) {
        (MessageFormat::Json, _) => Output::EventStream,
        (MessageFormat::Human, true) => Output::SummaryJson,
        (MessageFormat::Human, false) => Output::Human,
    };
    run_until_ctrl_c(lab, start, Queueing::from(args.queue), output, args.verbose).await
}

/// How a campaign takes its turn on its devices (docs/shared-lab.md).
#[derive(Debug, Clone, Copy)]
pub(super) struct Queueing {
    pub priority: i32,
    pub start: runner::StartWhen,
}

impl From<QueueArgs> for Queueing {
    fn from(q: QueueArgs) -> Queueing {
        let start = if q.no_wait { runner::StartWhen::AllNow } else { runner::StartWhen::AnyFree };
        Queueing { priority: q.priority, start }
    }
}

/// Runs `start` until done or Ctrl-C (the first lets the trials in flight wind down, a
/// second exits at once).
pub(super) async fn run_until_ctrl_c(
    lab: Lab,
    start: Start,
    queueing: Queueing,
    output: Output,
    verbose: bool,
) -> Result<RunOutcome, CliError> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let ctrl_c = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            let _ = stop_tx.send(true);
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(exit::INTERRUPTED as i32);
            }
        }
    });
    let result = run_campaign(lab, start, queueing, output, verbose, stop_rx).await;
    ctrl_c.abort();
    result
}

/// What a campaign run starts from.
pub(super) enum Start {
    /// A new campaign of a runbook; `id`: the id it gets (else `lab run`'s own choice);
    /// `seed`: the seed it runs with instead of the runbook's (a scheduled slot's).
    Runbook { path: PathBuf, id: Option<String>, seed: Option<u64> },
    /// A new campaign of a runbook the lab wrote itself (a confirmation), read as if it
    /// were the file `source` (relative paths in it resolve from there).
    Generated { text: String, source: PathBuf, id: String },
    /// An interrupted campaign, with the runbook it was started with.
    Resume(String),
    /// A new campaign that runs a manifest's runbook with its seed, refused when a build's
    /// hashes changed unless `allow_changed_builds`.
    Manifest { manifest: Box<runner::Manifest>, allow_changed_builds: bool },
}

/// `lab run`'s whole path, for `lab run` and for scheduled slots: validate, open every
/// device, take the campaign's turn on them, create (or reopen) the campaign, run it
/// until done or until `stop` is set (the way a first Ctrl-C stops it), write the report
/// files.
pub(super) async fn run_campaign(
    lab: Lab,
    start: Start,
    queueing: Queueing,
    output: Output,
    verbose: bool,
    stop: watch::Receiver<bool>,
) -> Result<RunOutcome, CliError> {
    let lab = Arc::new(lab);
    // Everything is validated, and every device opened, before the store is touched:
    // bad input changes nothing.
    let mut rerun_of = None;
    let (runbook, plan, resume, new_id) = match start {
        Start::Runbook { path, id, seed } => {
            let mut runbook = config::load_runbook(&path, &lab)?;
            if let Some(seed) = seed {
                runbook.seed = seed;
            }
            let plan = plan::build(&runbook, &lab)?;
            (runbook, plan, None, id)
        }
        Start::Generated { text, source, id } => {
            let runbook = config::parse_runbook(&text, &source, &lab)?;
            let plan = plan::build(&runbook, &lab)?;
            (runbook, plan, None, Some(id))
        }
        Start::Manifest { manifest, allow_changed_builds } => {
            let (runbook, plan, rerun) = from_manifest(&lab, &manifest, allow_changed_builds)?;
            rerun_of = Some(rerun);
            (runbook, plan, None, None)
        }
        Start::Resume(id) => {
            let id = &id;
            let store = context::open_store_existing(&lab)?.ok_or_else(|| {
                CliError::bad_input(format!("no store at {}; nothing to resume", super::context::display_store(&lab)))
            })?;
            let c = store.campaign(id)?;
            if c.status == CampaignStatus::Running && c.runner().is_some_and(|p| p.alive()) {
                return Err(CliError::bad_input(format!(
                    "campaign {id} is being run by process {}; fix: wait for it, or stop it first",
                    c.runner_pid.unwrap_or_default()
                )));
            }
            // The campaign goes on with the runbook it was started with, not today's file.
            let mut runbook = config::parse_runbook(&c.runbook_text, Path::new(&c.runbook_path), &lab)?;
            // … and its own seed (a scheduled slot's is not the one in the file).
            runbook.seed = c.seed;
            let plan = Plan::deserialize(&c.plan_json)
                .map_err(|e| CliError::internal(format!("campaign {id}: stored plan unreadable: {e}")))?;
            (runbook, plan, Some((store, id.clone())), None)
        }
    };
    // One transport per host, shared by its devices and their tethers.
    let hosts = crate::transport::Hosts::for_lab(&lab);
    // `{ uhubctl = "auto" }` tethers become the port the phone is on, before anything runs.
    let mut resolved = (*lab).clone();
    let names: Vec<String> = plan.devices.iter().map(|d| d.name.clone()).collect();
    crate::tether::hubs::resolve_auto(&mut resolved, &names, &hosts)
        .await
        .map_err(|e| CliError::new(exit::UNAVAILABLE, e))?;
    let lab = Arc::new(resolved);
    let devices = open_devices(&lab, &plan, &hosts)?;
    preflight(&devices).await?;
    let opening = match resume {
        Some((store, id)) => Opening { store, id, new: None },
        None => {
            let store = context::open_store(&lab)?;
            let id = match new_id {
                Some(id) => id,
                None => runner::new_id(&runbook.name, &store)?,
            };
            let mut record = runner::new_record(&id, &lab, &runbook, &plan);
            if let (Some(r), Some(hashes)) = (&rerun_of, record.content_hashes.as_object_mut()) {
                hashes.insert("rerun".into(), serde_json::to_value(r).map_err(CliError::internal)?);
            }
            Opening { store, id, new: Some(Box::new(record)) }
        }
    };
    execute(lab, hosts, runbook, plan, opening, devices, queueing, output, verbose, stop).await
}

/// The campaign about to run: in `store` under `id`, created once its first device is its
/// own (`new`), or there already (a resume).
struct Opening {
    store: Store,
    id: String,
    new: Option<Box<crate::store::NewCampaign>>,
}

/// The runbook and plan a manifest describes, on `lab`, and what the new campaign records
/// of where it came from. Refused (bad input) when a build's files changed, unless allowed.
fn from_manifest(
    lab: &Lab,
    m: &runner::Manifest,
    allow_changed_builds: bool,
) -> Result<(Runbook, Plan, runner::RerunOf), CliError> {
    // Relative paths in the runbook (its build files) resolve from where it was read.
    let mut runbook = config::parse_runbook(&m.runbook.text, Path::new(&m.runbook.path), lab)?;
    runbook.seed = m.seed;
    let plan = plan::build(&runbook, lab)?;
    let changed = m.changed_builds(&runbook, &runner::content_hashes(&runbook));
    if !changed.is_empty() && !allow_changed_builds {
        return Err(CliError::bad_input(format!(
            "campaign {}: {}; fix: put the campaign's build files back, or pass --allow-changed-builds \
(the new campaign's manifest and report then say which builds changed)",
            m.campaign,
            changed.join("; ")
        )));
    }
    // Adaptive repeats grow a plan as it runs: its first round cannot be compared with the
    // manifest's final one.
    let plan_changed = plan.adaptive.is_none() && crate::seed::sha256_hex_json(&plan) != m.plan_sha256;
    Ok((runbook, plan, runner::RerunOf { campaign: m.campaign.clone(), changed_builds: changed, plan_changed }))
}

type Devices = BTreeMap<String, Arc<dyn crate::device::Device>>;

fn open_devices(lab: &Lab, plan: &Plan, hosts: &crate::transport::Hosts) -> Result<Devices, CliError> {
    let mut out = BTreeMap::new();
    for d in &plan.devices {
        let spec = lab.device(&d.name).ok_or_else(|| {
            CliError::bad_input(format!(
                "{}: device {} of the campaign is not in the lab; fix: add it back or use another --lab",
                lab.source.display(),
                d.name
            ))
        })?;
        let dev = crate::device::open(spec, lab, hosts).map_err(|e| CliError::new(exit::UNAVAILABLE, e))?;
        out.insert(d.name.clone(), dev);
    }
    Ok(out)
}

/// What would fail every trial of a device (an unauthorized phone) stops the run here,
/// before the store is touched.
async fn preflight(devices: &Devices) -> Result<(), CliError> {
    for d in devices.values() {
        match tokio::time::timeout(std::time::Duration::from_secs(120), d.preflight()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(CliError::new(exit::UNAVAILABLE, e)),
            Err(_) => {
                return Err(CliError::new(
                    exit::UNAVAILABLE,
                    format!("{}: checking the device did not finish within 2 minutes", d.name()),
                ));
            }
        }
    }
    Ok(())
}

#[expect(
    clippy::too_many_arguments,
    reason = "the run's parts, each its own type; a struct would be built once to be taken apart here"
)]
async fn execute(
    lab: Arc<Lab>,
    hosts: crate::transport::Hosts,
    runbook: Runbook,
    plan: Plan,
    opening: Opening,
    devices: Devices,
    queueing: Queueing,
    output: Output,
    verbose: bool,
    stop_rx: watch::Receiver<bool>,
) -> Result<RunOutcome, CliError> {
    let Opening { store, id, new } = opening;
    let resumed = new.is_none();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (report_tx, report_rx) = mpsc::unbounded_channel();
    let reporter = tokio::spawn(Reporter::new(verbose, output).run(report_rx));
    // Steps the runner waits on go to the terminal's prompter too, when there is one.
    let prompter = operator::spawn_terminal(store.clone());
    let relay = tokio::spawn(async move {
        while let Some(e) = rx.recv().await {
            if let (Some(p), Some(tx)) = (operator::Prompt::from_event(&e), &prompter) {
                let _ = tx.send(p);
            }
            let _ = report_tx.send(e);
        }
    });
    let events = EventSink::new(tx);
    let desk = Arc::new(runner::OperatorDesk::new(
        store.clone(),
        &id,
        events.clone(),
        runbook.timeouts.operator,
        stop_rx.clone(),
    ));
    let operator: Arc<dyn crate::tether::Operator> = desk.clone();
    let mut opened = BTreeMap::new();
    let monitors: BTreeMap<String, runner::MonitorPlace> =
        devices.keys().filter_map(|name| Some((name.clone(), runner::monitor_place(&lab, &hosts, name)?))).collect();
    for (name, dev) in devices {
        let slot = monitors.get(&name).map(|m| m.slot.clone());
        let tether = runner::tether_for(&lab, &hosts, &name, operator.clone(), slot)
            .ok_or_else(|| CliError::internal(format!("device {name} has no tether")))?;
        opened.insert(name, (dev, tether));
    }
    // The reporter ends when the last event sender is gone: the desk's go with the campaign.
    drop(operator);
    // The campaign's turn on its devices: it starts once one is its own (all, for
    // `--no-wait` and a schedule slot); the others are waited for by their workers.
    let req = LeaseRequest {
        purpose: "campaign".into(),
        campaign: Some(id.clone()),
        runbook: Some(runbook.name.clone()),
        host: context::hostname(),
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
    let got = match queueing.start {
        runner::StartWhen::All(deadline) => {
            Turns::join_all_in_order(&store, &expect, &req, &events, deadline, &mut stop_rx.clone()).await?
        }
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
            drop((events, desk, opened));
            let _ = relay.await;
            let _ = reporter.await;
            if *stop_rx.borrow() {
                return Err(CliError::new(
                    exit::INTERRUPTED,
                    format!("stopped while waiting for devices; campaign {id} did not start, nothing was recorded"),
                ));
            }
            let fix = match queueing.start {
                runner::StartWhen::AllNow => "run it without --no-wait to wait its turn, or name other devices",
                _ => "it waited as long as it may; it runs at its next slot, or start it by hand with `lab run`",
            };
            return Err(CliError::busy(format!("{}; fix: {fix}", busy.join("; "))));
        }
    };
    match new {
        Some(record) => store.create_campaign(&record, plan.max_attempts, std::process::id())?,
        None => {
            // Another `--resume` of it may have started while this one waited for devices.
            let c = store.campaign_without_plan(&id)?;
            if c.status == CampaignStatus::Running
                && c.runner().is_some_and(|p| p.alive() && p.pid != std::process::id())
            {
                return Err(CliError::bad_input(format!(
                    "campaign {id} is being run by process {} (it started while this one waited for devices); \
fix: wait for it",
                    c.runner_pid.unwrap_or_default()
                )));
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
    };
    let result = campaign.run(resumed).await;
    let _ = relay.await;
    let stream = reporter.await.ok().and_then(Reporter::into_stream);
    let summary = result?;

    let (files, tables) = report_cmd::write_files(&store, &id, &summary.artifacts)?;
    let code = if *stop_rx.borrow() && summary.pending > 0 {
        exit::INTERRUPTED
    } else if summary.pending > 0 {
        exit::UNAVAILABLE
    } else if summary.failed > 0 {
        exit::TRIALS_FAILED
    } else {
        exit::OK
    };
    let mut text = String::new();
    let stream = if let Some(mut stream) = stream {
        // The stream's last line: where the report is, and how the run ends.
        let last = serde_json::json!({ "event": "report_written", "campaign": id, "files": files, "exit_code": code });
        if let serde_json::Value::Object(fields) = last {
            stream.write(fields);
        }
        Some(stream)
    } else if output == Output::SummaryJson {
        let json = serde_json::json!({ "campaign": summary, "files": files });
        text.push_str(&serde_json::to_string_pretty(&json).map_err(CliError::internal)?);
        text.push('\n');
        None
    } else {
        text.push('\n');
        text.push_str(&tables);
        text.push_str("\nreport files:\n");
        for f in &files {
            text.push_str(&format!("  {f}\n"));
        }
        if summary.status == CampaignStatus::Interrupted {
            text.push_str(&format!("\ncampaign {id} is interrupted; continue it with: lab run --resume {id}\n"));
        }
        None
    };
    Ok(RunOutcome { output: text, code, campaign: id, stream })
}
