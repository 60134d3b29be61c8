//! `lab agent` (docs/agents.md): serves one lab host's devices. It takes the submitted
//! campaigns that have trials on them, in priority order, and runs each one's part with
//! [`launch`] (`Start::Part`): the same leases, preconditions, tethers, monitors,
//! validity and retries as `lab run`. Between changes it sleeps on the store's work
//! channel (`LISTEN` or inotify): no timer, no polling.
//!
//! Liveness is its lock (`Store::take_agent_lock`): one agent per host, gone with its
//! process or database session. An attempt it begins is a row until recorded; at each look
//! it records the rows no running part owns (a killed agent's, or its own stopped ones) as
//! interrupted, invalid attempts, so no attempt is silently dropped.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::event::{Event, EventSink};
use super::launch::{AgentPart, LaunchError, LaunchFailure, Launched, Queueing, Start, launch};
use super::trial::{call, now_rfc3339};
use super::turns::StartWhen;
use crate::config::Lab;
use crate::store::{
    AgentLock, AgentRow, AttemptRecord, AttemptStatus, Channel, InFlight, OpenError, PLAN_FORMAT, Store, StoreError,
    Wake,
};

/// Why an agent could not serve.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("{lab}: no [[host]] named `{host}`; fix: `lab agent --host NAME` with a host of the lab file ({known})")]
    UnknownHost { lab: String, host: String, known: String },
    #[error("{lab}: no [[device]] has host = \"{host}\"; fix: give the host's devices `host = \"{host}\"`")]
    NoDevices { lab: String, host: String },
    #[error(
        "an agent already serves host {host}: pid {pid} on {machine} since {since}; fix: `lab agent drain {host}` \
and wait for it to exit, or serve another host"
    )]
    AlreadyServed { host: String, pid: u32, machine: String, since: String },
    #[error(transparent)]
    OpenStore(#[from] OpenError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The longest pause before looking again after the store failed.
const RETRY_MAX: Duration = Duration::from_secs(10);

/// The least time between two wake-ups of `lab wait` from one campaign's part. Each
/// `NOTIFY` wakes every listening session of the database in the server (PostgreSQL
/// signals them all, whatever they listen to): with one a trial, those sessions took 15 %
/// of the server's CPU in the agents bench (docs/benchmarks.md).
const TELL_EVERY: Duration = Duration::from_secs(1);

/// A campaign's part running in this agent.
struct Running {
    devices: Vec<String>,
    stop: watch::Sender<bool>,
}

/// Serves `host`'s devices until `stop` (SIGTERM) or `lab agent drain` makes it drain:
/// the trials in progress finish, nothing new is taken, and it returns.
pub async fn serve(
    lab: Lab,
    host: String,
    events: EventSink,
    mut stop: watch::Receiver<bool>,
) -> Result<(), AgentError> {
    let shown = lab.source.display().to_string();
    if !lab.hosts.iter().any(|h| h.name == host) {
        let known = lab.hosts.iter().map(|h| h.name.as_str()).collect::<Vec<_>>().join(", ");
        return Err(AgentError::UnknownHost { lab: shown, host, known });
    }
    let devices: Vec<String> = lab.devices.iter().filter(|d| d.host == host).map(|d| d.name.clone()).collect();
    if devices.is_empty() {
        return Err(AgentError::NoDevices { lab: shown, host });
    }
    let store = Store::open_at(&lab.store)?;
    let (s, h) = (store.clone(), host.clone());
    let mut lock = match call(move || s.take_agent_lock(&h)).await? {
        Some(l) => l,
        None => return Err(already_served(&store, &host)),
    };
    let row = AgentRow {
        host: host.clone(),
        machine: crate::store::this_host(),
        pid: std::process::id(),
        start: None,
        version: env!("CARGO_PKG_VERSION").into(),
        plan_format: PLAN_FORMAT,
        devices: devices.clone(),
        since: now_rfc3339(),
        state: "serving".into(),
        refused: String::new(),
    };
    let (s, r) = (store.clone(), row.clone());
    call(move || s.register_agent(&r)).await?;
    // Listening before the first look: nothing submitted after it is missed.
    let s = store.clone();
    let mut wakes = call(move || s.listen(Channel::Work)).await?;
    let say = |campaign: Option<&str>, note: String| {
        events.emit(Event::Agent { host: host.clone(), campaign: campaign.map(String::from), note })
    };
    say(None, format!("serving {} for {}", devices.join(", "), crate::store::shown_location(&lab.store)));

    let (drain_tx, drain_rx) = watch::channel(false);
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(String, Result<Launched, LaunchError>)>();
    let mut running: BTreeMap<String, Running> = BTreeMap::new();
    let mut refused: BTreeMap<String, String> = BTreeMap::new();
    let mut draining = false;
    let mut retry = Duration::from_millis(200);
    let mut lock_lost = lock.lost();
    loop {
        let looked = look(&store, &host, &devices, &running, &mut refused, draining).await;
        // The store could not be read: look again after a pause (the only timer an agent
        // sets, and only while its store is down).
        let failed = looked.is_err();
        match looked {
            Ok(look) => {
                retry = Duration::from_millis(200);
                if look.drain_asked && !draining {
                    draining = true;
                    let _ = drain_tx.send(true);
                    say(None, "draining: the trials in progress finish, nothing new is taken".into());
                }
                for id in look.cancelled {
                    if let Some(r) = running.get(&id) {
                        let _ = r.stop.send(true);
                        say(Some(&id), "cancelled: stopping its trials now".into());
                    }
                }
                for (id, why) in look.refused {
                    say(Some(&id), format!("refused: {why}"));
                }
                for (id, part_devices, priority) in look.start {
                    say(Some(&id), format!("taking its trials on {}", part_devices.join(", ")));
                    let (stop_tx, stop_rx) = watch::channel(false);
                    running.insert(id.clone(), Running { devices: part_devices.clone(), stop: stop_tx });
                    let part = AgentPart { host: host.clone(), devices: part_devices, drain: drain_rx.clone() };
                    let (lab, store, done, agent_events) =
                        (lab.clone(), store.clone(), done_tx.clone(), events.clone());
                    tokio::spawn(async move {
                        let result = run_part(lab, store, id.clone(), part, priority, agent_events, stop_rx).await;
                        let _ = done.send((id, result));
                    });
                }
            }
            Err(e) => {
                say(None, format!("cannot read the store ({e}); looking again in {} s", retry.as_secs_f64()));
            }
        }
        if draining && running.is_empty() {
            break;
        }
        tokio::select! {
            w = wakes.next() => {
                wakes.drain();
                if w.is_none() {
                    // The listener is gone for good: listen again, or wait a while to.
                    let s = store.clone();
                    match call(move || s.listen(Channel::Work)).await {
                        Ok(again) => wakes = again,
                        Err(e) => {
                            say(None, format!("cannot listen to the store ({e}); looking again in {} s", retry.as_secs_f64()));
                            tokio::time::sleep(retry).await;
                            retry = (retry * 2).min(RETRY_MAX);
                        }
                    }
                }
                if w == Some(Wake::Lost) {
                    say(None, "the store's connection was lost; waiting for it".into());
                }
            }
            Some((id, result)) = done_rx.recv() => {
                let id: String = id;
                running.remove(&id);
                say(Some(&id), part_ended(&result));
                if let Err(e) = &result && e.failure() == LaunchFailure::BadInput {
                    refused.insert(id.clone(), e.to_string());
                    let (s, h, text) = (store.clone(), host.clone(), refusals(&refused));
                    let _ = call(move || s.set_agent_refused(&h, &text)).await;
                }
            }
            _ = stop.changed(), if !draining => {
                draining = true;
                let _ = drain_tx.send(true);
                let (s, h) = (store.clone(), host.clone());
                let _ = call(move || s.set_agent_state(&h, "draining")).await;
                say(None, "draining: the trials in progress finish, nothing new is taken".into());
            }
            _ = lost(&mut lock_lost) => {
                say(None, "its lock in the store was lost (the database session ended); taking it again".into());
                lock = retake(&store, &host, &row).await;
                lock_lost = lock.lost();
            }
            _ = tokio::time::sleep(retry), if failed => {
                retry = (retry * 2).min(RETRY_MAX);
            }
        }
    }
    let (s, h) = (store.clone(), host.clone());
    let _ = call(move || s.set_agent_state(&h, "stopped")).await;
    say(None, "drained; stopped".into());
    drop(lock);
    Ok(())
}

/// Waits until the lock is said lost (never, where it cannot be).
async fn lost(l: &mut Option<watch::Receiver<bool>>) {
    match l {
        Some(rx) => {
            if rx.wait_for(|lost| *lost).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending::<()>().await,
    }
}

/// Takes the agent's lock again after its session ended, and its row with it.
async fn retake(store: &Store, host: &str, row: &AgentRow) -> AgentLock {
    let mut pause = Duration::from_millis(200);
    loop {
        let (s, h, r) = (store.clone(), host.to_string(), row.clone());
        let got = call(move || {
            let lock = s.take_agent_lock(&h)?;
            if lock.is_some() {
                s.register_agent(&r)?;
            }
            Ok::<_, StoreError>(lock)
        })
        .await;
        if let Ok(Some(lock)) = got {
            return lock;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RETRY_MAX);
    }
}

/// What one look at the store found to do.
#[derive(Default)]
struct Look {
    /// Campaign, this agent's devices with its trials, priority: parts to start.
    start: Vec<(String, Vec<String>, i32)>,
    cancelled: Vec<String>,
    refused: Vec<(String, String)>,
    drain_asked: bool,
}

/// Reads what changed: attempts left in flight (recorded interrupted), drain asked for,
/// cancelled parts, new work.
async fn look(
    store: &Store,
    host: &str,
    devices: &[String],
    running: &BTreeMap<String, Running>,
    refused: &mut BTreeMap<String, String>,
    draining: bool,
) -> Result<Look, StoreError> {
    let busy: BTreeSet<String> = running.values().flat_map(|r| r.devices.iter().cloned()).collect();
    let idle: Vec<String> = devices.iter().filter(|d| !busy.contains(*d)).cloned().collect();
    let (s, h) = (store.clone(), host.to_string());
    let ids: Vec<String> = running.keys().cloned().collect();
    let known: Vec<String> = ids.iter().chain(refused.keys()).cloned().collect();
    let devs = devices.to_vec();
    let (row, cancelled, claimable) = call(move || {
        for d in &idle {
            recover(&s, &h, d)?;
        }
        let row = s.agent_row(&h)?;
        let cancelled = s.cancel_requested(&ids)?;
        let claimable = s.claimable(&devs, &known)?;
        Ok::<_, StoreError>((row, cancelled, claimable))
    })
    .await?;
    let mut out = Look { drain_asked: row.is_some_and(|r| r.state == "draining"), cancelled, ..Default::default() };
    if draining || out.drain_asked {
        return Ok(out);
    }
    let mut changed = false;
    for c in claimable {
        if running.contains_key(&c.campaign) || refused.contains_key(&c.campaign) {
            continue;
        }
        if c.plan_format > PLAN_FORMAT {
            let why = format!(
                "its plan is format {}, this agent (lab {}) runs format {PLAN_FORMAT} and older; fix: upgrade this \
agent (drain, replace, start)",
                c.plan_format,
                env!("CARGO_PKG_VERSION")
            );
            refused.insert(c.campaign.clone(), why.clone());
            out.refused.push((c.campaign, why));
            changed = true;
            continue;
        }
        out.start.push((c.campaign, c.devices, c.priority));
    }
    if changed {
        let (s, h, text) = (store.clone(), host.to_string(), refusals(refused));
        call(move || s.set_agent_refused(&h, &text)).await?;
    }
    Ok(out)
}

/// The refusals as the agent's row keeps them: one line each.
fn refusals(refused: &BTreeMap<String, String>) -> String {
    refused.iter().map(|(c, why)| format!("{c}: {why}")).collect::<Vec<_>>().join("\n")
}

/// Records the attempts begun on `device` and never recorded as invalid, interrupted ones
/// (the device is idle in this agent: nothing runs them). Their trials stay pending and
/// run again.
fn recover(store: &Store, host: &str, device: &str) -> Result<(), StoreError> {
    for (f, recorded) in store.in_flight_on(device)? {
        if !recorded {
            let reason = if f.pid == std::process::id() {
                format!(
                    "interrupted: the attempt was stopped before its end (the campaign cancelled, or the device's \
lease in the store lost), by the agent on {host}"
                )
            } else {
                format!(
                    "interrupted: agent lost: the agent on {} (pid {}) ended during this attempt (killed, or its \
machine or database connection went away)",
                    f.host, f.pid
                )
            };
            store.record_attempt(interrupted(&f, reason.clone()))?;
            let event = serde_json::to_string(&Event::AttemptRecorded {
                device: f.device.clone(),
                trial: trial_key(&f.artifact_dir),
                attempt: f.attempt,
                valid: false,
                reasons: vec![reason],
                will_retry: true,
                device_offline: false,
            })?;
            store.append_events(&f.campaign, &now_rfc3339(), &[event])?;
        }
        store.end_attempt(&f.campaign, f.trial_idx, f.attempt)?;
    }
    Ok(())
}

/// The trial's key from its attempt folder (`<campaign>/<key>.attempt-<n>`).
fn trial_key(dir: &str) -> String {
    let name = dir.rsplit('/').next().unwrap_or(dir);
    name.rsplit_once(".attempt-").map(|(k, _)| k).unwrap_or(name).to_string()
}

/// An attempt in flight as recorded when it was lost: invalid, with why.
fn interrupted(f: &InFlight, reason: String) -> AttemptRecord {
    AttemptRecord {
        campaign: f.campaign.clone(),
        trial_idx: f.trial_idx,
        attempt: f.attempt,
        device: f.device.clone(),
        status: AttemptStatus::Invalid,
        reasons: vec![reason],
        phases: Vec::new(),
        started_at: f.started_at.clone(),
        ended_at: now_rfc3339(),
        soak_start_s: 0.0,
        artifact_dir: f.artifact_dir.clone(),
        measurements: Vec::new(),
        series: Vec::new(),
        state_before: serde_json::Value::Null,
        state_after: serde_json::Value::Null,
        state_soak: serde_json::Value::Null,
        labels: Vec::new(),
        untether: None,
        attestations: Vec::new(),
    }
}

/// Runs one campaign's part; its events go to the campaign's stream in the store (for
/// `lab wait`) and to the agent's own log.
async fn run_part(
    lab: Lab,
    store: Store,
    id: String,
    part: AgentPart,
    priority: i32,
    agent_events: EventSink,
    stop: watch::Receiver<bool>,
) -> Result<Launched, LaunchError> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Event>();
    let forward = {
        let (store, id) = (store.clone(), id.clone());
        tokio::spawn(async move {
            // A burst (a trial's phases) is one statement; `lab wait` is woken at most once
            // every `TELL_EVERY` (a burst within it is told with the next, or at its end).
            let mut told: Option<tokio::time::Instant> = None;
            let mut owed = false;
            loop {
                let next = match told.filter(|_| owed) {
                    Some(at) => tokio::select! {
                        e = rx.recv() => e,
                        () = tokio::time::sleep_until(at + TELL_EVERY) => {
                            let (s, id) = (store.clone(), id.clone());
                            let _ = call(move || s.notify_about(Channel::Events, &id)).await;
                            (told, owed) = (Some(tokio::time::Instant::now()), false);
                            continue;
                        }
                    },
                    None => rx.recv().await,
                };
                let Some(first) = next else { break };
                let mut batch = vec![first];
                while let Ok(e) = rx.try_recv() {
                    batch.push(e);
                }
                let lines: Vec<String> = batch.iter().filter_map(|e| serde_json::to_string(e).ok()).collect();
                for e in batch {
                    agent_events.emit(e);
                }
                let tell = told.is_none_or(|at| at.elapsed() >= TELL_EVERY);
                let (s, id) = (store.clone(), id.clone());
                let _ = call(move || {
                    let at = now_rfc3339();
                    if tell { s.append_events_told(&id, &at, &lines) } else { s.append_events(&id, &at, &lines) }
                })
                .await;
                if tell {
                    told = Some(tokio::time::Instant::now());
                }
                owed = !tell;
            }
        })
    };
    let queueing = Queueing { priority, start: StartWhen::AnyFree };
    let result = launch(lab, Start::Part { id: id.clone(), part }, queueing, EventSink::new(tx), stop).await;
    let _ = forward.await;
    // `lab wait` looks again: the campaign may have ended.
    let s = store.clone();
    let _ = call(move || s.notify_about(Channel::Events, &id)).await;
    result
}

/// The agent's line for a part that ended.
fn part_ended(result: &Result<Launched, LaunchError>) -> String {
    match result {
        Ok(l) if l.summary.status == crate::store::CampaignStatus::Done => {
            format!("campaign done ({} valid, {} failed); report files written", l.summary.valid, l.summary.failed)
        }
        Ok(l) => format!("its part here ended; {} trials pending in the campaign", l.summary.pending),
        Err(e) => format!("its part failed: {e}"),
    }
}

fn already_served(store: &Store, host: &str) -> AgentError {
    match store.agent_row(host) {
        Ok(Some(r)) => AgentError::AlreadyServed { host: host.into(), pid: r.pid, machine: r.machine, since: r.since },
        _ => AgentError::AlreadyServed {
            host: host.into(),
            pid: 0,
            machine: "another machine".into(),
            since: "now".into(),
        },
    }
}
