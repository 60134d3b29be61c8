//! `SlotRunner`: claims the due slots of a lab's schedules and runs their campaigns
//! through a [`Launcher`] (the CLI's, which is `lab run`'s own path), recording each
//! outcome. A slot runs once: its row is inserted by exactly one runner. A slot left
//! claimed by a runner that died on this machine, or interrupted (SIGTERM, Ctrl-C), is
//! taken over (one conditional update) and its campaign resumed with `lab run --resume`'s
//! machinery, so what was recorded is kept and nothing runs twice.

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::watch;

use super::build_cache::BuildCache;
use super::due::{checkpoint, due_slots, parse_utc, utc_text};
use super::{Now, ScheduleError};
use crate::config::{Lab, Schedule, SeedPolicy};
use crate::store::{Claim, Claimant, SlotRow, SlotState, Store};

/// How a slot's campaign ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "outcome", content = "message")]
pub enum SlotOutcome {
    /// Every trial valid.
    Ok,
    /// Done, but some trials failed (`lab run` exit 4).
    TrialsFailed,
    /// Trials left pending: devices offline (exit 3). The slot is finished; the campaign
    /// can still be resumed by hand.
    Unavailable,
    /// Stopped (SIGTERM, Ctrl-C) with trials pending: the next runner resumes it.
    Interrupted,
    /// The campaign could not run: an invalid runbook, a device that cannot be opened.
    Failed { code: u8, message: String },
    /// Its devices stayed held by others for as long as the slot may wait: who held them.
    Busy(String),
}

impl SlotOutcome {
    /// As stored in `schedule_slots.outcome`.
    pub fn text(&self) -> String {
        match self {
            SlotOutcome::Ok => "ok".into(),
            SlotOutcome::TrialsFailed => "trials-failed".into(),
            SlotOutcome::Unavailable => "unavailable".into(),
            SlotOutcome::Interrupted => "interrupted".into(),
            SlotOutcome::Failed { message, .. } => format!("failed: {message}"),
            SlotOutcome::Busy(holders) => format!("devices busy: {holders}"),
        }
    }
}

/// What running a campaign gave.
#[derive(Debug, Clone)]
pub struct Launch {
    pub outcome: SlotOutcome,
    /// What the campaign's command printed (its report tables).
    pub output: String,
}

/// Which runbook a job's campaign runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobRunbook {
    /// A runbook file (the schedule's), read when the campaign starts.
    File(PathBuf),
    /// A runbook the lab wrote (a confirmation), read as if it were the file `source`.
    Text { text: String, source: PathBuf },
}

/// A campaign to run under `id`, with `seed` instead of the runbook's when set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub runbook: JobRunbook,
    pub id: String,
    pub seed: Option<u64>,
    /// Its place in its devices' queues (the schedule's `priority`).
    pub priority: i32,
    /// Until when it waits for devices others hold; after that the slot is skipped.
    pub deadline: Option<std::time::Instant>,
}

/// Runs a job's campaign: the one in the store under its id is resumed (with the
/// runbook and seed it was started with); one not there yet is started.
#[async_trait::async_trait]
pub trait Launcher: Send + Sync {
    async fn launch(&self, job: &Job) -> Launch;
}

/// What happened to one slot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "action")]
pub enum SlotAction {
    /// Claimed and run by this runner.
    Ran(SlotOutcome),
    /// Left unfinished (a runner on this machine that died, or an interrupted campaign),
    /// taken over and resumed.
    Resumed { from_pid: Option<u32>, was: SlotState, outcome: SlotOutcome },
    /// Not run, and why.
    Skipped { because: String },
    /// Another runner has it.
    Claimed { pid: Option<u32>, host: Option<String>, state: SlotState },
}

#[derive(Debug, Clone, Serialize)]
pub struct SlotReport {
    pub schedule: String,
    pub due_utc: DateTime<Utc>,
    #[serde(skip)]
    pub zone: chrono_tz::Tz,
    pub campaign: Option<String>,
    #[serde(flatten)]
    pub action: SlotAction,
    /// What the review of a campaign that ran found, confirmed and sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review: Option<super::ReviewReport>,
    #[serde(skip)]
    pub output: String,
}

impl RunDueReport {
    /// Whether a pass confirmed a regression (`run-due` exits 5).
    pub fn regression(&self) -> bool {
        self.slots.iter().any(|s| s.review.as_ref().is_some_and(|r| r.regression))
    }
}

/// Everything one `run-due` pass did, in order.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunDueReport {
    pub slots: Vec<SlotReport>,
}

pub struct SlotRunner<'a> {
    pub lab: &'a Lab,
    pub store: Store,
    pub pid: u32,
    pub host: String,
    /// Set when the runner must stop: no slot is started after it, and the running
    /// campaign (the launcher watches the same channel) winds down as on Ctrl-C.
    pub stop: watch::Receiver<bool>,
}

impl SlotRunner<'_> {
    fn stopping(&self) -> bool {
        *self.stop.borrow()
    }

    /// Resumes what was left unfinished, then runs what is due at `now` (every
    /// schedule, or only `only`).
    pub async fn run_due(
        &self,
        now: Now,
        only: Option<&str>,
        launcher: &dyn Launcher,
    ) -> Result<RunDueReport, ScheduleError> {
        let mut report = RunDueReport::default();
        let wanted = |name: &str| only.is_none_or(|o| o == name);
        for row in self.store.unfinished_slots()? {
            let Some(s) = self.lab.schedule(&row.schedule).filter(|s| wanted(&s.name)) else {
                continue;
            };
            if self.stopping() {
                break;
            }
            report.slots.push(self.unfinished(s, row, now, launcher).await?);
        }
        for s in self.lab.schedules.iter().filter(|s| wanted(&s.name)) {
            if self.stopping() {
                break;
            }
            self.due(s, now, launcher, &mut report).await?;
        }
        Ok(report)
    }

    fn claimant<'c>(&'c self, at: &'c str) -> Claimant<'c> {
        Claimant { pid: self.pid, host: &self.host, at }
    }

    /// A slot claimed or interrupted: resumed here when its runner is gone, else named.
    async fn unfinished(
        &self,
        s: &Schedule,
        row: SlotRow,
        now: Now,
        launcher: &dyn Launcher,
    ) -> Result<SlotReport, ScheduleError> {
        let due = parse_utc(&row.due_utc)?;
        let mine = row.claimed_host.as_deref() == Some(self.host.as_str());
        let gone = row.state == SlotState::Interrupted
            || (mine && row.claimant().is_none_or(|p| p.pid != self.pid && !p.alive()));
        let at = utc_text(now.get());
        if !gone || !self.store.take_over_slot(&row, &self.claimant(&at))? {
            let current = self.store.slot(&row.schedule, &row.due_utc)?.unwrap_or(row.clone());
            return Ok(self.report(
                s,
                due,
                current.campaign.clone(),
                SlotAction::Claimed { pid: current.claimed_pid, host: current.claimed_host, state: current.state },
            ));
        }
        let job = match (self.new_job(s, due, now), &row.campaign) {
            (Ok(job), Some(c)) => Ok(Job { id: c.clone(), ..job }),
            // A campaign in the store resumes from its stored runbook, whatever today's file says.
            (Err(_), Some(c)) => Ok(Job {
                runbook: JobRunbook::File(s.runbook.clone()),
                id: c.clone(),
                seed: None,
                priority: s.priority,
                deadline: wait_deadline(s, due, now),
            }),
            (job, None) => job,
        };
        let campaign = job.as_ref().ok().map(|j| j.id.clone());
        if let (None, Some(c)) = (&row.campaign, &campaign) {
            self.store.set_slot_campaign(&row.schedule, &row.due_utc, c)?;
        }
        let mut launch = self.launch(job, launcher).await;
        let review = self.review(s, due, campaign.as_deref(), &mut launch, now, launcher).await;
        self.end(s, due, &launch.outcome, now)?;
        let action = SlotAction::Resumed { from_pid: row.claimed_pid, was: row.state, outcome: launch.outcome };
        Ok(SlotReport { output: launch.output, review, ..self.report(s, due, campaign, action) })
    }

    /// The schedule's due slots: the latest claimed and run, the others recorded skipped.
    async fn due(
        &self,
        s: &Schedule,
        now: Now,
        launcher: &dyn Launcher,
        report: &mut RunDueReport,
    ) -> Result<(), ScheduleError> {
        let at_time = now.get();
        let at = utc_text(at_time);
        let first_seen = parse_utc(&self.store.schedule_first_seen(&s.name, &at)?)?;
        let last_row = self.store.last_slot(&s.name)?;
        let last = last_row.as_ref().map(|r| parse_utc(&r.due_utc)).transpose()?;
        let due = due_slots(s, checkpoint(last, first_seen), at_time)?;
        let Some(slot) = due.run else {
            // Another runner claimed the latest slot after this pass looked for unfinished
            // ones: name it, rather than say nothing was due.
            if let Some(row) = last_row.filter(|r| matches!(r.state, SlotState::Claimed | SlotState::Interrupted)) {
                let due = parse_utc(&row.due_utc)?;
                if !report.slots.iter().any(|r| r.schedule == s.name && r.due_utc == due) {
                    let action = SlotAction::Claimed { pid: row.claimed_pid, host: row.claimed_host, state: row.state };
                    report.slots.push(self.report(s, due, row.campaign, action));
                }
            }
            return Ok(());
        };
        let job = self.new_job(s, slot, now);
        let because =
            format!("missed: at {at} the later slot {} was due too, and only the latest due slot runs", utc_text(slot));
        let skipped: Vec<(String, String)> = due.skipped.iter().map(|d| (utc_text(*d), because.clone())).collect();
        let key = utc_text(slot);
        match self.store.claim_slot(
            &s.name,
            &key,
            job.as_ref().ok().map(|j| j.id.as_str()),
            &self.claimant(&at),
            &skipped,
        )? {
            Claim::Taken(row) => {
                report.slots.push(self.report(
                    s,
                    slot,
                    row.campaign.clone(),
                    SlotAction::Claimed { pid: row.claimed_pid, host: row.claimed_host, state: row.state },
                ));
            }
            Claim::Won => {
                for d in &due.skipped {
                    report.slots.push(self.report(s, *d, None, SlotAction::Skipped { because: because.clone() }));
                }
                let campaign = job.as_ref().ok().map(|j| j.id.clone());
                let mut launch = self.launch(job, launcher).await;
                let review = self.review(s, slot, campaign.as_deref(), &mut launch, now, launcher).await;
                self.end(s, slot, &launch.outcome, now)?;
                let (campaign, action) = match launch.outcome.clone() {
                    // Never started: no campaign, and the slot is skipped, naming who held its devices.
                    SlotOutcome::Busy(_) => (None, SlotAction::Skipped { because: launch.outcome.text() }),
                    outcome => (campaign, SlotAction::Ran(outcome)),
                };
                report.slots.push(SlotReport {
                    output: launch.output,
                    review,
                    ..self.report(s, slot, campaign, action)
                });
            }
        }
        Ok(())
    }

    /// Reviews a campaign that ran to its end. The slot stays claimed until the review
    /// is done; a confirmation stopped by SIGTERM leaves the slot interrupted, and the
    /// next runner goes on with the review where it stopped.
    async fn review(
        &self,
        s: &Schedule,
        due: DateTime<Utc>,
        campaign: Option<&str>,
        launch: &mut Launch,
        now: Now,
        launcher: &dyn Launcher,
    ) -> Option<super::ReviewReport> {
        let campaign = campaign?;
        if !matches!(launch.outcome, SlotOutcome::Ok | SlotOutcome::TrialsFailed) {
            return None;
        }
        let deadline = wait_deadline(s, due, now);
        let due = utc_text(due);
        let at = utc_text(now.get());
        let review = super::Review {
            lab: self.lab,
            store: &self.store,
            schedule: s,
            due_utc: &due,
            campaign,
            at: &at,
            deadline,
        };
        let report = match review.run(launcher).await {
            Ok(r) => r,
            Err(e) => super::ReviewReport { notes: vec![format!("the review stopped: {e}")], ..Default::default() },
        };
        if report.interrupted {
            launch.outcome = SlotOutcome::Interrupted;
        }
        launch.output.push_str(&report.output);
        Some(report)
    }

    async fn launch(&self, job: Result<Job, SlotOutcome>, launcher: &dyn Launcher) -> Launch {
        match job {
            Ok(job) => launcher.launch(&job).await,
            Err(outcome) => Launch { outcome, output: String::new() },
        }
    }

    /// The campaign a slot runs: a new id (`<runbook name>-<UTC time>`, as `lab run`
    /// names it) and the slot's seed; or the outcome of a runbook that cannot be read.
    /// The runbook's phone builds are kept in the build cache first, so a confirmation
    /// can run this build again after next week's nightly replaced the file.
    fn new_job(&self, s: &Schedule, due: DateTime<Utc>, now: Now) -> Result<Job, SlotOutcome> {
        let runbook = crate::config::load_runbook(&s.runbook, self.lab)
            .map_err(|e| SlotOutcome::Failed { code: 2, message: e.to_string() })?;
        let id = self
            .store
            .free_campaign_id(&runbook.name)
            .map_err(|e| SlotOutcome::Failed { code: 1, message: e.to_string() })?;
        BuildCache::new(&self.lab.artifacts_dir).keep(&runbook).map_err(|e| SlotOutcome::Failed {
            code: 1,
            message: format!(
                "keeping a copy of the runbook's builds in {}: {e}; fix: free disk space there",
                self.lab.artifacts_dir.join(super::build_cache::CACHE_DIR).display()
            ),
        })?;
        let seed = match s.seed {
            SeedPolicy::PerSlot => Some(slot_seed(runbook.seed, &s.name, due)),
            SeedPolicy::Runbook => None,
        };
        Ok(Job {
            runbook: JobRunbook::File(s.runbook.clone()),
            id,
            seed,
            priority: s.priority,
            deadline: wait_deadline(s, due, now),
        })
    }

    fn end(&self, s: &Schedule, due: DateTime<Utc>, outcome: &SlotOutcome, now: Now) -> Result<(), ScheduleError> {
        let state = match outcome {
            SlotOutcome::Interrupted => SlotState::Interrupted,
            SlotOutcome::Busy(_) => SlotState::Skipped,
            _ => SlotState::Finished,
        };
        self.store.end_slot(&s.name, &utc_text(due), state, &outcome.text(), &utc_text(now.get()))?;
        Ok(())
    }

    fn report(&self, s: &Schedule, due: DateTime<Utc>, campaign: Option<String>, action: SlotAction) -> SlotReport {
        SlotReport {
            schedule: s.name.clone(),
            due_utc: due,
            zone: s.timezone,
            campaign,
            action,
            review: None,
            output: String::new(),
        }
    }
}

/// Until when a slot due at `due` waits for devices others hold: `max_wait` from now, or
/// else until the schedule's next slot after `due`.
pub fn wait_deadline(s: &Schedule, due: DateTime<Utc>, now: Now) -> Option<std::time::Instant> {
    let wait = match s.max_wait {
        Some(w) => w,
        None => {
            let next = super::due::next_after(s, due, due)?;
            (next - now.get()).to_std().unwrap_or_default()
        }
    };
    std::time::Instant::now().checked_add(wait)
}

/// A slot's seed: the runbook's, the schedule's name and the due time, so weeks differ
/// and the same slot always gets the same.
pub fn slot_seed(runbook_seed: u64, schedule: &str, due: DateTime<Utc>) -> u64 {
    crate::seed::derive(runbook_seed, &["schedule", schedule, &utc_text(due)])
}
