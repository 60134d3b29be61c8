//! `Daemon`: runs what is due, then sleeps until the earliest next slot of any
//! schedule — one sleep, no polling — and starts over from the wall clock when it wakes
//! (late after a suspend: what fell due meanwhile is run then, the latest missed slot of
//! each schedule once). It stops when the runner's stop channel is set, between slots or
//! during one (the campaign winds down as on Ctrl-C and its slot is left interrupted).

use chrono::{DateTime, Utc};

use super::due::{checkpoint, next_after, parse_utc, utc_text};
use super::slot_runner::{Launcher, RunDueReport, SlotRunner};
use super::{Now, ScheduleError, wake};

/// What the daemon tells its caller.
#[derive(Debug, Clone)]
pub enum DaemonEvent {
    /// A pass ran, resumed or skipped slots.
    Ran(RunDueReport),
    /// Asleep until the next slot.
    Sleeping { schedule: String, until: DateTime<Utc>, zone: chrono_tz::Tz },
    /// No schedule ever falls due again: waiting only for a stop.
    NothingScheduled,
}

pub struct Daemon<'a> {
    pub runner: SlotRunner<'a>,
    pub now: Now,
    /// Only this schedule; all when `None`.
    pub only: Option<String>,
}

impl Daemon<'_> {
    /// Until stopped. `on_event` hears every pass and every sleep.
    pub async fn run(
        &self,
        launcher: &dyn Launcher,
        on_event: &mut (dyn FnMut(DaemonEvent) + Send),
    ) -> Result<(), ScheduleError> {
        let mut stop = self.runner.stop.clone();
        loop {
            if *stop.borrow() {
                return Ok(());
            }
            let report = self.runner.run_due(self.now, self.only.as_deref(), launcher).await?;
            if !report.slots.is_empty() {
                on_event(DaemonEvent::Ran(report));
            }
            if *stop.borrow() {
                return Ok(());
            }
            let stopped = async {
                // A dropped sender never stops the daemon: only a sent `true` does.
                while stop.changed().await.is_ok() {
                    if *stop.borrow() {
                        return;
                    }
                }
                std::future::pending::<()>().await
            };
            match self.next()? {
                None => {
                    on_event(DaemonEvent::NothingScheduled);
                    stopped.await;
                    return Ok(());
                }
                Some((schedule, until, zone)) => {
                    on_event(DaemonEvent::Sleeping { schedule, until, zone });
                    tokio::select! {
                        r = wake::until(until, self.now) => r?,
                        () = stopped => return Ok(()),
                    }
                }
            }
        }
    }

    /// The earliest next slot over the schedules, from each one's checkpoint.
    fn next(&self) -> Result<Option<(String, DateTime<Utc>, chrono_tz::Tz)>, ScheduleError> {
        let now = self.now.get();
        let store = &self.runner.store;
        let mut best: Option<(String, DateTime<Utc>, chrono_tz::Tz)> = None;
        for s in &self.runner.lab.schedules {
            if self.only.as_deref().is_some_and(|o| o != s.name) {
                continue;
            }
            let seen = parse_utc(&store.schedule_first_seen(&s.name, &utc_text(now))?)?;
            let last = store.last_slot(&s.name)?.map(|r| parse_utc(&r.due_utc)).transpose()?;
            if let Some(t) = next_after(s, checkpoint(last, seen), now)
                && best.as_ref().is_none_or(|(_, b, _)| t < *b)
            {
                best = Some((s.name.clone(), t, s.timezone));
            }
        }
        Ok(best)
    }
}
