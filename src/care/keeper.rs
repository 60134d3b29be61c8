//! `Keeper`: the care loop. Each pass reads every target phone's level, records it with
//! its battery health, and switches its port by the charge window; between passes it
//! sleeps, on its clock, until the first phone is due. When it stops it switches on every
//! port it cut: no phone is left without USB power.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::{mpsc, watch};

use super::care_error::CareError;
use super::event::CareEvent;
use super::policy::{Action, ChargeWindow};
use super::targets::CareTarget;
use crate::clock::Clock;
use crate::config::CareSettings;
use crate::device::DeviceError;
use crate::store::{BatteryReadingRow, DeviceLease, LeaseRequest, Store};

/// Bound of one device call (a state read, a port switch).
const CALL: Duration = Duration::from_secs(60);
/// How long a phone reachable only over USB gets to show up after its port is switched
/// on for a reading.
const RECONNECT: Duration = Duration::from_secs(120);

/// What care knows of one phone between passes.
struct Tracked {
    target: CareTarget,
    /// Whether its port has power, as far as care knows (it starts powered: a hub
    /// powers its ports by default).
    powered: bool,
    /// Care switched the port off and has not switched it on since.
    cut: bool,
    /// (time, level) of the first reading since the port last changed: the rate the
    /// next check is predicted from.
    since: Option<(Duration, f64)>,
    last_level: Option<f64>,
}

/// What a care run did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CareSummary {
    pub passes: u32,
    /// Ports switched off at the upper limit, and on at the lower one (not counting the
    /// ports given back when care stops).
    pub cuts: u32,
    pub restores: u32,
    /// Each target's last level read.
    pub levels: Vec<(String, Option<f64>)>,
    /// Ports care cut and could not switch on again at the end.
    pub not_restored: Vec<String>,
    /// Time on care's clock from start to stop.
    pub elapsed: Duration,
}

pub struct Keeper {
    window: ChargeWindow,
    interval: Duration,
    clock: Clock,
    /// Care's clock at its start, and the wall time then: readings are stamped with
    /// the wall time plus the time on care's clock since (virtual for simulated phones).
    start: Duration,
    wall_start: DateTime<Utc>,
    store: Option<Store>,
    events: mpsc::UnboundedSender<CareEvent>,
    targets: Vec<Tracked>,
    summary: CareSummary,
}

impl Keeper {
    pub fn new(
        settings: &CareSettings,
        clock: Clock,
        store: Option<Store>,
        events: mpsc::UnboundedSender<CareEvent>,
        targets: Vec<CareTarget>,
    ) -> Self {
        let targets = targets
            .into_iter()
            .map(|target| Tracked { target, powered: true, cut: false, since: None, last_level: None })
            .collect();
        Keeper {
            window: ChargeWindow::of(settings),
            interval: settings.interval,
            start: clock.now(),
            clock,
            wall_start: Utc::now(),
            store,
            events,
            targets,
            summary: CareSummary::default(),
        }
    }

    fn elapsed(&self) -> Duration {
        self.clock.now().saturating_sub(self.start)
    }

    fn emit(&self, e: CareEvent) {
        let _ = self.events.send(e);
    }

    /// Passes until `shutdown` turns true, or (`limit`) that much time on care's clock
    /// has gone by; one pass when `once`. Then every port care cut is switched on again.
    pub async fn run(
        mut self,
        mut shutdown: watch::Receiver<bool>,
        once: bool,
        limit: Option<Duration>,
    ) -> CareSummary {
        loop {
            if *shutdown.borrow() {
                break;
            }
            let next = self.pass().await;
            if once {
                break;
            }
            let wait = match limit {
                Some(l) => next.min(l.saturating_sub(self.elapsed())),
                None => next,
            };
            if wait.is_zero() {
                break;
            }
            tokio::select! {
                _ = self.clock.sleep(wait) => {}
                _ = shutdown.changed() => break,
            }
        }
        self.finish().await
    }

    /// One look at every phone; returns how long until the first is due again.
    pub async fn pass(&mut self) -> Duration {
        self.summary.passes += 1;
        let mut next = self.interval;
        for i in 0..self.targets.len() {
            if let Some(wait) = self.care_for(i).await {
                next = next.min(wait);
            }
        }
        next
    }

    /// Reads, records and switches target `i`; `None` when it was left alone.
    async fn care_for(&mut self, i: usize) -> Option<Duration> {
        let at = self.elapsed();
        let name = self.targets[i].target.device.name().to_string();
        // Care touches a phone only while it holds the phone's lease, for this pass.
        let _lease = match self.lease(i).await {
            Ok(lease) => {
                // A port left off (by this care before someone else had the phone, or by a
                // care that died) is care's to switch on again.
                if self.left_off(i).await {
                    self.targets[i].cut = true;
                }
                lease
            }
            Err(by) => {
                // Someone else has the phone (or its turn): they switch the port on if care
                // left it off (`port_cuts`), and care starts over with it afterwards.
                let t = &mut self.targets[i];
                (t.cut, t.since) = (false, None);
                self.emit(CareEvent::Busy { at, device: name, by: by.to_string() });
                return None;
            }
        };
        let (level, powered) = match self.read(i).await {
            Ok(r) => r,
            Err(e) => {
                self.emit(CareEvent::Failed { at, device: name, error: e.to_string() });
                return None;
            }
        };
        let action = self.window.decide(level, powered);
        let t = &mut self.targets[i];
        t.powered = powered;
        t.last_level = Some(level);
        let now = self.clock.now();
        let rate = t.since.and_then(|(t0, l0)| {
            let dt = now.saturating_sub(t0).as_secs_f64();
            (dt > 0.0).then(|| (level - l0) / dt)
        });
        if t.since.is_none() {
            t.since = Some((now, level));
        }
        match action {
            Action::Keep => Some(self.window.next_check(level, powered, rate, self.interval)),
            Action::Cut | Action::Restore => {
                let on = action == Action::Restore;
                let why = if on {
                    format!("at or below {} %", self.window.lower_pct)
                } else {
                    format!("at or above {} %", self.window.upper_pct)
                };
                match self.switch(i, on).await {
                    Ok(()) => {
                        if on {
                            self.summary.restores += 1;
                        } else {
                            self.summary.cuts += 1;
                        }
                        let t = &self.targets[i];
                        self.emit(CareEvent::Switched {
                            at,
                            device: name,
                            port: t.target.port.clone(),
                            on,
                            battery_pct: Some(level),
                            why,
                        });
                        Some(self.window.next_check(level, on, None, self.interval))
                    }
                    Err(e) => {
                        self.emit(CareEvent::Failed { at, device: name, error: e.to_string() });
                        None
                    }
                }
            }
        }
    }

    /// The level and whether the phone has USB power, recorded with its health. A phone
    /// care cut that cannot be reached (USB only) gets its port back to be read.
    async fn read(&mut self, i: usize) -> Result<(f64, bool), CareError> {
        let device = self.targets[i].target.device.clone();
        let state = match bounded(device.name(), device.state()).await {
            Err(e) if e.is_disconnect() && self.targets[i].cut => {
                self.switch(i, true).await?;
                let t = &self.targets[i];
                self.emit(CareEvent::Switched {
                    at: self.elapsed(),
                    device: device.name().into(),
                    port: t.target.port.clone(),
                    on: true,
                    battery_pct: None,
                    why: "to read it (reachable over USB only)".into(),
                });
                device.wait_connected(RECONNECT).await?;
                bounded(device.name(), device.state()).await
            }
            other => other,
        }?;
        let level =
            state.battery_pct.value().ok_or_else(|| CareError::NoBatteryLevel { device: device.name().into() })?;
        let powered = state.external_power.value().unwrap_or(self.targets[i].powered);
        let health = match bounded(device.name(), device.battery_health()).await {
            Ok(h) => Some(h),
            Err(DeviceError::Unsupported { .. }) => None,
            Err(e) => {
                self.emit(CareEvent::Failed { at: self.elapsed(), device: device.name().into(), error: e.to_string() });
                None
            }
        };
        let (health_pct, cycle_count) = health.as_ref().map_or((None, None), |h| (h.health_pct, h.cycle_count));
        self.emit(CareEvent::Reading {
            at: self.elapsed(),
            device: device.name().into(),
            battery_pct: level,
            powered,
            health_pct,
            cycle_count,
        });
        if let Some(store) = &self.store {
            let source = health
                .map(|h| h.source)
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| device.spec().platform().to_string());
            let row = BatteryReadingRow {
                device: device.name().into(),
                at: self.wall_now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                battery_pct: Some(level),
                health_pct,
                cycle_count,
                source,
            };
            let store = store.clone();
            let added = tokio::task::spawn_blocking(move || store.add_battery_reading(&row))
                .await
                .unwrap_or_else(|e| Err(crate::store::StoreError::Internal(e.to_string())));
            if let Err(e) = added {
                self.emit(CareEvent::Failed { at: self.elapsed(), device: device.name().into(), error: e.to_string() });
            }
        }
        Ok((level, powered))
    }

    fn wall_now(&self) -> DateTime<Utc> {
        self.wall_start + chrono::Duration::from_std(self.elapsed()).unwrap_or_default()
    }

    /// Target `i`'s lease, if nobody holds it or waits for it; else who does. `Ok(None)`:
    /// no store to lease it from (care without a lab store: nothing else can run).
    async fn lease(&self, i: usize) -> Result<Option<DeviceLease>, CareError> {
        let Some(store) = self.store.clone() else { return Ok(None) };
        let device = self.targets[i].target.device.name().to_string();
        let got = tokio::task::spawn_blocking(move || store.try_lease(&device, &LeaseRequest::new("care")))
            .await
            .unwrap_or_else(|e| Err(crate::store::StoreError::Internal(e.to_string())));
        match got {
            Ok(Ok(lease)) => Ok(Some(lease)),
            Ok(Err(busy)) => Err(CareError::Busy { by: busy.describe() }),
            Err(e) => Err(CareError::Lease(e)),
        }
    }

    /// Whether the store says target `i`'s port was left off by care.
    async fn left_off(&self, i: usize) -> bool {
        let Some(store) = self.store.clone() else { return false };
        let device = self.targets[i].target.device.name().to_string();
        tokio::task::spawn_blocking(move || store.port_cut(&device)).await.is_ok_and(|r| matches!(r, Ok(Some(_))))
    }

    /// Records (or clears) that care left target `i`'s port off, for whoever takes the
    /// phone next.
    async fn mark_cut(&self, i: usize, cut: bool) -> Result<(), CareError> {
        let Some(store) = self.store.clone() else { return Ok(()) };
        let (device, port) = (self.targets[i].target.device.name().to_string(), self.targets[i].target.port.clone());
        let at = self.wall_now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        tokio::task::spawn_blocking(move || {
            if cut { store.set_port_cut(&device, &port, &at) } else { store.clear_port_cut(&device) }
        })
        .await
        .unwrap_or_else(|e| Err(crate::store::StoreError::Internal(e.to_string())))
        .map_err(CareError::from)
    }

    /// Switches target `i`'s port through its tether (which tells the device); call it
    /// while holding the phone's lease.
    async fn switch(&mut self, i: usize, on: bool) -> Result<(), CareError> {
        // Off is recorded before the switch, on after it: a crash between leaves a row
        // that makes the next holder switch on a port that is on, never the other way.
        if !on {
            self.mark_cut(i, true).await?;
        }
        let t = &self.targets[i];
        let device = t.target.device.as_ref();
        let call = async {
            if on { t.target.tether.retether(device).await } else { t.target.tether.untether(device).await.map(|_| ()) }
        };
        match tokio::time::timeout(CALL, call).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => {
                return Err(CareError::SwitchTimedOut {
                    device: device.name().into(),
                    port: t.target.port.clone(),
                    limit: CALL,
                });
            }
        }
        let t = &mut self.targets[i];
        (t.powered, t.cut, t.since) = (on, !on, None);
        if on {
            self.mark_cut(i, false).await?;
        }
        Ok(())
    }

    /// Switches on every port care cut (twice if need be), and says what it did.
    pub(super) async fn finish(mut self) -> CareSummary {
        for i in 0..self.targets.len() {
            if !self.targets[i].cut {
                continue;
            }
            let (device, port) =
                (self.targets[i].target.device.name().to_string(), self.targets[i].target.port.clone());
            // A phone someone else took meanwhile is theirs: they switch its port on.
            let Ok(_lease) = self.lease(i).await else {
                continue;
            };
            let mut result = self.switch(i, true).await;
            if result.is_err() {
                result = self.switch(i, true).await;
            }
            match result {
                Ok(()) => {
                    self.emit(CareEvent::Restored { device, port });
                }
                Err(error) => {
                    self.summary.not_restored.push(port.clone());
                    self.emit(CareEvent::NotRestored { device, port, error: error.to_string() });
                }
            }
        }
        self.summary.levels = self.targets.iter().map(|t| (t.target.device.name().to_string(), t.last_level)).collect();
        self.summary.elapsed = self.elapsed();
        self.summary
    }
}

async fn bounded<T>(
    device: &str,
    f: impl std::future::Future<Output = Result<T, DeviceError>>,
) -> Result<T, DeviceError> {
    match tokio::time::timeout(CALL, f).await {
        Ok(r) => r,
        Err(_) => Err(DeviceError::Failed {
            device: device.into(),
            what: "reading the device".into(),
            detail: format!("did not finish within {CALL:?}"),
        }),
    }
}
