//! A device's worker: runs that device's trials one after the other.

use std::collections::VecDeque;
use std::sync::Arc;

use super::event::Event;
use super::trial::{
    Attempt, AttemptOutcome, RunError, TrialContext, blocking, now_rfc3339, sleep_or_cancel, wait_for_device,
    write_status,
};
use crate::device::Device;
use crate::store::{BatteryReadingRow, PlannedTrialRow};
use crate::tether::Tether;

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

/// Runs `queue` (trial, next attempt number) on `device`, re-queuing invalid
/// attempts at the end of the queue until `max_attempts` is reached.
pub async fn run_device(
    ctx: Arc<TrialContext>,
    device: Arc<dyn Device>,
    tether: Box<dyn Tether>,
    queue: Vec<(PlannedTrialRow, u32)>,
) -> Result<WorkerEnd, RunError> {
    let mut queue: VecDeque<(PlannedTrialRow, u32)> = queue.into();
    let name = device.name().to_string();
    let mut shutdown = ctx.shutdown.clone();

    if let Err(e) = device.identify().await {
        let waited = e.is_disconnect() && wait_for_device(&ctx, device.as_ref(), None, &e).await.is_ok();
        if !waited {
            let reason = format!("cannot reach the device: {e}");
            set_status(&ctx, &name, "offline").await;
            ctx.events.emit(Event::DeviceOffline { device: name, reason: reason.clone() });
            return Ok(WorkerEnd::Offline(reason));
        }
    }

    record_health(&ctx, device.as_ref()).await;

    let mut first = true;
    let end = loop {
        let Some((trial, attempt)) = queue.pop_front() else { break WorkerEnd::Finished };
        if *shutdown.borrow() {
            break WorkerEnd::Cancelled;
        }
        // Cool-down between trials, on top of the gates inside the attempt.
        if !first
            && !ctx.runbook.cooldown.is_zero()
            && !sleep_or_cancel(&device.clock(), ctx.runbook.cooldown, &mut shutdown).await
        {
            break WorkerEnd::Cancelled;
        }
        first = false;
        let outcome = Attempt { ctx: &ctx, device: device.as_ref(), tether: tether.as_ref(), trial: &trial, attempt }
            .run()
            .await?;
        match outcome {
            AttemptOutcome::Recorded { valid: true } => {}
            AttemptOutcome::Recorded { valid: false } => {
                if attempt + 1 < ctx.max_attempts {
                    queue.push_back((trial, attempt + 1));
                }
            }
            AttemptOutcome::DeviceOffline { reason } => {
                ctx.events.emit(Event::DeviceOffline { device: name.clone(), reason: reason.clone() });
                break WorkerEnd::Offline(reason);
            }
            AttemptOutcome::Cancelled => break WorkerEnd::Cancelled,
        }
    };
    set_status(&ctx, &name, if matches!(end, WorkerEnd::Offline(_)) { "offline" } else { "idle" }).await;
    if end == WorkerEnd::Finished {
        ctx.events.emit(Event::DeviceDone { device: name });
    }
    Ok(end)
}

/// Each campaign run adds a battery reading (health, cycles) per phone where the platform
/// gives them, so `lab status` has a trend even without `lab care`. Informational: a phone
/// that does not answer in time, or a store that fails, does not hold the campaign.
async fn record_health(ctx: &TrialContext, device: &dyn Device) {
    let Ok(Ok(h)) = tokio::time::timeout(HEALTH_READ, device.battery_health()).await else { return };
    let row = BatteryReadingRow {
        device: device.name().into(),
        at: now_rfc3339(),
        battery_pct: None,
        health_pct: h.health_pct,
        cycle_count: h.cycle_count,
        source: if h.source.is_empty() { device.spec().platform().to_string() } else { h.source },
    };
    let store = ctx.store.clone();
    let _ = blocking(move || store.add_battery_reading(&row)).await;
}

/// How long reading a phone's battery health may take at the start of a campaign.
const HEALTH_READ: std::time::Duration = std::time::Duration::from_secs(30);

async fn set_status(ctx: &TrialContext, device: &str, state: &str) {
    // Status is informational; a failure to write it must not end the campaign.
    let _ = write_status(ctx, device, state, None, None).await;
}
