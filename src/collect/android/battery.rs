//! `adb shell dumpsys battery`: the BatteryService state.
//!
//! ```text
//! Current Battery Service state:
//!   AC powered: false
//!   USB powered: true
//!   ...
//!   level: 85
//!   temperature: 283
//! ```
//! Units as Android prints them: temperature in tenths of °C, voltage in mV, charge counter
//! in µAh, max charging current in µA and voltage in µV. Every `label: value` line is
//! kept, known or not.

use serde::Serialize;

use crate::collect::parse_error::ParseError;
use crate::collect::text::{end_line, excerpt, numbered};

const HEADER: &str = "Current Battery Service state:";

/// A value as printed: `true`/`false`, a whole number, a decimal number, or text.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum FieldValue {
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
}

impl FieldValue {
    fn parse(s: &str) -> FieldValue {
        match s {
            "true" => FieldValue::Bool(true),
            "false" => FieldValue::Bool(false),
            _ => {
                if let Ok(i) = s.parse::<i64>() {
                    FieldValue::Int(i)
                } else if let Some(x) = s.parse::<f64>().ok().filter(|x| x.is_finite()) {
                    FieldValue::Float(x)
                } else {
                    FieldValue::Text(s.to_string())
                }
            }
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            FieldValue::Int(i) => Some(*i),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            FieldValue::Bool(b) => Some(*b),
            _ => None,
        }
    }
}

/// One `label: value` line, in file order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Field {
    pub name: String,
    pub value: FieldValue,
    pub line: usize,
}

/// `BatteryManager.BATTERY_STATUS_*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChargeStatus {
    Unknown,
    Charging,
    Discharging,
    NotCharging,
    Full,
    Other,
}

impl ChargeStatus {
    pub fn from_code(code: i64) -> Self {
        match code {
            1 => ChargeStatus::Unknown,
            2 => ChargeStatus::Charging,
            3 => ChargeStatus::Discharging,
            4 => ChargeStatus::NotCharging,
            5 => ChargeStatus::Full,
            _ => ChargeStatus::Other,
        }
    }
}

/// What `dumpsys battery` says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatteryService {
    /// Every `label: value` line, unknown labels included.
    pub fields: Vec<Field>,
    /// `(UPDATES STOPPED -- use 'reset' to restart)`: `dumpsys battery unplug/set` is in effect,
    /// so the values may be faked.
    pub updates_stopped: bool,
    pub level: i64,
    pub scale: i64,
    /// `level / scale · 100`.
    pub level_pct: f64,
    pub status_code: Option<i64>,
    pub status: Option<ChargeStatus>,
    pub health_code: Option<i64>,
    pub present: Option<bool>,
    /// Sources that report power (`AC`, `USB`, `Wireless`, `Dock`).
    pub powered_by: Vec<String>,
    /// `temperature` / 10.
    pub temperature_c: Option<f64>,
    pub voltage_mv: Option<i64>,
    pub charge_counter_uah: Option<i64>,
    pub max_charging_current_ua: Option<i64>,
    pub max_charging_voltage_uv: Option<i64>,
    pub technology: Option<String>,
}

impl BatteryService {
    pub fn field(&self, name: &str) -> Option<&FieldValue> {
        self.fields.iter().find(|f| f.name == name).map(|f| &f.value)
    }

    /// Charge counter in mAh (µAh / 1000).
    pub fn charge_counter_mah(&self) -> Option<f64> {
        self.charge_counter_uah.map(|u| u as f64 / 1000.0)
    }
}

/// Parses `dumpsys battery` output.
pub fn parse(text: &str) -> Result<BatteryService, ParseError> {
    let mut lines = numbered(text).filter(|(_, l)| !l.trim().is_empty());
    match lines.next() {
        Some((_, l)) if l.trim() == HEADER => {}
        Some((n, l)) => {
            return Err(ParseError::at(
                n,
                format!("not `dumpsys battery` output: expected `{HEADER}`, found `{}`", excerpt(l.trim())),
            ));
        }
        None => return Err(ParseError::at(1, format!("empty input: expected `dumpsys battery` output (`{HEADER}`)"))),
    }
    let mut fields = Vec::new();
    let mut updates_stopped = false;
    for (n, raw) in lines {
        let l = raw.trim();
        if l.starts_with('(') && l.ends_with(')') {
            updates_stopped |= l.contains("UPDATES STOPPED");
            continue;
        }
        let Some((name, value)) = l.split_once(':') else {
            return Err(ParseError::at(n, format!("expected `label: value`, found `{}`", excerpt(l))));
        };
        let name = name.trim();
        if name.is_empty() {
            return Err(ParseError::at(n, format!("a value without a label: `{}`", excerpt(l))));
        }
        fields.push(Field { name: name.to_string(), value: FieldValue::parse(value.trim()), line: n });
    }
    build(fields, updates_stopped, end_line(text))
}

fn build(fields: Vec<Field>, updates_stopped: bool, end: usize) -> Result<BatteryService, ParseError> {
    let find = |name: &str| fields.iter().find(|f| f.name == name);
    // A known label whose value has the wrong type is an error at its line.
    let int =
        |name: &str| -> Result<Option<i64>, ParseError> {
            match find(name) {
                None => Ok(None),
                Some(f) => f.value.as_int().map(Some).ok_or_else(|| {
                    ParseError::at(f.line, format!("`{name}` must be a whole number, found {:?}", f.value))
                }),
            }
        };
    let flag =
        |name: &str| -> Result<Option<bool>, ParseError> {
            match find(name) {
                None => Ok(None),
                Some(f) => f.value.as_bool().map(Some).ok_or_else(|| {
                    ParseError::at(f.line, format!("`{name}` must be true or false, found {:?}", f.value))
                }),
            }
        };
    let level = int("level")?.ok_or_else(|| ParseError::at(end, "no `level:` line (truncated output?)"))?;
    let scale = int("scale")?.unwrap_or(100);
    if scale <= 0 {
        let line = find("scale").map_or(end, |f| f.line);
        return Err(ParseError::at(line, format!("`scale` must be positive, found {scale}")));
    }
    let mut powered_by = Vec::new();
    for (label, name) in
        [("AC powered", "AC"), ("USB powered", "USB"), ("Wireless powered", "Wireless"), ("Dock powered", "Dock")]
    {
        if flag(label)? == Some(true) {
            powered_by.push(name.to_string());
        }
    }
    let status_code = int("status")?;
    let technology = find("technology").map(|f| match &f.value {
        FieldValue::Text(s) => s.clone(),
        other => format!("{other:?}"),
    });
    Ok(BatteryService {
        level,
        scale,
        level_pct: level as f64 / scale as f64 * 100.0,
        status_code,
        status: status_code.map(ChargeStatus::from_code),
        health_code: int("health")?,
        present: flag("present")?,
        powered_by,
        temperature_c: int("temperature")?.map(|t| t as f64 / 10.0),
        voltage_mv: int("voltage")?,
        charge_counter_uah: int("Charge counter")?,
        max_charging_current_ua: int("Max charging current")?,
        max_charging_voltage_uv: int("Max charging voltage")?,
        technology,
        updates_stopped,
        fields,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_device_layout_with_note_and_extra_labels() {
        let text = "Current Battery Service state:\n  (UPDATES STOPPED -- use 'reset' to restart)\n  AC powered: false\n  USB powered: true\n  Charge counter: 2860000\n  status: 2\n  level: 85\n  scale: 100\n  voltage: 4231\n  temperature: 283\n  Charging policy: 1\n";
        let b = parse(text).unwrap();
        assert!(b.updates_stopped);
        assert_eq!(b.powered_by, ["USB"]);
        assert_eq!(b.status, Some(ChargeStatus::Charging));
        assert_eq!(b.temperature_c, Some(28.3));
        assert_eq!(b.charge_counter_mah(), Some(2860.0));
        assert_eq!(b.field("Charging policy"), Some(&FieldValue::Int(1)));
    }

    #[test]
    fn errors_name_the_line() {
        assert_eq!(parse("").unwrap_err().line(), Some(1));
        assert_eq!(parse("hello\n").unwrap_err().line(), Some(1));
        let e = parse("Current Battery Service state:\n  level: 50\n  garbage line\n").unwrap_err();
        assert_eq!(e.line(), Some(3), "{e}");
        let e = parse("Current Battery Service state:\n  AC powered: false\n").unwrap_err();
        assert_eq!(e.line(), Some(3), "{e}");
        assert!(e.to_string().contains("level"), "{e}");
        let e = parse("Current Battery Service state:\n  level: high\n").unwrap_err();
        assert_eq!(e.line(), Some(2), "{e}");
    }
}
