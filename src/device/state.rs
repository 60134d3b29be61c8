//! What a device tells about itself, field by field, with where each value came from.

use serde::{Deserialize, Serialize};

/// Where a reading came from. The report says it, so an operator's word is never
/// mistaken for a measurement.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Provenance {
    /// Read from the device by the lab.
    Read,
    /// Set by the lab and read back.
    Set,
    /// Reported by the app under test.
    App,
    /// Attested by an operator.
    Operator,
    /// From the device's own log of the soak (an iPhone's powerlog), read after it.
    Powerlog,
}

impl Provenance {
    /// How the report and `lab status` name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Provenance::Read => "read",
            Provenance::Set => "set",
            Provenance::App => "app",
            Provenance::Operator => "attested",
            Provenance::Powerlog => "powerlog",
        }
    }
}

/// A value that may be unknown (no API reads it on this platform).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Reading<T> {
    #[default]
    Unknown,
    Known {
        value: T,
        from: Provenance,
    },
}

impl<T> Reading<T> {
    pub fn is_unknown(&self) -> bool {
        matches!(self, Reading::Unknown)
    }

    /// Where the value came from; `None` when unknown.
    pub fn from(&self) -> Option<Provenance> {
        match self {
            Reading::Unknown => None,
            Reading::Known { from, .. } => Some(*from),
        }
    }
}

impl<T: Copy> Reading<T> {
    pub fn read(value: T) -> Self {
        Reading::Known { value, from: Provenance::Read }
    }
    pub fn value(&self) -> Option<T> {
        match self {
            Reading::Unknown => None,
            Reading::Known { value, .. } => Some(*value),
        }
    }
}

impl Reading<String> {
    pub fn text(&self) -> Option<&str> {
        match self {
            Reading::Unknown => None,
            Reading::Known { value, .. } => Some(value),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct StateSnapshot {
    /// Screen brightness, percent of maximum.
    pub brightness_pct: Reading<f64>,
    pub bluetooth_on: Reading<bool>,
    pub wifi_on: Reading<bool>,
    pub battery_pct: Reading<f64>,
    pub charging: Reading<bool>,
    /// External power connected (USB), whether or not it charges.
    pub external_power: Reading<bool>,
    pub battery_temp_c: Reading<f64>,
    /// Platform thermal status (Android `Thermal Status: N`, 0 = none).
    pub thermal_status: Reading<u32>,
    /// Bundle id / package of the foreground app.
    pub foreground_app: Reading<String>,
    /// Hosts: the 1-minute load average (`/proc/loadavg`).
    #[serde(default, skip_serializing_if = "Reading::is_unknown")]
    pub load_avg: Reading<f64>,
    /// Hosts: the CPU frequency governor (`scaling_governor` of cpu0).
    #[serde(default, skip_serializing_if = "Reading::is_unknown")]
    pub cpu_governor: Reading<String>,
    /// Hosts: the hottest thermal zone, °C.
    #[serde(default, skip_serializing_if = "Reading::is_unknown")]
    pub cpu_temp_c: Reading<f64>,
    /// Phones: battery saver (Android `low_power`).
    #[serde(default, skip_serializing_if = "Reading::is_unknown")]
    pub low_power: Reading<bool>,
    /// Phones: airplane mode.
    #[serde(default, skip_serializing_if = "Reading::is_unknown")]
    pub airplane_mode: Reading<bool>,
    /// Phones: the screen is on (awake).
    #[serde(default, skip_serializing_if = "Reading::is_unknown")]
    pub screen_on: Reading<bool>,
    /// Phones: the screen stays on while plugged in (Android `stay_on_while_plugged_in` ≠ 0).
    #[serde(default, skip_serializing_if = "Reading::is_unknown")]
    pub stay_awake: Reading<bool>,
}

impl StateSnapshot {
    /// What a device's own log of the soak says (an iPhone's powerlog): the brightest the
    /// screen was and whether Bluetooth was on at any time, as `Provenance::Powerlog`;
    /// `None` when the log says neither.
    pub fn from_soak_log(log: &crate::collect::ios::powerlog::SoakLog) -> Option<StateSnapshot> {
        let logged = |v| Reading::Known { value: v, from: Provenance::Powerlog };
        let s = StateSnapshot {
            brightness_pct: log.brightness_max_pct().map_or(Reading::Unknown, logged),
            bluetooth_on: log
                .bluetooth_on
                .map_or(Reading::Unknown, |b| Reading::Known { value: b, from: Provenance::Powerlog }),
            ..StateSnapshot::default()
        };
        (s != StateSnapshot::default()).then_some(s)
    }
}

/// State the lab would like the device in; `None` leaves a field alone.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct DesiredState {
    pub brightness_pct: Option<f64>,
    pub bluetooth_on: Option<bool>,
    pub wifi_on: Option<bool>,
}

impl DesiredState {
    pub fn is_empty(&self) -> bool {
        self.brightness_pct.is_none() && self.bluetooth_on.is_none() && self.wifi_on.is_none()
    }
}
