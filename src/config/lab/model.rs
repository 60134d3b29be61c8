//! The validated lab inventory (`lab.toml`): hosts, the devices attached to them, and
//! where the traffic endpoint is reached.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::runbook::model::EndpointSettings;

/// A validated lab. Paths are absolute (resolved against the lab file's folder).
#[derive(Debug, Clone, Serialize)]
pub struct Lab {
    pub name: String,
    /// The file this lab came from (or `<embedded>` for the built-in default).
    pub source: PathBuf,
    /// The file's text, verbatim (kept with every campaign).
    #[serde(skip)]
    pub text: String,
    /// Where trials write their raw files: `[lab] artifacts` when it is a folder, else
    /// `[lab.object_store] local` (default `artifacts`), the files' first place before the
    /// bucket.
    pub artifacts_dir: PathBuf,
    /// `[lab] artifacts = "s3://bucket/prefix"` and `[lab.object_store]`: the bucket every
    /// raw file is uploaded to (docs/artifacts.md). `None`: the folder is their one place.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_store: Option<ObjectStoreSettings>,
    /// `[lab] store` (or `LAB_STORE`): a SQLite file, or a PostgreSQL server.
    pub store: StoreLocation,
    pub hosts: Vec<Host>,
    pub devices: Vec<DeviceSpec>,
    /// Where the traffic endpoint listens and the address devices are given.
    pub endpoint: LabEndpoint,
    /// `[care]`: how `lab care` keeps hub-powered phones between campaigns.
    pub care: CareSettings,
    /// `[[schedule]]`: runbooks that run again on a calendar (docs/schedule.md).
    pub schedules: Vec<crate::config::schedule::model::Schedule>,
    /// `[[monitor]]`: power monitors, each supplying at most one device.
    pub monitors: Vec<MonitorSpec>,
    /// `[serve]`: `lab serve`'s address and access (docs/serve.md). Not part of what a
    /// campaign records of its lab.
    #[serde(skip)]
    pub serve: ServeSettings,
}

/// `[serve]` of lab.toml.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeSettings {
    /// Where `lab serve` listens unless `--bind` says otherwise: loopback by default.
    pub bind: std::net::SocketAddr,
    /// The file holding the token that changes (and, off loopback, reads) the lab.
    pub token_file: Option<PathBuf>,
    /// Off loopback (or behind a proxy), pages may be read without the token.
    pub public_read: bool,
    /// Where people reach it through a reverse proxy: `https://lab.example.org`. Its host
    /// is answered on a loopback bind, changes from its pages are same-origin, and reading
    /// needs the token as off loopback.
    pub public_url: Option<PublicUrl>,
    /// How long a connection may take to send a request's head, counted from when the
    /// server waits for one: at the connection's start and after each answer, so an idle
    /// keep-alive connection is closed at this timeout too. A body must arrive within it.
    pub header_timeout: std::time::Duration,
    /// Connections served at once; at the limit, accepting waits (open ones keep being
    /// answered, new ones queue in the kernel until one closes).
    pub max_connections: u32,
    /// The largest request body (a form) read, in bytes: 413 beyond it.
    pub max_body_bytes: u32,
    /// The folder whose runbooks (`*.toml` directly in it) the Submit page offers:
    /// `runbooks` beside the lab file unless `[serve] runbooks` says otherwise.
    pub runbooks: PathBuf,
}

/// `[serve] public_url`, split.
#[derive(Debug, Clone, PartialEq)]
pub struct PublicUrl {
    /// `lab.example.org` or `lab.example.org:8443`: what the proxy passes in `Host`.
    pub host: String,
    pub https: bool,
}

impl Default for ServeSettings {
    fn default() -> Self {
        ServeSettings {
            bind: std::net::SocketAddr::from(([127, 0, 0, 1], 8470)),
            token_file: None,
            public_read: false,
            public_url: None,
            header_timeout: std::time::Duration::from_secs(20),
            max_connections: 1024,
            max_body_bytes: 64 * 1024,
            runbooks: PathBuf::from("runbooks"),
        }
    }
}

impl Lab {
    /// The monitor that supplies `device`, if one does.
    pub fn monitor_of(&self, device: &str) -> Option<&MonitorSpec> {
        self.monitors.iter().find(|m| m.supplies.as_deref() == Some(device))
    }
}

/// An S3-compatible bucket for the lab's raw files (docs/artifacts.md).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObjectStoreSettings {
    pub bucket: String,
    /// The keys' common prefix, without a leading or trailing `/` (empty: none).
    pub prefix: String,
    /// An S3-compatible server (MinIO, Ceph, GCS's interoperability): its base URL.
    /// `None`: AWS, at the region's endpoint (or `AWS_ENDPOINT`).
    pub endpoint: Option<String>,
    /// `None`: `AWS_DEFAULT_REGION`/`AWS_REGION`, else `us-east-1`.
    pub region: Option<String>,
    /// An `http://` endpoint is refused unless this is set.
    pub allow_http: bool,
    /// A program (argv, no shell) that prints the credentials; else the environment's.
    /// Not part of what a campaign records of its lab.
    #[serde(skip)]
    pub credentials_command: Vec<String>,
    /// Whether a raw file's local copy stays once its upload is confirmed.
    pub keep_local: bool,
    /// How long a campaign waits at its end for the uploads still going.
    #[serde(skip)]
    pub drain_timeout: Duration,
}

impl ObjectStoreSettings {
    /// `s3://bucket/prefix` as written in the lab file (normalized).
    pub fn url(&self) -> String {
        if self.prefix.is_empty() {
            format!("s3://{}", self.bucket)
        } else {
            format!("s3://{}/{}", self.bucket, self.prefix)
        }
    }
}

/// Where a lab's store is (docs/shared-lab.md).
#[derive(Debug, Clone)]
pub enum StoreLocation {
    /// A SQLite file: the default, `artifacts/lab.db`.
    Sqlite(PathBuf),
    /// A PostgreSQL server shared by several machines' lab files.
    Postgres {
        url: Box<crate::config::PgUrl>,
        /// `[lab] store_password_command`: a program (argv, no shell) that prints the password.
        password_command: Vec<String>,
    },
}

impl StoreLocation {
    /// The SQLite file, if the store is one.
    pub fn sqlite_path(&self) -> Option<&std::path::Path> {
        match self {
            StoreLocation::Sqlite(p) => Some(p),
            StoreLocation::Postgres { .. } => None,
        }
    }
}

/// Shown as a path or as the URL without its password: a lab is written into manifests.
impl Serialize for StoreLocation {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            StoreLocation::Sqlite(p) => p.serialize(s),
            StoreLocation::Postgres { url, .. } => s.serialize_str(url.shown()),
        }
    }
}

/// `[[monitor]]` (docs/platforms/monitors.md): an external power monitor that supplies one
/// device in place of its battery and samples its current.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MonitorSpec {
    pub name: String,
    /// The lab host it is attached to (its USB, or the host its Otii server runs on).
    pub host: String,
    pub kind: MonitorKind,
    /// The supply voltage, volts.
    pub voltage_v: f64,
    /// The current limit, amperes.
    pub current_limit_a: f64,
    /// Samples a second of the main current.
    pub sample_rate_hz: u32,
    /// The device it supplies (`[[device]] monitor`), if any.
    pub supplies: Option<String>,
}

/// Which instrument a monitor is, and where to find it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum MonitorKind {
    /// A Qoitech Otii Arc or Ace, through the Otii 3 TCP server at `address` (on the
    /// monitor's host: reached through that host's transport); `device`: its name or serial
    /// where the server has several.
    Otii { model: OtiiModel, address: String, device: Option<String> },
    /// A Monsoon power monitor on its host's USB, by its serial number.
    Monsoon { model: MonsoonModel, serial: String },
    /// The simulator's monitor, for simulated phones (its physical model: docs/sim.md).
    Sim,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum OtiiModel {
    Arc,
    Ace,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum MonsoonModel {
    /// The High Voltage Power Monitor.
    Hvpm,
    /// The Low Voltage Power Monitor.
    Lvpm,
}

/// What an instrument allows, from its maker's published specifications
/// (docs/platforms/monitors.md says which).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MonitorLimits {
    pub voltage_v: (f64, f64),
    pub max_current_a: f64,
    /// The sample rates it can be set to; one: it cannot be set.
    pub sample_rates_hz: &'static [u32],
}

impl MonitorKind {
    pub fn label(&self) -> &'static str {
        match self {
            MonitorKind::Otii { model: OtiiModel::Arc, .. } => "Otii Arc",
            MonitorKind::Otii { model: OtiiModel::Ace, .. } => "Otii Ace",
            MonitorKind::Monsoon { model: MonsoonModel::Hvpm, .. } => "Monsoon HVPM",
            MonitorKind::Monsoon { model: MonsoonModel::Lvpm, .. } => "Monsoon LVPM",
            MonitorKind::Sim => "simulated monitor",
        }
    }

    pub fn limits(&self) -> MonitorLimits {
        match self {
            MonitorKind::Otii { model: OtiiModel::Arc, .. } => {
                // The Otii 3 TCP server sets no Arc's rate (only an Ace's, with
                // `arc_set_channel_samplerate`): over TCP an Arc samples at 4 kHz.
                MonitorLimits { voltage_v: (0.5, 4.55), max_current_a: 5.0, sample_rates_hz: &[4000] }
            }
            MonitorKind::Otii { model: OtiiModel::Ace, .. } => MonitorLimits {
                voltage_v: (0.5, 25.0),
                max_current_a: 5.0,
                sample_rates_hz: &[1000, 4000, 10_000, 50_000],
            },
            MonitorKind::Monsoon { model: MonsoonModel::Hvpm, .. } => {
                MonitorLimits { voltage_v: (0.8, 13.5), max_current_a: 8.0, sample_rates_hz: &[5000] }
            }
            MonitorKind::Monsoon { model: MonsoonModel::Lvpm, .. } => {
                MonitorLimits { voltage_v: (2.01, 4.55), max_current_a: 4.5, sample_rates_hz: &[5000] }
            }
            MonitorKind::Sim => {
                MonitorLimits { voltage_v: (0.5, 25.0), max_current_a: 8.0, sample_rates_hz: &[10, 100, 1000, 5000] }
            }
        }
    }
}

/// `[care]` (docs/care.md): the charge window `lab care` keeps each hub-powered phone in,
/// and how often it looks when no phone is about to cross a limit.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct CareSettings {
    /// `charge = [lower, upper]`, percent: the port goes off at ≥ upper, on at ≤ lower.
    pub lower_pct: f64,
    pub upper_pct: f64,
    /// The longest time between two checks of a phone.
    pub interval: Duration,
}

impl Default for CareSettings {
    /// 40–80 %: the range phone makers' own "optimised charging" keeps a battery in.
    fn default() -> Self {
        CareSettings { lower_pct: 40.0, upper_pct: 80.0, interval: Duration::from_secs(15 * 60) }
    }
}

impl Lab {
    pub fn device(&self, name: &str) -> Option<&DeviceSpec> {
        self.devices.iter().find(|d| d.name == name)
    }
    pub fn host(&self, name: &str) -> Option<&Host> {
        self.hosts.iter().find(|h| h.name == name)
    }
    pub fn schedule(&self, name: &str) -> Option<&crate::config::schedule::model::Schedule> {
        self.schedules.iter().find(|s| s.name == name)
    }
}

/// `[lab] endpoint_bind` and `endpoint_url`: the traffic endpoint as the lab's network
/// sees it (a phone on Wi-Fi cannot reach this machine's loopback address).
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct LabEndpoint {
    /// Address to listen on; overrides the runbook's `[endpoint] bind` when set.
    pub bind: Option<SocketAddr>,
    /// Base URL devices are given (`http://192.0.2.10:8765`, no trailing `/`); trial URLs
    /// are `<url>/t/<token>`. `None`: built from the address the endpoint listens on.
    pub url: Option<String>,
}

impl LabEndpoint {
    /// The runbook's endpoint settings with the lab's address applied: the lab's bind
    /// wins, and its URL is what devices are given.
    pub fn apply(&self, settings: &EndpointSettings) -> EndpointSettings {
        EndpointSettings {
            bind: self.bind.unwrap_or(settings.bind),
            public_url: self.url.clone().or_else(|| settings.public_url.clone()),
            ..settings.clone()
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Host {
    pub name: String,
    pub kind: HostKind,
}

/// How a host is reached.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum HostKind {
    /// This machine.
    Local,
    /// A lab host reached over SSH.
    Ssh(SshHost),
}

/// A `[[host]]` with an `address`: see docs/hosts.md. The SSH transport holds it as it
/// is (`transport::SshConfig`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct SshHost {
    /// `hostname` or `hostname:port` (default port 22).
    pub address: String,
    pub user: String,
    /// Private key file; `None` uses the SSH agent.
    pub identity: Option<PathBuf>,
    pub known_hosts: PathBuf,
    /// Refuse hosts whose key is not in `known_hosts` (a changed key is always refused).
    pub strict_host_key_checking: bool,
    pub connect_timeout: Duration,
    /// libssh2 keepalive interval; also how stale a session may be before it is probed.
    pub keepalive: Duration,
    /// How many devices of this host may work at once: sessions open at once (each a TCP
    /// connection).
    pub max_sessions: u32,
    /// Build cache on the host, relative to the login folder, where builds are cached by
    /// sha256.
    pub cache_dir: String,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    Sim,
    Host,
    Android,
    Ios,
}

impl Platform {
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Sim => "sim",
            Platform::Host => "host",
            Platform::Android => "android",
            Platform::Ios => "ios",
        }
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a device is cut from and given back USB power around the soak.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum TetherSpec {
    /// Never tethered (a lab host, or a phone that lives on battery).
    None,
    /// An operator unplugs and replugs the cable when asked.
    Manual,
    /// The device unplugs itself in software (Android `dumpsys battery unplug`, the simulator).
    Software,
    /// A USB hub with per-port power switching, driven by `uhubctl -l LOCATION -p PORT`.
    /// `repeat`: `uhubctl -r N`, the off request sent N times (kernels before 6.0 power a
    /// port straight back on after one).
    Uhubctl { location: String, port: u32, repeat: Option<u32> },
    /// The hub port the device's USB serial is found on (`uhubctl -f` on its host), at
    /// the start of `lab run` (`tether::hubs::resolve_auto`).
    UhubctlAuto,
    /// The power monitor that supplies the device switches its USB passthrough off for the
    /// soak (a Monsoon): `tether = "monitor"`.
    Monitor,
}

impl TetherSpec {
    pub fn label(&self) -> String {
        match self {
            TetherSpec::None => "none".into(),
            TetherSpec::Manual => "manual".into(),
            TetherSpec::Software => "software".into(),
            TetherSpec::Uhubctl { location, port, .. } => format!("uhubctl {location}:{port}"),
            TetherSpec::UhubctlAuto => "uhubctl auto".into(),
            TetherSpec::Monitor => "monitor".into(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct DeviceSpec {
    pub name: String,
    pub host: String,
    pub model: String,
    pub os: String,
    pub tags: Vec<String>,
    pub tether: TetherSpec,
    /// The platform, with what only that platform has (`[device.sim]`, `[device.android]`,
    /// `[device.ios]`).
    pub kind: DeviceKind,
}

impl DeviceSpec {
    pub fn platform(&self) -> Platform {
        self.kind.platform()
    }
    pub fn sim(&self) -> Option<&SimParams> {
        match &self.kind {
            DeviceKind::Sim(s) => Some(s),
            _ => None,
        }
    }
    pub fn android(&self) -> Option<&AndroidDevice> {
        match &self.kind {
            DeviceKind::Android(a) => Some(a),
            _ => None,
        }
    }
    pub fn ios(&self) -> Option<&IosDevice> {
        match &self.kind {
            DeviceKind::Ios(i) => Some(i),
            _ => None,
        }
    }
}

/// What a device is, with the data of its platform's section.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "lowercase", tag = "platform")]
pub enum DeviceKind {
    /// A simulated phone: `[device.sim]`.
    Sim(SimParams),
    /// A Linux machine measuring itself.
    Host,
    /// An Android phone: `[device.android]`.
    Android(AndroidDevice),
    /// An iPhone: `[device.ios]`.
    Ios(IosDevice),
}

impl DeviceKind {
    pub fn platform(&self) -> Platform {
        match self {
            DeviceKind::Sim(_) => Platform::Sim,
            DeviceKind::Host => Platform::Host,
            DeviceKind::Android(_) => Platform::Android,
            DeviceKind::Ios(_) => Platform::Ios,
        }
    }
}

/// `[device.android]`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct AndroidDevice {
    /// The adb serial (`adb devices`; `192.168.1.7:5555` for adb over Wi-Fi).
    pub serial: String,
    pub adb_server: Option<AdbServer>,
    /// Record a Perfetto `android.power` trace (battery counters, power rails) on the
    /// phone over every trial (docs/platforms/android.md, "Perfetto during the soak").
    pub perfetto: bool,
}

/// The adb server to use, on the device's host: `adb -H host -P port`. None: adb's default (127.0.0.1:5037).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct AdbServer {
    pub host: String,
    pub port: u16,
}

impl AdbServer {
    /// adb's options that select this server.
    pub fn adb_args(&self) -> [String; 4] {
        ["-H".into(), self.host.clone(), "-P".into(), self.port.to_string()]
    }
}

/// `[device.ios]`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct IosDevice {
    /// The device's UDID (`idevice_id -l`).
    pub udid: String,
    /// Where usbmuxd answers on the device's host; `None`: the system's socket
    /// (`/var/run/usbmuxd`).
    pub usbmuxd: Option<UsbmuxdAddress>,
    /// The host's pair record for this phone (`/var/lib/lockdown/<UDID>.plist`), read on the
    /// machine that runs lab; `None`: the one usbmuxd keeps.
    pub pair_record: Option<PathBuf>,
    /// What is sampled over USB while a tethered trial runs (`samples = ["energy", "cpu",
    /// "packets"]`); empty: nothing, the phone is only read before and after.
    pub samples: Vec<IosSample>,
}

/// A tethered sample an iPhone can take during a trial (docs/platforms/ios.md).
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum IosSample {
    /// Xcode's energy gauge over DVT: unitless cost values (the 0–20 level).
    Energy,
    /// CPU (% of one core) and memory footprint from DVT sysmontap.
    Cpu,
    /// The app's packets through pcapd: packet and byte counts, HTTP requests.
    Packets,
}

impl IosSample {
    pub const NAMES: [&'static str; 3] = ["energy", "cpu", "packets"];

    pub fn from_name(name: &str) -> Option<IosSample> {
        match name {
            "energy" => Some(IosSample::Energy),
            "cpu" => Some(IosSample::Cpu),
            "packets" => Some(IosSample::Packets),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum UsbmuxdAddress {
    /// A Unix socket on the device's host.
    Socket(PathBuf),
    /// A TCP address as the device's host sees it (a forward to another machine's usbmuxd).
    Tcp { host: String, port: u16 },
}

impl std::fmt::Display for UsbmuxdAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UsbmuxdAddress::Socket(p) => write!(f, "{}", p.display()),
            UsbmuxdAddress::Tcp { host, port } => f.write_str(&crate::config::join_host_port(host, *port)),
        }
    }
}

/// Parameters of a simulated phone (see docs/sim.md for the physical model).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SimParams {
    /// Which real platform the simulator imitates (`ios` or `android`); decides the raw dump's shape.
    pub emulates: Platform,
    /// Seed of the per-device random effect and of the device's noise stream.
    pub seed: u64,
    pub battery_mah: f64,
    pub battery_start_pct: f64,
    pub voltage_v: f64,
    /// SoC and radios idle, screen off (mW).
    pub base_mw: f64,
    /// Display power at 100 % brightness (mW); scales linearly with brightness.
    pub screen_mw_max: f64,
    /// Power per percent of one core of CPU load (mW / %).
    pub cpu_mw_per_pct: f64,
    /// Energy per wakeup (mJ).
    pub wakeup_mj: f64,
    /// Energy per request on the radio (mJ), plus a tail at `radio_tail_mw` for `radio_tail`.
    pub request_mj: f64,
    pub radio_tail_mw: f64,
    pub radio_tail: Duration,
    /// Charging current when tethered (mA).
    pub charge_ma: f64,
    pub ambient_c: f64,
    /// Temperature rise per watt at steady state (°C / W) and the thermal time constant.
    pub thermal_c_per_w: f64,
    pub thermal_tau: Duration,
    /// Relative sd of the per-device random effect on power (e.g. 0.03 = 3 %).
    pub device_effect_sd: f64,
    /// Relative sd of the per-trial random effect on power.
    pub trial_noise_sd: f64,
    /// Brightness the device boots with (percent).
    pub brightness_pct: f64,
    /// Reachable only over USB, like a phone without Wi-Fi debugging: while its port is
    /// off (a uhubctl or manual tether) nobody can reach it, and after power comes back it
    /// takes a few seconds to show up again.
    pub usb_only: bool,
    /// The USB serial it shows on a hub (`lab hubs`, `tether = { uhubctl = "auto" }`).
    pub usb_serial: Option<String>,
    /// For tests on the stand-in uhubctl (standins/uhubctl), which stands in for the hub
    /// hardware: the phone reads its VBUS and whether it is on the bus from the stand-in at
    /// its uhubctl tether's port (`uhubctl --standin-vbus|--standin-bus LOC PORT` on its
    /// host) each time the tether switches it, instead of believing the tether.
    pub standin_hub: bool,
    /// Battery health it reports: full-charge capacity over design capacity, percent.
    pub battery_health_pct: f64,
    /// Charge cycles it reports.
    pub cycle_count: u32,
    pub faults: SimFaults,
}

/// Fault injection for the simulator: each a probability per trial.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct SimFaults {
    /// The device drops off USB/the network during the trial and comes back after `reconnect_after`.
    pub disconnect: f64,
    pub reconnect_after: Duration,
    /// Brightness resets (to 100 %) mid-soak.
    pub brightness_reset: f64,
    /// USB power is not really cut: the device charges during the soak.
    pub charging_during_soak: f64,
    /// A `usb_only` phone does not show up again when its port is switched back on, until
    /// `reconnect_after` has passed.
    pub stays_lost: f64,
}

impl SimParams {
    /// Defaults for a simulated phone imitating `emulates` (an iPhone 6s for `ios`,
    /// a Pixel 5 for `android`). Every field can be overridden in `[device.sim]`.
    pub fn defaults(emulates: Platform) -> Self {
        let (battery_mah, voltage_v) = match emulates {
            Platform::Android => (4080.0, 3.87),
            _ => (1715.0, 3.82),
        };
        SimParams {
            emulates,
            seed: 0,
            battery_mah,
            battery_start_pct: 100.0,
            voltage_v,
            // Calibrated on the Envoy Mobile audit (docs/sim.md, "Calibration"): with these,
            // control / envoy-poll / envoy-kqueue land on energy level 1 / 12 / 1 of 20
            // and kqueue drains within 5 % of control.
            base_mw: 350.0,
            screen_mw_max: 800.0,
            cpu_mw_per_pct: 4.0,
            wakeup_mj: 0.4,
            request_mj: 3.0,
            radio_tail_mw: 30.0,
            radio_tail: Duration::from_millis(200),
            charge_ma: 1000.0,
            ambient_c: 25.0,
            thermal_c_per_w: 6.0,
            thermal_tau: Duration::from_secs(600),
            device_effect_sd: 0.02,
            trial_noise_sd: 0.02,
            brightness_pct: 50.0,
            usb_only: false,
            usb_serial: None,
            standin_hub: false,
            battery_health_pct: 100.0,
            cycle_count: 0,
            faults: SimFaults { reconnect_after: Duration::from_secs(300), ..SimFaults::default() },
        }
    }
}
