//! Rows of the store, as the runner writes them and the report reads them.

use serde::{Deserialize, Serialize};

use super::ProcessId;
use super::backend::{Columns, DbError, FromRow};
use super::process_id::start_from_column;

use crate::measure::{Measurement, Series, UntetherMode};

pub type CampaignId = String;

/// The name of an attempt's folder in its campaign's: `<trial key>.attempt-<n>`. One folder
/// per attempt, not a trial's folder with one per attempt inside: a folder is the costliest
/// thing a trial creates on the file system (an inode and a block, and on ext4 without a
/// journal a search past recently freed inodes), and `mkdir` was a tenth of a simulated
/// campaign's CPU time on this project's VM. The key is a validated name and `n` a number,
/// so the name never leaves its campaign's folder; earlier campaigns' attempts keep the
/// `<trial key>/attempt-<n>` they were recorded with (`artifact_dir`).
pub fn attempt_folder(trial_key: &str, attempt: u32) -> String {
    format!("{trial_key}.attempt-{attempt}")
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CampaignStatus {
    /// Submitted (`lab submit`), waiting for the lab's agents to take it (docs/agents.md).
    Queued,
    /// A `lab run` process is working on it (or died without saying so: see `runner_pid`).
    Running,
    /// Stopped before every trial was done (Ctrl-C, device offline); resumable.
    Interrupted,
    /// Every planned trial has a final outcome.
    Done,
}

impl CampaignStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CampaignStatus::Queued => "queued",
            CampaignStatus::Running => "running",
            CampaignStatus::Interrupted => "interrupted",
            CampaignStatus::Done => "done",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "queued" => Some(Self::Queued),
            "running" => Some(Self::Running),
            "interrupted" => Some(Self::Interrupted),
            "done" => Some(Self::Done),
            _ => None,
        }
    }
}

/// What a campaign was started from: enough to re-run it and to trust its results.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NewCampaign {
    pub id: CampaignId,
    pub runbook_name: String,
    pub runbook_path: String,
    /// The runbook file's text, verbatim.
    pub runbook_text: String,
    pub runbook_sha256: String,
    /// The lab file's text, verbatim.
    pub lab_text: String,
    pub lab_sha256: String,
    /// sha256 of every build artifact and pushed file, by name.
    pub content_hashes: serde_json::Value,
    pub tool_version: String,
    pub seed: u64,
    /// RFC 3339.
    pub created_at: String,
    pub planned_trials: Vec<PlannedTrialRow>,
    /// The plan as JSON text, so `lab report` can show variants in order (text, not a
    /// `serde_json::Value`: a big plan's tree of values is several times its text).
    pub plan_json: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PlannedTrialRow {
    /// Position in the plan; stable across resumes.
    pub idx: u32,
    /// Human name and artifact folder name: `0007-sim-iphone-1-control-r2`.
    pub key: String,
    pub device: String,
    pub device_model: String,
    pub variant: String,
    pub build: String,
    pub config: String,
    pub repeat: u32,
    pub block: u32,
    /// Position in its device's queue.
    pub device_order: u32,
}

impl PlannedTrialRow {
    /// The columns `from_row` reads, in order, of `trials t`.
    pub(super) const COLUMNS: &str =
        "t.idx, t.key, t.device, t.device_model, t.variant, t.build, t.config, t.repeat, t.block, t.device_order";
}

impl FromRow<'_> for PlannedTrialRow {
    fn from_row(c: &mut Columns<'_>) -> Result<Self, DbError> {
        Ok(PlannedTrialRow {
            idx: c.get()?,
            key: c.get()?,
            device: c.get()?,
            device_model: c.get()?,
            variant: c.get()?,
            build: c.get()?,
            config: c.get()?,
            repeat: c.get()?,
            block: c.get()?,
            device_order: c.get()?,
        })
    }
}

/// A pending trial given to another device of its model (`on_offline = "move"`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TrialMove {
    pub trial_idx: u32,
    pub to_device: String,
    /// Its place in the new device's queue (after what that device already has).
    pub device_order: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CampaignRecord {
    pub id: CampaignId,
    pub runbook_name: String,
    pub runbook_path: String,
    pub runbook_text: String,
    pub runbook_sha256: String,
    pub lab_text: String,
    pub lab_sha256: String,
    pub content_hashes: serde_json::Value,
    pub tool_version: String,
    pub seed: u64,
    pub created_at: String,
    pub finished_at: Option<String>,
    pub status: CampaignStatus,
    /// pid of the `lab run` working on it, while running.
    pub runner_pid: Option<u32>,
    /// When that process started (see [`ProcessId`]); `None` for campaigns recorded before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_start: Option<u64>,
    /// Free-form note set at the end ("interrupted by Ctrl-C", "sim-iphone-2 offline").
    pub note: Option<String>,
    pub plan_json: serde_json::Value,
    /// The lab's own CPU and wakeups during the campaign, when measured.
    pub footprint_json: Option<serde_json::Value>,
}

impl CampaignRecord {
    /// The columns `from_row` reads, in order: every column of `campaigns` but the plan's
    /// (SQLite copies each selected column out of the row, and a big plan is tens of
    /// megabytes).
    pub(super) const COLUMNS: &str = "id, runbook_name, runbook_path, runbook_text, runbook_sha256, lab_text, \
lab_sha256, content_hashes, tool_version, seed, created_at, finished_at, status, runner_pid, runner_start, note, \
footprint_json, max_attempts";
}

/// A campaign with its `plan_json` left `Null` (unparsed): the plan is not among its columns.
impl FromRow<'_> for CampaignRecord {
    fn from_row(c: &mut Columns<'_>) -> Result<Self, DbError> {
        let parse = |s: String| serde_json::from_str(&s).unwrap_or(serde_json::Value::Null);
        let record = CampaignRecord {
            id: c.get()?,
            runbook_name: c.get()?,
            runbook_path: c.get()?,
            runbook_text: c.get()?,
            runbook_sha256: c.get()?,
            lab_text: c.get()?,
            lab_sha256: c.get()?,
            content_hashes: parse(c.get()?),
            tool_version: c.get()?,
            seed: c.get::<i64>()? as u64,
            created_at: c.get()?,
            finished_at: c.get()?,
            status: CampaignStatus::parse(&c.get::<String>()?).unwrap_or(CampaignStatus::Interrupted),
            runner_pid: c.get()?,
            runner_start: start_from_column(c.get()?),
            note: c.get()?,
            plan_json: serde_json::Value::Null,
            footprint_json: c.get::<Option<String>>()?.map(parse),
        };
        // The retry limit, read as a number all the same.
        c.get::<u32>()?;
        Ok(record)
    }
}

impl CampaignRecord {
    /// The `lab run` process working on it, while running (alive or not: ask it).
    pub fn runner(&self) -> Option<ProcessId> {
        self.runner_pid.map(|pid| ProcessId { pid, start: self.runner_start })
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AttemptStatus {
    Valid,
    Invalid,
}

impl AttemptStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptStatus::Valid => "valid",
            AttemptStatus::Invalid => "invalid",
        }
    }
}

/// One execution of a planned trial. A planned trial has attempts until one is valid
/// or the retry limit is reached. Written atomically with its measurements.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AttemptRecord {
    pub campaign: CampaignId,
    pub trial_idx: u32,
    /// 0 for the first attempt.
    pub attempt: u32,
    /// The device it ran on (a trial may move when its planned device is lost).
    pub device: String,
    pub status: AttemptStatus,
    /// Why the attempt is invalid; empty when valid.
    pub reasons: Vec<String>,
    /// Phase name → seconds spent, in order.
    pub phases: Vec<(String, f64)>,
    /// Wall-clock start and end, RFC 3339.
    pub started_at: String,
    pub ended_at: String,
    /// Device-clock start of the soak, seconds since the device clock's epoch.
    pub soak_start_s: f64,
    /// Its folder (`<campaign>/<trial key>.attempt-<n>`, [`attempt_folder`]), relative to
    /// the artifacts folder's parent.
    pub artifact_dir: String,
    pub measurements: Vec<Measurement>,
    /// Values over the attempt's time (the battery level); stored in the same transaction.
    #[serde(default)]
    pub series: Vec<Series>,
    /// State snapshots before and after the soak, as JSON.
    pub state_before: serde_json::Value,
    pub state_after: serde_json::Value,
    /// What the device's own log says about the soak (`Collected::soak_state`), as JSON;
    /// `Null` where it keeps none.
    #[serde(default)]
    pub state_soak: serde_json::Value,
    /// How it was cut from USB power (`None`: recorded before the store kept it).
    #[serde(default)]
    pub untether: Option<UntetherMode>,
    /// What must be said with its figures (a soft-untethered phone that charged on).
    #[serde(default)]
    pub labels: Vec<String>,
    /// What an operator attested during this attempt (its steps' answers).
    #[serde(default)]
    pub attestations: Vec<Attestation>,
}

impl AttemptRecord {
    /// The columns `from_row` reads, in order, of `attempts a` joined with `trials t`
    /// (an attempt recorded before attempts kept their device ran on its trial's).
    pub(super) const COLUMNS: &str = "a.campaign, a.trial_idx, a.attempt, COALESCE(a.device, t.device), a.status, \
a.reasons, a.phases, a.started_at, a.ended_at, a.soak_start_s, a.artifact_dir, a.state_before, a.state_after, \
a.state_soak, a.untether, a.labels";
}

/// An attempt without its measurements, series and attestations (rows of their own).
impl FromRow<'_> for AttemptRecord {
    fn from_row(c: &mut Columns<'_>) -> Result<Self, DbError> {
        // Unreadable JSON is empty, as it was before the columns were checked.
        fn json<T: serde::de::DeserializeOwned + Default>(c: &mut Columns<'_>) -> Result<T, DbError> {
            Ok(serde_json::from_str(c.text()?.unwrap_or("")).unwrap_or_default())
        }
        Ok(AttemptRecord {
            campaign: c.get()?,
            trial_idx: c.get()?,
            attempt: c.get()?,
            device: c.get()?,
            status: if c.text()? == Some("valid") { AttemptStatus::Valid } else { AttemptStatus::Invalid },
            reasons: json(c)?,
            phases: json(c)?,
            started_at: c.get()?,
            ended_at: c.get()?,
            soak_start_s: c.get()?,
            artifact_dir: c.get()?,
            measurements: Vec::new(),
            series: Vec::new(),
            state_before: json(c)?,
            state_after: json(c)?,
            state_soak: c.text()?.and_then(|s| serde_json::from_str(s).ok()).unwrap_or_default(),
            untether: c.text()?.and_then(UntetherMode::parse),
            labels: json(c)?,
            attestations: Vec::new(),
        })
    }
}

/// An operator's answer to a step, as kept with an attempt: shown as *attested*, never
/// as read.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Attestation {
    pub step: String,
    /// `StepWhen::as_str`: before-campaign, before-trial, untether, re-tether, after-trial.
    pub when: String,
    pub text: String,
    pub by: String,
    /// RFC 3339.
    pub at: String,
    /// Setting → value (`{"brightness": 50, "bluetooth": false}`); empty for a plain confirmation.
    pub values: serde_json::Map<String, serde_json::Value>,
}

impl Attestation {
    /// The columns `from_row` reads, in order, of `attestations`.
    pub(super) const COLUMNS: &str = "step, step_when, text, answered_by, answered_at, answer";
}

impl FromRow<'_> for Attestation {
    fn from_row(c: &mut Columns<'_>) -> Result<Self, DbError> {
        Ok(Attestation {
            step: c.get()?,
            when: c.get()?,
            text: c.get()?,
            by: c.get()?,
            at: c.get()?,
            values: serde_json::from_str(&c.get::<String>()?).unwrap_or_default(),
        })
    }
}

/// A step put to the operators by a runner.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NewStep {
    pub campaign: CampaignId,
    pub device: String,
    /// None for a before-campaign step.
    pub trial_key: Option<String>,
    pub attempt: Option<u32>,
    pub step: String,
    pub when: String,
    pub text: String,
    /// The settings the answer must attest.
    pub attest: Vec<String>,
    pub asked_at: String,
    /// RFC 3339; after it the step is expired and cannot be answered.
    pub deadline: String,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum StepStatus {
    Pending,
    Answered,
    /// Its deadline passed unanswered.
    Expired,
    /// The runner stopped waiting (Ctrl-C, or a crashed runner found by the next one).
    Abandoned,
}

impl StepStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Pending => "pending",
            StepStatus::Answered => "answered",
            StepStatus::Expired => "expired",
            StepStatus::Abandoned => "abandoned",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [StepStatus::Pending, StepStatus::Answered, StepStatus::Expired, StepStatus::Abandoned]
            .into_iter()
            .find(|x| x.as_str() == s)
    }
}

/// A step as the desk holds it: what was asked (readable through `Deref`), and its answer.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StepRow {
    pub id: i64,
    #[serde(flatten)]
    pub asked: NewStep,
    pub status: StepStatus,
    pub answered_at: Option<String>,
    pub answered_by: Option<String>,
    pub values: serde_json::Map<String, serde_json::Value>,
}

impl StepRow {
    /// The columns `from_row` reads, in order, of `operator_steps`.
    pub(super) const COLUMNS: &str = "id, campaign, device, trial_key, attempt, step, step_when, text, attest, \
asked_at, deadline, status, answered_at, answered_by, answer";
}

impl FromRow<'_> for StepRow {
    fn from_row(c: &mut Columns<'_>) -> Result<Self, DbError> {
        Ok(StepRow {
            id: c.get()?,
            asked: NewStep {
                campaign: c.get()?,
                device: c.get()?,
                trial_key: c.get()?,
                attempt: c.get()?,
                step: c.get()?,
                when: c.get()?,
                text: c.get()?,
                attest: serde_json::from_str(&c.get::<String>()?).unwrap_or_default(),
                asked_at: c.get()?,
                deadline: c.get()?,
            },
            status: StepStatus::parse(&c.get::<String>()?).unwrap_or(StepStatus::Abandoned),
            answered_at: c.get()?,
            answered_by: c.get()?,
            values: c.get::<Option<String>>()?.and_then(|a| serde_json::from_str(&a).ok()).unwrap_or_default(),
        })
    }
}

/// A planned trial joined with its attempts' outcome, for status and reports.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TrialRecord {
    pub row: PlannedTrialRow,
    pub attempts: u32,
    /// `pending`, `valid` or `failed` (every attempt invalid).
    pub outcome: TrialOutcome,
}

/// What is left to run on one device (`Store::pending_queue`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceQueue {
    pub device: String,
    /// Trials planned on it, and how many of them have their final outcome.
    pub planned: u32,
    pub done: u32,
    /// (trial index, attempts so far) of its pending trials, in queue order.
    pub pending: Vec<(u32, u32)>,
}

/// A campaign's trials by outcome, and its attempts (`Store::outcome_counts`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutcomeCounts {
    pub valid: u32,
    pub failed: u32,
    pub pending: u32,
    pub attempts: u32,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TrialOutcome {
    Pending,
    Valid,
    Failed,
}

/// One series of one attempt, as `Store::series` reads them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AttemptSeries {
    pub trial_idx: u32,
    pub attempt: u32,
    pub series: Series,
}

/// From `trial_idx, attempt, name, unit, source, points`.
impl FromRow<'_> for AttemptSeries {
    fn from_row(c: &mut Columns<'_>) -> Result<Self, DbError> {
        let (trial_idx, attempt, name, unit, source) = (c.get()?, c.get()?, c.get()?, c.get()?, c.get()?);
        let points = Series::points_from_blob(c.blob().unwrap_or_default())
            .map_err(|e| DbError::Type(format!("a series' points: {e}")))?;
        Ok(AttemptSeries { trial_idx, attempt, series: Series { name, unit, source, points } })
    }
}

/// One measurement of one attempt, flattened for reports and `results.csv`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MeasurementRow {
    pub trial_idx: u32,
    pub attempt: u32,
    pub status: AttemptStatus,
    pub metric: String,
    pub value: f64,
    pub unit: String,
    pub source: String,
}

/// Last known state of a device, written by its worker as phases change, so that
/// `lab status` in another terminal can show it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DeviceStatusRow {
    pub device: String,
    /// `idle`, `busy`, `offline`.
    pub state: String,
    pub battery_pct: Option<f64>,
    pub campaign: Option<CampaignId>,
    pub trial_key: Option<String>,
    pub phase: Option<String>,
    pub updated_at: String,
}

impl DeviceStatusRow {
    /// The columns `from_row` reads, in order.
    pub(super) const COLUMNS: &str = "device, state, battery_pct, campaign, trial_key, phase, updated_at";
}

impl FromRow<'_> for DeviceStatusRow {
    fn from_row(c: &mut Columns<'_>) -> Result<Self, DbError> {
        Ok(DeviceStatusRow {
            device: c.get()?,
            state: c.get()?,
            battery_pct: c.get()?,
            campaign: c.get()?,
            trial_key: c.get()?,
            phase: c.get()?,
            updated_at: c.get()?,
        })
    }
}

impl std::ops::Deref for StepRow {
    type Target = NewStep;
    fn deref(&self) -> &NewStep {
        &self.asked
    }
}

/// One reading of a device's battery (`lab care`): level, health and cycles as the
/// device reported them, and where they came from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BatteryReadingRow {
    pub device: String,
    /// RFC 3339, UTC.
    pub at: String,
    pub battery_pct: Option<f64>,
    /// Full-charge over design capacity, percent.
    pub health_pct: Option<f64>,
    pub cycle_count: Option<u32>,
    /// Where health and cycles were read: `sim`, the uevent path, …
    pub source: String,
}

impl BatteryReadingRow {
    /// The columns `from_row` reads, in order.
    pub(super) const COLUMNS: &str = "device, at, battery_pct, health_pct, cycle_count, source";
}

impl FromRow<'_> for BatteryReadingRow {
    fn from_row(c: &mut Columns<'_>) -> Result<Self, DbError> {
        Ok(BatteryReadingRow {
            device: c.get()?,
            at: c.get()?,
            battery_pct: c.get()?,
            health_pct: c.get()?,
            cycle_count: c.get()?,
            source: c.get()?,
        })
    }
}
