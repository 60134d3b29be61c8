//! `SimDevice`: a simulated phone behind the `Device` trait, on its own virtual clock.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;

use super::dump::{self, DUMP_FILE, DumpHeader};
use super::log::TrialLog;
use super::monitor::SimMonitor;
use super::powerlog::POWERLOG_FILE;
use super::standin_hub::StandinHub;
use super::state::SimState;
use crate::clock::Clock;
use crate::collect::{ios::powerlog, sim::dump as sim_dump};
use crate::config::{Build, DeviceSpec, MonitorSpec, Platform, VariantConfig};
use crate::device::{
    AppHandle, ArtifactFile, BatteryHealth, Collected, DesiredState, Device, DeviceError, Identity, LaunchSpec,
    Prepared, SoakEvidence, StateSnapshot,
};
use crate::measure::UntetherMode;
use crate::monitor::PowerMonitor;

/// A simulated phone (docs/sim.md). Deterministic: the device's seed and each launch's
/// seed decide everything, and time is the device's own virtual clock, which only
/// moves when someone sleeps on it.
#[derive(Debug)]
pub struct SimDevice {
    spec: DeviceSpec,
    clock: Clock,
    /// Shared with the simulated monitor that supplies it, if one does.
    state: Arc<Mutex<SimState>>,
    /// `standin_hub`: where its port's VBUS and bus are read from.
    hub: Option<StandinHub>,
}

impl SimDevice {
    /// A phone with `spec.sim`'s parameters (the config loader always fills them; without
    /// them the iPhone defaults are used), on USB, battery at `battery_start_pct`.
    pub fn new(spec: DeviceSpec) -> SimDevice {
        Self::with_clock(spec, Clock::virtual_clock())
    }

    /// A simulated phone on another clock: tests use `Clock::tokio()` under
    /// `tokio::time::pause` to drive the runner's own timers in virtual time.
    pub fn with_clock(spec: DeviceSpec, clock: Clock) -> SimDevice {
        SimDevice { state: Arc::new(Mutex::new(SimState::new(spec.clone()))), clock, spec, hub: None }
    }

    /// A simulated phone whose USB port is `hub`'s, on the stand-in uhubctl
    /// (`[device.sim] standin_hub`).
    pub fn on_standin_hub(spec: DeviceSpec, hub: StandinHub) -> SimDevice {
        SimDevice { hub: Some(hub), ..Self::new(spec) }
    }

    /// The state at the clock's time (a copy: reading it changes nothing).
    pub fn model_state(&self) -> SimState {
        let mut st = self.lock().clone();
        st.advance(self.clock.now());
        st
    }

    fn lock(&self) -> MutexGuard<'_, SimState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the state carried to now, if the phone answers.
    fn with_state<R>(&self, f: impl FnOnce(&mut SimState) -> Result<R, DeviceError>) -> Result<R, DeviceError> {
        let mut st = self.lock();
        st.advance(self.clock.now());
        st.ensure_connected()?;
        f(&mut st)
    }

    fn io(&self, path: &Path, source: std::io::Error) -> DeviceError {
        DeviceError::Io { device: self.spec.name.clone(), path: path.to_path_buf(), source }
    }

    /// The trial's powerlog (its bytes) and what it says about the window: from the launch
    /// to the window's end, in wall time.
    fn powerlog(
        &self,
        header: &DumpHeader,
        log: &TrialLog,
        window_s: f64,
    ) -> Result<(Vec<u8>, powerlog::SoakLog), DeviceError> {
        let failed = |detail: String| DeviceError::Failed {
            device: self.spec.name.clone(),
            what: "reading the powerlog".into(),
            detail,
        };
        let (bytes, read) = super::powerlog::write(header, log).map_err(|e| failed(format!("writing it: {e}")))?;
        let read = read.map_err(|e| failed(e.to_string()))?;
        let from = super::powerlog::launch_wall_s(header);
        Ok((bytes, read.soak(from, from + window_s)))
    }
}

/// Writes `bytes` to `path`, making its folder first if it is not there. The runner makes
/// each attempt's folder before the device sees it, so that is one `open` per file and no
/// `mkdir` (a `mkdir` that fails on an existing folder still costs a path walk).
fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    match std::fs::write(path, bytes) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))?;
            std::fs::write(path, bytes)
        }
        other => other,
    }
}

#[async_trait]
impl Device for SimDevice {
    fn spec(&self) -> &DeviceSpec {
        &self.spec
    }

    fn clock(&self) -> Clock {
        self.clock.clone()
    }

    async fn identify(&self) -> Result<Identity, DeviceError> {
        self.with_state(|st| Ok(st.identify()))
    }

    fn simulated_monitor(&self, spec: &MonitorSpec) -> Option<Box<dyn PowerMonitor>> {
        let seed = self.spec.sim().map_or(0, |p| p.seed);
        Some(Box::new(SimMonitor::new(spec.clone(), seed, self.state.clone(), self.clock.clone())))
    }

    async fn prepare(&self, build: &Build, config: &VariantConfig) -> Result<Prepared, DeviceError> {
        let outcome = self.with_state(|st| st.prepare(build, config))?;
        Ok(Prepared::new(build, config, outcome))
    }

    async fn state(&self) -> Result<StateSnapshot, DeviceError> {
        let st = self.model_state();
        st.ensure_connected()?;
        Ok(st.snapshot())
    }

    async fn set_state(&self, want: &DesiredState) -> Result<(), DeviceError> {
        self.with_state(|st| st.set_state(want))
    }

    async fn reset_counters(&self) -> Result<(), DeviceError> {
        self.with_state(|st| {
            st.reset_counters();
            Ok(())
        })
    }

    async fn launch(&self, spec: &LaunchSpec) -> Result<AppHandle, DeviceError> {
        self.with_state(|st| st.launch(spec))
    }

    /// The port's power reaches the phone whether or not it answers. On the stand-in hub,
    /// what the port really carries is read there.
    async fn usb_power_changed(&self, on: bool) -> Result<(), DeviceError> {
        let (vbus, bus) = match &self.hub {
            Some(hub) => hub.read(&self.spec.name).await?,
            None => (on, on),
        };
        let mut st = self.lock();
        st.advance(self.clock.now());
        st.usb_port(on, vbus, bus);
        Ok(())
    }

    /// The simulator's charge model stops charging when its port is off: a real cut.
    async fn software_untether(&self) -> Result<UntetherMode, DeviceError> {
        self.with_state(|st| {
            st.untether();
            Ok(UntetherMode::PowerCut)
        })
    }

    /// Restores USB power even when the phone does not answer: the power comes from the
    /// lab's side of the cable. Ends the trial's measurement window.
    async fn software_retether(&self) -> Result<(), DeviceError> {
        let mut st = self.lock();
        st.advance(self.clock.now());
        st.retether();
        Ok(())
    }

    /// `battery_health_pct` and `cycle_count` of `[device.sim]`, as a phone reports them.
    async fn battery_health(&self) -> Result<BatteryHealth, DeviceError> {
        let st = self.model_state();
        st.ensure_connected()?;
        let p = st.params();
        Ok(BatteryHealth {
            health_pct: Some(p.battery_health_pct),
            cycle_count: Some(p.cycle_count),
            source: "sim".into(),
        })
    }

    /// Sleeps on the device clock until the phone is back, or `timeout` (then `Disconnected`).
    async fn wait_connected(&self, timeout: Duration) -> Result<(), DeviceError> {
        let now = self.clock.now();
        let back = {
            let mut st = self.lock();
            st.advance(now);
            st.lost_until()
        };
        let Some(back) = back else {
            return Ok(());
        };
        let wait = back - now;
        if wait <= timeout {
            self.clock.sleep(wait).await;
            return Ok(());
        }
        self.clock.sleep(timeout).await;
        let st = self.model_state();
        st.ensure_connected()
    }

    /// Closes the measurement window, writes `sim-energy.log` into `dir` and reads the
    /// measurements, the battery series and the soak evidence back from it with
    /// `collect::sim::dump::parse`.
    async fn collect(&self, app: &AppHandle, dir: &Path) -> Result<Collected, DeviceError> {
        let (header, log) = self.with_state(|st| st.collect(&app.id))?;
        let text = dump::render(&header, &log);
        let summary = sim_dump::parse(&text).map_err(|e| DeviceError::Failed {
            device: self.spec.name.clone(),
            what: "reading the sim dump".into(),
            detail: format!("{}: {e}", dir.join(DUMP_FILE).display()),
        })?;
        let mut artifacts = vec![ArtifactFile::of(DUMP_FILE, text.as_bytes())];
        let mut files = vec![(DUMP_FILE, text.into_bytes())];
        let mut charging_s = summary.charging_s;
        let mut soak_state = None;
        // A simulated iPhone also leaves its powerlog, and its untethered evidence is read
        // from there, as a real iPhone's is.
        if header.emulates == Platform::Ios {
            let (bytes, soak) = self.powerlog(&header, &log, summary.duration_s)?;
            artifacts.push(ArtifactFile::of(POWERLOG_FILE, &bytes));
            files.push((POWERLOG_FILE, bytes));
            charging_s = soak.charging_s;
            soak_state = StateSnapshot::from_soak_log(&soak);
        }
        // Written here, on the runtime's thread: two small files into the folder the runner
        // made take tens of microseconds, where a trip to the blocking pool and back (a
        // thread woken, then the task) cost 200 simulated phones more than the writes, and
        // left the cores idle a tenth of the time between the hand-overs.
        let written = files.into_iter().try_for_each(|(name, bytes)| {
            let path = dir.join(name);
            write_file(&path, &bytes).map_err(|e| (path, e))
        });
        written.map_err(|(path, e)| self.io(&path, e))?;
        Ok(Collected {
            measurements: summary.measurements(),
            series: summary.series(),
            artifacts,
            evidence: SoakEvidence {
                charging_s,
                app_died: summary.app_died,
                requests_seen: Some(summary.requests_sent),
                measured_duration: Some(Duration::from_secs_f64(summary.duration_s)),
                lost_contact: summary.lost_contact,
                app_exit: None,
                ..SoakEvidence::default()
            },
            soak_state,
        })
    }

    async fn stop(&self, app: &AppHandle) -> Result<(), DeviceError> {
        self.with_state(|st| {
            st.stop(&app.id);
            Ok(())
        })
    }
}
