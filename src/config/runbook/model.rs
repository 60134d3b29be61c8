//! The validated runbook: one experiment (builds × configs × devices × repeats).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::lab::model::Platform;

#[derive(Debug, Clone, Serialize)]
pub struct Runbook {
    pub name: String,
    pub description: String,
    /// The file this runbook came from.
    pub source: PathBuf,
    /// The file's text, verbatim (kept with every campaign).
    #[serde(skip)]
    pub text: String,
    /// sha256 of the runbook file's bytes.
    pub sha256: String,
    /// Length of the soak of every trial.
    pub duration: Duration,
    /// Trials per variant per device model (spread over the devices of that model);
    /// with adaptive repeats, the first round (`min`).
    pub repeats: u32,
    /// `repeats = { min, max, target_ci }`: add trials until the gating metrics' intervals
    /// are narrow enough (see docs/statistics.md).
    pub adaptive: Option<AdaptiveRepeats>,
    pub seed: u64,
    pub order: Order,
    /// Pause between two trials on one device (on top of the charge and temperature gates).
    pub cooldown: Duration,
    /// How often an invalid trial is re-run before it is given up.
    pub retries: u32,
    /// What happens to the trials of a device that stays unreachable.
    pub on_offline: OnOffline,
    /// Device selectors as written (`name-glob`, `tag:X`, `model:X`), already checked against the lab.
    pub devices: Vec<Selector>,
    /// Builds in file order; exactly one has `baseline = true`.
    pub builds: Vec<Build>,
    /// Configs in file order; `[configs]` absent gives one config named `default`.
    pub configs: Vec<VariantConfig>,
    pub workload: Workload,
    /// The traffic endpoint the runner starts when a device talks to it.
    pub endpoint: EndpointSettings,
    pub preconditions: Preconditions,
    /// Metrics to record and report; empty means everything the device gives.
    pub metrics: Vec<String>,
    pub statistics: StatsSettings,
    pub timeouts: PhaseTimeouts,
    /// `[monitor]`: how trials on a power monitor are measured.
    pub monitor: MonitorSettings,
    /// `[[steps]]`: what an operator does by hand, in file order.
    pub steps: Vec<crate::config::OperatorStep>,
}

impl Runbook {
    pub fn baseline(&self) -> &Build {
        self.builds.iter().find(|b| b.baseline).expect("validated runbook has a baseline")
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Randomized complete blocks per device: each block runs every variant once, shuffled.
    #[default]
    Balanced,
    /// Variant after variant, repeats together (how people do it by hand; confounds drift).
    Sequential,
    /// Fully shuffled per device.
    Random,
}

/// `on_offline`: what becomes of the pending trials of a device that is lost and not
/// back within `timeouts.reconnect`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum OnOffline {
    /// They wait for the device: the campaign ends interrupted, `lab run --resume` goes on.
    #[default]
    Wait,
    /// They move to other devices of the same model in the campaign that are still up.
    Move,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(tag = "kind", content = "value", rename_all = "lowercase")]
pub enum Selector {
    /// A device name or a glob over names (`sim-iphone-*`).
    Name(String),
    Tag(String),
    Model(String),
}

#[derive(Debug, Clone, Serialize)]
pub struct Build {
    pub name: String,
    pub baseline: bool,
    pub ios: Option<IosArtifact>,
    pub android: Option<AndroidArtifact>,
    pub host: Option<HostCommand>,
    pub sim: Option<SimProfile>,
}

impl Build {
    /// Whether this build has something a device of `platform` can run.
    pub fn runs_on(&self, platform: Platform) -> bool {
        match platform {
            Platform::Sim => self.sim.is_some(),
            Platform::Ios => self.ios.is_some(),
            Platform::Android => self.android.is_some(),
            Platform::Host => self.host.is_some(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct IosArtifact {
    pub ipa: PathBuf,
    pub bundle_id: String,
    pub sha256: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct AndroidArtifact {
    /// One APK, or split APKs with the base first (installed together, `adb install-multiple`).
    pub apks: Vec<ApkFile>,
    pub package: String,
    /// Activity to start (`.MainActivity`); defaults to the package's launcher activity.
    pub activity: Option<String>,
    /// Of all files, in order: the file's sha256 for one APK; for split APKs the sha256 of
    /// their sha256s (hex, one per line).
    pub sha256: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ApkFile {
    pub path: PathBuf,
    pub sha256: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct HostCommand {
    /// argv; never passed through a shell.
    pub command: Vec<String>,
    /// argv of a step that builds the program, run once per campaign and device before
    /// the first trial of this build (with the same `env` and `cwd`).
    pub build: Option<Vec<String>>,
    pub env: BTreeMap<String, String>,
    pub cwd: Option<PathBuf>,
}

/// How a simulated app behaves (see docs/sim.md).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SimProfile {
    /// CPU load in percent of one core (can exceed 100 on multi-core phones).
    pub cpu_pct: f64,
    pub wakeups_per_s: f64,
    pub memory_mb: f64,
    /// Fraction of requests answered from a local cache (never reach the network).
    pub cache_hit_ratio: f64,
    /// Probability that the app dies during a trial.
    pub crash_probability: f64,
    /// A label that makes this a different build (a new nightly of the same code): it
    /// changes the build's hash, never its behaviour. Left out of the hash when absent,
    /// so existing builds keep theirs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build_id: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct VariantConfig {
    pub name: String,
    /// Environment of the program on a `host` device (added to the build's `env`).
    pub env: BTreeMap<String, String>,
    /// Arguments appended to a `host` build's command.
    pub args: Vec<String>,
    pub files: Vec<PushFile>,
    pub sim: SimAdjust,
    /// What an Android app is started with.
    pub android: AndroidLaunch,
    /// What an iOS app is started with.
    pub ios: IosLaunch,
}

impl VariantConfig {
    pub fn default_config() -> Self {
        VariantConfig {
            name: "default".into(),
            env: BTreeMap::new(),
            args: Vec::new(),
            files: Vec::new(),
            sim: SimAdjust::default(),
            android: AndroidLaunch::default(),
            ios: IosLaunch::default(),
        }
    }
}

/// `[configs.NAME.android]`: intent extras of the activity start.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct AndroidLaunch {
    pub extras: BTreeMap<String, IntentExtra>,
}

/// One intent extra, typed as TOML wrote it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(untagged)]
pub enum IntentExtra {
    Str(String),
    /// A whole number within 32 bits: an `int` extra (`getIntExtra`).
    Int(i64),
    Bool(bool),
    /// A `float` extra (`getFloatExtra`).
    Float(f64),
}

impl IntentExtra {
    /// The `am start` options that pass this extra: `["--ez", "trace", "true"]`.
    pub fn am_args(&self, key: &str) -> [String; 3] {
        let (option, value) = match self {
            IntentExtra::Str(s) => ("--es", s.clone()),
            IntentExtra::Int(i) => ("--ei", i.to_string()),
            IntentExtra::Bool(b) => ("--ez", b.to_string()),
            IntentExtra::Float(f) => ("--ef", f.to_string()),
        };
        [option.to_string(), key.to_string(), value]
    }
}

/// `[configs.NAME.ios]`: the app's environment and launch arguments.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct IosLaunch {
    pub env: BTreeMap<String, String>,
    pub args: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PushFile {
    pub src: PathBuf,
    /// Destination on the device, relative to the app's data folder.
    pub dest: String,
    pub sha256: String,
}

/// How a config changes a simulated app's behaviour.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SimAdjust {
    pub cpu_scale: f64,
    pub wakeups_scale: f64,
    pub memory_mb_add: f64,
    pub cache_hit_ratio: Option<f64>,
    pub crash_probability: Option<f64>,
}

impl Default for SimAdjust {
    fn default() -> Self {
        SimAdjust {
            cpu_scale: 1.0,
            wakeups_scale: 1.0,
            memory_mb_add: 0.0,
            cache_hit_ratio: None,
            crash_probability: None,
        }
    }
}

impl SimAdjust {
    pub fn apply(&self, p: &SimProfile) -> SimProfile {
        SimProfile {
            cpu_pct: p.cpu_pct * self.cpu_scale,
            wakeups_per_s: p.wakeups_per_s * self.wakeups_scale,
            memory_mb: p.memory_mb + self.memory_mb_add,
            cache_hit_ratio: self.cache_hit_ratio.unwrap_or(p.cache_hit_ratio),
            crash_probability: self.crash_probability.unwrap_or(p.crash_probability),
            build_id: p.build_id.clone(),
        }
    }
}

/// `[monitor]` (docs/platforms/monitors.md): for devices a power monitor supplies.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Default)]
pub struct MonitorSettings {
    /// The start of the soak left out of the monitor's figures (the app settling).
    pub warmup: Duration,
    /// Before each trial, how long the phone idles with the app stopped, measured on the
    /// same monitor for the app's net energy; `None`: no idle baseline.
    pub idle: Option<Duration>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Workload {
    /// One request every `request_interval`; `None` means the workload sends no requests.
    pub request_interval: Option<Duration>,
    /// Allowed relative difference between expected and observed requests (0.02 = 2 %).
    pub request_tolerance: f64,
}

impl Workload {
    /// Requests the workload implies over `duration`: floor(duration / interval).
    pub fn expected_requests(&self, duration: Duration) -> Option<u64> {
        let iv = self.request_interval?;
        Some((duration.as_nanos() / iv.as_nanos().max(1)) as u64)
    }
}

#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Preconditions {
    /// Screen brightness range in percent, inclusive.
    pub brightness: Option<(f64, f64)>,
    pub bluetooth: Option<bool>,
    pub wifi: Option<bool>,
    /// Low Power Mode (iOS) / battery saver (Android) must be on or off.
    pub low_power: Option<bool>,
    /// Charge to at least this battery level (percent) before a trial.
    pub battery_min: Option<f64>,
    /// Cool down to at most this temperature (°C) before a trial.
    pub temperature_max: Option<f64>,
    /// The soak must run off USB power.
    pub untethered: bool,
    /// The app must be in the foreground at the end of the soak.
    pub app_foreground: bool,
    /// Hosts: wait until the 1-minute load average is at most this before a trial.
    pub load_max: Option<f64>,
    /// Hosts with a battery must run on AC power.
    pub ac_power: Option<bool>,
    /// Set brightness, Bluetooth and Wi-Fi to what is asked before each trial, where the
    /// device allows (`false`: only read and check them).
    pub auto_fix: bool,
}

/// How the traffic endpoint answers (see docs/config.md, `[endpoint]`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct EndpointSettings {
    /// Address to listen on; port 0 picks a free port.
    pub bind: SocketAddr,
    /// HTTP status of every answer.
    pub status: u16,
    /// Bytes in every answer's body.
    pub body_bytes: u64,
    /// `Cache-Control` header of every answer; `None` sends none.
    pub cache_control: Option<String>,
    /// Base URL devices are given (`http://192.0.2.10:8765`); trial URLs are
    /// `<public_url>/t/<token>`. Only the lab sets it (`LabEndpoint::apply`); `None`: built
    /// from the address the endpoint listens on.
    pub public_url: Option<String>,
}

impl Default for EndpointSettings {
    fn default() -> Self {
        EndpointSettings {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            status: 200,
            body_bytes: 0,
            cache_control: None,
            public_url: None,
        }
    }
}

/// Adaptive repeats: `repeats = { min = 5, max = 30, target_ci = "3%" }` (until precise)
/// or `repeats = { min = 3, max = 30, stop = "decided" }` (until decided).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct AdaptiveRepeats {
    /// Trials per variant per device model in the first round.
    pub min: u32,
    /// Never more than this many planned trials per variant per device model.
    pub max: u32,
    /// Target half-width of every gating metric's confidence interval, relative to its
    /// mean (0.03 = ±3 %); 0 (unused) when `stop` is `decided`.
    pub target_ci: f64,
    /// What ends the repeats. Absent in plans stored before sequential campaigns.
    #[serde(default)]
    pub stop: StopRule,
    /// A sequential design sized from a power (`power = 0.9`): `min` and `max` are then
    /// its first look and its most trials per arm, set when the campaign is planned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<PowerDesign>,
}

/// `repeats = { stop = "decided", power = 0.9, looks = 5, cv = "5%" }`: what a sequential
/// design sized from a power asks for (docs/statistics.md, "Designs sized from a power").
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct PowerDesign {
    /// Power to call a change of twice the threshold.
    pub power: f64,
    /// Looks, after equal blocks.
    pub looks: u32,
    /// The CV it is sized for: the runbook's `cv`, or (when planned) the lab's noise
    /// floor; `None` in a runbook that leaves it to the lab.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cv: Option<f64>,
    /// How many campaigns the lab's noise floor pooled, when `cv` came from it (0: the
    /// runbook's); `lab plan` names them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub noise_campaigns: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl PowerDesign {
    /// The design's target once its CV is known.
    pub fn target(&self) -> Option<crate::stats::sequential::Target> {
        Some(crate::stats::sequential::Target { power: self.power, looks: self.looks, cv: self.cv? })
    }
}

impl AdaptiveRepeats {
    /// Repeats until every gating interval is within `target_ci`.
    pub fn precise(min: u32, max: u32, target_ci: f64) -> AdaptiveRepeats {
        AdaptiveRepeats { min, max, target_ci, stop: StopRule::Precise, power: None }
    }

    /// Repeats until every compared variant is decided (a group-sequential design).
    pub fn decided(min: u32, max: u32) -> AdaptiveRepeats {
        AdaptiveRepeats { min, max, target_ci: 0.0, stop: StopRule::Decided, power: None }
    }

    pub fn sequential(&self) -> bool {
        self.stop == StopRule::Decided
    }

    /// The target of a design sized from a power, once planned (its CV known).
    pub fn target(&self) -> Option<crate::stats::sequential::Target> {
        self.power.and_then(|p| p.target())
    }
}

/// What ends adaptive repeats.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum StopRule {
    /// Every gating metric's interval is within `target_ci` (precision; no p-value looked at).
    #[default]
    Precise,
    /// Every variant compared is `worse`, `better` or `same` by a group-sequential test
    /// (docs/statistics.md, "Sequential campaigns").
    Decided,
}

/// Metrics whose verdicts decide a comparison when the runbook names none: energy and
/// charge, CPU, memory.
pub const DEFAULT_GATING: [&str; 4] = ["energy_level", "charge_used_mah", "cpu_pct", "memory_mb"];

fn default_gating() -> Vec<String> {
    DEFAULT_GATING.iter().map(|m| m.to_string()).collect()
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StatsSettings {
    pub alpha: f64,
    /// Smallest relative change that matters (0.05 = 5 %).
    pub practical_threshold: f64,
    /// Confidence level of intervals (0.95).
    pub confidence: f64,
    /// The gating family: metrics whose p-values are Holm-adjusted together and whose
    /// verdicts decide a comparison (and `lab compare`'s exit code).
    #[serde(default = "default_gating")]
    pub gating: Vec<String>,
}

impl Default for StatsSettings {
    fn default() -> Self {
        StatsSettings { alpha: 0.05, practical_threshold: 0.05, confidence: 0.95, gating: default_gating() }
    }
}

/// Upper bounds per phase; a phase that takes longer fails the trial attempt.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PhaseTimeouts {
    pub prepare: Duration,
    /// Waiting for the battery to reach `battery_min` and the temperature to drop.
    pub gate: Duration,
    pub launch: Duration,
    pub tether: Duration,
    pub collect: Duration,
    /// How long a lost device is waited for before it is declared offline.
    pub reconnect: Duration,
    /// How long an operator step (a `[[steps]]` entry, a manual tether) waits for its
    /// answer before the attempt is given up as invalid.
    pub operator: Duration,
}

impl Default for PhaseTimeouts {
    fn default() -> Self {
        PhaseTimeouts {
            prepare: Duration::from_secs(600),
            gate: Duration::from_secs(4 * 3600),
            launch: Duration::from_secs(120),
            tether: Duration::from_secs(120),
            collect: Duration::from_secs(600),
            reconnect: Duration::from_secs(1800),
            operator: Duration::from_secs(1800),
        }
    }
}
