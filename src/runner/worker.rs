//! A device's worker: runs that device's trials one after the other.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use super::event::Event;
use super::monitored::open_monitor;
use super::status_board::When;
use super::trial::{
    Attempt, AttemptOutcome, Recording, RunError, TrialContext, blocking, now_rfc3339, sleep_or_cancel,
    wait_for_device, write_status,
};
use super::turns::Turn;
use crate::device::Device;
use crate::monitor::SharedMonitor;
use crate::plan::Plan;
use crate::store::{BatteryReadingRow, PlannedTrialRow, PortCut};
use crate::tether::Tether;

/// The planned trials, found by index: the plan's own rows (no copy per round or per
/// queue), plus any the store has and the plan does not.
pub struct TrialRows {
    plan: Arc<Plan>,
    /// Index → position in `plan.trials`, when they differ (built plans number trials
    /// by position).
    positions: Option<HashMap<u32, usize>>,
    extra: BTreeMap<u32, PlannedTrialRow>,
}

impl TrialRows {
    pub fn new(plan: Arc<Plan>) -> TrialRows {
        let aligned = plan.trials.iter().enumerate().all(|(i, t)| t.idx as usize == i);
        let positions = (!aligned).then(|| plan.trials.iter().enumerate().map(|(i, t)| (t.idx, i)).collect());
        TrialRows { plan, positions, extra: BTreeMap::new() }
    }

    pub fn get(&self, idx: u32) -> Option<&PlannedTrialRow> {
        let pos = match &self.positions {
            None => Some(idx as usize),
            Some(p) => p.get(&idx).copied(),
        };
        pos.and_then(|i| self.plan.trials.get(i)).or_else(|| self.extra.get(&idx))
    }

    /// Adds a row the plan lacks.
    pub fn add(&mut self, row: PlannedTrialRow) {
        self.extra.insert(row.idx, row);
    }
}

/// How a worker ended.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerEnd {
    /// Every queued trial has an outcome.
    Finished,
    /// The device went away; its remaining trials stay pending.
    Offline(String),
    /// Ctrl-C.
    Cancelled,
}

/// Runs `queue` (trial index in `rows`, next attempt number) on `device`, re-queuing
/// invalid attempts at the end of the queue until `max_attempts` is reached.
pub async fn run_device(
    ctx: Arc<TrialContext>,
    device: Arc<dyn Device>,
    tether: Box<dyn Tether>,
    turn: Arc<tokio::sync::Mutex<Turn>>,
    rows: Arc<TrialRows>,
    queue: Vec<(u32, u32)>,
) -> Result<WorkerEnd, RunError> {
    // The device's last record, still committing while its next attempt runs (or while
    // the next holder of the device begins): waited for before the worker ends.
    let mut left = Leftover::default();
    let name = device.name().to_string();
    let end = run_held(ctx.clone(), device, tether, turn.clone(), rows, queue, &mut left).await;
    // Taken while the device is still held: the next holder's rows are newer, and the store
    // keeps the newest (`set_device_statuses`).
    let at = now_rfc3339();
    // Done with the device, however the worker ended: the next in its queue may have it (a
    // worker holds one device only while it works on it, so two campaigns that want each
    // other's devices both finish).
    // Off the async threads: letting go writes to the store (`DeviceLease`'s drop), which
    // on a busy server held up every device task of the process behind it.
    let held = std::mem::replace(&mut *turn.lock().await, Turn::Released);
    let _ = tokio::task::spawn_blocking(move || drop(held)).await;
    // Its last word in `lab status`, after the next holder could begin. Informational: a
    // failure to write it must not end the campaign.
    if let Some(state) = left.status {
        let _ = ctx.status.set(super::trial::status_row(&ctx, &name, state, None, None, at), When::Now).await;
    }
    let committed = match left.recording {
        Some(r) => r.committed().await,
        None => Ok(()),
    };
    let end = end?;
    committed?;
    // After its last `AttemptRecorded`.
    if end == WorkerEnd::Finished {
        ctx.events.emit(Event::DeviceDone { device: name });
    }
    Ok(end)
}

/// Resolves when the agent running this part drains; never elsewhere.
async fn drained(ctx: &TrialContext) {
    if let Some(mut d) = ctx.drain.clone()
        && d.wait_for(|draining| *draining).await.is_ok()
    {
        return;
    }
    std::future::pending::<()>().await
}

/// What a worker leaves for after its device is let go.
#[derive(Default)]
struct Leftover {
    /// The device's last record, still on its way to the store.
    recording: Option<Recording>,
    /// The state `lab status` shows once the worker is done with the device.
    status: Option<&'static str>,
}

/// [`run_device`] once its lease is taken (or waited for here).
async fn run_held(
    ctx: Arc<TrialContext>,
    device: Arc<dyn Device>,
    tether: Box<dyn Tether>,
    turn: Arc<tokio::sync::Mutex<Turn>>,
    rows: Arc<TrialRows>,
    queue: Vec<(u32, u32)>,
    left: &mut Leftover,
) -> Result<WorkerEnd, RunError> {
    let queue: VecDeque<(u32, u32)> = queue.into();
    let name = device.name().to_string();
    let mut shutdown = ctx.shutdown.clone();

    // Nothing touches the device before its lease is the campaign's.
    let (lease_lost, cut) = {
        let mut slot = turn.lock().await;
        if let Turn::Released = *slot {
            // A later round: the device was given back when its last worker was done.
            *slot = super::turns::join(&ctx.store, &name, ctx.lease_request.clone(), &ctx.events).await?;
        }
        if let Turn::Waiting(w) = &mut *slot {
            let since = std::time::Instant::now();
            // An agent that drains takes no device it waits for (its place is left when the
            // turn is let go).
            let got = tokio::select! {
                got = w.taken(&mut shutdown) => got?,
                _ = drained(&ctx) => None,
            };
            match got {
                Some(lease) => {
                    ctx.events
                        .emit(Event::DeviceAcquired { device: name.clone(), waited_s: since.elapsed().as_secs_f64() });
                    *slot = Turn::Held(lease);
                }
                None => return Ok(WorkerEnd::Cancelled),
            }
        }
        match &*slot {
            Turn::Held(lease) => (lease.lost(), lease.port_cut()),
            _ => (None, None),
        }
    };
    // A waiting part's campaign starts with its first device: none begins before, and
    // none once the agent drains (the campaign stays queued for another).
    if let Some(gate) = &ctx.gate
        && (ctx.drain.as_ref().is_some_and(|d| *d.borrow()) || !gate.open().await?)
    {
        return Ok(WorkerEnd::Cancelled);
    }
    // The attempts stop on the campaign's shutdown, and on the lease lost: then another
    // holder may have the device. Both wake this only when they happen.
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let lost_flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (mut shutdown, lost_flag) = (shutdown.clone(), lost_flag.clone());
        tokio::spawn(async move {
            let lost = async {
                let said = match lease_lost {
                    Some(mut l) => l.wait_for(|lost| *lost).await.is_ok(),
                    None => false,
                };
                // A sender gone without saying lost: the lease was given back.
                if !said {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                _ = super::trial::stopped(&mut shutdown) => {}
                _ = lost => lost_flag.store(true, std::sync::atomic::Ordering::SeqCst),
            }
            let _ = stop_tx.send(true);
        })
    };
    let end = run_leased(&ctx, &device, tether.as_ref(), &rows, queue, stop, &lost_flag, cut, left).await;
    watcher.abort();
    end
}

/// The lease lost, as the worker says it.
const LEASE_LOST: &str = "its lease in the store was lost (the database session that held it ended), so \
     another campaign may have the device now; its remaining trials stay pending: `lab run --resume` runs them";

/// [`run_held`] with the lease held: `stop` turns `true` on shutdown or when the lease
/// is lost (`lost` says which).
#[expect(clippy::too_many_arguments, reason = "the worker's parts, and the slot of the record on its way")]
async fn run_leased(
    ctx: &Arc<TrialContext>,
    device: &Arc<dyn Device>,
    tether: &dyn Tether,
    rows: &TrialRows,
    queue: VecDeque<(u32, u32)>,
    stop: tokio::sync::watch::Receiver<bool>,
    lost: &std::sync::atomic::AtomicBool,
    cut: Option<Option<PortCut>>,
    left: &mut Leftover,
) -> Result<WorkerEnd, RunError> {
    let name = device.name().to_string();
    let stopped = |name: &str| {
        if lost.load(std::sync::atomic::Ordering::SeqCst) {
            ctx.events.emit(Event::DeviceOffline { device: name.to_string(), reason: LEASE_LOST.into() });
            WorkerEnd::Offline(LEASE_LOST.into())
        } else {
            WorkerEnd::Cancelled
        }
    };

    // A port `lab care` left off is switched on before anything else (read with the lease
    // when it was taken from the queue).
    let cut = match cut {
        Some(cut) => cut,
        None => {
            let (store, dev) = (ctx.store.clone(), name.clone());
            blocking(move || store.port_cut(&dev)).await?
        }
    };
    if let Some(cut) = cut {
        match tokio::time::timeout(ctx.runbook.timeouts.tether, tether.retether(device.as_ref())).await {
            Ok(Ok(())) => {
                let (store, dev) = (ctx.store.clone(), name.clone());
                blocking(move || store.clear_port_cut(&dev)).await?;
                ctx.events.emit(Event::PortRestored { device: name.clone(), port: cut.port });
            }
            failed => {
                let why = match failed {
                    Ok(Err(e)) => e.to_string(),
                    _ => format!("did not finish within {:?}", ctx.runbook.timeouts.tether),
                };
                let reason = format!("`lab care` left port {} off and switching it on failed: {why}", cut.port);
                return Ok(offline(ctx, name, reason).await);
            }
        }
    }

    let identified = device.identify().await;
    if let Ok(id) = &identified {
        ctx.identities.lock().unwrap_or_else(|p| p.into_inner()).insert(name.clone(), id.clone());
        ctx.events.emit(Event::DeviceIdentified {
            device: name.clone(),
            model: id.model.clone(),
            os: id.os.clone(),
            serial: id.serial.clone(),
        });
    }
    if let Err(e) = identified {
        let waited = e.is_disconnect() && wait_for_device(ctx, device.as_ref(), None, &e).await.is_ok();
        if !waited {
            return Ok(offline(ctx, name, format!("cannot reach the device: {e}")).await);
        }
    }

    let health = record_health(ctx, device.as_ref()).await;

    // Its power monitor, before any trial: one that cannot be opened keeps its trials pending.
    let monitor = match ctx.monitors.get(&name) {
        None => None,
        Some(place) => match open_monitor(place, device.as_ref(), MONITOR_CALL).await {
            Ok(m) => {
                ctx.instruments.lock().unwrap_or_else(|p| p.into_inner()).insert(name.clone(), m.identity());
                ctx.events.emit(Event::MonitorOpened { device: name.clone(), monitor: m.label() });
                *place.slot.lock().await = Some(m);
                Some(place.slot.clone())
            }
            Err(e) => {
                return Ok(offline(ctx, name, format!("cannot open its power monitor: {e}")).await);
            }
        },
    };
    let end = run_queue(ctx, device, tether, monitor.as_ref(), rows, queue, &stop, stopped, &mut left.recording).await;
    if let Some(h) = health {
        let _ = h.await;
    }
    // Closed however the trials ended (done, Ctrl-C, an error): its licence goes back.
    let opened = match monitor {
        Some(slot) => slot.lock().await.take(),
        None => None,
    };
    if let Some(m) = opened {
        let label = m.label();
        let detail = match tokio::time::timeout(MONITOR_CALL, m.close()).await {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some(format!("closing it did not finish within {} s", MONITOR_CALL.as_secs())),
        };
        if let Some(detail) = detail {
            ctx.events.emit(Event::MonitorNotClosed { device: name.clone(), monitor: label, detail });
        }
    }
    let end = end?;
    left.status = Some(if matches!(end, WorkerEnd::Offline(_)) { "offline" } else { "idle" });
    Ok(end)
}

/// How long opening or closing a power monitor may take.
const MONITOR_CALL: std::time::Duration = std::time::Duration::from_secs(30);

/// The device's queue of attempts, one after the other: on an agent, each begins as soon as
/// the one before is sent to the store (its record left in `recording`).
#[expect(clippy::too_many_arguments, reason = "the worker's parts, each borrowed from it for the loop")]
async fn run_queue(
    ctx: &Arc<TrialContext>,
    device: &Arc<dyn Device>,
    tether: &dyn Tether,
    monitor: Option<&SharedMonitor>,
    rows: &TrialRows,
    mut queue: VecDeque<(u32, u32)>,
    stop: &tokio::sync::watch::Receiver<bool>,
    stopped: impl Fn(&str) -> WorkerEnd,
    recording: &mut Option<Recording>,
) -> Result<WorkerEnd, RunError> {
    let name = device.name().to_string();
    let mut shutdown = stop.clone();
    let mut first = true;
    let end = loop {
        let Some((idx, attempt)) = queue.pop_front() else { break WorkerEnd::Finished };
        let trial = rows.get(idx).ok_or_else(|| RunError::Internal(format!("trial {idx} is not planned")))?;
        if *shutdown.borrow() {
            break stopped(&name);
        }
        // An agent that drains starts nothing new; its device's other trials stay pending.
        if ctx.drain.as_ref().is_some_and(|d| *d.borrow()) {
            break WorkerEnd::Cancelled;
        }
        // Cool-down between trials, on top of the gates inside the attempt.
        if !first
            && !ctx.runbook.cooldown.is_zero()
            && !sleep_or_cancel(&device.clock(), ctx.runbook.cooldown, &mut shutdown).await
        {
            break stopped(&name);
        }
        first = false;
        let outcome = Attempt { ctx, device: device.as_ref(), tether, monitor, trial, attempt, stop: stop.clone() }
            .run_pipelined(recording)
            .await?;
        // Only an agent's device goes on before the commit: its attempt is in
        // `attempts_in_flight` until then (recorded interrupted if the agent dies), and its
        // store is a server's round trips away. `lab run` keeps each attempt's events
        // (`attempt_recorded`) before the next attempt's, as its event stream always had them.
        if ctx.agent_host.is_none()
            && let Some(r) = recording.take()
        {
            r.committed().await?;
        }
        match outcome {
            AttemptOutcome::Recorded { valid: true } => {}
            AttemptOutcome::Recorded { valid: false } => {
                if attempt + 1 < ctx.max_attempts {
                    queue.push_back((idx, attempt + 1));
                }
            }
            AttemptOutcome::DeviceOffline { reason } => {
                ctx.events.emit(Event::DeviceOffline { device: name.clone(), reason: reason.clone() });
                break WorkerEnd::Offline(reason);
            }
            AttemptOutcome::Cancelled => break stopped(&name),
        }
    };
    Ok(end)
}

/// Each campaign run adds a battery reading (health, cycles) per phone where the platform
/// gives them, so `lab status` has a trend even without `lab care`. Informational: a phone
/// that does not answer in time, or a store that fails, does not hold the campaign; the
/// reading goes to the store while the trials begin (the returned task, joined by the worker).
async fn record_health(ctx: &TrialContext, device: &dyn Device) -> Option<tokio::task::JoinHandle<()>> {
    let Ok(Ok(h)) = tokio::time::timeout(HEALTH_READ, device.battery_health()).await else { return None };
    let row = BatteryReadingRow {
        device: device.name().into(),
        at: now_rfc3339(),
        battery_pct: None,
        health_pct: h.health_pct,
        cycle_count: h.cycle_count,
        source: if h.source.is_empty() { device.spec().platform().to_string() } else { h.source },
    };
    let store = ctx.store.clone();
    Some(tokio::spawn(async move {
        let _ = blocking(move || store.add_battery_reading(&row)).await;
    }))
}

/// How long reading a phone's battery health may take at the start of a campaign.
const HEALTH_READ: std::time::Duration = std::time::Duration::from_secs(30);

/// The device is given up for this run before its trials: its status says so and the
/// event says why.
async fn offline(ctx: &TrialContext, name: String, reason: String) -> WorkerEnd {
    set_status(ctx, &name, "offline").await;
    ctx.events.emit(Event::DeviceOffline { device: name, reason: reason.clone() });
    WorkerEnd::Offline(reason)
}

/// A worker's first and last word in `lab status`: in the store before it goes on.
async fn set_status(ctx: &TrialContext, device: &str, state: &str) {
    // Status is informational; a failure to write it must not end the campaign.
    let _ = write_status(ctx, device, state, None, None, When::Now).await;
}
