//! The `Device` trait: one lifecycle for every platform (sim, host, Android, iOS).
//!
//! The runner only talks to this trait, so a new backend plugs in without touching
//! the runner. Optional capabilities default to `DeviceError::Unsupported` rather
//! than failing the trial; the runner decides what an unsupported step means.

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::state::{DesiredState, StateSnapshot};
use crate::clock::Clock;
use crate::config::{Build, DeviceSpec, VariantConfig};
use crate::measure::{Measurement, Series, UntetherMode};

#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// The device is not reachable (unplugged, rebooted, host down). The runner waits
    /// for it to come back.
    #[error("device {device} is not connected: {detail}")]
    Disconnected { device: String, detail: String },
    #[error("{what} is not supported by {device}")]
    Unsupported { device: String, what: String },
    /// The build cannot run on this device (no artifact for its platform).
    #[error("build {build} has nothing that runs on {device} ({platform})")]
    NoArtifact { build: String, device: String, platform: String },
    #[error("{device}: {what} failed: {detail}")]
    Failed { device: String, what: String, detail: String },
    /// The device is there but cannot be used as it is (a phone that is locked, does not
    /// trust this host, has Developer Mode off): the detail says what fixes it.
    #[error("{device}: {detail}")]
    Unavailable { device: String, detail: String },
    #[error("{device}: I/O error on {path}: {source}")]
    Io { device: String, path: PathBuf, source: std::io::Error },
}

impl DeviceError {
    pub fn is_disconnect(&self) -> bool {
        matches!(self, DeviceError::Disconnected { .. })
    }

    /// A failure of the device's host transport while `what`: an unreachable host is a lost
    /// device (the runner waits for it), anything else a failed step.
    pub fn from_transport(device: &str, what: &str, e: crate::transport::TransportError) -> DeviceError {
        match e {
            crate::transport::TransportError::Unreachable { .. } => {
                DeviceError::Disconnected { device: device.into(), detail: format!("{what}: {e}") }
            }
            e => DeviceError::Failed { device: device.into(), what: what.into(), detail: e.to_string() },
        }
    }
}

/// What the device says it is.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Identity {
    pub name: String,
    pub model: String,
    pub os: String,
    /// Serial, UDID or host name.
    pub serial: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub enum PrepareOutcome {
    /// The build was installed (its hash differed from what was there).
    Installed { sha256: String },
    /// The same build was already installed.
    AlreadyInstalled { sha256: String },
}

impl PrepareOutcome {
    pub fn sha256(&self) -> &str {
        match self {
            PrepareOutcome::Installed { sha256 } | PrepareOutcome::AlreadyInstalled { sha256 } => sha256,
        }
    }
}

/// What `prepare` made ready on the device, handed back to `launch`: the device keeps no
/// hidden "last prepared" state, so a launch always runs what this says.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub build: Build,
    pub config: VariantConfig,
    pub outcome: PrepareOutcome,
    /// Where the backend put the build, when it matters to the launch: the program's path
    /// on a host, the package's APK path on Android.
    pub location: Option<String>,
}

impl Prepared {
    pub fn new(build: &Build, config: &VariantConfig, outcome: PrepareOutcome) -> Self {
        Prepared { build: build.clone(), config: config.clone(), outcome, location: None }
    }

    /// The install was skipped: the same build was there.
    pub fn skipped(&self) -> bool {
        matches!(self.outcome, PrepareOutcome::AlreadyInstalled { .. })
    }
}

/// Everything a launch needs; the endpoint URL comes from the runner.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    /// The build and config `prepare` made ready.
    pub prepared: Prepared,
    pub trial_key: String,
    /// Seeds whatever randomness the backend has for this trial attempt.
    pub seed: u64,
    pub duration: Duration,
    pub request_interval: Option<Duration>,
    /// The trial's URL on the lab's traffic endpoint (`http://…/t/<token>`), for devices
    /// that [talk to it](Device::talks_to_endpoint) when the workload sends requests.
    pub endpoint_url: Option<String>,
    /// The attempt's artifact folder (the one `collect` gets): backends may write the
    /// app's logs there while it runs.
    pub dir: PathBuf,
}

/// A running app on a device.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AppHandle {
    /// The backend's handle of this run (a pid, a launch id): what `collect` and `stop` look up.
    pub id: String,
    /// The app's identity as the device names it (package, bundle id, program): what a
    /// foreground reading is compared with.
    pub app_id: String,
    /// Device clock time at launch.
    pub launched_at: Duration,
}

/// A raw file a trial produced, relative to the trial's artifact folder.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ArtifactFile {
    pub name: String,
    pub bytes: u64,
    pub sha256: String,
}

impl ArtifactFile {
    /// The record of file `name` whose content is `bytes`.
    pub fn of(name: &str, bytes: &[u8]) -> Self {
        ArtifactFile { name: name.into(), bytes: bytes.len() as u64, sha256: crate::seed::sha256_hex(bytes) }
    }
}

/// What the device observed during the soak that decides validity.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct SoakEvidence {
    /// Seconds the device spent charging while it should have been untethered.
    pub charging_s: f64,
    /// The app was not running at collection time.
    pub app_died: bool,
    /// Requests the traffic endpoint counted for this trial, when known.
    pub requests_seen: Option<u64>,
    /// Soak length as the device measured it.
    pub measured_duration: Option<Duration>,
    /// How the app ended when it died ("exit code 2; stderr: …"), for the reason.
    #[serde(default)]
    pub app_exit: Option<String>,
    /// The device dropped off (USB, network) at some point during the trial.
    #[serde(default)]
    pub lost_contact: bool,
    /// Requests to the lab's endpoint the phone's own packet tap saw the app send (an
    /// iPhone's pcapd in a tethered trial): a second count beside the endpoint's.
    #[serde(default)]
    pub requests_on_wire: Option<u64>,
    /// What the attempt's figures must be read with (a tethered sample that ended early).
    #[serde(default)]
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Collected {
    pub measurements: Vec<Measurement>,
    /// Values over the attempt's time (the sim's `battery_pct`); none where the backend keeps none.
    #[serde(default)]
    pub series: Vec<Series>,
    pub artifacts: Vec<ArtifactFile>,
    pub evidence: SoakEvidence,
    /// What the device's own log says about the soak (an iPhone's powerlog: the brightest
    /// the screen was, Bluetooth), marked `Provenance::Powerlog`; checked against the
    /// preconditions like the readings before and after.
    #[serde(default)]
    pub soak_state: Option<StateSnapshot>,
}

/// What a device says about its battery's wear (`lab care` stores it, `lab status`
/// shows its trend). `None`: the platform does not say.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct BatteryHealth {
    /// Full-charge capacity over design capacity, percent.
    pub health_pct: Option<f64>,
    pub cycle_count: Option<u32>,
    /// Where it was read (`sim`, `sysfs power_supply`, …).
    pub source: String,
}

impl BatteryHealth {
    /// From a Linux power-supply uevent (Android).
    pub fn from_power_supply(ps: &crate::collect::linux::power_supply::PowerSupply, source: &str) -> Self {
        BatteryHealth { health_pct: ps.health_pct(), cycle_count: ps.cycle_count, source: source.into() }
    }

    /// From an iPhone's IOPMPowerSource (lockdown diagnostics): ready for the iOS backend.
    pub fn from_ios(b: &crate::collect::ios::battery::IosBattery) -> Self {
        BatteryHealth {
            health_pct: b.health_pct,
            cycle_count: b.cycle_count.and_then(|c| u32::try_from(c).ok()),
            source: "IOPMPowerSource".into(),
        }
    }
}

/// A step only an operator can do for this device (an iPhone before iOS 17 has no API to
/// start a sysdiagnose): put to them like a runbook's `[[steps]]`, after those of `when`.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceStep {
    pub when: crate::config::StepWhen,
    pub name: String,
    pub text: String,
}

#[async_trait]
pub trait Device: Send + Sync {
    fn spec(&self) -> &DeviceSpec;

    fn name(&self) -> &str {
        &self.spec().name
    }

    /// The clock trials on this device run on (virtual for simulated devices).
    fn clock(&self) -> Clock;

    /// Whether the app under test really sends its requests to the lab's traffic
    /// endpoint, so that the endpoint's count for the trial is the truth about its
    /// traffic. Real devices do; a simulated one models its traffic and reports it itself.
    fn talks_to_endpoint(&self) -> bool {
        false
    }

    /// Checks, before any trial, what would make every trial fail (a phone that has not
    /// accepted this host's key): an error stops `lab run` before anything is recorded.
    /// A device that is merely not there yet is not an error here (the runner waits for it).
    async fn preflight(&self) -> Result<(), DeviceError> {
        Ok(())
    }

    /// Connects and says what the device is.
    async fn identify(&self) -> Result<Identity, DeviceError>;

    /// A simulated power monitor supplying this device (`[[monitor]] kind = "sim"`): only a
    /// simulated device knows what it draws.
    fn simulated_monitor(&self, _spec: &crate::config::MonitorSpec) -> Option<Box<dyn crate::monitor::PowerMonitor>> {
        None
    }

    /// Installs `build` if the installed build's hash differs, then applies `config`.
    /// What it returns is what `launch` gets back in its `LaunchSpec`.
    async fn prepare(&self, build: &Build, config: &VariantConfig) -> Result<Prepared, DeviceError>;

    async fn state(&self) -> Result<StateSnapshot, DeviceError>;

    /// Sets what the platform allows; fields it cannot set are left alone.
    async fn set_state(&self, _want: &DesiredState) -> Result<(), DeviceError> {
        Err(DeviceError::Unsupported { device: self.name().into(), what: "setting device state".into() })
    }

    /// Resets energy counters and starts on-device logging for a new trial.
    async fn reset_counters(&self) -> Result<(), DeviceError>;

    async fn launch(&self, spec: &LaunchSpec) -> Result<AppHandle, DeviceError>;

    /// An untethered soak is over and re-tethering is about to begin. A device whose own
    /// log is read for the soak afterwards notes the moment: it logs the plug-in before
    /// the lab hears of it (an operator's confirmation, a hub's status), so the lab's
    /// re-tether time is too late to end the soak's window with.
    async fn soak_ended(&self) {}

    /// The lab switched this device's USB power (a hub port, an operator's cable). Real
    /// devices notice by themselves; a simulated phone models what a real one would do
    /// (stop charging, drop off USB while the port is off).
    async fn usb_power_changed(&self, _on: bool) -> Result<(), DeviceError> {
        Ok(())
    }

    /// Cuts USB power in software (tether = "software"); says what it managed (see
    /// [`UntetherMode`]: a phone told it is unplugged still charges).
    async fn software_untether(&self) -> Result<UntetherMode, DeviceError> {
        Err(DeviceError::Unsupported { device: self.name().into(), what: "software untether".into() })
    }

    async fn software_retether(&self) -> Result<(), DeviceError> {
        Err(DeviceError::Unsupported { device: self.name().into(), what: "software re-tether".into() })
    }

    /// The battery's health and cycle count, where the platform gives them.
    async fn battery_health(&self) -> Result<BatteryHealth, DeviceError> {
        Err(DeviceError::Unsupported { device: self.name().into(), what: "reading battery health".into() })
    }

    /// Waits until the device answers again, up to `timeout`.
    async fn wait_connected(&self, timeout: Duration) -> Result<(), DeviceError>;

    /// Stops logging, pulls raw files into `dir`, parses them into measurements.
    async fn collect(&self, app: &AppHandle, dir: &Path) -> Result<Collected, DeviceError>;

    /// Steps the device needs from an operator in every attempt.
    fn operator_steps(&self) -> Vec<DeviceStep> {
        Vec::new()
    }

    /// Stops the app (idempotent).
    async fn stop(&self, app: &AppHandle) -> Result<(), DeviceError>;
}
