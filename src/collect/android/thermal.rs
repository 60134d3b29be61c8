//! `adb shell dumpsys thermalservice`: the thermal status and the temperature lists.
//!
//! ```text
//! Thermal Status: 1
//! Cached temperatures:
//!     Temperature{mValue=38.1, mType=0, mName=AP, mStatus=0}
//! HAL Ready: true
//! Current temperatures from HAL:
//!     Temperature{mValue=44.8, mType=0, mName=AP, mStatus=0}
//! ```
//! `mValue` is in °C; `mType` is `android.os.Temperature.TYPE_*`; `mStatus` and the thermal
//! status are `PowerManager.THERMAL_STATUS_*` (0 none … 6 shutdown).

use serde::Serialize;

use crate::collect::parse_error::ParseError;
use crate::collect::text::{boolean, end_line, excerpt, finite, number, numbered};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Temperature {
    pub name: String,
    /// `mType`.
    pub type_code: i64,
    pub type_name: String,
    pub value_c: f64,
    /// `mStatus` (throttling severity of this sensor).
    pub status: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThermalService {
    /// `Thermal Status:` (0 none, 1 light, 2 moderate, 3 severe, 4 critical, 5 emergency, 6 shutdown).
    pub status: i64,
    pub status_name: &'static str,
    pub status_override: Option<bool>,
    pub hal_ready: Option<bool>,
    /// `Cached temperatures:` (the last values the service was told about).
    pub cached: Vec<Temperature>,
    /// `Current temperatures from HAL:` (read when the dump was taken).
    pub current: Vec<Temperature>,
}

impl ThermalService {
    /// The HAL's current list when there is one, else the cached list.
    pub fn temperatures(&self) -> &[Temperature] {
        if self.current.is_empty() { &self.cached } else { &self.current }
    }

    /// Highest temperature of one type (e.g. `BATTERY`, `SKIN`).
    pub fn max_of_type(&self, type_name: &str) -> Option<f64> {
        self.temperatures().iter().filter(|t| t.type_name == type_name).map(|t| t.value_c).reduce(f64::max)
    }
}

pub fn status_name(code: i64) -> &'static str {
    match code {
        0 => "none",
        1 => "light",
        2 => "moderate",
        3 => "severe",
        4 => "critical",
        5 => "emergency",
        6 => "shutdown",
        _ => "unknown",
    }
}

/// `android.os.Temperature.TYPE_*`.
pub fn type_name(code: i64) -> String {
    const NAMES: [&str; 20] = [
        "CPU",
        "GPU",
        "BATTERY",
        "SKIN",
        "USB_PORT",
        "POWER_AMPLIFIER",
        "BCL_VOLTAGE",
        "BCL_CURRENT",
        "BCL_PERCENTAGE",
        "NPU",
        "TPU",
        "DISPLAY",
        "MODEM",
        "SOC",
        "WIFI",
        "CAMERA",
        "FLASHLIGHT",
        "SPEAKER",
        "AMBIENT",
        "POGO",
    ];
    usize::try_from(code).ok().and_then(|i| NAMES.get(i)).map_or_else(|| format!("TYPE_{code}"), |s| s.to_string())
}

#[derive(Clone, Copy, PartialEq)]
enum Section {
    Cached,
    Current,
    Other,
}

/// Parses one `Temperature{mValue=.., mType=.., mName=.., mStatus=..}`.
fn temperature(n: usize, l: &str) -> Result<Temperature, ParseError> {
    let inner = l.strip_prefix("Temperature{").and_then(|r| r.strip_suffix('}')).ok_or_else(|| {
        ParseError::at(n, format!("malformed temperature `{}` (expected `Temperature{{…}}`)", excerpt(l)))
    })?;
    let (mut value, mut kind, mut name, mut status) = (None, None, None, None);
    for pair in inner.split(", ") {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(ParseError::at(n, format!("`{}` is not a key=value field", excerpt(pair))));
        };
        match k.trim() {
            "mValue" => value = Some(finite(n, "mValue", v)?),
            "mType" => kind = Some(number::<i64>(n, "mType", v)?),
            "mName" => name = Some(v.to_string()),
            "mStatus" => status = Some(number::<i64>(n, "mStatus", v)?),
            _ => {}
        }
    }
    let missing = |k: &str| ParseError::at(n, format!("temperature without `{k}=`"));
    let type_code = kind.ok_or_else(|| missing("mType"))?;
    Ok(Temperature {
        name: name.ok_or_else(|| missing("mName"))?,
        type_code,
        type_name: type_name(type_code),
        value_c: value.ok_or_else(|| missing("mValue"))?,
        status: status.unwrap_or(0),
    })
}

/// Parses `dumpsys thermalservice` output.
pub fn parse(text: &str) -> Result<ThermalService, ParseError> {
    let (mut status, mut status_override, mut hal_ready) = (None, None, None);
    let (mut cached, mut current) = (Vec::new(), Vec::new());
    let mut section = Section::Other;
    for (n, raw) in numbered(text) {
        let l = raw.trim();
        if l.is_empty() {
            continue;
        }
        if l.starts_with("Temperature{") {
            let t = temperature(n, l)?;
            match section {
                Section::Cached => cached.push(t),
                Section::Current => current.push(t),
                Section::Other => {}
            }
            continue;
        }
        let indented = raw.starts_with(['\t', ' ']);
        if let Some((k, v)) = l.split_once(':') {
            let (k, v) = (k.trim(), v.trim());
            match k {
                "Thermal Status" => status = Some(number::<i64>(n, "Thermal Status", v)?),
                "IsStatusOverride" => status_override = boolean(v),
                "HAL Ready" => hal_ready = boolean(v),
                _ => {}
            }
            if v.is_empty() && !indented {
                section = match k {
                    "Cached temperatures" => Section::Cached,
                    "Current temperatures from HAL" => Section::Current,
                    _ => Section::Other,
                };
            }
        } else if !indented && !l.contains('{') {
            return Err(ParseError::at(
                n,
                format!("unexpected line `{}` in `dumpsys thermalservice` output", excerpt(l)),
            ));
        }
    }
    let status = status.ok_or_else(|| {
        ParseError::at(end_line(text), "no `Thermal Status:` line: not `dumpsys thermalservice` output, or truncated")
    })?;
    Ok(ThermalService { status, status_name: status_name(status), status_override, hal_ready, cached, current })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "IsStatusOverride: false\nThermalEventListeners:\n\tcallbacks: 2\n\tkilled: false\nThermal Status: 1\nCached temperatures:\n\tTemperature{mValue=38.1, mType=0, mName=AP, mStatus=0}\n\tTemperature{mValue=32.2, mType=2, mName=BAT, mStatus=0}\nHAL Ready: true\nHAL connection:\n\tThermalHAL AIDL 1  connected: yes\nCurrent temperatures from HAL:\n\tTemperature{mValue=44.8, mType=0, mName=AP, mStatus=0}\n\tTemperature{mValue=33.5, mType=2, mName=BAT, mStatus=0}\n\tTemperature{mValue=38.0, mType=3, mName=SKIN, mStatus=1}\nCurrent cooling devices from HAL:\n\tCoolingDevice{mValue=0, mType=1, mName=battery}\n";

    #[test]
    fn status_and_lists() {
        let t = parse(SAMPLE).unwrap();
        assert_eq!((t.status, t.status_name, t.hal_ready, t.status_override), (1, "light", Some(true), Some(false)));
        assert_eq!(t.cached.len(), 2);
        assert_eq!(t.current.len(), 3);
        assert_eq!(t.current[2].type_name, "SKIN");
        assert_eq!(t.max_of_type("BATTERY"), Some(33.5));
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse("Thermal Status: hot\n").unwrap_err();
        assert_eq!(e.line(), Some(1));
        let e = parse("Cached temperatures:\n\tTemperature{mValue=abc, mType=0, mName=AP, mStatus=0}\n").unwrap_err();
        assert_eq!(e.line(), Some(2), "{e}");
        let e = parse("IsStatusOverride: false\n").unwrap_err();
        assert_eq!(e.line(), Some(2), "{e}");
    }
}
