//! Cancelling a queued campaign from the page. A queued campaign exists only as its rows
//! in the devices' queues (it is written to the store once it has a device), kept by the
//! `lab run` process that waits: cancelling it is that process's Ctrl-C, sent as SIGINT.
//! It then gives up its place in every queue and exits, recording nothing — exactly what
//! Ctrl-C in its terminal does. Only a `lab run` (or `lab rerun`) on this machine is
//! signalled, checked here by pid, start time and command line just before: not a
//! schedule's slot (its process is `lab schedule`, whose Ctrl-C would stop the whole
//! schedule), not another machine's process of a PostgreSQL lab, and not twice (a second
//! Ctrl-C would make it exit at once).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

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
    #[error(
        "campaign {id} is a schedule's slot, waited for by `lab schedule` (pid {pid}): cancelling it would stop the \
schedule; fix: let it wait (it gives up at its slot's deadline), or stop the schedule where it runs"
    )]
    Scheduled { id: String, pid: u32 },
    #[error(
        "campaign {id} was already told to stop (pid {pid}); it leaves the queue as soon as it wakes (a second \
Ctrl-C would make it exit at once)"
    )]
    AlreadyAsked { id: String, pid: u32 },
    #[error(
        "the process waiting for campaign {id} (pid {pid}) cannot be checked here ({why}); fix: stop it with Ctrl-C \
where it runs"
    )]
    Unverified { id: String, pid: u32, why: String },
    #[error("could not signal the process (pid {pid}) waiting for campaign {id}: {why}")]
    Signal { id: String, pid: u32, why: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Processes already told to stop (pid, start time): never twice.
pub type Asked = Mutex<BTreeSet<(u32, u64)>>;

/// What the process with `pid` runs: `Some(true)` a `lab run` / `lab rerun`, `Some(false)`
/// a `lab schedule`, `None` neither (or unreadable).
fn lab_run(pid: u32) -> Option<bool> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<&[u8]> = raw.split(|b| *b == 0).skip(1).collect();
    if args.contains(&&b"schedule"[..]) {
        return Some(false);
    }
    args.iter().any(|a| *a == b"run" || *a == b"rerun").then_some(true)
}

/// Stops the `lab run` waiting for campaign `id` as its Ctrl-C would; `here` is this
/// machine's name as queue rows give it; `asked` the processes already told. Returns
/// what was done, in words.
pub fn cancel(store: &Store, id: &str, here: &str, asked: &Asked) -> Result<String, CancelError> {
    let queued = queued_campaigns(store)?;
    let q = queued.iter().find(|q| q.campaign == id).ok_or_else(|| CancelError::NotQueued(id.to_string()))?;
    let w = &q.waiter;
    if w.host != here {
        return Err(CancelError::Elsewhere { id: id.to_string(), host: w.host.clone(), pid: w.pid });
    }
    let unverified = |why: &str| CancelError::Unverified { id: id.to_string(), pid: w.pid, why: why.into() };
    // The pid must be that process, not another that got the number since (on PostgreSQL
    // the queue's own liveness check is the waiter's advisory lock, not this machine's pid).
    let start = w.start.ok_or_else(|| unverified("its queue row has no process start time"))?;
    if !w.process().alive() {
        return Err(unverified("no process with that pid and start time runs on this machine"));
    }
    match lab_run(w.pid) {
        Some(true) => {}
        Some(false) => return Err(CancelError::Scheduled { id: id.to_string(), pid: w.pid }),
        None => return Err(unverified("it is not a `lab run`")),
    }
    let mut told = asked.lock().unwrap_or_else(|p| p.into_inner());
    if told.contains(&(w.pid, start)) {
        return Err(CancelError::AlreadyAsked { id: id.to_string(), pid: w.pid });
    }
    let pid = i32::try_from(w.pid).map_err(|_| unverified("not a pid"))?;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGINT)
        .map_err(|e| CancelError::Signal { id: id.to_string(), pid: w.pid, why: e.to_string() })?;
    told.insert((w.pid, start));
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
        let asked = Asked::default();
        assert!(matches!(cancel(&store, "run-1", &here, &asked), Err(CancelError::NotQueued(id)) if id == "run-1"));
        assert!(matches!(cancel(&store, "nope", &here, &asked), Err(CancelError::NotQueued(_))));
        assert!(matches!(cancel(&store, "q-1", "another-machine", &asked), Err(CancelError::Elsewhere { .. })));
        // The waiter is this test process: not a `lab run`, so it is not signalled.
        let refused = cancel(&store, "q-1", &here, &asked);
        assert!(
            matches!(&refused, Err(CancelError::Unverified { why, .. }) if why.contains("not a `lab run`")),
            "{refused:?}"
        );
        assert!(asked.lock().unwrap().is_empty());
        drop((running, waits_too, queued));
    }
}
