//! Schedules (docs/schedule.md): which slots of each `[[schedule]]` are due, claiming
//! and running them once whatever the number of runners, the daemon that sleeps until
//! the next one, and the timer units that start `lab schedule run-due`.

mod agent_launch;
mod agent_unit;
mod alert;
mod baseline;
mod build_cache;
mod campaign_launcher;
mod confirm;
mod daemon;
mod due;
mod error;
mod install;
mod now;
mod review;
mod slot_runner;
mod wake;

pub use agent_unit::AgentUnit;
pub use baseline::{BASELINE_MAX, baseline_campaigns};
pub use build_cache::BuildCache;
pub use campaign_launcher::{CampaignLauncher, Listen};
pub use confirm::{CampaignSide, ConfirmPlan, ConfirmRequest, Unconfirmable, confirm_plan};
pub use daemon::{Daemon, DaemonEvent};
pub use due::{Due, FIRST_SIGHT_LOOKBACK, checkpoint, due_slots, next_after, parse_utc, utc_text};
pub use error::ScheduleError;
pub use install::{InstallTarget, Paths, crontab, launchd_plist, systemd_units};
pub use now::Now;
pub use review::{ConfirmationRun, Review, ReviewReport, history_path};
pub use slot_runner::{
    Job, JobRunbook, Launch, Launcher, RunDueReport, SlotAction, SlotOutcome, SlotReport, SlotRunner, slot_seed,
};
