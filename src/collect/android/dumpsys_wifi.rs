//! `adb shell dumpsys wifi` (the Android 5/6 era layout): supplicant events in the
//! WifiConfigStore / WifiStateMachine logs.
//!
//! Counts the supplicant event lines: `CTRL-EVENT-DISCONNECTED` (disconnects),
//! `CTRL-EVENT-SCAN-STARTED` (scans) and `Trying to associate with SSID` (associations).
//! State-machine records such as `CMD_START_SCAN` are requests, not scans, and are not counted.

use serde::Serialize;

use crate::collect::parse_error::ParseError;
use crate::collect::text::{excerpt, numbered};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DumpsysWifi {
    pub enabled: bool,
    pub disconnects: u64,
    pub scans: u64,
    pub associations: u64,
}

/// Parses `dumpsys wifi` output; it starts with `Wi-Fi is enabled` or `Wi-Fi is disabled`.
pub fn parse(text: &str) -> Result<DumpsysWifi, ParseError> {
    let mut lines = numbered(text).filter(|(_, l)| !l.trim().is_empty());
    let enabled = match lines.next() {
        Some((_, l)) if l.trim() == "Wi-Fi is enabled" => true,
        Some((_, l)) if l.trim() == "Wi-Fi is disabled" => false,
        Some((n, l)) => {
            return Err(ParseError::at(
                n,
                format!(
                    "not `dumpsys wifi` output: expected `Wi-Fi is enabled` or `Wi-Fi is disabled`, found `{}`",
                    excerpt(l.trim())
                ),
            ));
        }
        None => return Err(ParseError::at(1, "empty input: expected `dumpsys wifi` output")),
    };
    let (mut disconnects, mut scans, mut associations) = (0, 0, 0);
    for (_, l) in lines {
        disconnects += u64::from(l.contains("CTRL-EVENT-DISCONNECTED"));
        scans += u64::from(l.contains("CTRL-EVENT-SCAN-STARTED"));
        associations += u64::from(l.contains("Trying to associate with SSID"));
    }
    Ok(DumpsysWifi { enabled, disconnects, scans, associations })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_events() {
        let t = "Wi-Fi is enabled\n10-08 13:07:37.777 - wlan0: CTRL-EVENT-SCAN-STARTED\n10-08 - CTRL-EVENT-DISCONNECTED bssid=x\n10-08 - Trying to associate with SSID 'x'\n10-08 - CTRL-EVENT-SCAN-STARTED\n";
        assert_eq!(parse(t).unwrap(), DumpsysWifi { enabled: true, disconnects: 1, scans: 2, associations: 1 });
        assert_eq!(parse("\n\nWifi is enabled\n").unwrap_err().line(), Some(3));
    }
}
