//! The simulated phone's state, carried lazily to whatever time it is asked about.
//!
//! Nothing polls: every method first moves the state to the clock's `now` with
//! `advance`, which steps the battery in closed form from one change point to the
//! next (the app's faults, and the minute marks at which the fuel gauge logs).
//! Reads (`state()`) advance a copy, so asking does not change what the trial logs.

use std::time::Duration;

use super::dump::DumpHeader;
use super::log::{BatteryRecord, EventKind, LogEnd, LogEvent, TrialLog};
use super::model::{self, AppLoad, Cell, Regime};
use super::trial::{self, SAMPLE_PERIOD, TrialPlan, WindowFacts};
use crate::config::{Build, DeviceSpec, Platform, SimParams, SimProfile, TetherSpec, VariantConfig};
use crate::device::{
    AppHandle, DesiredState, DeviceError, Identity, LaunchSpec, PrepareOutcome, Provenance, Reading, StateSnapshot,
};
use crate::seed;

/// What the foreground app reads as when no trial app is running.
pub const HOME_SCREEN: &str = "home screen";

/// How long a `usb_only` phone takes to show up again after its port is switched on.
pub const REENUMERATE: Duration = Duration::from_secs(3);

#[derive(Debug, Clone, Copy, PartialEq)]
struct Setting<T> {
    value: T,
    from: Provenance,
}

impl<T: Copy> Setting<T> {
    fn reading(&self) -> Reading<T> {
        Reading::Known { value: self.value, from: self.from }
    }
}

#[derive(Debug, Clone)]
struct Installed {
    sha256: String,
    build: String,
    /// The build's profile with the config applied.
    profile: SimProfile,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Crash,
    BrightnessReset,
    ExternalPower,
    LostContact,
    Reconnected,
}

/// One launched app and its measurement window (launch until re-tether, stop or collect).
#[derive(Debug, Clone)]
struct Run {
    app_id: String,
    trial_key: String,
    launched_at: Duration,
    interval: Option<Duration>,
    profile: SimProfile,
    plan: TrialPlan,
    /// Device effect × trial effect.
    power_factor: f64,
    load: AppLoad,
    alive: bool,
    crashed_at: Option<Duration>,
    stopped: bool,
    /// The charging_during_soak fault is feeding the phone.
    external_power: bool,
    /// Faults still to happen, device-clock time, in order.
    pending: Vec<(Duration, Change)>,
    window_end: Option<Duration>,
    log: TrialLog,
}

impl Run {
    fn window_open(&self) -> bool {
        self.window_end.is_none()
    }
}

/// The whole simulated phone at device-clock time `at`.
#[derive(Debug, Clone)]
pub struct SimState {
    spec: DeviceSpec,
    params: SimParams,
    device_factor: f64,
    at: Duration,
    cell: Cell,
    /// USB power on (software tether).
    tethered: bool,
    brightness: Setting<f64>,
    bluetooth: Setting<bool>,
    wifi: Setting<bool>,
    installed: Option<Installed>,
    run: Option<Run>,
    /// Device-clock interval `[from, until)` in which the phone does not answer.
    lost: Option<(Duration, Duration)>,
    /// A `usb_only` phone off USB: unreachable until then (`Duration::MAX` while the port is off).
    off_usb: Option<Duration>,
    /// While a simulated power monitor records: what the phone drew from when, (device
    /// time, mW), a point where it changed.
    draw: Option<Vec<(Duration, f64)>>,
}

impl SimState {
    /// A phone at time zero: battery at `battery_start_pct`, at ambient temperature, on
    /// USB unless its tether is `none`, with Bluetooth and Wi-Fi on.
    pub fn new(spec: DeviceSpec) -> Self {
        let params = spec.sim().cloned().unwrap_or_else(|| SimParams::defaults(Platform::Ios));
        SimState {
            device_factor: trial::device_effect(&params),
            at: Duration::ZERO,
            cell: Cell::new(&params),
            tethered: spec.tether != TetherSpec::None,
            brightness: Setting { value: params.brightness_pct, from: Provenance::Read },
            bluetooth: Setting { value: true, from: Provenance::Read },
            wifi: Setting { value: true, from: Provenance::Read },
            installed: None,
            run: None,
            lost: None,
            off_usb: None,
            draw: None,
            params,
            spec,
        }
    }

    pub fn params(&self) -> &SimParams {
        &self.params
    }

    /// The device's multiplicative effect on power (fixed for its lifetime).
    pub fn device_factor(&self) -> f64 {
        self.device_factor
    }

    pub fn at(&self) -> Duration {
        self.at
    }

    /// Moves the phone to device time `to` (no-op when `to` is not later).
    pub fn advance(&mut self, to: Duration) {
        while self.at < to {
            let next = self.next_stop(to);
            let regime = self.regime();
            self.note_draw(regime.load_mw);
            self.cell = self.cell.step(&self.params, &regime, (next - self.at).as_secs_f64());
            self.at = next;
            self.apply_due();
        }
    }

    /// Starts keeping what the phone draws (a simulated monitor's recording), from now.
    pub fn start_draw(&mut self) {
        self.draw = Some(Vec::new());
        self.note_draw(self.regime().load_mw);
    }

    /// What the phone drew since [`start_draw`](Self::start_draw): (device time, mW) where
    /// it changed, from then until now; keeping stops.
    pub fn take_draw(&mut self) -> Vec<(Duration, f64)> {
        self.draw.take().unwrap_or_default()
    }

    fn note_draw(&mut self, mw: f64) {
        let at = self.at;
        if let Some(d) = &mut self.draw
            && d.last().is_none_or(|&(_, last)| last != mw)
        {
            d.push((at, mw));
        }
    }

    /// When the phone answers again, if it does not answer now.
    pub fn lost_until(&self) -> Option<Duration> {
        let fault = self.lost.filter(|(from, until)| *from <= self.at && self.at < *until).map(|(_, until)| until);
        fault.max(self.off_usb.filter(|until| self.at < *until))
    }

    pub fn ensure_connected(&self) -> Result<(), DeviceError> {
        if let Some(until) = self.off_usb.filter(|until| self.at < *until) {
            return Err(DeviceError::Disconnected {
                device: self.spec.name.clone(),
                detail: if until == Duration::MAX {
                    "the simulated phone is reachable over USB only and its port is off".into()
                } else {
                    format!(
                        "the simulated phone is back on USB and shows up in {:.0} s of device time",
                        (until - self.at).as_secs_f64()
                    )
                },
            });
        }
        match self.lost_until() {
            None => Ok(()),
            Some(until) => Err(DeviceError::Disconnected {
                device: self.spec.name.clone(),
                detail: format!(
                    "the simulated phone dropped off (disconnect fault) and answers again in {:.0} s of device time",
                    (until - self.at).as_secs_f64()
                ),
            }),
        }
    }

    pub fn identify(&self) -> Identity {
        let serial = format!("sim-{:016x}", self.params.seed);
        Identity { name: self.spec.name.clone(), model: self.spec.model.clone(), os: self.spec.os.clone(), serial }
    }

    pub fn snapshot(&self) -> StateSnapshot {
        let p = &self.params;
        let regime = self.regime();
        let foreground = match &self.run {
            Some(run) if run.alive && !run.stopped => run.app_id.clone(),
            _ => HOME_SCREEN.to_string(),
        };
        StateSnapshot {
            brightness_pct: self.brightness.reading(),
            bluetooth_on: self.bluetooth.reading(),
            wifi_on: self.wifi.reading(),
            battery_pct: Reading::read(round1(self.cell.level_pct(p))),
            charging: Reading::read(self.cell.is_charging(p, &regime)),
            external_power: Reading::read(regime.external_power),
            battery_temp_c: Reading::read(round1(self.cell.temp_c)),
            thermal_status: Reading::read(model::thermal_status(self.cell.temp_c)),
            foreground_app: Reading::Known { value: foreground, from: Provenance::Read },
            ..StateSnapshot::default()
        }
    }

    /// "Installs" the build: the install hash is the sha256 of the JSON of the build's
    /// sim profile and the config's adjustments, so a changed config reinstalls.
    pub fn prepare(&mut self, build: &Build, config: &VariantConfig) -> Result<PrepareOutcome, DeviceError> {
        let profile = build.sim.as_ref().ok_or_else(|| DeviceError::NoArtifact {
            build: build.name.clone(),
            device: self.spec.name.clone(),
            platform: Platform::Sim.to_string(),
        })?;
        let json = serde_json::to_vec(&(profile, &config.sim)).map_err(|e| DeviceError::Failed {
            device: self.spec.name.clone(),
            what: format!("installing build {}", build.name),
            detail: e.to_string(),
        })?;
        let sha256 = seed::sha256_hex(&json);
        let same = self.installed.as_ref().is_some_and(|i| i.sha256 == sha256);
        self.installed =
            Some(Installed { sha256: sha256.clone(), build: build.name.clone(), profile: config.sim.apply(profile) });
        Ok(if same { PrepareOutcome::AlreadyInstalled { sha256 } } else { PrepareOutcome::Installed { sha256 } })
    }

    pub fn set_state(&mut self, want: &DesiredState) -> Result<(), DeviceError> {
        if let Some(b) = want.brightness_pct {
            if !(0.0..=100.0).contains(&b) {
                return Err(self.failed(
                    "setting brightness",
                    format!("{b} % is outside 0–100 %; fix the runbook's brightness precondition"),
                ));
            }
            self.brightness = Setting { value: b, from: Provenance::Set };
        }
        if let Some(on) = want.bluetooth_on {
            self.bluetooth = Setting { value: on, from: Provenance::Set };
        }
        if let Some(on) = want.wifi_on {
            self.wifi = Setting { value: on, from: Provenance::Set };
        }
        self.note_change();
        Ok(())
    }

    /// Stops any app still running (a device lost mid-trial may have kept it) and drops
    /// the last trial's log: the next trial starts from zero.
    pub fn reset_counters(&mut self) {
        self.stop_run();
        self.run = None;
    }

    /// Starts the installed app (stopping any other) and draws the attempt's effects
    /// and faults from `spec.seed`.
    pub fn launch(&mut self, spec: &LaunchSpec) -> Result<AppHandle, DeviceError> {
        let installed = self
            .installed
            .clone()
            .ok_or_else(|| self.failed("launching the app", "nothing is installed; call prepare first".into()))?;
        // The launch runs what its prepare made: the phone must still have that install.
        if installed.sha256 != spec.prepared.outcome.sha256() {
            return Err(self.failed(
                "launching the app",
                format!(
                    "build {} is not what is installed (build {}); prepare it first",
                    spec.prepared.build.name, installed.build
                ),
            ));
        }
        self.stop_run();
        let plan = TrialPlan::draw(spec.seed, &self.params, &installed.profile, spec.duration);
        let launched_at = self.at;
        let mut pending: Vec<(Duration, Change)> = [
            (plan.crash_at, Change::Crash),
            (plan.brightness_reset_at, Change::BrightnessReset),
            (plan.external_power_at, Change::ExternalPower),
            (plan.disconnect_at, Change::LostContact),
            (plan.disconnect_at.map(|d| d + self.params.faults.reconnect_after), Change::Reconnected),
        ]
        .into_iter()
        .filter_map(|(at, c)| at.map(|d| (launched_at + d, c)))
        .collect();
        pending.sort_by_key(|(at, _)| *at);
        self.lost = plan.disconnect_at.map(|d| (launched_at + d, launched_at + d + self.params.faults.reconnect_after));
        let app_id = format!("sim.{}", installed.build);
        self.run = Some(Run {
            app_id: app_id.clone(),
            trial_key: spec.trial_key.clone(),
            launched_at,
            interval: spec.request_interval,
            load: trial::app_load(&installed.profile, spec.request_interval),
            profile: installed.profile,
            power_factor: self.device_factor * plan.trial_factor,
            plan,
            alive: true,
            crashed_at: None,
            stopped: false,
            external_power: false,
            pending,
            window_end: None,
            log: TrialLog {
                brightness_pct: self.brightness.value,
                bluetooth_on: self.bluetooth.value,
                ..TrialLog::default()
            },
        });
        // Logs the launch record (and any fault due at once).
        self.apply_due();
        Ok(AppHandle { id: app_id.clone(), app_id, launched_at })
    }

    pub fn untether(&mut self) {
        self.tethered = false;
        self.note_change();
    }

    /// USB power back; this ends the measurement window.
    pub fn retether(&mut self) {
        self.close_window();
        self.tethered = true;
    }

    /// The lab switched the phone's USB port (hub or cable), and the port did what it was
    /// told. Off: it stops charging and, if `usb_only`, cannot be reached. On: the window
    /// ends; a `usb_only` phone shows up after `REENUMERATE`, or (stays_lost) only after
    /// `faults.reconnect_after`.
    pub fn usb_power(&mut self, on: bool) {
        self.usb_port(on, on, on);
    }

    /// The lab switched the phone's port `on` or off, and the port now carries VBUS or not
    /// (`vbus`) and has the phone on the bus or not (`bus`) — what a hub that does not cut
    /// VBUS makes differ (`standin_hub`). The window ends when the lab switches on.
    pub fn usb_port(&mut self, on: bool, vbus: bool, bus: bool) {
        let stays_lost = self.run.as_ref().is_some_and(|r| r.plan.stays_lost);
        if on {
            self.retether();
        }
        if self.tethered != vbus {
            self.tethered = vbus;
            self.note_change();
        }
        if self.params.usb_only {
            self.off_usb = match (bus, on) {
                (false, _) => Some(Duration::MAX),
                (true, true) => {
                    Some(self.at + if stays_lost { self.params.faults.reconnect_after } else { REENUMERATE })
                }
                // Switched off but still on the bus: it answers as before.
                (true, false) => self.off_usb,
            };
        }
    }

    /// Closes the window of `app_id`'s trial and returns what the dump needs.
    pub fn collect(&mut self, app_id: &str) -> Result<(DumpHeader, TrialLog), DeviceError> {
        if self.run.as_ref().is_none_or(|r| r.app_id != app_id) {
            return Err(self.failed(
                "collecting",
                format!("no trial log for app {app_id} (it was never launched here, or the log was reset)"),
            ));
        }
        self.close_window();
        let run = self.run.as_ref().ok_or_else(|| self.failed("collecting", "the trial vanished".into()))?;
        let header = DumpHeader {
            device: self.spec.name.clone(),
            model: self.spec.model.clone(),
            // `os` is optional in lab.toml; the dump's header needs a value.
            os: if self.spec.os.is_empty() { "unknown".into() } else { self.spec.os.clone() },
            emulates: self.params.emulates,
            app: run.app_id.clone(),
            trial: run.trial_key.clone(),
            seed: run.plan.seed,
            battery_mah: self.params.battery_mah,
            voltage_v: self.params.voltage_v,
            request_interval: run.interval,
            launched_at: run.launched_at,
        };
        Ok((header, run.log.clone()))
    }

    /// Stops `app_id` if it is the running app (idempotent).
    pub fn stop(&mut self, app_id: &str) {
        if self.run.as_ref().is_some_and(|r| r.app_id == app_id) {
            self.stop_run();
        }
    }

    fn stop_run(&mut self) {
        if self.run.as_ref().is_some_and(|r| !r.stopped) {
            self.close_window();
            if let Some(run) = self.run.as_mut() {
                run.stopped = true;
            }
        }
    }

    fn failed(&self, what: &str, detail: String) -> DeviceError {
        DeviceError::Failed { device: self.spec.name.clone(), what: what.into(), detail }
    }

    /// What the phone draws now, and whether USB (or the fault's other path) feeds it.
    fn regime(&self) -> Regime {
        let p = &self.params;
        let (load_mw, fault_power) = match &self.run {
            Some(run) if !run.stopped => {
                let app = run.alive.then_some(&run.load);
                (run.power_factor * model::foreground_mw(p, self.brightness.value, app), run.external_power)
            }
            // Asleep with the screen off between trials.
            _ => (self.device_factor * model::IDLE_MW, false),
        };
        Regime { load_mw, external_power: self.tethered || fault_power }
    }

    /// The next time the regime may change or the gauge logs, capped at `to`.
    fn next_stop(&self, to: Duration) -> Duration {
        let Some(run) = self.run.as_ref().filter(|r| r.window_open()) else {
            return to;
        };
        let since = self.at - run.launched_at;
        let k = since.as_nanos() / SAMPLE_PERIOD.as_nanos() + 1;
        let grid = run.launched_at + Duration::from_nanos((k * SAMPLE_PERIOD.as_nanos()) as u64);
        let fault = run.pending.iter().map(|(at, _)| *at).find(|at| *at > self.at);
        fault.map_or(grid, |f| f.min(grid)).min(to)
    }

    /// Applies the faults due at `self.at` and logs the gauge on minute marks and changes.
    fn apply_due(&mut self) {
        let at = self.at;
        let Some(run) = self.run.as_mut().filter(|r| r.window_open()) else {
            return;
        };
        let t = at - run.launched_at;
        let due = run.pending.iter().take_while(|(when, _)| *when <= at).count();
        let changes: Vec<Change> = run.pending.drain(..due).map(|(_, c)| c).collect();
        for change in &changes {
            let kind = match change {
                Change::Crash => {
                    run.alive = false;
                    run.crashed_at = Some(t);
                    EventKind::Crash
                }
                Change::BrightnessReset => EventKind::Brightness { pct: 100.0 },
                Change::ExternalPower => {
                    run.external_power = true;
                    EventKind::ExternalPower
                }
                Change::LostContact => EventKind::LostContact,
                Change::Reconnected => EventKind::Reconnected,
            };
            run.log.events.push(LogEvent { t, kind });
        }
        if changes.contains(&Change::BrightnessReset) {
            self.brightness = Setting { value: 100.0, from: Provenance::Read };
        }
        let on_minute = t.as_nanos().is_multiple_of(SAMPLE_PERIOD.as_nanos());
        if on_minute || !changes.is_empty() {
            self.log_gauge();
        }
    }

    /// A gauge record now, if a window is open.
    fn log_gauge(&mut self) {
        let regime = self.regime();
        let p = &self.params;
        let cell = self.cell;
        let at = self.at;
        if let Some(run) = self.run.as_mut().filter(|r| r.window_open()) {
            run.log.record(BatteryRecord {
                t: at - run.launched_at,
                level_pct: cell.level_pct(p).round() as u32,
                charge_mah: cell.charge_mah.round() as u64,
                current_ma: cell.current_ma(p, &regime),
                external_power: regime.external_power,
                charging: cell.is_charging(p, &regime),
                temp_c: cell.temp_c,
            });
        }
    }

    /// The lab changed something mid-window: log the gauge under the new regime.
    fn note_change(&mut self) {
        self.log_gauge();
    }

    /// Ends the measurement window now: last gauge record, the app's samples, the end line.
    fn close_window(&mut self) {
        if !self.run.as_ref().is_some_and(|r| r.window_open()) {
            return;
        }
        self.log_gauge();
        let at = self.at;
        let lost = self.lost;
        let params = &self.params;
        let Some(run) = self.run.as_mut() else {
            return;
        };
        let window = at - run.launched_at;
        let lost = lost
            .filter(|(from, _)| *from >= run.launched_at)
            .map(|(from, until)| (from - run.launched_at, until - run.launched_at));
        let set = run.plan.samples(&WindowFacts {
            params,
            profile: &run.profile,
            interval: run.interval,
            power_factor: run.power_factor,
            window,
            crashed_at: run.crashed_at,
            lost,
        });
        run.log.samples = set.samples;
        run.log.end = Some(LogEnd {
            t: window,
            requests_sent: set.requests_sent,
            requests_cached: set.requests_cached,
            app_alive: run.alive,
        });
        run.window_end = Some(at);
        run.pending.clear();
        run.external_power = false;
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}
