//! An attempt's three state snapshots as the store keeps them: JSON texts and the digest
//! reports read (`store::StateDigest`), made straight from the typed snapshots.
//!
//! The store can make both from JSON values (`EncodedAttempt::encode`), which is what records
//! made elsewhere go through; a campaign's attempts skip the tree of values, which took a
//! runner more time to build, print and free than the rest of recording an attempt.

use crate::device::{Provenance, Reading as DeviceReading, StateSnapshot};
use crate::store::{Kept, Reading, SETTINGS, SOURCES, StateDigest};

/// The JSON text of a snapshot (`null` for none), as `serde_json::to_value` then
/// `to_string` would give it but for the order of the fields.
pub fn state_json(s: Option<&StateSnapshot>) -> String {
    serde_json::to_string(&s).unwrap_or_else(|_| "null".into())
}

/// The digest of the snapshots before, during and after the soak: what
/// `StateDigest::from_json` reads from their JSON.
pub fn state_digest(moments: [Option<&StateSnapshot>; 3]) -> StateDigest {
    let mut readings = Vec::new();
    for (m, s) in moments.into_iter().enumerate() {
        let Some(s) = s else { continue };
        for (i, (field, _, _)) in SETTINGS.iter().enumerate() {
            let known = match *field {
                "brightness_pct" => float(&s.brightness_pct),
                "low_power" => switch(&s.low_power),
                "thermal_status" => match s.thermal_status {
                    DeviceReading::Known { value, from } => Some((Kept::Integer(f64::from(value)), from)),
                    DeviceReading::Unknown => None,
                },
                "charging" => switch(&s.charging),
                "external_power" => switch(&s.external_power),
                "bluetooth_on" => switch(&s.bluetooth_on),
                "wifi_on" => switch(&s.wifi_on),
                "airplane_mode" => switch(&s.airplane_mode),
                "screen_on" => switch(&s.screen_on),
                _ => None,
            };
            let Some((value, from)) = known else { continue };
            let Some(source) = SOURCES.iter().position(|(name, _)| *name == provenance_name(from)) else { continue };
            readings.push(Reading { moment: m as u8, setting: i as u8, source: source as u8, value });
        }
    }
    StateDigest { readings }
}

fn switch(r: &DeviceReading<bool>) -> Option<(Kept, Provenance)> {
    match *r {
        DeviceReading::Known { value, from } => Some((Kept::Switch(value), from)),
        DeviceReading::Unknown => None,
    }
}

/// A number JSON can hold; NaN and infinities are `null` in JSON, which the digest skips.
fn float(r: &DeviceReading<f64>) -> Option<(Kept, Provenance)> {
    match *r {
        DeviceReading::Known { value, from } if value.is_finite() => Some((Kept::Float(value), from)),
        _ => None,
    }
}

/// The name a provenance is stored under (its serde name, which `SOURCES` lists).
fn provenance_name(p: Provenance) -> &'static str {
    match p {
        Provenance::Read => "read",
        Provenance::Set => "set",
        Provenance::App => "app",
        Provenance::Operator => "operator",
        Provenance::Powerlog => "powerlog",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known<T>(value: T, from: Provenance) -> DeviceReading<T> {
        DeviceReading::Known { value, from }
    }

    /// Snapshots with every setting known, unknown, or a number JSON cannot hold, from
    /// every source.
    fn snapshots() -> Vec<StateSnapshot> {
        let froms = [Provenance::Read, Provenance::Set, Provenance::App, Provenance::Operator, Provenance::Powerlog];
        let mut out = vec![StateSnapshot::default()];
        for (k, from) in froms.into_iter().enumerate() {
            let on = k % 2 == 0;
            out.push(StateSnapshot {
                brightness_pct: known([50.0, 12.5, f64::NAN, 0.0, f64::INFINITY][k], from),
                bluetooth_on: known(on, from),
                wifi_on: known(!on, from),
                battery_pct: known(99.0, from),
                charging: known(on, from),
                external_power: known(!on, from),
                battery_temp_c: known(25.5, from),
                thermal_status: known(k as u32, from),
                foreground_app: known("app".into(), from),
                low_power: if on { known(false, from) } else { DeviceReading::Unknown },
                airplane_mode: known(on, from),
                screen_on: known(true, from),
                stay_awake: known(true, from),
                load_avg: known(0.5, from),
                ..StateSnapshot::default()
            });
        }
        out
    }

    #[test]
    fn the_digest_and_text_are_what_the_store_makes_from_the_json_values() {
        let all = snapshots();
        for before in &all {
            for soak in [None, Some(&all[4]), Some(&all[0])] {
                for after in [Some(&all[1]), None, Some(&all[5])] {
                    let value = |s: Option<&StateSnapshot>| serde_json::to_value(s).unwrap();
                    let want = StateDigest::from_json(&value(Some(before)), &value(soak), &value(after));
                    assert_eq!(state_digest([Some(before), soak, after]), want, "{before:?} {soak:?} {after:?}");
                    // The text reads back as the same value.
                    let text = state_json(Some(before));
                    assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), value(Some(before)));
                }
            }
        }
        assert_eq!(state_json(None), "null");
        assert!(!state_digest([Some(&all[1]), None, None]).readings.is_empty());
    }
}
