//! A job's campaign on the lab's agents (docs/agents.md, docs/schedule.md): where agents
//! serve every host of its devices, the slot (or its confirmation) is submitted under the
//! job's id, seed and priority and followed to its end, so its review still comes after
//! the campaign ends, as when it runs in this process. Where no agent serves any of them
//! (the default lab), nothing here applies: the campaign runs in this process as before.
//! Split between hosts with agents and hosts without, the slot fails as `lab run`
//! refuses such a runbook.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;

use super::campaign_launcher::failed_launch;
use super::slot_runner::{Job, JobRunbook, Launch, SlotOutcome};
use crate::config::{self, Lab, Runbook};
use crate::plan::Plan;
use crate::runner::{self, EventSink, Followed};
use crate::store::{CampaignStatus, Cancelled, Channel, Store, StoreError};

/// Where a job's campaign runs.
pub enum Place {
    /// In this process, through `runner::launch` (no agent serves its hosts).
    Here,
    /// On the agents: a new campaign, validated and planned, to submit…
    Submit(Box<(Runbook, Plan)>),
    /// … or one submitted before (a slot taken over after its runner stopped): followed,
    /// queued again first when it was interrupted.
    Submitted,
}

/// Where `job` runs on `lab`; an outcome instead when it cannot run at all.
pub fn place(lab: &Lab, job: &Job) -> Result<Place, SlotOutcome> {
    let internal = |e: StoreError| SlotOutcome::Failed { code: 1, message: e.to_string() };
    let Some(store) =
        Store::open_existing_at(&lab.store).map_err(|e| SlotOutcome::Failed { code: 1, message: e.to_string() })?
    else {
        return Ok(Place::Here);
    };
    // Submitted before: the agents' still, even while none serves (it waits for one).
    match store.submitted(&job.id) {
        Ok(Some(_)) => return Ok(Place::Submitted),
        // Run by a process before: resumed here, as it always was.
        Ok(None) => return Ok(Place::Here),
        Err(StoreError::NoCampaign(_)) => {}
        Err(e) => return Err(internal(e)),
    }
    let serving = store.serving_hosts().map_err(internal)?;
    if serving.is_empty() {
        return Ok(Place::Here);
    }
    let bad = |message: String| SlotOutcome::Failed { code: 2, message };
    let mut rb = match &job.runbook {
        JobRunbook::File(path) => config::load_runbook(path, lab),
        JobRunbook::Text { text, source } => config::parse_runbook(text, source, lab),
    }
    .map_err(|e| bad(e.to_string()))?;
    if let Some(seed) = job.seed {
        rb.seed = seed;
    }
    let plan = crate::runner::plan_with_noise(&rb, lab).map_err(|e| bad(e.to_string()))?;
    let mut hosts: Vec<&str> =
        plan.devices.iter().filter_map(|d| lab.device(&d.name)).map(|d| d.host.as_str()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    let (on, off): (Vec<&str>, Vec<&str>) = hosts.iter().partition(|h| serving.iter().any(|s| s == *h));
    match (on.is_empty(), off.is_empty()) {
        (true, _) => Ok(Place::Here),
        (false, true) => Ok(Place::Submit(Box::new((rb, plan)))),
        (false, false) => Err(bad(format!(
            "{}: its devices are on hosts with agents ({}) and without ({}); fix: start `lab agent --host HOST` on the \
others, or split the runbook",
            rb.source.display(),
            on.join(", "),
            off.join(", ")
        ))),
    }
}

/// Submits (or queues again) `job`'s campaign for the agents and follows it until it ends
/// or `stop` is set; its stored events go to `events`. Not taken by an agent by the job's
/// deadline, it is withdrawn and the slot is busy, as a slot that waited for its devices
/// that long is.
pub async fn run_on_agents(
    lab: &Lab,
    job: &Job,
    place: Place,
    events: EventSink,
    stop: watch::Receiver<bool>,
) -> Launch {
    let store = match Store::open_at(&lab.store) {
        Ok(s) => s,
        Err(e) => return failed_launch(&runner::LaunchError::from(e)),
    };
    let queued = match place {
        Place::Here => Ok(()),
        Place::Submit(new) => runner::submit_planned(lab, &new.0, &new.1, &job.id, job.priority),
        Place::Submitted => requeue(&store, &job.id, job.priority).map_err(runner::LaunchError::from),
    };
    if let Err(e) = queued {
        return failed_launch(&e);
    }
    let expired = Arc::new(AtomicBool::new(false));
    let (follow_stop, relay) = relay_stop(&store, job, stop, expired.clone());
    let followed = runner::follow(store.clone(), &job.id, events, follow_stop).await;
    relay.abort();
    let outcome = match followed {
        Err(e) => return failed_launch(&e),
        Ok(Followed::Detached) => SlotOutcome::Interrupted,
        Ok(Followed::Removed) if expired.load(Ordering::SeqCst) => {
            SlotOutcome::Busy("no agent took its campaign before the slot's deadline; withdrawn".into())
        }
        Ok(Followed::Removed) => SlotOutcome::Failed {
            // `lab run`'s exit code when stopped.
            code: 130,
            message: format!("campaign {} was cancelled before an agent took it", job.id),
        },
        Ok(Followed::Ended(CampaignStatus::Done)) => match store.outcome_counts(&job.id) {
            Ok(c) if c.failed > 0 => SlotOutcome::TrialsFailed,
            Ok(c) if c.pending > 0 => SlotOutcome::Unavailable,
            Ok(_) => SlotOutcome::Ok,
            Err(e) => SlotOutcome::Failed { code: 1, message: e.to_string() },
        },
        Ok(Followed::Ended(_)) => SlotOutcome::Interrupted,
    };
    let output = match outcome {
        SlotOutcome::Ok | SlotOutcome::TrialsFailed | SlotOutcome::Unavailable => report_text(lab, &store, &job.id),
        _ => String::new(),
    };
    Launch { outcome, output }
}

/// A submitted campaign left interrupted (its slot's runner stopped, or a cancel) is
/// queued again; one queued or running is left as it is.
fn requeue(store: &Store, id: &str, priority: i32) -> Result<(), StoreError> {
    if store.resubmit(id, Some(priority))? == CampaignStatus::Interrupted {
        store.notify(Channel::Work)?;
    }
    Ok(())
}

/// The stop the follow watches: `stop`, and at the job's deadline the campaign withdrawn
/// when no agent has taken it yet (`expired` then set; the follow sees it removed).
fn relay_stop(
    store: &Store,
    job: &Job,
    mut stop: watch::Receiver<bool>,
    expired: Arc<AtomicBool>,
) -> (watch::Receiver<bool>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = watch::channel(false);
    let (store, id, deadline) = (store.clone(), job.id.clone(), job.deadline);
    let relay = tokio::spawn(async move {
        if let Some(d) = deadline {
            tokio::select! {
                r = stop.wait_for(|s| *s) => {
                    if r.is_ok() {
                        let _ = tx.send(true);
                    }
                    return;
                }
                _ = tokio::time::sleep_until(d.into()) => {}
            }
            let _ = tokio::task::spawn_blocking(move || withdraw_if_queued(&store, &id, &expired)).await;
        }
        if stop.wait_for(|s| *s).await.is_ok() {
            let _ = tx.send(true);
        }
    });
    (rx, relay)
}

/// Removes campaign `id` if it is still queued, `expired` set before the follower is woken
/// (it then finds the campaign gone).
fn withdraw_if_queued(store: &Store, id: &str, expired: &AtomicBool) {
    if !store.campaign_without_plan(id).is_ok_and(|c| c.status == CampaignStatus::Queued) {
        return;
    }
    match store.cancel_campaign(id, &runner::now_rfc3339()) {
        Ok(Cancelled::Removed) => {
            expired.store(true, Ordering::SeqCst);
            let _ = store.notify(Channel::Events);
        }
        // An agent took it in the instant between: its attempts so far are recorded
        // interrupted; queued again, they run again and the slot goes on.
        Ok(Cancelled::Stopping) => {
            let _ = store.resubmit(id, None);
            let _ = store.notify(Channel::Work);
        }
        _ => {}
    }
}

/// What `lab run` shows at a campaign's end: its tables and report files, written here
/// from the store.
fn report_text(lab: &Lab, store: &Store, id: &str) -> String {
    match crate::report::write_campaign_files(store, id, &lab.artifacts_dir.join(id)) {
        Ok(written) => {
            let mut text = format!("\n{}\nreport files:\n", written.tables);
            for f in &written.paths {
                text.push_str(&format!("  {}\n", crate::fs::display_path(f)));
            }
            text
        }
        Err(e) => format!("\ncampaign {id}: its report files could not be written here: {e}\n"),
    }
}
