//! A Linux power-supply's `uevent` file (`/sys/class/power_supply/battery/uevent` on an
//! Android phone, readable from `adb shell` on most): one `POWER_SUPPLY_NAME=value` a
//! line, as the kernel's power_supply_sysfs prints it.
//!
//! ```text
//! POWER_SUPPLY_NAME=battery
//! POWER_SUPPLY_CYCLE_COUNT=0
//! POWER_SUPPLY_CHARGE_FULL=2363000
//! POWER_SUPPLY_CHARGE_FULL_DESIGN=2366000
//! ```
//! Charges are in µAh, energies in µWh (the kernel's ABI, Documentation/ABI/testing/sysfs-class-power).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::collect::parse_error::ParseError;

const PREFIX: &str = "POWER_SUPPLY_";

#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct PowerSupply {
    /// Every property, by its name without `POWER_SUPPLY_` (`CYCLE_COUNT`), as printed.
    pub properties: BTreeMap<String, String>,
    pub cycle_count: Option<u32>,
    pub charge_full_uah: Option<i64>,
    pub charge_full_design_uah: Option<i64>,
    pub energy_full_uwh: Option<i64>,
    pub energy_full_design_uwh: Option<i64>,
    pub capacity_pct: Option<f64>,
}

impl PowerSupply {
    /// Full-charge over design capacity, percent: by charge, else by energy; `None` when
    /// the gauge does not give both (or gives 0 for design, as emulators do).
    pub fn health_pct(&self) -> Option<f64> {
        let ratio = |full: Option<i64>, design: Option<i64>| match (full, design) {
            (Some(f), Some(d)) if f > 0 && d > 0 => Some(100.0 * f as f64 / d as f64),
            _ => None,
        };
        ratio(self.charge_full_uah, self.charge_full_design_uah)
            .or_else(|| ratio(self.energy_full_uwh, self.energy_full_design_uwh))
    }
}

/// Parses a `uevent` file. Lines that are not `POWER_SUPPLY_…=…` are errors; a known
/// property whose value is not a number is an error naming its line.
pub fn parse(text: &str) -> Result<PowerSupply, ParseError> {
    let mut ps = PowerSupply::default();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let n = i + 1;
        let (key, value) = line
            .strip_prefix(PREFIX)
            .and_then(|l| l.split_once('='))
            .ok_or_else(|| ParseError::at(n, format!("expected `POWER_SUPPLY_NAME=value`, found `{line}`")))?;
        let int = |what: &str| {
            value
                .parse::<i64>()
                .map_err(|_| ParseError::at(n, format!("{PREFIX}{what}: `{value}` is not a whole number")))
        };
        match key {
            "CYCLE_COUNT" => {
                let c = int(key)?;
                // Some gauges print -1 for "not known".
                ps.cycle_count = u32::try_from(c).ok();
            }
            "CHARGE_FULL" => ps.charge_full_uah = Some(int(key)?),
            "CHARGE_FULL_DESIGN" => ps.charge_full_design_uah = Some(int(key)?),
            "ENERGY_FULL" => ps.energy_full_uwh = Some(int(key)?),
            "ENERGY_FULL_DESIGN" => ps.energy_full_design_uwh = Some(int(key)?),
            "CAPACITY" => ps.capacity_pct = Some(int(key)? as f64),
            _ => {}
        }
        ps.properties.insert(key.to_string(), value.to_string());
    }
    if ps.properties.is_empty() {
        return Err(ParseError::at(1, "no POWER_SUPPLY_ property (an empty uevent file)"));
    }
    Ok(ps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_is_full_over_design_by_charge_else_by_energy() {
        let ps = parse(
            "POWER_SUPPLY_CHARGE_FULL=1800000\nPOWER_SUPPLY_CHARGE_FULL_DESIGN=2000000\nPOWER_SUPPLY_CYCLE_COUNT=412\n",
        )
        .unwrap();
        assert_eq!((ps.health_pct(), ps.cycle_count), (Some(90.0), Some(412)));
        let e = parse("POWER_SUPPLY_ENERGY_FULL=42450000\nPOWER_SUPPLY_ENERGY_FULL_DESIGN=41040000\n").unwrap();
        assert!((e.health_pct().unwrap() - 103.4356).abs() < 1e-3, "a new cell can be above its design");
        let none =
            parse("POWER_SUPPLY_CHARGE_FULL=0\nPOWER_SUPPLY_CHARGE_FULL_DESIGN=0\nPOWER_SUPPLY_CYCLE_COUNT=-1\n")
                .unwrap();
        assert_eq!((none.health_pct(), none.cycle_count), (None, None));
    }

    #[test]
    fn what_is_not_a_property_is_an_error_with_its_line() {
        let e = parse("POWER_SUPPLY_NAME=battery\nhello\n").unwrap_err();
        assert_eq!(e.line(), Some(2));
        let e = parse("POWER_SUPPLY_NAME=battery\nPOWER_SUPPLY_CYCLE_COUNT=many\n").unwrap_err();
        assert_eq!(e.to_string(), "line 2: POWER_SUPPLY_CYCLE_COUNT: `many` is not a whole number");
        assert!(parse("\n").is_err());
    }
}
