//! One attempt of one trial: the state machine
//! prepare → gate → launch → untether → soak → re-tether → collect → validate → record.
//!
//! Every phase's device-clock duration is kept with the attempt. Whatever goes
//! wrong on the device becomes an invalid attempt with a reason a person
//! understands; only store and file-system failures abort the campaign.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::desk::{OperatorDesk, StepAsk, StepError};
use super::event::{Event, EventSink, Phase};
use super::footprint::Footprint;
use super::recorder::{Recorder, committed};
use super::state_row::{state_digest, state_json};
use super::status_board::{StatusBoard, When};
use super::validity;
use crate::clock::Clock;
use crate::config::{Runbook, StepWhen};
use crate::device::{AppHandle, Collected, DesiredState, Device, DeviceError, LaunchSpec, StateSnapshot};
use crate::endpoint::{Endpoint, EndpointError, ReportAt};
use crate::measure::Measurement;
use crate::measure::UntetherMode;
use crate::store::{
    AttemptStatus, DeviceStatusRow, EncodedAttempt, InFlight, PlannedTrialRow, SeriesRow, Store, StoreError,
    attempt_folder, list_json,
};
use crate::tether::{Tether, TetherError};
use crate::text::duration;

use super::monitored::{self, Window};
use crate::collect::monitor::{PowerTrace, WindowFigures};
use crate::monitor::{MonitorError, SharedMonitor};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("artifacts: {path}: {source}; fix: check free disk space and permissions")]
    Artifacts { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    #[error("internal: {0}")]
    Internal(String),
}

/// What every trial of a campaign shares.
pub struct TrialContext {
    pub campaign: String,
    pub runbook: Arc<Runbook>,
    pub store: Store,
    pub events: EventSink,
    /// `artifacts/<campaign>`.
    pub artifacts: PathBuf,
    pub max_attempts: u32,
    /// Becomes `true` on Ctrl-C: finish nothing new, record nothing partial.
    pub shutdown: watch::Receiver<bool>,
    /// The traffic endpoint, when the workload sends requests to it.
    pub endpoint: Option<Arc<Endpoint>>,
    /// The lab's own CPU and wakeups over the soaks.
    pub footprint: Arc<Footprint>,
    /// Where operator steps are asked and answered.
    pub desk: Arc<OperatorDesk>,
    /// What `lab status` shows per device, on its way to the store.
    pub status: Arc<StatusBoard>,
    /// Where attempts go to the store.
    pub recorder: Arc<Recorder>,
    /// Where a recorded attempt's raw files go next, when the lab keeps them in a bucket.
    pub uploads: Option<Arc<super::uploads::Uploads>>,
    /// What each device answered it is, for the manifest.
    pub identities: std::sync::Mutex<std::collections::BTreeMap<String, crate::device::Identity>>,
    /// What a worker asks for its device with, when a later round needs it again.
    pub lease_request: crate::store::LeaseRequest,
    /// The power monitor each monitored device is on.
    pub monitors: std::collections::BTreeMap<String, super::monitored::MonitorPlace>,
    /// What each opened monitor said it is, for the manifest.
    pub instruments: Arc<std::sync::Mutex<std::collections::BTreeMap<String, serde_json::Value>>>,
    /// The lab host of the agent that runs these trials: each attempt is in the store's
    /// `attempts_in_flight` until recorded, so the agent's death cannot drop it.
    pub agent_host: Option<String>,
    /// An agent's drain: once `true`, no new attempt starts (the ones running finish).
    pub drain: Option<watch::Receiver<bool>>,
    /// A waiting part's start, which each worker passes once its device is its own.
    pub gate: Option<Arc<super::start_gate::StartGate>>,
}

/// An attempt's record on its way to the store, and what follows its commit: its raw files
/// handed to the uploads, its `AttemptRecorded` event. Until it is committed the attempt is
/// not recorded: a crash leaves its trial pending (and an agent's attempt in
/// `attempts_in_flight`, recorded interrupted by whoever recovers it), as during a commit.
pub struct Recording(tokio::task::JoinHandle<Result<(), RunError>>);

impl Recording {
    /// Waits for the commit (and every earlier record of the device's).
    pub async fn committed(self) -> Result<(), RunError> {
        self.0.await.map_err(|e| RunError::Internal(format!("recording task: {e}")))?
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum AttemptOutcome {
    Recorded {
        valid: bool,
    },
    /// The device went away and did not come back; its remaining trials wait.
    DeviceOffline {
        reason: String,
    },
    /// Ctrl-C: the attempt was abandoned and not recorded.
    Cancelled,
}

/// How often one step of an attempt is done again after its device came back.
const RECONNECTS: u32 = 3;

/// Beyond `timeouts.reconnect`, how long the wait for a lost device may overrun before the
/// runner stops waiting by itself.
const RECONNECT_SLACK: Duration = Duration::from_secs(60);

/// A step that failed: a reason for the record, whether the device is gone, and whether
/// it was Ctrl-C (then nothing is recorded).
struct Failure {
    reason: String,
    offline: bool,
    cancelled: bool,
}

impl Failure {
    fn new(reason: impl Into<String>) -> Self {
        Failure { reason: reason.into(), offline: false, cancelled: false }
    }

    fn offline(reason: impl Into<String>) -> Self {
        Failure { reason: reason.into(), offline: true, cancelled: false }
    }

    fn cancelled() -> Self {
        Failure { reason: "stopped by the user".into(), offline: false, cancelled: true }
    }
}

/// Resolves when the campaign is stopped; never, once nobody can stop it any more.
pub(super) async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    if shutdown.wait_for(|stop| *stop).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Sleeps on the device clock unless the campaign is stopped first.
/// Returns false when cancelled.
pub async fn sleep_or_cancel(clock: &Clock, d: Duration, shutdown: &mut watch::Receiver<bool>) -> bool {
    if *shutdown.borrow() {
        return false;
    }
    let slept = tokio::select! {
        _ = clock.sleep(d) => true,
        _ = stopped(shutdown) => false,
    };
    slept && !*shutdown.borrow()
}

pub struct Attempt<'a> {
    pub ctx: &'a TrialContext,
    pub device: &'a dyn Device,
    pub tether: &'a dyn Tether,
    /// The power monitor that supplies the device, if one does (opened by the worker).
    pub monitor: Option<&'a SharedMonitor>,
    pub trial: &'a PlannedTrialRow,
    pub attempt: u32,
    /// Turns `true` when the attempt must stop: the campaign's shutdown, or (from the
    /// worker) the device's lease lost. It ends as on Ctrl-C: power back, app stopped,
    /// nothing recorded.
    pub stop: watch::Receiver<bool>,
}

struct Progress {
    phases: Vec<(String, f64)>,
    current: Option<(Phase, Duration)>,
    soak_start: Duration,
    before: Option<StateSnapshot>,
    after: Option<StateSnapshot>,
    /// What the device's own log said about the soak.
    soak: Option<StateSnapshot>,
    app: Option<AppHandle>,
    /// USB power is (or may be) off: whatever happens next, the attempt gives it back
    /// before it returns.
    untethered: bool,
    /// How the tether cut it, recorded with the attempt.
    mode: UntetherMode,
    /// What must be said with the attempt's figures.
    labels: Vec<String>,
    /// A power monitor recording runs: `run` stops it, whatever ended the steps.
    recording: bool,
}

impl Attempt<'_> {
    fn clock(&self) -> Clock {
        self.device.clock()
    }

    /// Closes the current phase (keeping its device-clock length) and opens `phase`.
    fn enter(&self, p: &mut Progress, phase: Phase) {
        let now = self.clock().now();
        if let Some((prev, start)) = p.current.replace((phase, now)) {
            p.phases.push((prev.as_str().to_string(), (now - start).as_secs_f64()));
        }
        self.ctx.events.emit(Event::Phase {
            device: self.device.name().into(),
            trial: self.trial.key.clone(),
            attempt: self.attempt,
            phase,
        });
    }

    async fn status(&self, phase: Phase, battery: Option<f64>) -> Result<(), RunError> {
        self.status_as("busy", phase, battery).await
    }

    async fn status_as(&self, state: &str, phase: Phase, battery: Option<f64>) -> Result<(), RunError> {
        // A real soak is long and must not be woken: its row is written before it begins.
        // Other phases (and a simulated soak, which takes no time) go with the next write.
        let when = if phase == Phase::Soak && !self.clock().is_virtual() { When::Now } else { When::Soon };
        write_status(self.ctx, self.device.name(), state, Some((&self.trial.key, phase)), battery, when).await
    }

    /// Waits for a device that stopped answering (see [`wait_for_device`]). Not back in
    /// time: a failure that takes the device offline.
    async fn reconnect(&self, phase: Phase, e: &DeviceError) -> Result<(), Failure> {
        let wait = self.ctx.runbook.timeouts.reconnect;
        let mut shutdown = self.stop.clone();
        // The device's own wait is bounded by `wait`; the outer bound (real time) also
        // holds for a backend that does not keep its word. Ctrl-C ends the wait.
        let waited = tokio::select! {
            r = tokio::time::timeout(wait + RECONNECT_SLACK,
                wait_for_device(self.ctx, self.device, Some((&self.trial.key, phase)), e)) => r,
            _ = stopped(&mut shutdown) => return Err(Failure::cancelled()),
        };
        match waited {
            Ok(Ok(())) => {
                self.status_quiet(phase, None).await;
                Ok(())
            }
            Ok(Err(e2)) => Err(Failure::offline(format!(
                "device lost during {} and not back within {}: {e2}",
                phase.as_str(),
                duration::seconds(wait)
            ))),
            Err(_) => Err(Failure::offline(format!(
                "device lost during {} and not back within {}",
                phase.as_str(),
                duration::seconds(wait)
            ))),
        }
    }

    /// Turns a device error into a failure; a disconnect waits for the device first.
    async fn fail(&self, phase: Phase, e: DeviceError) -> Failure {
        if e.is_disconnect() {
            match self.reconnect(phase, &e).await {
                Ok(()) => Failure::new(format!("device disconnected during {}: {e}", phase.as_str())),
                Err(f) => f,
            }
        } else {
            Failure::new(format!("{} failed: {e}", phase.as_str()))
        }
    }

    /// A device step that may simply be done again: when the device was lost, the step
    /// waits for it and runs again (up to `RECONNECTS` times) instead of spoiling the
    /// attempt. Every call is bounded by `limit`.
    async fn retried<T, Fut>(&self, phase: Phase, limit: Duration, call: impl Fn() -> Fut) -> Result<T, Failure>
    where
        Fut: std::future::Future<Output = Result<T, DeviceError>>,
    {
        let mut lost = 0;
        loop {
            match self.timed(phase, limit, call()).await? {
                Ok(v) => return Ok(v),
                Err(e) if e.is_disconnect() && lost < RECONNECTS => {
                    lost += 1;
                    self.reconnect(phase, &e).await?;
                }
                Err(e) => return Err(self.fail(phase, e).await),
            }
        }
    }

    /// Bounds one device call by its phase's timeout (real time: a hung tool or a
    /// device that stopped answering must not stall the campaign), and ends it on
    /// Ctrl-C: the call's future is dropped, which stops what it was doing.
    async fn timed<T, E>(
        &self,
        phase: Phase,
        limit: Duration,
        call: impl std::future::Future<Output = Result<T, E>>,
    ) -> Result<Result<T, E>, Failure> {
        let mut shutdown = self.stop.clone();
        tokio::select! {
            r = tokio::time::timeout(limit, call) => r.map_err(|_| {
                Failure::new(format!("{} did not finish within {}", phase.as_str(), duration::seconds(limit)))
            }),
            _ = stopped(&mut shutdown) => Err(Failure::cancelled()),
        }
    }

    /// A device call of a phase, bounded and cancellable; a disconnect waits for the device.
    async fn call<T>(
        &self,
        phase: Phase,
        limit: Duration,
        call: impl std::future::Future<Output = Result<T, DeviceError>>,
    ) -> Result<T, Failure> {
        match self.timed(phase, limit, call).await? {
            Ok(v) => Ok(v),
            Err(e) => Err(self.fail(phase, e).await),
        }
    }

    /// Gives USB power back after the attempt, whatever ended it: bounded, and not
    /// stopped by Ctrl-C (no phone is left with its port off). Tried twice.
    async fn restore_power(&self) -> Option<String> {
        let limit = self.tether_limit();
        let mut last = String::new();
        for _ in 0..2 {
            match tokio::time::timeout(limit, self.tether.retether(self.device)).await {
                Ok(Ok(())) => return None,
                Ok(Err(e)) => last = e.to_string(),
                Err(_) => last = format!("re-tether did not finish within {}", duration::seconds(limit)),
            }
        }
        self.ctx.events.emit(Event::PowerNotRestored {
            device: self.device.name().into(),
            trial: self.trial.key.clone(),
            detail: last.clone(),
        });
        Some(format!("USB power not restored ({}): {last}", self.tether.label()))
    }

    /// A tether call's bound: `timeouts.tether`, plus `timeouts.operator` when a person
    /// does it.
    fn tether_limit(&self) -> Duration {
        let t = &self.ctx.runbook.timeouts;
        t.tether + if self.tether.needs_operator() { t.operator } else { Duration::ZERO }
    }

    /// Asks the runbook's operator steps of `when` (before-campaign ones once per device
    /// and run) and waits for their answers. An unanswered step fails the attempt.
    async fn operator_steps(&self, when: StepWhen) -> Result<(), Failure> {
        let name = self.device.name();
        for s in self.ctx.runbook.steps.iter().filter(|s| s.when == when) {
            if when == StepWhen::BeforeCampaign && self.ctx.desk.done_for_campaign(name, &s.name) {
                continue;
            }
            self.ask(StepAsk {
                device: name,
                step: &s.name,
                when,
                text: &s.text,
                attest: &s.attest,
                confirm: s.confirm,
            })
            .await?;
        }
        // What only an operator can do for this device (an old iPhone's sysdiagnose).
        for s in self.device.operator_steps().into_iter().filter(|s| s.when == when) {
            self.ask(StepAsk { device: name, step: &s.name, when, text: &s.text, attest: &[], confirm: true }).await?;
        }
        Ok(())
    }

    /// Puts one step to the operator and waits for the answer (or the campaign's stop).
    async fn ask(&self, ask: StepAsk<'_>) -> Result<(), Failure> {
        let mut shutdown = self.stop.clone();
        let answered = tokio::select! {
            r = self.ctx.desk.ask(&ask) => r,
            _ = stopped(&mut shutdown) => return Err(Failure::cancelled()),
        };
        match answered {
            Ok(_) => Ok(()),
            Err(StepError::Cancelled { .. }) => Err(Failure::cancelled()),
            Err(e) => Err(Failure::new(e.to_string())),
        }
    }

    async fn tether_fail(&self, phase: Phase, e: TetherError) -> Failure {
        match e {
            TetherError::Device(d) => self.fail(phase, d).await,
            other => Failure::new(format!("{} failed: {other}", phase.as_str())),
        }
    }

    /// Runs the attempt and waits for its record's commit (the tests' way; the worker
    /// pipelines).
    #[cfg(test)]
    pub async fn run(self) -> Result<AttemptOutcome, RunError> {
        let mut recording = None;
        let outcome = self.run_pipelined(&mut recording).await?;
        match recording {
            Some(r) => r.committed().await.map(|()| outcome),
            None => Ok(outcome),
        }
    }

    /// Runs the attempt and sends its record to the store without waiting for the commit:
    /// the device can begin its next attempt meanwhile. `recording` holds the device's
    /// record still on its way, if any; the new one follows it (events in the device's order),
    /// and takes its place there. Whoever holds the slot waits for it before the device is
    /// let go ([`Recording::committed`]).
    pub async fn run_pipelined(self, recording: &mut Option<Recording>) -> Result<AttemptOutcome, RunError> {
        let started_at = now_rfc3339();
        self.ctx.desk.begin_attempt(self.device.name(), &self.trial.key, self.attempt);
        let mut p = Progress {
            phases: Vec::new(),
            current: None,
            soak_start: Duration::ZERO,
            before: None,
            after: None,
            soak: None,
            app: None,
            untethered: false,
            mode: UntetherMode::None,
            labels: Vec::new(),
            recording: false,
        };
        // The files go straight to their final folder: the row, committed last, is what
        // makes an attempt recorded. A folder without a row (a crash before the commit) is
        // replaced when that attempt is run again. (Staging in `.partial/` and renaming
        // cost a fifth of a simulated campaign's time on a journaled disk.)
        let dir = self.ctx.artifacts.join(attempt_folder(&self.trial.key, self.attempt));
        fresh_dir(&dir)?;
        if let Some(host) = &self.ctx.agent_host {
            let row = InFlight {
                campaign: self.ctx.campaign.clone(),
                trial_idx: self.trial.idx,
                attempt: self.attempt,
                device: self.device.name().into(),
                host: host.clone(),
                pid: std::process::id(),
                started_at: started_at.clone(),
                artifact_dir: self.relative_dir(&dir),
            };
            // Before the device is touched: gathered with the other devices' by the recorder.
            self.ctx.recorder.begin(row).await?;
        }

        let result = self.steps(&mut p, &dir).await;
        // Whatever ended the steps (a failure, Ctrl-C, a device gone), the phone gets its
        // USB power back, then the app is stopped (bounded: a wedged device must not hold
        // the campaign). A recording left running stops before (bounded too): a Monsoon
        // takes no command while it samples, and its passthrough may be the tether.
        if let Some(m) = self.monitor.filter(|_| p.recording) {
            let limit = self.ctx.runbook.timeouts.collect;
            let stop = async {
                if let Some(m) = m.lock().await.as_mut() {
                    let _ = m.stop().await;
                }
            };
            let _ = tokio::time::timeout(limit, stop).await;
        }
        let power = if p.untethered { self.restore_power().await } else { None };
        if let Some(app) = &p.app {
            let _ = tokio::time::timeout(self.ctx.runbook.timeouts.launch, self.device.stop(app)).await;
        }
        // Its traffic and reports were read in the steps: the endpoint keeps only trials in flight.
        if let Some(e) = &self.ctx.endpoint {
            e.forget(&traffic_token(&self.trial.key, self.attempt));
        }
        let (collected, mut reasons, offline) = match result {
            Ok(Step::Done(c, reasons)) => (Some(*c), reasons, None),
            Ok(Step::Cancelled) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Ok(AttemptOutcome::Cancelled);
            }
            Err(f) if f.cancelled => {
                let _ = std::fs::remove_dir_all(&dir);
                return Ok(AttemptOutcome::Cancelled);
            }
            Err(f) => (None, vec![f.reason.clone()], f.offline.then_some(f.reason)),
        };
        reasons.extend(power);
        self.enter(&mut p, Phase::Record);
        if collected.is_none() && reasons.is_empty() {
            reasons.push("attempt did not complete".into());
        }
        let valid = reasons.is_empty() && collected.is_some();
        let wanted = &self.ctx.runbook.metrics;
        let (measurements, series) = match collected {
            Some(c) => (
                c.measurements.into_iter().filter(|m| wanted.is_empty() || wanted.contains(&m.metric)).collect(),
                c.series,
            ),
            None => (Vec::new(), Vec::new()),
        };
        if let Some((phase, start)) = p.current.take() {
            p.phases.push((phase.as_str().into(), (self.clock().now() - start).as_secs_f64()));
        }

        // Encoded here, on this device's task: the recording thread every device waits on
        // only runs SQLite (`runner::recorder`).
        let digest = state_digest([p.before.as_ref(), p.soak.as_ref(), p.after.as_ref()]);
        let record = EncodedAttempt {
            campaign: self.ctx.campaign.clone(),
            trial_idx: self.trial.idx,
            attempt: self.attempt,
            device: self.device.name().into(),
            status: if valid { AttemptStatus::Valid } else { AttemptStatus::Invalid },
            reasons: list_json(&reasons),
            phases: list_json(&p.phases),
            labels: list_json(&p.labels),
            started_at,
            ended_at: now_rfc3339(),
            soak_start_s: p.soak_start.as_secs_f64(),
            artifact_dir: self.relative_dir(&dir),
            state_before: state_json(p.before.as_ref()),
            state_after: state_json(p.after.as_ref()),
            state_soak: p.soak.as_ref().map(|s| state_json(Some(s))),
            state_digest: digest.to_blob(),
            untether: Some(p.mode),
            measurements,
            series: series.into_iter().map(SeriesRow::of).collect(),
            attestations: self.ctx.desk.attested(self.device.name()),
        };
        // Its `attempts_in_flight` row, if any, goes in the same transaction.
        let answer = self.ctx.recorder.submit(record)?;
        let will_retry = !valid && offline.is_none() && self.attempt + 1 < self.ctx.max_attempts;
        let event = Event::AttemptRecorded {
            device: self.device.name().into(),
            trial: self.trial.key.clone(),
            attempt: self.attempt,
            valid,
            reasons,
            will_retry,
            device_offline: offline.is_some(),
        };
        let upload = self.ctx.uploads.clone().zip(dir.file_name().map(|f| f.to_string_lossy().into_owned()));
        let (events, campaign, before) = (self.ctx.events.clone(), self.ctx.campaign.clone(), recording.take());
        *recording = Some(Recording(tokio::spawn(async move {
            let before = match before {
                Some(r) => r.committed().await,
                None => Ok(()),
            };
            committed(answer).await?;
            // Recorded: its files may go to the bucket now (in the background).
            if let Some((u, folder)) = upload {
                u.recorded(&campaign, &folder);
            }
            events.emit(event);
            before
        })));
        Ok(match offline {
            Some(reason) => AttemptOutcome::DeviceOffline { reason },
            None => AttemptOutcome::Recorded { valid },
        })
    }

    /// An attempt's folder as the store keeps it: relative to the artifacts folder's parent.
    fn relative_dir(&self, dir: &Path) -> String {
        dir.strip_prefix(self.ctx.artifacts.parent().unwrap_or(Path::new(""))).unwrap_or(dir).display().to_string()
    }

    async fn steps(&self, p: &mut Progress, dir: &Path) -> Result<Step, Failure> {
        let rb = &self.ctx.runbook;
        let pre = &rb.preconditions;
        let mut shutdown = self.stop.clone();
        let build = rb
            .builds
            .iter()
            .find(|b| b.name == self.trial.build)
            .ok_or_else(|| Failure::new(format!("build {} is not in the runbook", self.trial.build)))?;
        let config = rb
            .configs
            .iter()
            .find(|c| c.name == self.trial.config)
            .ok_or_else(|| Failure::new(format!("config {} is not in the runbook", self.trial.config)))?;

        // prepare: install if the hash differs, apply config, set what can be set.
        self.enter(p, Phase::Prepare);
        self.status_quiet(Phase::Prepare, None).await;
        let prepared = self.retried(Phase::Prepare, rb.timeouts.prepare, || self.device.prepare(build, config)).await?;
        self.ctx.events.emit(Event::Installed {
            device: self.device.name().into(),
            build: build.name.clone(),
            skipped: prepared.skipped(),
        });
        let want = DesiredState {
            brightness_pct: pre.brightness.map(|(lo, hi)| (lo + hi) / 2.0),
            bluetooth_on: pre.bluetooth,
            wifi_on: pre.wifi,
        };
        if pre.auto_fix && !want.is_empty() {
            match self.timed(Phase::Prepare, rb.timeouts.prepare, self.device.set_state(&want)).await? {
                Ok(()) | Err(DeviceError::Unsupported { .. }) => {}
                Err(e) => return Err(self.fail(Phase::Prepare, e).await),
            }
        }

        // The operator's steps before the trial, after the lab's own settings (which
        // would otherwise undo what they set by hand).
        self.operator_steps(StepWhen::BeforeCampaign).await?;
        self.operator_steps(StepWhen::BeforeTrial).await?;

        // gate: charge to battery_min and cool down to temperature_max, tethered.
        self.enter(p, Phase::Gate);
        let gate_start = self.clock().now();
        let before = loop {
            let s = self.retried(Phase::Gate, rb.timeouts.collect, || self.device.state()).await?;
            let low = match (pre.battery_min, s.battery_pct.value()) {
                (Some(min), Some(b)) if b < min => Some(format!("charging: battery {b:.0} % < {min:.0} %")),
                _ => None,
            };
            let hot = match (pre.temperature_max, s.battery_temp_c.value()) {
                (Some(max), Some(t)) if t > max => Some(format!("cooling down: {t:.1} °C > {max:.1} °C")),
                _ => None,
            };
            let busy = match (pre.load_max, s.load_avg.value()) {
                (Some(max), Some(l)) if l > max => Some(format!("waiting for a quiet machine: load {l:.2} > {max:.2}")),
                _ => None,
            };
            let step = match (&low, &hot) {
                // Charge moves in minutes, temperature in a minute, the 1-minute load average in seconds.
                (Some(_), _) => Duration::from_secs(300),
                (None, Some(_)) => Duration::from_secs(60),
                (None, None) => Duration::from_secs(15),
            };
            let Some(what) = low.or(hot).or(busy) else { break s };
            if self.clock().now() - gate_start > rb.timeouts.gate {
                return Err(Failure::new(format!("gate: still {what} after {}", duration::seconds(rb.timeouts.gate))));
            }
            self.ctx.events.emit(Event::Waiting {
                device: self.device.name().into(),
                trial: self.trial.key.clone(),
                what,
            });
            self.status_quiet(Phase::Gate, s.battery_pct.value()).await;
            if !sleep_or_cancel(&self.clock(), step, &mut shutdown).await {
                return Ok(Step::Cancelled);
            }
        };
        // What no API read, the operator may have attested (kept as attested).
        let mut before = before;
        validity::fill_attested(&mut before, &self.ctx.desk.attested(self.device.name()), &StepWhen::BEFORE);
        let mut reasons = validity::precondition_violations(pre, &before, "before");
        p.before = Some(before.clone());
        if !reasons.is_empty() {
            return Err(Failure::new(reasons.join("; ")));
        }

        let idle = match (self.monitor, rb.monitor.idle) {
            (Some(m), Some(len)) => Some(self.idle(p, m, len, dir).await?),
            _ => None,
        };

        // launch
        self.enter(p, Phase::Launch);
        self.call(Phase::Launch, rb.timeouts.launch, self.device.reset_counters()).await?;
        // The attempt's own URL on the endpoint, for devices whose app really uses it.
        let endpoint = self.ctx.endpoint.as_deref().filter(|_| self.device.talks_to_endpoint());
        let token = traffic_token(&self.trial.key, self.attempt);
        let spec = LaunchSpec {
            prepared,
            trial_key: self.trial.key.clone(),
            seed: crate::seed::derive(rb.seed, &["trial", &self.trial.key, &self.attempt.to_string()]),
            duration: rb.duration,
            request_interval: rb.workload.request_interval,
            endpoint_url: endpoint.map(|e| e.url(&token)),
            dir: dir.to_path_buf(),
        };
        let app = self.call(Phase::Launch, rb.timeouts.launch, self.device.launch(&spec)).await?;
        p.app = Some(app.clone());

        // untether, and check the device really stopped charging.
        let untether = pre.untethered && self.tether.mode() != UntetherMode::None;
        if untether {
            self.enter(p, Phase::Untether);
            // From here on the port may be off: `run` gives the power back whatever happens.
            p.untethered = true;
            // What it was meant to be, should the untether itself fail.
            p.mode = self.tether.mode();
            p.mode = match self.timed(Phase::Untether, self.tether_limit(), self.tether.untether(self.device)).await? {
                Ok(mode) => mode,
                Err(e) => return Err(self.tether_fail(Phase::Untether, e).await),
            };
            match self.timed(Phase::Untether, rb.timeouts.tether, self.device.state()).await? {
                // Expected of a phone only told it is unplugged: its figures are labelled
                // and reported apart, not thrown away.
                Ok(s) if s.charging.value() == Some(true) && p.mode == UntetherMode::SoftUntethered => {
                    p.labels.push(validity::STILL_CHARGING_SOFT.to_string());
                }
                Ok(s) if s.charging.value() == Some(true) => {
                    return Err(Failure::new(format!(
                        "still charging after untether ({}); check the hub port or cable",
                        self.tether.label()
                    )));
                }
                Ok(_) => {}
                // A USB-attached phone whose port was cut is expected to drop off: that is
                // evidence the power really went. Whether it charged is read from its own
                // record after re-tether (`SoakEvidence::charging_s`).
                Err(e) if e.is_disconnect() && self.tether.mode() == UntetherMode::PowerCut => {
                    self.ctx
                        .events
                        .emit(Event::OffUsb { device: self.device.name().into(), trial: self.trial.key.clone() });
                }
                Err(e) => return Err(self.fail(Phase::Untether, e).await),
            }
        }
        self.operator_steps(StepWhen::Untether).await?;

        // soak: nobody polls; the orchestrator sleeps.
        self.enter(p, Phase::Soak);
        p.soak_start = self.clock().now();
        self.status_quiet(Phase::Soak, before.battery_pct.value()).await;
        // Both read the kernel's / the endpoint's counters at the two ends of the soak only.
        let traffic_start = endpoint.map(|e| e.count(&token));
        let window = (!self.clock().is_virtual()).then(|| self.ctx.footprint.begin());
        let soak_mark = match self.monitor {
            Some(m) => Some(self.record_from(p, m, &format!("soak start {} a{}", self.trial.key, self.attempt)).await?),
            None => None,
        };
        let completed = sleep_or_cancel(&self.clock(), rb.duration, &mut shutdown).await;
        let traffic = endpoint.zip(traffic_start).map(|(e, start)| e.count(&token).since(&start));
        if let Some(w) = window.filter(|_| completed) {
            self.ctx.footprint.end(w);
        }

        if !completed {
            // `run` re-tethers and stops the recording.
            return Ok(Step::Cancelled);
        }
        let recorded = match (self.monitor, soak_mark) {
            (Some(m), Some(start)) => {
                let (end, trace, source, identity) =
                    self.record_until(p, m, &format!("soak end {} a{}", self.trial.key, self.attempt)).await?;
                Some((start, end, trace, source, identity))
            }
            _ => None,
        };
        if untether {
            self.device.soak_ended().await;
            self.enter(p, Phase::Retether);
            if let Err(e) = self.timed(Phase::Retether, self.tether_limit(), self.tether.retether(self.device)).await? {
                return Err(self.tether_fail(Phase::Retether, e).await);
            }
            p.untethered = false;
        }
        self.operator_steps(StepWhen::Retether).await?;

        // collect, once the device answers: one that dropped off during the soak (or
        // with its port) is waited for (what it lost shows in its evidence).
        self.enter(p, Phase::Collect);
        let after = match self.timed(Phase::Collect, rb.timeouts.collect, self.device.state()).await? {
            Ok(s) => s,
            Err(e) if e.is_disconnect() => {
                self.reconnect(if untether { Phase::Retether } else { Phase::Soak }, &e).await?;
                self.retried(Phase::Collect, rb.timeouts.collect, || self.device.state()).await?
            }
            Err(e) => return Err(self.fail(Phase::Collect, e).await),
        };
        p.after = Some(after.clone());
        // A collect that lost the device before reading anything leaves the app running:
        // it is read once the device is back (a late reading shows in the soak's length).
        let mut collected: Collected =
            self.retried(Phase::Collect, rb.timeouts.collect, || self.device.collect(&app, dir)).await?;
        if let Some(t) = traffic.filter(|_| rb.workload.request_interval.is_some()) {
            // What the endpoint counted is the truth about the app's traffic.
            collected.evidence.requests_seen = Some(t.requests);
            let source = "lab traffic endpoint (requests to the trial's token during the soak)";
            collected.measurements.push(Measurement::new("endpoint_requests", t.requests as f64, "count", source));
            collected.measurements.push(Measurement::new("endpoint_bytes", t.bytes as f64, "bytes", source));
        }

        if let Some((start, end, trace, source, identity)) = recorded {
            let w = Window {
                trace: &trace,
                start_s: start,
                end_s: end,
                warmup_s: rb.monitor.warmup.as_secs_f64(),
                stem: "current",
            };
            let f = w.figures();
            w.write(dir, &f, &identity)
                .map_err(|e| Failure::new(format!("writing the power monitor's samples: {e}")))?;
            collected.measurements.extend(monitored::soak_measurements(&f, &source));
            if let Some(idle) = &idle {
                collected.measurements.extend(monitored::net_measurements(&f, idle, &source));
            }
            // What the endpoint counted, else what the app says it sent.
            let requests = traffic.map(|t| t.requests).or(collected.evidence.requests_seen);
            if let Some(n) = requests.filter(|_| rb.workload.request_interval.is_some()) {
                let per = monitored::per_request(&collected.measurements, n, &source);
                collected.measurements.extend(per);
            }
            collected.series.push(w.power_series(&source));
            if let Some(why) = f.invalid {
                reasons.push(format!("power monitor: {why}"));
            }
        }

        self.operator_steps(StepWhen::AfterTrial).await?;
        let mut after = after;
        // What the app reported fills what no API read, before an operator's word does
        // (read > app > attested); its launch report fills the state before the soak,
        // which is checked again on what it added.
        if let Some(e) = endpoint {
            if let Some(r) = e.app_report(&token, ReportAt::Launch) {
                let mut before = before.clone();
                p.labels.extend(validity::fill_reported(&mut before, &r, "at launch"));
                reasons.extend(validity::precondition_violations(pre, &before, "before"));
                p.before = Some(before);
            }
            if let Some(r) = e.app_report(&token, ReportAt::End) {
                p.labels.extend(validity::fill_reported(&mut after, &r, "at the end"));
            }
        }
        validity::fill_attested(&mut after, &self.ctx.desk.attested(self.device.name()), &StepWhen::AFTER);
        p.after = Some(after.clone());

        // validate
        self.enter(p, Phase::Validate);
        reasons.extend(validity::precondition_violations(pre, &after, "after"));
        if let Some(log) = &collected.soak_state {
            reasons.extend(validity::precondition_violations(pre, log, "during"));
            p.soak = Some(log.clone());
        }
        reasons.extend(validity::soak_violations(
            pre,
            &rb.workload,
            rb.duration,
            &collected.evidence,
            p.mode,
            &self.tether.cut_question(),
        ));
        p.labels.extend(validity::soak_labels(p.mode, &collected.evidence, rb.workload.request_tolerance));
        if pre.app_foreground
            && !collected.evidence.app_died
            && let Some(fg) = after.foreground_app.text()
            && fg != app.app_id
        {
            reasons.push(format!("app not in the foreground after the soak (foreground: {fg})"));
        }
        Ok(Step::Done(Box::new(collected), reasons))
    }

    /// Starts a recording on the device's monitor and marks `text` in it: the mark's time.
    /// A monitor that cannot be reached takes the device offline; any other failure
    /// spoils the attempt.
    async fn record_from(&self, p: &mut Progress, m: &SharedMonitor, text: &str) -> Result<f64, Failure> {
        let limit = self.ctx.runbook.timeouts.collect;
        let mut m = m.lock().await;
        let m = m.as_mut().ok_or_else(|| Failure::offline("its power monitor is not open"))?;
        // Running from here on, as far as `run` knows: whatever ends the attempt stops it.
        p.recording = true;
        match bounded(Phase::Soak, limit, m.start()).await? {
            Ok(()) => {}
            Err(e) if e.is_unreachable() => return Err(Failure::offline(e.to_string())),
            Err(e) => return Err(Failure::new(format!("power monitor: starting a recording: {e}"))),
        }
        bounded(Phase::Soak, limit, m.mark(text)).await?.map_err(|e| Failure::new(monitor_lost(&e)))
    }

    /// Marks `text` in the running recording and stops it: the mark's time, the samples,
    /// and the source and identity to give with its figures.
    async fn record_until(
        &self,
        p: &mut Progress,
        m: &SharedMonitor,
        text: &str,
    ) -> Result<(f64, PowerTrace, String, serde_json::Value), Failure> {
        let limit = self.ctx.runbook.timeouts.collect;
        let mut m = m.lock().await;
        let m = m.as_mut().ok_or_else(|| Failure::offline("its power monitor is not open"))?;
        let end = bounded(Phase::Soak, limit, m.mark(text)).await?.map_err(|e| Failure::new(monitor_lost(&e)))?;
        let trace = bounded(Phase::Soak, limit, m.stop()).await?.map_err(|e| Failure::new(monitor_lost(&e)))?;
        p.recording = false;
        Ok((end, trace, monitored::source_of(m.as_ref()), m.identity()))
    }

    /// The idle baseline: the phone, app stopped, under the soak's conditions (untethered
    /// as it will be), recorded for `len` on its monitor. Its figures, or why not.
    async fn idle(
        &self,
        p: &mut Progress,
        m: &SharedMonitor,
        len: Duration,
        dir: &Path,
    ) -> Result<WindowFigures, Failure> {
        self.enter(p, Phase::Idle);
        let untether = self.ctx.runbook.preconditions.untethered && self.tether.mode() != UntetherMode::None;
        if untether {
            p.untethered = true;
            if let Err(e) = self.timed(Phase::Idle, self.tether_limit(), self.tether.untether(self.device)).await? {
                return Err(self.tether_fail(Phase::Idle, e).await);
            }
        }
        let start = self.record_from(p, m, &format!("idle start {} a{}", self.trial.key, self.attempt)).await?;
        let mut shutdown = self.stop.clone();
        if !sleep_or_cancel(&self.clock(), len, &mut shutdown).await {
            return Err(Failure::cancelled());
        }
        let (end, trace, _, identity) =
            self.record_until(p, m, &format!("idle end {} a{}", self.trial.key, self.attempt)).await?;
        if untether {
            if let Err(e) = self.timed(Phase::Idle, self.tether_limit(), self.tether.retether(self.device)).await? {
                return Err(self.tether_fail(Phase::Idle, e).await);
            }
            p.untethered = false;
            // A phone that left USB with its port is back only after it re-enumerates: the
            // launch waits for it to answer (a lost one is waited for, as after the soak).
            let limit = self.ctx.runbook.timeouts.collect;
            self.retried(Phase::Idle, limit, || self.device.state()).await?;
        }
        let w = Window { trace: &trace, start_s: start, end_s: end, warmup_s: 0.0, stem: "idle_current" };
        let f = w.figures();
        w.write(dir, &f, &identity).map_err(|e| Failure::new(format!("writing the power monitor's samples: {e}")))?;
        match &f.invalid {
            Some(why) => Err(Failure::new(format!("power monitor, idle baseline: {why}"))),
            None => Ok(f),
        }
    }

    /// Device status is for people watching `lab status`; failing to write it must not fail a trial.
    async fn status_quiet(&self, phase: Phase, battery: Option<f64>) {
        let _ = self.status(phase, battery).await;
    }
}

enum Step {
    Done(Box<Collected>, Vec<String>),
    Cancelled,
}

/// A power monitor's call, bounded but not cut short by Ctrl-C: a call dropped half-way
/// (a Monsoon's start, between its USB request and its reader thread) would leave the
/// instrument sampling where nothing can stop it, and its passthrough (a tether) off.
/// Each returns within seconds; the campaign's stop is seen right after.
async fn bounded<T>(
    phase: Phase,
    limit: Duration,
    call: impl std::future::Future<Output = Result<T, MonitorError>>,
) -> Result<Result<T, MonitorError>, Failure> {
    tokio::time::timeout(limit, call).await.map_err(|_| {
        Failure::new(format!(
            "the power monitor did not answer within {} ({})",
            duration::seconds(limit),
            phase.as_str()
        ))
    })
}

/// A monitor that failed mid-recording: the attempt's samples are lost.
fn monitor_lost(e: &MonitorError) -> String {
    format!("power monitor lost during the recording: {e}")
}

/// The attempt's token on the traffic endpoint: its trial key and attempt number, in
/// the characters a token may have (`+` of `build+config` becomes `_`; the key's
/// leading plan index keeps tokens unique).
pub fn traffic_token(trial_key: &str, attempt: u32) -> String {
    let key: String =
        trial_key.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
    format!("{key}-a{attempt}")
}

/// Writes what `lab status` shows for `device`: its state, and the trial and phase it is
/// in (`None` between trials); `when` says how soon it must be in the store.
pub(super) async fn write_status(
    ctx: &TrialContext,
    device: &str,
    state: &str,
    at: Option<(&str, Phase)>,
    battery: Option<f64>,
    when: When,
) -> Result<(), RunError> {
    ctx.status.set(status_row(ctx, device, state, at, battery, now_rfc3339()), when).await
}

/// `device`'s row for `lab status` in this campaign, stamped `updated_at`.
pub(super) fn status_row(
    ctx: &TrialContext,
    device: &str,
    state: &str,
    at: Option<(&str, Phase)>,
    battery: Option<f64>,
    updated_at: String,
) -> DeviceStatusRow {
    DeviceStatusRow {
        device: device.into(),
        state: state.into(),
        battery_pct: battery,
        campaign: Some(ctx.campaign.clone()),
        trial_key: at.map(|(key, _)| key.to_string()),
        phase: at.map(|(_, phase)| phase.as_str().to_string()),
        updated_at,
    }
}

/// Waits up to `timeouts.reconnect` for a device that stopped answering with `e`, in
/// `at` (trial and phase; `None` before its first trial): announces it, shows the device
/// `reconnecting` in `lab status`, and announces its return.
pub(super) async fn wait_for_device(
    ctx: &TrialContext,
    device: &dyn Device,
    at: Option<(&str, Phase)>,
    e: &DeviceError,
) -> Result<(), DeviceError> {
    let wait = ctx.runbook.timeouts.reconnect;
    let trial = at.map(|(key, _)| key.to_string()).unwrap_or_default();
    ctx.events.emit(Event::Disconnected {
        device: device.name().into(),
        trial: trial.clone(),
        phase: at.map_or(Phase::Prepare, |(_, phase)| phase),
        detail: e.to_string(),
        timeout_s: wait.as_secs(),
    });
    // Status is informational; a failure to write it must not end the campaign.
    let _ = write_status(ctx, device.name(), "reconnecting", at, None, When::Now).await;
    let since = device.clock().now();
    device.wait_connected(wait).await?;
    let after_s = (device.clock().now() - since).as_secs_f64();
    ctx.events.emit(Event::Reconnected { device: device.name().into(), trial, after_s });
    Ok(())
}

/// An empty folder at `dir`: what an unrecorded earlier try of the same attempt left there
/// is removed. One `mkdir` once the campaign's folder is there (its first attempt makes it).
fn fresh_dir(dir: &Path) -> Result<(), RunError> {
    use std::io::ErrorKind;
    let failed = |source| RunError::Artifacts { path: dir.to_path_buf(), source };
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => std::fs::create_dir_all(dir).map_err(failed),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            std::fs::remove_dir_all(dir).map_err(failed)?;
            std::fs::create_dir(dir).map_err(failed)
        }
        Err(e) => Err(failed(e)),
    }
}

pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Runs a blocking store call off the async threads, its error kept a store error.
pub(super) async fn call<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| StoreError::Internal(format!("store task: {e}")))?
}

/// Runs a blocking store call off the async threads.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, RunError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| RunError::Internal(format!("store task: {e}")))?
        .map_err(RunError::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traffic_tokens_are_what_the_endpoint_accepts() {
        let t = traffic_token("0003-this-host-relay+fast-r1", 2);
        assert_eq!(t, "0003-this-host-relay_fast-r1-a2");
        assert_eq!(crate::endpoint::token_of(&format!("/t/{t}")), Some(t.as_str()));
    }
}
