//! A campaign: every trial of one `lab run`, one worker per device, devices in parallel.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::adaptive::{self, SharedTether};
use super::desk::OperatorDesk;
use super::event::{DeviceProgress, Event, EventSink};
use super::footprint::Footprint;
use super::manifest::{MANIFEST_FILE, Manifest};
use super::monitored::MonitorPlace;
use super::recorder::Recorder;
use super::start_gate::StartGate;
use super::status_board::StatusBoard;
use super::trial::{RunError, TrialContext, blocking, now_rfc3339};
use super::turns::{Turn, Turns};
use super::worker::{TrialRows, WorkerEnd, run_device};
use crate::config::{Lab, OnOffline, Runbook};
use crate::device::{Device, Identity};
use crate::endpoint::Endpoint;
use crate::plan::Plan;
use crate::store::{CampaignStatus, NewCampaign, Store, TrialMove, TrialOutcome};
use crate::tether::{Operator, Tether};
use crate::transport::Hosts;

/// An opened device and the tether that cuts its power.
pub type OpenedDevice = (Arc<dyn Device>, Box<dyn Tether>);

/// An opened device with its tether shared between the rounds of a campaign.
type SharedDevice = (Arc<dyn Device>, Arc<dyn Tether>);

/// Everything a campaign runs with.
pub struct Campaign {
    pub id: String,
    pub lab: Arc<Lab>,
    pub runbook: Arc<Runbook>,
    pub plan: Arc<Plan>,
    pub store: Store,
    /// One opened device (and its tether) per planned device.
    pub devices: BTreeMap<String, OpenedDevice>,
    pub events: EventSink,
    pub shutdown: watch::Receiver<bool>,
    /// Operator steps (the runbook's and a manual tether's) are asked and answered here.
    pub desk: Arc<OperatorDesk>,
    /// Each device's lease, held or waited for: a worker touches its device only once
    /// the lease is its campaign's.
    pub turns: Turns,
    /// The power monitor each monitored device is on.
    pub monitors: BTreeMap<String, MonitorPlace>,
    /// What each opened monitor said it is, for the manifest.
    pub instruments: Arc<Mutex<BTreeMap<String, serde_json::Value>>>,
    /// An agent's part of a submitted campaign: only its devices run here, and a look (or
    /// the end) is decided by whichever agent's part completes it (docs/agents.md).
    pub agent: Option<super::launch::AgentPart>,
    /// An agent's part that got ready before any of its devices was free: the campaign
    /// starts when the first is (`start_gate.rs`). `None`: it has started.
    pub gate: Option<Arc<StartGate>>,
}

/// What an agent's part does after its round.
enum PartNext {
    /// Trials are left elsewhere, or another agent decided: this part is over.
    Leave,
    /// This agent decided the look and it gave this agent's devices more trials.
    Again,
    /// This agent decided that the campaign is over.
    Finished,
}

/// How an agent's part of an adaptive campaign came out of its wait for a look.
enum Awaited {
    /// Its devices have trials again (this agent's look, or another's).
    Round,
    /// This agent decided the end.
    Finished,
    /// Over without it (another agent ended it), or the agent drains.
    Leave,
    /// Cancelled.
    Stopped,
}

/// A device's turn, shared by the workers of a campaign's rounds: the lease stays with
/// the campaign until it ends.
type TurnSlot = Arc<tokio::sync::Mutex<Turn>>;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CampaignSummary {
    pub id: String,
    pub status: CampaignStatus,
    pub valid: u32,
    pub failed: u32,
    pub pending: u32,
    pub invalid_attempts: u32,
    pub wall_s: f64,
    pub note: Option<String>,
    pub artifacts: PathBuf,
}

/// A new campaign id: `<runbook>-<UTC yyyymmdd-hhmmss>`, with a suffix if taken.
pub fn new_id(runbook: &str, store: &Store) -> Result<String, RunError> {
    Ok(store.free_campaign_id(runbook)?)
}

/// sha256 of every build and pushed file of `runbook`, as the store keeps them
/// (`{"builds": {build: {platform: sha}}, "files": {"config:dest": sha}}`).
pub fn content_hashes(runbook: &Runbook) -> serde_json::Value {
    let mut builds = serde_json::Map::new();
    for b in &runbook.builds {
        let mut m = serde_json::Map::new();
        if let Some(a) = &b.ios {
            m.insert("ios".into(), a.sha256.clone().into());
        }
        if let Some(a) = &b.android {
            m.insert("android".into(), a.sha256.clone().into());
        }
        if let Some(h) = &b.host {
            m.insert(
                "host".into(),
                crate::seed::sha256_hex(serde_json::to_string(h).unwrap_or_default().as_bytes()).into(),
            );
        }
        if let Some(s) = &b.sim {
            m.insert(
                "sim".into(),
                crate::seed::sha256_hex(serde_json::to_string(s).unwrap_or_default().as_bytes()).into(),
            );
        }
        builds.insert(b.name.clone(), m.into());
    }
    let mut files = serde_json::Map::new();
    for c in &runbook.configs {
        for f in &c.files {
            files.insert(format!("{}:{}", c.name, f.dest), f.sha256.clone().into());
        }
    }
    serde_json::json!({ "builds": builds, "files": files })
}

/// What a campaign was started from, for the store.
pub fn new_record(id: &str, lab: &Lab, runbook: &Runbook, plan: &Plan) -> NewCampaign {
    NewCampaign {
        id: id.into(),
        runbook_name: runbook.name.clone(),
        runbook_path: runbook.source.display().to_string(),
        runbook_text: runbook.text.clone(),
        runbook_sha256: runbook.sha256.clone(),
        lab_text: lab.text.clone(),
        lab_sha256: crate::seed::sha256_hex(lab.text.as_bytes()),
        content_hashes: content_hashes(runbook),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        seed: runbook.seed,
        created_at: now_rfc3339(),
        planned_trials: plan.trials.clone(),
        plan_json: serde_json::to_string(plan).unwrap_or_default(),
    }
}

impl Campaign {
    pub fn artifacts_dir(&self) -> PathBuf {
        self.lab.artifacts_dir.join(&self.id)
    }

    /// Runs every trial that has no final outcome yet. Works the same for a new
    /// campaign and for a resumed one: the store says what is left.
    pub async fn run(mut self, resumed: bool) -> Result<CampaignSummary, RunError> {
        let wall = Instant::now();
        let artifacts = self.artifacts_dir();
        std::fs::create_dir_all(&artifacts)
            .map_err(|source| RunError::Artifacts { path: artifacts.clone(), source })?;
        // Half-written attempts staged by an older version's crashed run are not records.
        let partial = artifacts.join(".partial");
        if partial.exists() {
            std::fs::remove_dir_all(&partial)
                .map_err(|source| RunError::Artifacts { path: partial.clone(), source })?;
        }
        // The manifest first, so a campaign can be run again however this run ends (an
        // agent's waiting part: once it starts, before any device begins).
        let mut observed = Manifest::read(&artifacts.join(MANIFEST_FILE)).map(|m| m.observed()).unwrap_or_default();
        let manifest = self.manifest(&artifacts, &self.plan, &observed).await?;
        let path = artifacts.join(MANIFEST_FILE);
        let write = {
            let dir = artifacts.clone();
            move || manifest.write(&dir).map_err(|source| RunError::Artifacts { path, source })
        };
        match &self.gate {
            Some(gate) => gate.write_on_open(write),
            None => write()?,
        }
        // … and so are the steps it left waiting: nobody waits for their answers any more
        // (an agent's part leaves them: another agent's device may be waiting for one).
        if self.agent.is_none() {
            let desk = self.desk.clone();
            blocking(move || desk.abandon_leftovers()).await?;
        }
        let endpoint = match self.start_endpoint() {
            Ok(e) => e,
            Err(e) => {
                let (store, id, note) = (self.store.clone(), self.id.clone(), format!("error: {e}"));
                blocking(move || {
                    store.finish_campaign(&id, CampaignStatus::Interrupted, &now_rfc3339(), Some(&note), None)
                })
                .await?;
                return Err(e);
            }
        };
        let footprint = Arc::new(Footprint::new(endpoint.as_ref().map(|e| e.thread_id())));
        // The workers' stop signal: the user's Ctrl-C, or a worker's fatal error (its
        // siblings then wind down as on Ctrl-C: nothing partial is recorded).
        let (stop_tx, stop_rx) = watch::channel(*self.shutdown.borrow());
        let stop_tx = Arc::new(stop_tx);
        let forward = {
            let (tx, mut user) = (stop_tx.clone(), self.shutdown.clone());
            tokio::spawn(async move {
                if user.wait_for(|stop| *stop).await.is_ok() {
                    let _ = tx.send(true);
                }
            })
        };
        let recorder = Recorder::start(self.store.clone())
            .map_err(|e| RunError::Internal(format!("cannot start the thread that records attempts: {e}")))?;
        let uploads = super::uploads::start_for(&self.lab, &self.store, &self.events)?;
        let ctx = Arc::new(TrialContext {
            campaign: self.id.clone(),
            runbook: self.runbook.clone(),
            store: self.store.clone(),
            events: self.events.clone(),
            artifacts: artifacts.clone(),
            max_attempts: self.plan.max_attempts,
            shutdown: stop_rx,
            endpoint: endpoint.clone(),
            footprint: footprint.clone(),
            desk: self.desk.clone(),
            status: StatusBoard::new(self.store.clone()),
            recorder: Arc::new(recorder),
            uploads: uploads.clone(),
            identities: Mutex::new(BTreeMap::new()),
            lease_request: self.turns.request.clone(),
            monitors: self.monitors.clone(),
            instruments: self.instruments.clone(),
            agent_host: self.agent.as_ref().map(|a| a.host.clone()),
            gate: self.gate.clone(),
            drain: self.agent.as_ref().map(|a| a.drain.clone()),
        });
        // Tethers are shared so that adaptive rounds can hand them to new workers.
        let devices: BTreeMap<String, SharedDevice> =
            std::mem::take(&mut self.devices).into_iter().map(|(name, (d, t))| (name, (d, Arc::from(t)))).collect();
        // A device the campaign did not queue for (nothing left to run on it) is asked for
        // when a later round gives it trials.
        let mut taken = std::mem::take(&mut self.turns.turns);
        let turns: BTreeMap<String, TurnSlot> = devices
            .keys()
            .map(|name| {
                let t = taken.remove(name).unwrap_or(Turn::Released);
                (name.clone(), Arc::new(tokio::sync::Mutex::new(t)))
            })
            .collect();
        // The plan grows only with adaptive repeats; it is copied (once) only then.
        let mut plan = self.plan.clone();
        let mut round = 1;
        // Devices that went offline in this run, and why (kept across rounds).
        let mut down: BTreeMap<String, String> = BTreeMap::new();
        let mut moved_notes = Vec::new();
        let mut finished_here = self.agent.is_none();
        // An agent's part of an adaptive campaign waits for each look between its rounds,
        // its devices kept open as `lab run` keeps them (a simulated phone's battery goes
        // on from where it was): listening from before its first round ends.
        let mut looks = match (&self.agent, self.plan.adaptive.is_some()) {
            (Some(_), true) => {
                let store = self.store.clone();
                Some(blocking(move || store.listen(crate::store::Channel::Work)).await?)
            }
            _ => None,
        };
        let (cancelled, fatal) = loop {
            let end =
                self.run_round(&ctx, &devices, &turns, &plan, &down, round == 1, resumed, &artifacts, &stop_tx).await?;
            down.extend(end.offline);
            if end.fatal.is_some() {
                break (false, end.fatal);
            }
            if end.cancelled {
                break (true, None);
            }
            if self.agent.is_some() {
                // Devices offline keep their trials until they are back: no moves here.
                if !down.is_empty() {
                    break (false, None);
                }
                match self.part_next(&mut plan, &devices).await? {
                    PartNext::Leave => match looks.as_mut() {
                        None => break (false, None),
                        Some(wakes) => match self.await_look(wakes, &mut plan, &devices).await? {
                            Awaited::Round => {
                                round += 1;
                                continue;
                            }
                            Awaited::Finished => {
                                finished_here = true;
                                break (false, None);
                            }
                            Awaited::Leave => break (false, None),
                            Awaited::Stopped => break (true, None),
                        },
                    },
                    PartNext::Finished => {
                        finished_here = true;
                        break (false, None);
                    }
                    PartNext::Again => {
                        round += 1;
                        continue;
                    }
                }
            }
            if !down.is_empty() {
                if self.runbook.on_offline == OnOffline::Wait {
                    break (false, None);
                }
                // `on_offline = "move"`: their pending trials go to devices of the same
                // model that are still up, and another round runs them. Once nothing is
                // left on them, the campaign goes on as if they had never been there.
                let moves = self.move_pending(&devices, &plan, &down).await?;
                moved_notes.extend(moves.notes);
                if moves.moved > 0 {
                    round += 1;
                    continue;
                }
                if moves.stranded > 0 {
                    break (false, None);
                }
            }
            // Adaptive repeats: more trials for imprecise (or, sequential, undecided)
            // variants, then another round.
            if plan.adaptive.is_none() {
                break (false, None);
            }
            match adaptive::extend(&self.store, &self.id, Arc::make_mut(&mut plan)).await? {
                Some(ext) => {
                    for e in ext.decided {
                        self.events.emit(e);
                    }
                    if ext.trials.is_empty() {
                        break (false, None);
                    }
                    round += 1;
                    self.events.emit(Event::TrialsAdded {
                        round,
                        devices: per_device(&ext.trials),
                        reasons: ext.reasons,
                    });
                }
                None => break (false, None),
            }
        };
        forward.abort();
        let offline: Vec<String> = down.iter().map(|(d, why)| format!("{d}: {why}")).collect();
        // A waiting part stopped before any of its devices was free started nothing, and
        // leaves nothing (its folder, made empty at the start).
        let started = self.gate.as_ref().is_none_or(|g| g.is_open());
        if !started {
            let _ = std::fs::remove_dir(&artifacts);
        }
        // With what the devices said they are, and the trials adaptive rounds added.
        observed.extend(ctx.identities.lock().unwrap_or_else(|p| p.into_inner()).clone());
        if started {
            self.write_manifest(&artifacts, &plan, &observed).await?;
        }
        if let Some(u) = &uploads {
            if started {
                u.recorded(&self.id, crate::store::MANIFEST);
            }
            u.finish(&self.events, self.shutdown.clone()).await;
        }

        drop(plan);
        let store = self.store.clone();
        let id = self.id.clone();
        let counts = blocking(move || store.outcome_counts(&id)).await?;
        let (valid, failed, pending) = (counts.valid, counts.failed, counts.pending);
        let invalid_attempts = counts.attempts - valid;
        let mut notes = Vec::new();
        if cancelled {
            notes.push("stopped by the user".to_string());
        }
        if !offline.is_empty() {
            notes.push(format!("devices offline: {}", offline.join("; ")));
        }
        notes.extend(moved_notes);
        if let Some(e) = &fatal {
            notes.push(format!("error: {e}"));
        }
        let status = if pending == 0 { CampaignStatus::Done } else { CampaignStatus::Interrupted };
        let note = (!notes.is_empty()).then(|| notes.join("; "));
        // An agent's part that does not end the campaign leaves it running (or as `lab
        // cancel` left it) for the other parts.
        let status = match finished_here {
            true => status,
            false if cancelled => CampaignStatus::Interrupted,
            false => CampaignStatus::Running,
        };
        if finished_here {
            let store = self.store.clone();
            let (id, n) = (self.id.clone(), note.clone());
            let fp = footprint.to_json();
            let agent = self.agent.is_some();
            blocking(move || {
                store.finish_campaign(&id, status, &now_rfc3339(), n.as_deref(), fp.as_ref())?;
                // Other agents' parts waiting for a look hear that there is none.
                if agent {
                    store.notify(crate::store::Channel::Work)?;
                }
                Ok(())
            })
            .await?;
        }
        drop(ctx);
        drop(endpoint);
        // The devices are free for the next in their queues.
        drop(turns);
        if let Some(e) = fatal {
            return Err(e);
        }
        let summary = CampaignSummary {
            id: self.id.clone(),
            status,
            valid,
            failed,
            pending,
            invalid_attempts,
            wall_s: wall.elapsed().as_secs_f64(),
            note: note.clone(),
            artifacts,
        };
        if !finished_here {
            return Ok(summary);
        }
        self.events.emit(Event::CampaignFinished {
            id: self.id,
            status,
            valid,
            failed,
            pending,
            invalid_attempts,
            wall: wall.elapsed(),
            note,
        });
        Ok(summary)
    }
}

impl Campaign {
    /// An agent's part after its round: when no trial of the campaign is left anywhere,
    /// the look (adaptive and sequential campaigns) or the end is decided here if this
    /// agent is the first to claim it (`claim_look`, one row per planned-trial count), so
    /// two agents never decide one look twice and none is missed: each claims only after
    /// its own trials are recorded, so the last to finish always sees none left.
    async fn part_next(
        &self,
        plan: &mut Arc<Plan>,
        devices: &BTreeMap<String, SharedDevice>,
    ) -> Result<PartNext, RunError> {
        let (store, id) = (self.store.clone(), self.id.clone());
        let host = self.agent.as_ref().map(|a| a.host.clone()).unwrap_or_default();
        let claimed = blocking(move || {
            if store.outcome_counts(&id)?.pending > 0 {
                return Ok(None);
            }
            let n = store.planned_count(&id)?;
            if !store.claim_look(&id, n, &host, &now_rfc3339())? {
                return Ok(None);
            }
            // The plan as the store has it now: another agent's look may have grown it.
            let c = store.campaign(&id)?;
            Ok(Some(c.plan_json))
        })
        .await?;
        let Some(plan_json) = claimed else { return Ok(PartNext::Leave) };
        if plan.adaptive.is_none() {
            return Ok(PartNext::Finished);
        }
        *plan = Arc::new(
            Plan::deserialize(&plan_json).map_err(|e| RunError::Internal(format!("stored plan unreadable: {e}")))?,
        );
        let Some(ext) = adaptive::extend(&self.store, &self.id, Arc::make_mut(plan)).await? else {
            return Ok(PartNext::Finished);
        };
        for e in ext.decided {
            self.events.emit(e);
        }
        if ext.trials.is_empty() {
            return Ok(PartNext::Finished);
        }
        // Round k + 1 follows the k-th look.
        let looks = blocking({
            let (store, id) = (self.store.clone(), self.id.clone());
            move || store.looks_claimed(&id)
        })
        .await?;
        self.events.emit(Event::TrialsAdded {
            round: looks + 1,
            devices: per_device(&ext.trials),
            reasons: ext.reasons,
        });
        // The other agents hear of their new trials.
        let store = self.store.clone();
        blocking(move || store.notify(crate::store::Channel::Work)).await?;
        let mine = ext.trials.iter().any(|t| devices.contains_key(&t.device));
        Ok(if mine { PartNext::Again } else { PartNext::Leave })
    }
}

impl Campaign {
    /// Waits, between rounds, until this agent's devices have trials again or the campaign
    /// ends: at each wake-up (a look decided, a part over, a cancel, a drain) it looks, and
    /// claims the look itself when the last trials were another agent's.
    async fn await_look(
        &self,
        wakes: &mut crate::store::Wakes,
        plan: &mut Arc<Plan>,
        devices: &BTreeMap<String, SharedDevice>,
    ) -> Result<Awaited, RunError> {
        let mut shutdown = self.shutdown.clone();
        let mut drain = self.agent.as_ref().map(|a| a.drain.clone());
        loop {
            let (store, id) = (self.store.clone(), self.id.clone());
            let (queues, status) =
                blocking(move || Ok((store.pending_queue(&id)?, store.campaign_without_plan(&id)?.status))).await?;
            if queues.iter().any(|q| devices.contains_key(&q.device) && !q.pending.is_empty()) {
                return Ok(Awaited::Round);
            }
            if status != CampaignStatus::Running {
                return Ok(Awaited::Leave);
            }
            match self.part_next(plan, devices).await? {
                PartNext::Again => return Ok(Awaited::Round),
                PartNext::Finished => return Ok(Awaited::Finished),
                PartNext::Leave => {}
            }
            let drained = async {
                match drain.as_mut() {
                    Some(d) => drop(d.wait_for(|d| *d).await),
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = wakes.next() => wakes.drain(),
                _ = super::trial::stopped(&mut shutdown) => return Ok(Awaited::Stopped),
                _ = drained => return Ok(Awaited::Leave),
            }
        }
    }

    /// Writes `manifest.json` from the stored campaign, `plan` and the identities known.
    async fn write_manifest(
        &self,
        artifacts: &std::path::Path,
        plan: &Plan,
        observed: &BTreeMap<String, Identity>,
    ) -> Result<(), RunError> {
        let manifest = self.manifest(artifacts, plan, observed).await?;
        manifest.write(artifacts).map_err(|source| RunError::Artifacts { path: artifacts.join(MANIFEST_FILE), source })
    }

    /// The campaign's manifest as it stands: its stored record, this plan, what the devices
    /// and monitors said they are.
    async fn manifest(
        &self,
        artifacts: &std::path::Path,
        plan: &Plan,
        observed: &BTreeMap<String, Identity>,
    ) -> Result<Manifest, RunError> {
        // Without its plan: the plan is here, and a big one is megabytes of text.
        let (store, id) = (self.store.clone(), self.id.clone());
        let record = blocking(move || store.campaign_without_plan(&id)).await?;
        let mut manifest = Manifest::of(&record, &self.runbook, plan, &self.lab, observed);
        // What each monitor said it is: this run's, else an earlier run's.
        let earlier = Manifest::read(&artifacts.join(MANIFEST_FILE)).ok();
        for d in &mut manifest.devices {
            let said = self.instruments.lock().unwrap_or_else(|p| p.into_inner()).get(&d.name).cloned().or_else(|| {
                let e = earlier.as_ref()?.devices.iter().find(|e| e.name == d.name)?;
                e.monitor.as_ref()?.get("instrument").cloned()
            });
            if let (Some(m), Some(said)) = (d.monitor.as_mut().and_then(|m| m.as_object_mut()), said) {
                m.insert("instrument".into(), said);
            }
        }
        Ok(manifest)
    }
}

/// What `move_pending` did.
struct Moves {
    moved: usize,
    /// Pending trials of offline devices that no device could take.
    stranded: usize,
    /// One per offline device whose trials moved or could not.
    notes: Vec<String>,
}

/// How one round of workers ended.
struct RoundEnd {
    /// Device → why it went offline.
    offline: BTreeMap<String, String>,
    cancelled: bool,
    fatal: Option<RunError>,
}

impl Campaign {
    /// Runs every pending trial in the store, one worker per device, until all have an
    /// outcome (or the round is cut short). The first round announces the campaign. A
    /// worker's fatal error stops the others through `stop`.
    #[expect(clippy::too_many_arguments, reason = "a round's context, each its own type; called from one place")]
    async fn run_round(
        &self,
        ctx: &Arc<TrialContext>,
        devices: &BTreeMap<String, SharedDevice>,
        turns: &BTreeMap<String, TurnSlot>,
        plan: &Arc<Plan>,
        down: &BTreeMap<String, String>,
        first: bool,
        resumed: bool,
        artifacts: &std::path::Path,
        stop: &watch::Sender<bool>,
    ) -> Result<RoundEnd, RunError> {
        let store = self.store.clone();
        let id = self.id.clone();
        let queues = blocking(move || store.pending_queue(&id)).await?;
        let mut rows = TrialRows::new(plan.clone());
        if queues.iter().flat_map(|q| &q.pending).any(|&(idx, _)| rows.get(idx).is_none()) {
            // A trial the stored plan does not have: its row comes from the store.
            let (store, id) = (self.store.clone(), self.id.clone());
            for t in blocking(move || store.trials(&id)).await? {
                if rows.get(t.row.idx).is_none() {
                    rows.add(t.row);
                }
            }
        }
        let rows = Arc::new(rows);
        let progress: Vec<DeviceProgress> = queues
            .iter()
            .map(|q| DeviceProgress { device: q.device.clone(), planned: q.planned, done: q.done })
            .collect();
        if first {
            let started = Event::CampaignStarted {
                id: self.id.clone(),
                runbook: self.runbook.name.clone(),
                resumed,
                devices: progress,
                artifacts: artifacts.display().to_string(),
            };
            match &self.gate {
                Some(gate) => gate.tell_on_open(started),
                None => self.events.emit(started),
            }
        }

        let mut set = JoinSet::new();
        let mut missing = Vec::new();
        for q in queues.into_iter().filter(|q| !q.pending.is_empty()) {
            let (name, queue) = (q.device, q.pending);
            if self.agent.is_some() && !devices.contains_key(&name) {
                // Another agent's device: its trials are that agent's part.
                continue;
            }
            if down.contains_key(&name) {
                // Offline earlier in this run: not waited for again until a resume.
                continue;
            }
            match (devices.get(&name), turns.get(&name)) {
                (Some((device, tether)), Some(turn)) => {
                    let ctx = ctx.clone();
                    let (device, tether) = (device.clone(), Box::new(SharedTether(tether.clone())));
                    let (rows, turn) = (rows.clone(), turn.clone());
                    set.spawn(async move { (name, run_device(ctx, device, tether, turn, rows, queue).await) });
                }
                (Some(_), None) | (None, _) => missing.push(name),
            }
        }
        let mut end = RoundEnd {
            offline: missing.into_iter().map(|d| (d, "not available".to_string())).collect(),
            cancelled: false,
            fatal: None,
        };
        while let Some(joined) = set.join_next().await {
            match joined {
                Ok((_, Ok(WorkerEnd::Finished))) => {}
                Ok((name, Ok(WorkerEnd::Offline(reason)))) => {
                    end.offline.insert(name, reason);
                }
                Ok((_, Ok(WorkerEnd::Cancelled))) => end.cancelled = true,
                Ok((_, Err(e))) => {
                    let _ = stop.send(true);
                    end.fatal = end.fatal.or(Some(e));
                }
                Err(e) => {
                    let _ = stop.send(true);
                    end.fatal = end.fatal.or(Some(RunError::Internal(format!("device worker panicked: {e}"))));
                }
            }
        }
        Ok(end)
    }
}

impl Campaign {
    /// Gives the pending trials of offline devices to the other devices of their model
    /// that are up, round-robin in the order they were queued, each after what its new
    /// device already has.
    async fn move_pending(
        &self,
        devices: &BTreeMap<String, SharedDevice>,
        plan: &Plan,
        down: &BTreeMap<String, String>,
    ) -> Result<Moves, RunError> {
        let store = self.store.clone();
        let id = self.id.clone();
        let trials = blocking(move || store.trials(&id)).await?;
        let mut next_order: BTreeMap<String, u32> = BTreeMap::new();
        for t in &trials {
            let o = next_order.entry(t.row.device.clone()).or_default();
            *o = (*o).max(t.row.device_order + 1);
        }
        let mut moves = Vec::new();
        let mut notes = Vec::new();
        let mut stranded = 0;
        for from in down.keys() {
            let mut pending: Vec<_> =
                trials.iter().filter(|t| &t.row.device == from && t.outcome == TrialOutcome::Pending).collect();
            let Some(model) = pending.first().map(|t| t.row.device_model.clone()) else { continue };
            pending.sort_by_key(|t| t.row.device_order);
            let targets: Vec<&String> = devices
                .keys()
                .filter(|d| !down.contains_key(*d))
                .filter(|d| plan.devices.iter().any(|p| &p.name == *d && p.model == model))
                .collect();
            if targets.is_empty() {
                notes.push(format!("no other device of model {model} to take the trials of {from}"));
                stranded += pending.len();
                continue;
            }
            let mut per: BTreeMap<String, u32> = BTreeMap::new();
            for (k, t) in pending.iter().enumerate() {
                let to = targets[k % targets.len()].clone();
                let order = next_order.entry(to.clone()).or_default();
                moves.push(TrialMove { trial_idx: t.row.idx, to_device: to.clone(), device_order: *order });
                *order += 1;
                *per.entry(to).or_default() += 1;
            }
            notes.push(format!(
                "{} trials of {from} moved to {}",
                pending.len(),
                per.iter().map(|(d, n)| format!("{d} ({n})")).collect::<Vec<_>>().join(", ")
            ));
            self.events.emit(Event::TrialsMoved {
                from: from.clone(),
                to: per.into_iter().map(|(device, planned)| DeviceProgress { device, planned, done: 0 }).collect(),
            });
        }
        if moves.is_empty() {
            return Ok(Moves { moved: 0, stranded, notes });
        }
        let store = self.store.clone();
        let id = self.id.clone();
        let moved = blocking(move || store.move_trials(&id, &moves)).await?;
        Ok(Moves { moved, stranded, notes })
    }
}

/// Trials added per device, for the progress display.
fn per_device(trials: &[crate::store::PlannedTrialRow]) -> Vec<DeviceProgress> {
    let mut out: BTreeMap<&str, u32> = BTreeMap::new();
    for t in trials {
        *out.entry(t.device.as_str()).or_default() += 1;
    }
    out.into_iter().map(|(d, n)| DeviceProgress { device: d.to_string(), planned: n, done: 0 }).collect()
}

impl Campaign {
    /// The traffic endpoint, when a device's app really talks to it: to send the
    /// workload's requests, and to report its device's state (`POST …/state`), which it
    /// may do whatever the workload (simulated devices model both themselves).
    fn start_endpoint(&self) -> Result<Option<Arc<Endpoint>>, RunError> {
        let needed = self.devices.values().any(|(d, _)| d.talks_to_endpoint());
        if !needed {
            return Ok(None);
        }
        // The lab knows where devices reach this machine; the runbook how to answer.
        Ok(Some(Arc::new(Endpoint::start(&self.lab.endpoint.apply(&self.runbook.endpoint))?)))
    }
}

/// Opens the tether of `device`: it runs on the device's own host (a hub's `uhubctl` on
/// the shelf the phone is plugged into), through that host's shared transport;
/// `operator` answers manual steps.
/// `monitor`: where the device's power monitor will be, for `tether = "monitor"`.
pub fn tether_for(
    lab: &Lab,
    hosts: &Hosts,
    device: &str,
    operator: Arc<dyn Operator>,
    monitor: Option<crate::monitor::SharedMonitor>,
) -> Option<Box<dyn Tether>> {
    let spec = lab.device(device)?;
    let transport = hosts.get(&spec.host)?;
    Some(crate::tether::for_spec(&spec.tether, transport, operator, monitor))
}
