//! The [`Launcher`] of a real lab: a job's campaign started (or resumed) by the runner,
//! exactly as `lab run` starts one, or submitted to the lab's agents where they serve its
//! devices' hosts (src/schedule/agent_launch.rs).

use futures_util::future::BoxFuture;
use tokio::sync::watch;

use super::agent_launch::{self, Place};
use super::slot_runner::{Job, JobRunbook, Launch, Launcher, SlotOutcome};
use crate::config::Lab;
use crate::runner::{self, Ending, EventSink, LaunchError, LaunchFailure, Queueing, Start, StartWhen};
use crate::store::Store;

/// A sink for one campaign's events, and the wait for their reader once the campaign has
/// dropped the sink (the terminal's reporter finishing its lines).
pub type Listen = Box<dyn Fn() -> (EventSink, BoxFuture<'static, ()>) + Send + Sync>;

/// Runs jobs' campaigns on `lab` through [`runner::launch`] until `stop` is set.
pub struct CampaignLauncher {
    pub lab: Lab,
    pub stop: watch::Receiver<bool>,
    /// Where each campaign's events go.
    pub listen: Listen,
}

#[async_trait::async_trait]
impl Launcher for CampaignLauncher {
    async fn launch(&self, job: &Job) -> Launch {
        // On the lab's agents where they serve its devices' hosts; else here, as always.
        match agent_launch::place(&self.lab, job) {
            Err(outcome) => return Launch { outcome, output: String::new() },
            Ok(Place::Here) => {}
            Ok(place) => {
                let (events, reported) = (self.listen)();
                let launch = agent_launch::run_on_agents(&self.lab, job, place, events, self.stop.clone()).await;
                reported.await;
                return launch;
            }
        }
        let id = &job.id;
        let exists = Store::open_existing_at(&self.lab.store).ok().flatten().is_some_and(|st| st.campaign(id).is_ok());
        let start = match (&job.runbook, exists) {
            (_, true) => Start::Resume(id.clone()),
            (JobRunbook::File(path), false) => {
                Start::Runbook { path: path.clone(), id: Some(id.clone()), seed: job.seed }
            }
            (JobRunbook::Text { text, source }, false) => {
                Start::Generated { text: text.clone(), source: source.clone(), id: id.clone() }
            }
        };
        // A slot waits for all its devices, until its deadline.
        let queueing = Queueing { priority: job.priority, start: StartWhen::All(job.deadline) };
        let (events, reported) = (self.listen)();
        let result = runner::launch(self.lab.clone(), start, queueing, events, self.stop.clone()).await;
        reported.await;
        match result {
            Ok(launched) => {
                let outcome = match launched.ending {
                    Ending::Complete => SlotOutcome::Ok,
                    Ending::TrialsFailed => SlotOutcome::TrialsFailed,
                    Ending::Pending => SlotOutcome::Unavailable,
                    Ending::Interrupted => SlotOutcome::Interrupted,
                };
                Launch { outcome, output: launched.text() }
            }
            Err(e) => failed_launch(&e),
        }
    }
}

/// A campaign that could not start (or be followed), as its slot records it.
pub(super) fn failed_launch(e: &LaunchError) -> Launch {
    let outcome = match e.failure() {
        LaunchFailure::Busy => SlotOutcome::Busy(e.to_string()),
        // Stopped while waiting for its devices: the next runner goes on with the slot.
        LaunchFailure::Interrupted => SlotOutcome::Interrupted,
        // The exit codes `lab run` gives these (README).
        LaunchFailure::BadInput => SlotOutcome::Failed { code: 2, message: e.to_string() },
        LaunchFailure::Unavailable => SlotOutcome::Failed { code: 3, message: e.to_string() },
        LaunchFailure::Internal => SlotOutcome::Failed { code: 1, message: e.to_string() },
    };
    Launch { outcome, output: String::new() }
}
