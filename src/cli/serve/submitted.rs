//! The campaigns submitted to the lab's agents (`lab submit`, the Submit page) that are
//! queued or running, each with a Cancel button, cancelled as `lab cancel` does: a queued
//! one is removed, a running one stops at once (attempts in progress recorded
//! interrupted) and stays resumable.

use serde::Serialize;
use tabled::Tabled;

use crate::cli::lab_view::StatusView;
use crate::store::{Cancelled, Channel, Store, StoreError};

/// A submitted campaign not over yet.
#[derive(Debug, Clone, PartialEq, Serialize, Tabled)]
pub struct SubmittedCampaign {
    pub campaign: String,
    pub runbook: String,
    pub status: String,
    pub progress: String,
    pub priority: i32,
}

/// Of the view's campaigns, the submitted ones neither done nor interrupted.
pub fn submitted_campaigns(view: &StatusView, store: &Store) -> Result<Vec<SubmittedCampaign>, StoreError> {
    let mut out = Vec::new();
    for c in view.campaigns.iter().filter(|c| c.status != "done" && c.status != "interrupted") {
        match store.submitted(&c.campaign) {
            Ok(Some(priority)) => out.push(SubmittedCampaign {
                campaign: c.campaign.clone(),
                runbook: c.runbook.clone(),
                status: c.status.clone(),
                progress: c.progress.clone(),
                priority,
            }),
            // Gone since the view was read (cancelled, say): nothing to list.
            Ok(None) | Err(StoreError::NoCampaign(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// Why a submitted campaign was not cancelled.
#[derive(Debug, thiserror::Error)]
pub enum SubmittedCancelError {
    #[error("campaign {id} is already {status}: nothing to cancel")]
    Ended { id: String, status: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Cancels campaign `id` as `lab cancel` does when it was submitted to the agents, then
/// wakes the agents and followers; `Ok(None)` when it is no submitted campaign (or none
/// at all): the page's other cancel, of a `lab run` that waits, is the one to try.
pub fn cancel_submitted(store: &Store, id: &str, at: &str) -> Result<Option<String>, SubmittedCancelError> {
    match store.submitted(id) {
        Ok(Some(_)) => {}
        Ok(None) | Err(StoreError::NoCampaign(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let said = match store.cancel_campaign(id, at)? {
        Cancelled::Removed => format!("campaign {id} was queued for the agents: removed"),
        Cancelled::Stopping => format!(
            "campaign {id}: its agents stop it now (attempts in progress are recorded interrupted); continue it with: \
lab submit --resume {id}"
        ),
        Cancelled::Ended(s) => {
            return Err(SubmittedCancelError::Ended { id: id.to_string(), status: s.as_str().to_string() });
        }
        // A submitted campaign is never one a `lab run` process runs.
        Cancelled::RunByProcess(_) => return Ok(None),
    };
    store.notify(Channel::Work)?;
    store.notify(Channel::Events)?;
    Ok(Some(said))
}
