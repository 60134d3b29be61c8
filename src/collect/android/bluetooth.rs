//! `adb shell dumpsys bluetooth_manager`: whether Bluetooth is on.
//!
//! ```text
//! Bluetooth Status
//!   enabled: true
//!   state: ON
//!   address: 00:11:22:33:44:55
//!   name: Pixel 7
//! ```
//! Only the status block at the top is read; the per-profile dumps that follow are skipped.

use serde::Serialize;

use crate::collect::parse_error::ParseError;
use crate::collect::text::{boolean, end_line, excerpt, numbered};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BluetoothManager {
    pub enabled: bool,
    /// `state:` as printed (`ON`, `OFF`, `STATE_ON`, `BLE_ON`, …).
    pub state: Option<String>,
    pub name: Option<String>,
    pub address: Option<String>,
}

/// Parses `dumpsys bluetooth_manager` output.
pub fn parse(text: &str) -> Result<BluetoothManager, ParseError> {
    let (mut enabled, mut state, mut name, mut address) = (None, None, None, None);
    for (n, raw) in numbered(text) {
        let l = raw.trim();
        let Some((k, v)) = l.split_once(':') else { continue };
        let v = v.trim();
        match k.trim() {
            "enabled" if enabled.is_none() => {
                enabled = Some(boolean(v).ok_or_else(|| {
                    ParseError::at(n, format!("`enabled:` must be true or false, found `{}`", excerpt(v)))
                })?);
            }
            "state" if state.is_none() => state = Some(v.to_string()),
            "name" if name.is_none() => name = Some(v.to_string()),
            "address" if address.is_none() => address = Some(v.to_string()),
            _ => {}
        }
        // The status block ends where the profile dumps begin; stop at the first one.
        if enabled.is_some() && l.starts_with("Bluetooth Services") {
            break;
        }
    }
    let enabled = enabled.ok_or_else(|| {
        ParseError::at(end_line(text), "no `enabled:` line: not `dumpsys bluetooth_manager` output, or truncated")
    })?;
    Ok(BluetoothManager { enabled, state, name, address })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_block() {
        let b = parse("Bluetooth Status\n  enabled: true\n  state: ON\n  address: 00:11:22:33:44:55\n  name: Pixel\n")
            .unwrap();
        assert!(b.enabled);
        assert_eq!(b.state.as_deref(), Some("ON"));
        assert_eq!(parse("Bluetooth Status\n  enabled: maybe\n").unwrap_err().line(), Some(2));
        assert_eq!(parse("Bluetooth Status\n").unwrap_err().line(), Some(2));
    }
}
