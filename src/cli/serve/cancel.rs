//! Cancelling a queued campaign from the page. A queued campaign exists only as its rows
//! in the devices' queues (it is written to the store once it has a device), kept by the
//! `lab run` process that waits: cancelling it is that process's Ctrl-C, sent as SIGINT.
//! It then gives up its place in every queue and exits, recording nothing — exactly what
//! Ctrl-C in its terminal does. Only a process on this machine can be signalled; one
//! waiting on another machine of a PostgreSQL lab is refused with where it runs.

use std::collections::BTreeMap;

use serde::Serialize;
use tabled::Tabled;

use crate::store::{Store, StoreError, Waiter};

/// A campaign that waits for its devices and holds none of them.
#[derive(Debug, Clone, PartialEq, Serialize, Tabled)]
pub struct QueuedCampaign {
    pub campaign: String,
    pub runbook: String,
    /// The devices it waits for.
    pub devices: String,
    /// Machine and pid of the `lab run` that waits.
    pub machine: String,
    pub since: String,
    #[serde(skip)]
    #[tabled(skip)]
    waiter: Waiter,
}

/// Every queued campaign: campaign rows of the queues with no device held by the same
/// campaign (a campaign holding one device runs; it stops with Ctrl-C where it runs).
pub fn queued_campaigns(store: &Store) -> Result<Vec<QueuedCampaign>, StoreError> {
    let holding: Vec<String> = store.lease_holders()?.into_iter().filter_map(|h| h.campaign).collect();
    let mut by: BTreeMap<String, Vec<Waiter>> = BTreeMap::new();
    for w in store.queued()? {
        if let Some(c) = w.campaign.clone().filter(|c| !holding.contains(c)) {
            by.entry(c).or_default().push(w);
        }
    }
    Ok(by
        .into_iter()
        .filter_map(|(campaign, ws)| {
            let first = ws.iter().min_by(|a, b| a.since.cmp(&b.since))?.clone();
            let mut devices: Vec<&str> = ws.iter().map(|w| w.device.as_str()).collect();
            devices.dedup();
            Some(QueuedCampaign {
                campaign,
                runbook: first.runbook.clone().unwrap_or_default(),
                devices: devices.join(", "),
                machine: format!("{} ({})", first.host, first.pid),
                since: first.since.clone(),
                waiter: first,
            })
        })
        .collect())
}

/// Why a cancel was not done.
#[derive(Debug, thiserror::Error)]
pub enum CancelError {
    #[error(
        "campaign {0} is not waiting in any device's queue; only a queued campaign is cancelled here (a running one \
stops with Ctrl-C where it runs)"
    )]
    NotQueued(String),
    #[error("campaign {id} waits on machine {host} (pid {pid}), not this one; fix: stop it there with Ctrl-C")]
    Elsewhere { id: String, host: String, pid: u32 },
    #[error("could not signal the process (pid {pid}) waiting for campaign {id}: {why}")]
    Signal { id: String, pid: u32, why: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Stops the `lab run` waiting for campaign `id` as its Ctrl-C would; `here` is this
/// machine's name as queue rows give it. Returns what was done, in words.
pub fn cancel(store: &Store, id: &str, here: &str) -> Result<String, CancelError> {
    let queued = queued_campaigns(store)?;
    let q = queued.iter().find(|q| q.campaign == id).ok_or_else(|| CancelError::NotQueued(id.to_string()))?;
    let w = &q.waiter;
    if w.host != here {
        return Err(CancelError::Elsewhere { id: id.to_string(), host: w.host.clone(), pid: w.pid });
    }
    // `queued` kept only rows whose process is alive, checked with its start time: the pid
    // is that process, not another that got the number since.
    let pid = i32::try_from(w.pid).map_err(|_| CancelError::Signal {
        id: id.to_string(),
        pid: w.pid,
        why: "not a pid".into(),
    })?;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGINT)
        .map_err(|e| CancelError::Signal { id: id.to_string(), pid: w.pid, why: e.to_string() })?;
    Ok(format!(
        "campaign {id} was waiting for {} ({}); its lab run was told to stop as on Ctrl-C: it leaves every queue and \
records nothing",
        q.devices, q.machine
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::LeaseRequest;

    fn req(campaign: &str) -> LeaseRequest {
        LeaseRequest {
            purpose: "campaign".into(),
            campaign: Some(campaign.into()),
            runbook: Some("rb".into()),
            host: crate::store::this_host(),
            priority: 0,
            expect_s: Some(60.0),
        }
    }

    /// A campaign holding a device is running, not queued; one that holds none is queued;
    /// an unknown id and another machine's waiter are refused without a signal.
    #[test]
    fn only_a_campaign_that_holds_nothing_is_queued_and_only_here_is_signalled() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("lab.db")).unwrap();
        let running = store.try_lease("phone-1", &req("run-1")).unwrap().unwrap();
        let waits_too = store.enqueue("phone-2", &req("run-1")).unwrap();
        let queued = store.enqueue("phone-1", &req("q-1")).unwrap();
        let listed = queued_campaigns(&store).unwrap();
        assert_eq!(listed.iter().map(|q| q.campaign.as_str()).collect::<Vec<_>>(), ["q-1"]);
        assert_eq!(listed[0].devices, "phone-1");
        let here = crate::store::this_host();
        assert!(matches!(cancel(&store, "run-1", &here), Err(CancelError::NotQueued(id)) if id == "run-1"));
        assert!(matches!(cancel(&store, "nope", &here), Err(CancelError::NotQueued(_))));
        assert!(matches!(cancel(&store, "q-1", "another-machine"), Err(CancelError::Elsewhere { .. })));
        drop((running, waits_too, queued));
    }
}
