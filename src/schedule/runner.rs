//! `SlotRunner`: claims the due slots of a lab's schedules and runs their campaigns
//! through a [`Launcher`] (the CLI's, which is `lab run`'s own path), recording each
//! outcome. A slot runs once: its row is inserted by exactly one runner. A slot left
//! claimed by a runner that died on this machine, or interrupted (SIGTERM, Ctrl-C), is
//! taken over (one conditional update) and its campaign resumed with `lab run --resume`'s
//! machinery, so what was recorded is kept and nothing runs twice.

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::watch;

use super::due::{checkpoint, due_slots, parse_utc, utc_text};
use super::{Now, ScheduleError};
use crate::config::{Lab, Schedule};
use crate::store::{Claim, Claimant, SlotRow, SlotState, Store, pid_alive};

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

/// Runs a slot's campaign: the one in the store under `id` is resumed; one not there
/// yet is started from the schedule's runbook under that id.
#[async_trait::async_trait]
pub trait Launcher: Send + Sync {
    async fn launch(&self, schedule: &Schedule, id: &str) -> Launch;
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
    #[serde(skip)]
    pub output: String,
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
            || (mine && row.claimed_pid.is_none_or(|p| p != self.pid && !pid_alive(p)));
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
        let campaign = match &row.campaign {
            Some(c) => Some(c.clone()),
            None => self.new_campaign_id(s).ok(),
        };
        if let (None, Some(c)) = (&row.campaign, &campaign) {
            self.store.set_slot_campaign(&row.schedule, &row.due_utc, c)?;
        }
        let launch = self.launch(s, campaign.as_deref(), launcher).await;
        self.end(s, due, &launch.outcome, now)?;
        let action = SlotAction::Resumed { from_pid: row.claimed_pid, was: row.state, outcome: launch.outcome };
        Ok(SlotReport { output: launch.output, ..self.report(s, due, campaign, action) })
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
        let last = self.store.last_slot(&s.name)?.map(|r| parse_utc(&r.due_utc)).transpose()?;
        let due = due_slots(s, checkpoint(last, first_seen), at_time)?;
        let Some(slot) = due.run else { return Ok(()) };
        let id = self.new_campaign_id(s);
        let because =
            format!("missed: at {at} the later slot {} was due too, and only the latest due slot runs", utc_text(slot));
        let skipped: Vec<(String, String)> = due.skipped.iter().map(|d| (utc_text(*d), because.clone())).collect();
        let key = utc_text(slot);
        match self.store.claim_slot(
            &s.name,
            &key,
            id.as_ref().ok().map(String::as_str),
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
                let launch = match &id {
                    Ok(c) => self.launch(s, Some(c), launcher).await,
                    Err(e) => Launch { outcome: e.clone(), output: String::new() },
                };
                self.end(s, slot, &launch.outcome, now)?;
                report.slots.push(SlotReport {
                    output: launch.output,
                    ..self.report(s, slot, id.ok(), SlotAction::Ran(launch.outcome))
                });
            }
        }
        Ok(())
    }

    async fn launch(&self, s: &Schedule, id: Option<&str>, launcher: &dyn Launcher) -> Launch {
        match id {
            Some(id) => launcher.launch(s, id).await,
            None => Launch {
                outcome: SlotOutcome::Failed { code: 2, message: "no campaign id".into() },
                output: String::new(),
            },
        }
    }

    /// The id a new campaign of the schedule gets (`<runbook name>-<UTC time>`, as
    /// `lab run` names it), or the outcome of a runbook that cannot be read.
    fn new_campaign_id(&self, s: &Schedule) -> Result<String, SlotOutcome> {
        let runbook = crate::config::load_runbook(&s.runbook, self.lab)
            .map_err(|e| SlotOutcome::Failed { code: 2, message: e.to_string() })?;
        self.store.free_campaign_id(&runbook.name).map_err(|e| SlotOutcome::Failed { code: 1, message: e.to_string() })
    }

    fn end(&self, s: &Schedule, due: DateTime<Utc>, outcome: &SlotOutcome, now: Now) -> Result<(), ScheduleError> {
        let state = if *outcome == SlotOutcome::Interrupted { SlotState::Interrupted } else { SlotState::Finished };
        self.store.end_slot(&s.name, &utc_text(due), state, &outcome.text(), &utc_text(now.get()))?;
        Ok(())
    }

    fn report(&self, s: &Schedule, due: DateTime<Utc>, campaign: Option<String>, action: SlotAction) -> SlotReport {
        SlotReport { schedule: s.name.clone(), due_utc: due, zone: s.timezone, campaign, action, output: String::new() }
    }
}
