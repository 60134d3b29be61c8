//! What the simulated phone logs during a trial; `dump` writes it out as text.
//!
//! Times are relative to the app's launch.

use std::time::Duration;

/// The battery timeline, the app's per-minute samples and the events of one trial.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TrialLog {
    /// One record at launch, one per minute, one at every change and one at the end.
    pub records: Vec<BatteryRecord>,
    pub samples: Vec<Sample>,
    pub events: Vec<LogEvent>,
    /// Set when the measurement window closes (re-tether, stop or collect).
    pub end: Option<LogEnd>,
    /// The screen's brightness (percent) and Bluetooth at launch, as a phone's own log
    /// has them (changes are `events`).
    pub brightness_pct: f64,
    pub bluetooth_on: bool,
}

impl TrialLog {
    /// Adds a record, replacing one already taken at the same time (the later state wins).
    pub fn record(&mut self, rec: BatteryRecord) {
        match self.records.last_mut() {
            Some(last) if last.t == rec.t => *last = rec,
            _ => self.records.push(rec),
        }
    }
}

/// One reading of the fuel gauge, like iOS's IOPMPowerSource or `dumpsys battery`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatteryRecord {
    pub t: Duration,
    /// Whole percent, as the platform shows it.
    pub level_pct: u32,
    /// Charge counter, whole mAh (like `AppleRawCurrentCapacity`).
    pub charge_mah: u64,
    /// Current into the battery, mA (negative = discharging).
    pub current_ma: f64,
    /// External power connected.
    pub external_power: bool,
    pub charging: bool,
    pub temp_c: f64,
}

/// The app's activity over one minute (or the last part of one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// End of the sampled interval.
    pub t: Duration,
    pub dt: Duration,
    /// Percent of one core, averaged over `dt`.
    pub cpu_pct: f64,
    pub memory_mb: f64,
    pub wakeups: u64,
    /// Requests that went out on the network.
    pub sent: u64,
    /// Requests answered from the app's cache.
    pub cached: u64,
    /// Xcode-like energy level, 0–20, whole numbers as the gauge shows them.
    pub energy_level: u32,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogEvent {
    pub t: Duration,
    pub kind: EventKind,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EventKind {
    /// The app died.
    Crash,
    /// The screen brightness changed by itself (to `pct`).
    Brightness {
        pct: f64,
    },
    /// External power appeared while the phone should have run on battery.
    ExternalPower,
    /// The lab lost contact with the phone (the sample stream has a gap).
    LostContact,
    Reconnected,
}

impl EventKind {
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::Crash => "crash",
            EventKind::Brightness { .. } => "brightness",
            EventKind::ExternalPower => "external_power",
            EventKind::LostContact => "lost_contact",
            EventKind::Reconnected => "reconnected",
        }
    }
}

/// The end of the measurement window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogEnd {
    /// Window length.
    pub t: Duration,
    /// The app's own request counter over the window.
    pub requests_sent: u64,
    pub requests_cached: u64,
    /// The app was still running when the window closed.
    pub app_alive: bool,
}
