//! The iOS battery registry entry (`IOPMPowerSource` / `AppleSmartBattery`) as an XML or
//! binary plist: the reply of lockdown's diagnostics relay (`{Diagnostics: {IORegistry: {…}},
//! Status: "Success"}`), the output of `idevicediagnostics ioregentry AppleSmartBattery`
//! (`{IORegistry: {…}}`), or the registry dictionary itself.
//!
//! Units as the registry gives them: `Temperature` in 1/100 °C, `Voltage` and
//! `AppleRawBatteryVoltage` in mV, `InstantAmperage`/`Amperage` in mA (signed; negative while
//! discharging; may arrive as the unsigned 64-bit pattern of a negative number), raw and
//! design capacities in mAh, `CurrentCapacity` in % on iOS, `AvgTimeToEmpty` in minutes.

use std::collections::BTreeMap;

use plist::{Dictionary, Value};
use serde::Serialize;

use crate::collect::parse_error::ParseError;
use crate::collect::text::excerpt;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IosBattery {
    /// `Status` of a diagnostics-relay reply (`Success`), when present.
    pub status: Option<String>,
    /// State of charge, %: `CurrentCapacity` when it is a percentage (iOS), else
    /// `CurrentCapacity / MaxCapacity · 100`.
    pub level_pct: Option<f64>,
    /// `AppleRawCurrentCapacity`, mAh.
    pub raw_current_capacity_mah: Option<i64>,
    /// `AppleRawMaxCapacity`, mAh (full-charge capacity as the gauge measures it).
    pub raw_max_capacity_mah: Option<i64>,
    pub design_capacity_mah: Option<i64>,
    pub nominal_charge_capacity_mah: Option<i64>,
    pub full_charge_capacity_mah: Option<i64>,
    pub cycle_count: Option<i64>,
    /// `InstantAmperage`, mA, signed (negative = discharging).
    pub instant_current_ma: Option<i64>,
    /// `Amperage`, mA, signed (averaged by the gauge).
    pub amperage_ma: Option<i64>,
    /// `Voltage`, or `AppleRawBatteryVoltage` when `Voltage` is absent or 0, mV.
    pub voltage_mv: Option<i64>,
    pub voltage_source: Option<&'static str>,
    pub temperature_c: Option<f64>,
    pub is_charging: Option<bool>,
    /// `ExternalConnected`, else `AppleRawExternalConnected`.
    pub external_connected: Option<bool>,
    pub fully_charged: Option<bool>,
    pub at_critical_level: Option<bool>,
    pub avg_time_to_empty_min: Option<i64>,
    pub serial: Option<String>,
    pub adapter_watts: Option<i64>,
    pub adapter_description: Option<String>,
    /// `ManufacturerData` read as UTF-8 with trailing NULs trimmed (the cell id).
    pub cell_id: Option<String>,
    /// Maximum capacity relative to design, %: `NominalChargeCapacity` (what iOS Settings
    /// uses), else `AppleRawMaxCapacity`, else `FullChargeCapacity`, over `DesignCapacity`.
    pub health_pct: Option<f64>,
    /// Every top-level key of the registry entry, as JSON values.
    pub registry: BTreeMap<String, serde_json::Value>,
}

impl IosBattery {
    pub fn voltage_v(&self) -> Option<f64> {
        self.voltage_mv.map(|mv| mv as f64 / 1000.0)
    }
}

/// Reads an integer that may be stored signed or as the unsigned bit pattern of a negative.
fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Integer(i) => i.as_signed().or_else(|| i.as_unsigned().map(|u| u as i64)),
        Value::Real(x) if x.is_finite() => Some(*x as i64),
        _ => None,
    }
}

/// `<integer>` or `<real>` as f64.
fn real(v: &Value) -> Option<f64> {
    match v {
        Value::Real(x) if x.is_finite() => Some(*x),
        other => int(other).map(|i| i as f64),
    }
}

/// Finds the registry dictionary in the shapes the tools produce.
fn registry(root: &Dictionary) -> Option<&Dictionary> {
    if let Some(d) = root.get("Diagnostics").and_then(Value::as_dictionary)
        && let Some(r) = d.get("IORegistry").and_then(Value::as_dictionary)
    {
        return Some(r);
    }
    if let Some(r) = root.get("IORegistry").and_then(Value::as_dictionary) {
        return Some(r);
    }
    let battery_keys = ["CurrentCapacity", "Voltage", "CycleCount", "AppleRawCurrentCapacity", "Temperature"];
    battery_keys.iter().any(|k| root.contains_key(k)).then_some(root)
}

/// 1-based line of a byte offset.
fn line_of(bytes: &[u8], offset: usize) -> usize {
    bytes.iter().take(offset).filter(|&&b| b == b'\n').count() + 1
}

fn plist_error(bytes: &[u8], e: plist::Error) -> ParseError {
    let shown = e.to_string();
    // plist prints the position as "(offset N)"; map it to a line for XML.
    let offset = shown.rsplit_once("(offset ").and_then(|(_, r)| r.trim_end_matches(')').parse::<usize>().ok());
    let what = shown.rsplit_once(" (offset ").map_or(shown.as_str(), |(w, _)| w).to_string();
    let binary = bytes.starts_with(b"bplist");
    match offset {
        Some(o) if !binary => ParseError::at(line_of(bytes, o), format!("not a valid plist: {what}")),
        Some(o) => ParseError::Byte { offset: o as u64, message: format!("not a valid binary plist: {what}") },
        None if binary => ParseError::Byte { offset: 0, message: format!("not a valid binary plist: {what}") },
        None => ParseError::at(line_of(bytes, bytes.len()), format!("not a valid plist (truncated?): {what}")),
    }
}

/// Parses a battery registry plist (XML or binary).
pub fn parse(bytes: &[u8]) -> Result<IosBattery, ParseError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ParseError::at(1, "empty input: expected an XML or binary plist of the battery registry"));
    }
    let start = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let start = &start[start.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(0)..];
    if !(start.starts_with(b"<") || start.starts_with(b"bplist")) {
        let first = String::from_utf8_lossy(start.split(|&b| b == b'\n').next().unwrap_or_default()).into_owned();
        return Err(ParseError::at(
            line_of(bytes, bytes.len() - start.len()),
            format!(
                "not a plist: expected an XML plist (`<?xml …` or `<plist>`) or a binary one (`bplist00`), found `{}`",
                excerpt(&first)
            ),
        ));
    }
    let root = Value::from_reader(std::io::Cursor::new(bytes)).map_err(|e| plist_error(bytes, e))?;
    let Some(root) = root.as_dictionary() else {
        return Err(ParseError::at(1, "the plist's top level is not a dictionary"));
    };
    let status = root.get("Status").and_then(Value::as_string).map(str::to_string);
    let Some(reg) = registry(root) else {
        return Err(ParseError::at(
            1,
            "no battery registry in the plist: expected Diagnostics → IORegistry, IORegistry, or battery keys such as CurrentCapacity",
        ));
    };
    if status.as_deref().is_some_and(|s| s != "Success") && reg.is_empty() {
        return Err(ParseError::at(1, format!("the device answered Status = {:?}", status.unwrap_or_default())));
    }
    let battery_data = reg.get("BatteryData").and_then(Value::as_dictionary);
    // A key at the top level, else inside BatteryData (where newer iOS keeps capacities).
    let get = |k: &str| reg.get(k).or_else(|| battery_data.and_then(|d| d.get(k)));
    let get_int = |k: &str| get(k).and_then(int);
    let get_bool = |k: &str| get(k).and_then(Value::as_boolean);
    let (current, max) = (get_int("CurrentCapacity"), get_int("MaxCapacity"));
    let level_pct = match (current, max) {
        (Some(c), Some(m)) if m > 0 && m != 100 => Some(c as f64 / m as f64 * 100.0),
        (Some(c), _) => Some(c as f64),
        _ => None,
    };
    let (voltage_mv, voltage_source) = match (get_int("Voltage"), get_int("AppleRawBatteryVoltage")) {
        (Some(v), _) if v != 0 => (Some(v), Some("Voltage")),
        (_, Some(raw)) => (Some(raw), Some("AppleRawBatteryVoltage")),
        (v, None) => (v, v.map(|_| "Voltage")),
    };
    let design = get_int("DesignCapacity");
    let nominal = get_int("NominalChargeCapacity");
    let raw_max = get_int("AppleRawMaxCapacity");
    let full = get_int("FullChargeCapacity");
    let health_pct = match (nominal.or(raw_max).or(full), design) {
        (Some(m), Some(d)) if d > 0 => Some(m as f64 / d as f64 * 100.0),
        _ => None,
    };
    let adapter = reg.get("AdapterDetails").and_then(Value::as_dictionary);
    let cell_id = get("ManufacturerData")
        .and_then(Value::as_data)
        .map(|d| String::from_utf8_lossy(d).trim_end_matches('\0').to_string());
    let registry =
        reg.iter().map(|(k, v)| (k.clone(), serde_json::to_value(v).unwrap_or(serde_json::Value::Null))).collect();
    Ok(IosBattery {
        status,
        level_pct,
        raw_current_capacity_mah: get_int("AppleRawCurrentCapacity"),
        raw_max_capacity_mah: raw_max,
        design_capacity_mah: design,
        nominal_charge_capacity_mah: nominal,
        full_charge_capacity_mah: full,
        cycle_count: get_int("CycleCount"),
        instant_current_ma: get_int("InstantAmperage"),
        amperage_ma: get_int("Amperage"),
        voltage_mv,
        voltage_source,
        temperature_c: get("Temperature").and_then(real).map(|t| t / 100.0),
        is_charging: get_bool("IsCharging"),
        external_connected: get_bool("ExternalConnected").or_else(|| get_bool("AppleRawExternalConnected")),
        fully_charged: get_bool("FullyCharged"),
        at_critical_level: get_bool("AtCriticalLevel"),
        avg_time_to_empty_min: get_int("AvgTimeToEmpty"),
        serial: get("Serial").and_then(Value::as_string).map(str::to_string),
        adapter_watts: adapter.and_then(|a| a.get("Watts")).and_then(int),
        adapter_description: adapter.and_then(|a| a.get("Description")).and_then(Value::as_string).map(str::to_string),
        cell_id,
        health_pct,
        registry,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xml(body: &str) -> Vec<u8> {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<plist version=\"1.0\">\n<dict>\n{body}</dict>\n</plist>\n"
        )
        .into_bytes()
    }

    #[test]
    fn negative_current_as_unsigned_pattern_and_voltage_fallback() {
        let b = xml(
            "<key>InstantAmperage</key><integer>18446744073709551146</integer>\n<key>Voltage</key><integer>0</integer>\n<key>AppleRawBatteryVoltage</key><integer>3850</integer>\n<key>AppleRawExternalConnected</key><true/>\n<key>CurrentCapacity</key><integer>42</integer>\n<key>AppleRawCurrentCapacity</key><integer>1200</integer>\n",
        );
        let r = parse(&b).unwrap();
        assert_eq!(r.instant_current_ma, Some(-470));
        assert_eq!((r.voltage_mv, r.voltage_source), (Some(3850), Some("AppleRawBatteryVoltage")));
        assert_eq!(r.external_connected, Some(true));
        assert_eq!((r.level_pct, r.raw_current_capacity_mah), (Some(42.0), Some(1200)));
    }

    #[test]
    fn binary_plist_round_trip() {
        let mut d = Dictionary::new();
        d.insert("CurrentCapacity".into(), Value::Integer(77.into()));
        d.insert("Temperature".into(), Value::Integer(3125.into()));
        let mut buf = Vec::new();
        plist::to_writer_binary(&mut buf, &Value::Dictionary(d)).unwrap();
        let r = parse(&buf).unwrap();
        assert_eq!((r.level_pct, r.temperature_c), (Some(77.0), Some(31.25)));
    }

    #[test]
    fn errors_name_the_line_or_byte() {
        let mut b = xml("<key>CurrentCapacity</key><integer>42</integer>\n");
        b.truncate(b.len() - 20);
        let e = parse(&b).unwrap_err();
        assert!(e.line().is_some(), "{e}");
        let e = parse(b"<plist><dict><key>A</key><integer>x</integer></dict></plist>").unwrap_err();
        assert_eq!(e.line(), Some(1), "{e}");
        assert!(matches!(parse(b"bplist00garbage").unwrap_err(), ParseError::Byte { .. }));
        assert_eq!(parse(b"   ").unwrap_err().line(), Some(1));
        let e = parse(&xml("<key>Foo</key><integer>1</integer>\n")).unwrap_err();
        assert!(e.to_string().contains("no battery registry"), "{e}");
    }
}
