//! Events: everything the runner has to say. Only the CLI reporter prints them.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::stats::Verdict;
use crate::store::CampaignStatus;

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Prepare,
    Gate,
    Launch,
    Untether,
    Soak,
    Retether,
    /// The idle baseline on a power monitor, before launch.
    Idle,
    Collect,
    Validate,
    Record,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Prepare => "prepare",
            Phase::Gate => "gate",
            Phase::Launch => "launch",
            Phase::Untether => "untether",
            Phase::Soak => "soak",
            Phase::Retether => "retether",
            Phase::Idle => "idle",
            Phase::Collect => "collect",
            Phase::Validate => "validate",
            Phase::Record => "record",
        }
    }
}

/// The version of [`Event`]'s JSON form (`lab run --message-format json`, docs/report.md):
/// raised when a field changes meaning or goes away; new events and new fields keep it.
pub const EVENT_STREAM_VERSION: u32 = 1;

/// Deserialized too: `lab wait` shows what agents ran as `lab run` shows its own.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    CampaignStarted {
        id: String,
        runbook: String,
        resumed: bool,
        /// Planned trials per device, and how many of them are already done.
        devices: Vec<DeviceProgress>,
        artifacts: String,
    },
    /// The device answered as this phone (or host) before its first trial.
    DeviceIdentified {
        device: String,
        model: String,
        os: String,
        serial: String,
    },
    Phase {
        device: String,
        trial: String,
        attempt: u32,
        phase: Phase,
    },
    /// A gate holds the device (charging, cooling down).
    Waiting {
        device: String,
        trial: String,
        what: String,
    },
    Installed {
        device: String,
        build: String,
        skipped: bool,
    },
    AttemptRecorded {
        device: String,
        trial: String,
        attempt: u32,
        valid: bool,
        reasons: Vec<String>,
        will_retry: bool,
        /// The device went offline with this attempt: the trial stays pending.
        #[serde(default)]
        device_offline: bool,
    },
    /// The device (or its host) stopped answering; the runner waits up to `timeout_s`.
    /// `trial` is empty when it was lost before its first trial.
    Disconnected {
        device: String,
        trial: String,
        phase: Phase,
        detail: String,
        timeout_s: u64,
    },
    /// It answers again after `after_s` seconds; the step is done again.
    Reconnected {
        device: String,
        trial: String,
        after_s: f64,
    },
    DeviceOffline {
        device: String,
        reason: String,
    },
    /// Someone else has the device (or its turn): the campaign waits in its queue.
    /// `position`: 1 when next, and `holder` says who is ahead.
    DeviceWaiting {
        device: String,
        position: u32,
        holder: String,
    },
    /// The device waited for is this campaign's now.
    DeviceAcquired {
        device: String,
        waited_s: f64,
    },
    /// `lab care` had left the phone's hub port off: switched on before anything else.
    PortRestored {
        device: String,
        port: String,
    },
    /// After a power-cut untether the device cannot be reached, as expected (its port is
    /// off); the soak goes on and the device's own record is read after re-tether.
    OffUsb {
        device: String,
        trial: String,
    },
    /// The power monitor that supplies a device was opened for its trials.
    MonitorOpened {
        device: String,
        monitor: String,
    },
    /// A power monitor could not be closed at the end (an Otii licence may still be reserved).
    MonitorNotClosed {
        device: String,
        monitor: String,
        detail: String,
    },
    /// USB power could not be given back after a trial: the phone may be left draining.
    PowerNotRestored {
        device: String,
        trial: String,
        detail: String,
    },
    /// `on_offline = "move"`: pending trials of a device that went offline were given to
    /// other devices of its model.
    TrialsMoved {
        from: String,
        /// Trials moved per device (`planned`; `done` is 0).
        to: Vec<DeviceProgress>,
    },
    DeviceDone {
        device: String,
    },
    /// An operator step is put to the operators (`confirm`: the runner waits for an
    /// answer from `lab confirm` or the terminal, up to `timeout_s`; else it is only said).
    /// `id` is the step's row in the store (0 when not waited for); `trial` is empty for a
    /// before-campaign step.
    OperatorStep {
        id: i64,
        campaign: String,
        device: String,
        trial: String,
        step: String,
        when: String,
        text: String,
        attest: Vec<String>,
        confirm: bool,
        timeout_s: u64,
    },
    /// The step was answered; `values` as `key=value`.
    OperatorAnswered {
        device: String,
        step: String,
        by: String,
        values: Vec<String>,
    },
    /// Nobody answered in time: the attempt is invalid.
    OperatorExpired {
        device: String,
        step: String,
    },
    /// Adaptive repeats: some variants' gating intervals are still too wide, so more
    /// trials were planned; round 2 is the first extra round.
    TrialsAdded {
        round: u32,
        /// Trials added per device (`planned`; `done` is 0).
        devices: Vec<DeviceProgress>,
        /// `model / variant: metric ±x % > ±target`, one per variant that needs more.
        reasons: Vec<String>,
    },
    /// A sequential campaign (`stop = "decided"`) decided a variant on a model, or ran
    /// out of looks (`inconclusive`): its trials there stop.
    VariantDecided {
        model: String,
        variant: String,
        against: String,
        verdict: Verdict,
        /// The look (1-based) and the most the design has.
        look: usize,
        max_looks: usize,
        /// The variant's valid trials on the model, its device-hours, and the fixed
        /// design's with the same α and power (absent without a CV).
        trials: u32,
        device_hours: f64,
        fixed_device_hours: Option<f64>,
    },
    /// `lab agent`'s own word (its log, not a campaign's stream): it serves, took a
    /// campaign's part, refused one, drains, stopped.
    Agent {
        host: String,
        campaign: Option<String>,
        note: String,
    },
    /// A lab whose raw files go to a bucket: the object store cannot be reached (said once
    /// an outage; uploads wait, backing off), or a folder's files could not be listed. The
    /// files stay local and pending.
    UploadsFailing {
        place: String,
        detail: String,
    },
    /// The campaign's end waits (at most `drain_timeout`) for `files` uploads still going.
    UploadsWaiting {
        files: u64,
    },
    /// The uploads at the campaign's end: `confirmed` this campaign's run (bytes
    /// uploaded), and `pending` left local for the next campaign or `lab artifacts sync`.
    UploadsDone {
        confirmed: u64,
        bytes: u64,
        pending: u64,
        #[serde(rename = "waited_s", serialize_with = "seconds", deserialize_with = "from_seconds")]
        waited: Duration,
    },
    CampaignFinished {
        id: String,
        status: CampaignStatus,
        valid: u32,
        failed: u32,
        pending: u32,
        invalid_attempts: u32,
        #[serde(rename = "wall_s", serialize_with = "seconds", deserialize_with = "from_seconds")]
        wall: Duration,
        note: Option<String>,
    },
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn from_seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = f64::deserialize(d)?;
    Duration::try_from_secs_f64(s).map_err(serde::de::Error::custom)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceProgress {
    pub device: String,
    pub planned: u32,
    pub done: u32,
}

/// Where the runner sends events. Sending never blocks and never fails the run:
/// a reporter that went away just stops listening.
#[derive(Debug, Clone)]
pub struct EventSink {
    tx: Option<mpsc::UnboundedSender<Event>>,
}

impl EventSink {
    pub fn new(tx: mpsc::UnboundedSender<Event>) -> Self {
        EventSink { tx: Some(tx) }
    }

    /// A sink that drops everything (benchmarks, tests that do not watch).
    pub fn discard() -> Self {
        EventSink { tx: None }
    }

    pub fn emit(&self, e: Event) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(e);
        }
    }
}
