//! The part of an attempt's three state snapshots (before, during and after the soak)
//! that reports show: the known readings of nine settings with where each came from.
//! Stored as a small blob next to the JSON (migration 10), so a report over 144 000
//! attempts decodes about 200 bytes of each instead of parsing 1.3 KB of JSON.

use serde_json::Value;

/// The settings kept: (snapshot field, name shown, unit of a number).
pub const SETTINGS: &[(&str, &str, &str)] = &[
    ("brightness_pct", "brightness", " %"),
    ("low_power", "low_power", ""),
    ("thermal_status", "thermal_status", ""),
    ("charging", "charging", ""),
    ("external_power", "external_power", ""),
    ("bluetooth_on", "bluetooth", ""),
    ("wifi_on", "wifi", ""),
    ("airplane_mode", "airplane_mode", ""),
    ("screen_on", "screen_on", ""),
];

/// The moments of the snapshots, in the order of [`StateDigest::from_json`]'s arguments.
pub const MOMENTS: [&str; 3] = ["before", "during", "after"];

/// Where a reading came from: the stored `Provenance` names, and how reports name them
/// (an operator's value is "attested").
pub const SOURCES: [(&str, &str); 5] =
    [("read", "read"), ("set", "set"), ("app", "app"), ("operator", "attested"), ("powerlog", "powerlog")];

/// The index in [`SOURCES`] of an operator's attestation.
pub const OPERATOR: u8 = 3;

/// A reading's value: a switch, or a number (integers kept apart, so they print as the
/// JSON did).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kept {
    Switch(bool),
    Float(f64),
    Integer(f64),
}

impl Kept {
    pub fn as_f64(self) -> Option<f64> {
        match self {
            Kept::Float(x) | Kept::Integer(x) => Some(x),
            Kept::Switch(_) => None,
        }
    }

    /// The value as its JSON text (`50.0`, `3`, `true`).
    pub fn json_text(self) -> String {
        match self {
            Kept::Switch(b) => b.to_string(),
            Kept::Float(x) => Value::from(x).to_string(),
            Kept::Integer(x) => (x as i64).to_string(),
        }
    }
}

/// One known reading: moment (index in [`MOMENTS`]), setting (in [`SETTINGS`]), source
/// (in [`SOURCES`]) and value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    pub moment: u8,
    pub setting: u8,
    pub source: u8,
    pub value: Kept,
}

/// An attempt's known readings, moment by moment, in [`SETTINGS`] order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StateDigest {
    pub readings: Vec<Reading>,
}

#[derive(Debug, thiserror::Error)]
#[error("a stored state digest is corrupt at byte {at}; fix: none needed, the report reads the JSON instead")]
pub struct CorruptDigest {
    pub at: usize,
}

impl StateDigest {
    /// The readings the report shows: `"state": "known"`, a known `from`, and a boolean
    /// or numeric value; anything else is left out, as the report always left it out.
    pub fn from_json(before: &Value, soak: &Value, after: &Value) -> Self {
        let mut readings = Vec::new();
        for (m, state) in [before, soak, after].into_iter().enumerate() {
            for (i, (field, _, _)) in SETTINGS.iter().enumerate() {
                let r = &state[*field];
                if r["state"] != "known" {
                    continue;
                }
                let Some(source) = r["from"].as_str().and_then(|f| SOURCES.iter().position(|(s, _)| *s == f)) else {
                    continue;
                };
                let v = &r["value"];
                let value = match (v.as_bool(), v.as_f64()) {
                    (Some(b), _) => Kept::Switch(b),
                    (None, Some(x)) if v.is_f64() => Kept::Float(x),
                    (None, Some(x)) => Kept::Integer(x),
                    (None, None) => continue,
                };
                readings.push(Reading { moment: m as u8, setting: i as u8, source: source as u8, value });
            }
        }
        StateDigest { readings }
    }

    /// The same from the stored JSON texts (attempts recorded before migration 10); an
    /// unreadable text is an empty snapshot, as `Store::attempts` reads it.
    pub fn from_text(before: &str, soak: Option<&str>, after: &str) -> Self {
        let parse = |t: &str| serde_json::from_str::<Value>(t).unwrap_or(Value::Null);
        Self::from_json(&parse(before), &soak.map_or(Value::Null, parse), &parse(after))
    }

    /// The reading of `setting` at `moment`, if known.
    pub fn get(&self, moment: u8, setting: usize) -> Option<&Reading> {
        self.readings.iter().find(|r| r.moment == moment && r.setting as usize == setting)
    }

    /// Three bytes (moment and setting in one, source, kind) per reading, then the
    /// number's 8 bytes little-endian for a number.
    pub fn to_blob(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.readings.len() * 11);
        for r in &self.readings {
            out.push(r.moment << 4 | r.setting);
            out.push(r.source);
            match r.value {
                Kept::Switch(b) => out.push(u8::from(b)),
                Kept::Float(x) => {
                    out.push(2);
                    out.extend_from_slice(&x.to_le_bytes());
                }
                Kept::Integer(x) => {
                    out.push(3);
                    out.extend_from_slice(&x.to_le_bytes());
                }
            }
        }
        out
    }

    /// Calls `each` for every reading of a blob, without allocating.
    pub fn each_in_blob(blob: &[u8], mut each: impl FnMut(Reading)) -> Result<(), CorruptDigest> {
        let mut i = 0;
        while i < blob.len() {
            let [ms, source, kind] =
                *blob.get(i..i + 3).and_then(|b| <&[u8; 3]>::try_from(b).ok()).ok_or(CorruptDigest { at: i })?;
            let (moment, setting) = (ms >> 4, ms & 0x0f);
            if moment as usize >= MOMENTS.len()
                || setting as usize >= SETTINGS.len()
                || source as usize >= SOURCES.len()
            {
                return Err(CorruptDigest { at: i });
            }
            i += 3;
            let mut number = || {
                let bytes = blob.get(i..i + 8).ok_or(CorruptDigest { at: i })?;
                i += 8;
                Ok(f64::from_le_bytes(bytes.try_into().expect("8 bytes")))
            };
            let value = match kind {
                0 | 1 => Kept::Switch(kind == 1),
                2 => Kept::Float(number()?),
                3 => Kept::Integer(number()?),
                _ => return Err(CorruptDigest { at: i - 1 }),
            };
            each(Reading { moment, setting, source, value });
        }
        Ok(())
    }

    pub fn from_blob(blob: &[u8]) -> Result<Self, CorruptDigest> {
        let mut readings = Vec::new();
        Self::each_in_blob(blob, |r| readings.push(r))?;
        Ok(StateDigest { readings })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn known(value: Value, from: &str) -> Value {
        json!({"state": "known", "value": value, "from": from})
    }

    #[test]
    fn only_known_readings_with_a_source_are_kept_and_the_blob_round_trips() {
        let before = json!({
            "brightness_pct": known(json!(48.0), "set"),
            "low_power": known(json!(false), "app"),
            "thermal_status": known(json!(2), "read"),
            "wifi_on": {"state": "unknown"},
            "bluetooth_on": known(json!(true), "somewhere"),
            "screen_on": known(json!("yes"), "read"),
        });
        let soak = json!({"bluetooth_on": known(json!(true), "powerlog")});
        let after = json!({"brightness_pct": known(json!(51.5), "operator")});
        let d = StateDigest::from_json(&before, &soak, &after);
        let shown: Vec<String> = d
            .readings
            .iter()
            .map(|r| {
                format!(
                    "{} {} {} {}",
                    MOMENTS[r.moment as usize],
                    SETTINGS[r.setting as usize].1,
                    SOURCES[r.source as usize].1,
                    r.value.json_text()
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                "before brightness set 48.0",
                "before low_power app false",
                "before thermal_status read 2",
                "during bluetooth powerlog true",
                "after brightness attested 51.5",
            ]
        );
        assert_eq!(StateDigest::from_blob(&d.to_blob()).unwrap(), d);
        assert_eq!(StateDigest::from_text(&before.to_string(), Some(&soak.to_string()), &after.to_string()), d);
        assert_eq!(d.get(2, 0).map(|r| r.source), Some(OPERATOR));
        assert!(d.get(1, 0).is_none());
    }

    #[test]
    fn a_cut_or_unknown_blob_is_an_error_not_a_panic() {
        let d = StateDigest::from_json(&json!({"brightness_pct": known(json!(48.0), "set")}), &Value::Null, &json!({}));
        let blob = d.to_blob();
        for cut in 1..blob.len() {
            assert!(StateDigest::from_blob(&blob[..cut]).is_err(), "cut at {cut}");
        }
        assert!(StateDigest::from_blob(&[0x00, 0, 9]).is_err());
        assert!(StateDigest::from_blob(&[0x3f, 0, 0]).is_err());
        assert!(StateDigest::from_blob(&[]).unwrap().readings.is_empty());
    }
}
