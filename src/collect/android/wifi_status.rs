//! `adb shell cmd wifi status` (Android 11+): Wi-Fi on/off and the current connection.
//!
//! ```text
//! Wifi is enabled
//! ==== ClientModeManager instance: ConcreteClientModeManager{… role=ROLE_CLIENT_PRIMARY} ====
//! Wifi is connected to "GoogleGuest"
//! WifiInfo: SSID: "GoogleGuest", BSSID: 48:2f:6b:ac:b2:31, MAC: 82:f2:40:f1:51:be, …, RSSI: -60, Link speed: 573Mbps, …, Net ID: 14, …
//! successfulTxPackets: 90968
//! ```
//! The connection comes from the first `WifiInfo:` line (the primary client); the copy inside
//! `NetworkCapabilities … TransportInfo: <…>` is redacted and ignored.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::collect::parse_error::ParseError;
use crate::collect::text::{end_line, excerpt, number, numbered};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WifiInfo {
    pub ssid: Option<String>,
    pub bssid: Option<String>,
    pub mac_address: Option<String>,
    pub rssi_dbm: Option<i64>,
    pub link_speed_mbps: Option<i64>,
    pub tx_link_speed_mbps: Option<i64>,
    pub rx_link_speed_mbps: Option<i64>,
    pub frequency_mhz: Option<i64>,
    pub net_id: Option<i64>,
    pub supplicant_state: Option<String>,
    pub wifi_standard: Option<String>,
    /// Every `Key: value` pair of the line, as printed.
    pub fields: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WifiStatus {
    pub enabled: Option<bool>,
    /// `Wifi is connected to …` / `Wifi is not connected`.
    pub connected: Option<bool>,
    pub info: Option<WifiInfo>,
    /// `name: number` counter lines (`successfulTxPackets`, …).
    pub counters: BTreeMap<String, f64>,
}

/// Splits `a: 1, b: "x, y", c: <…>` at the commas outside quotes and angle brackets.
fn split_pairs(s: &str) -> Vec<&str> {
    let (mut out, mut start, mut quoted, mut depth) = (Vec::new(), 0, false, 0i32);
    let bytes = s.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'"' => quoted = !quoted,
            b'<' if !quoted => depth += 1,
            b'>' if !quoted => depth -= 1,
            b',' if !quoted && depth <= 0 && bytes.get(i + 1) == Some(&b' ') => {
                out.push(&s[start..i]);
                start = i + 2;
            }
            _ => {}
        }
    }
    if start <= s.len() {
        out.push(&s[start..]);
    }
    out
}

fn unquote(s: &str) -> &str {
    s.strip_prefix('"').and_then(|r| r.strip_suffix('"')).unwrap_or(s)
}

fn wifi_info(n: usize, rest: &str) -> Result<WifiInfo, ParseError> {
    let fields: Vec<(String, String)> = split_pairs(rest)
        .into_iter()
        .filter_map(|p| p.split_once(": ").map(|(k, v)| (k.trim().to_string(), v.trim().to_string())))
        .collect();
    if fields.is_empty() {
        return Err(ParseError::at(n, format!("`WifiInfo:` without `Key: value` fields: `{}`", excerpt(rest))));
    }
    let get = |k: &str| fields.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    let int = |k: &str, unit: &str| -> Result<Option<i64>, ParseError> {
        get(k).map(|v| number::<i64>(n, k, v.strip_suffix(unit).unwrap_or(v))).transpose()
    };
    let text = |k: &str| get(k).map(str::to_string);
    let ssid = get("SSID").map(unquote).filter(|s| *s != "<unknown ssid>").map(str::to_string);
    Ok(WifiInfo {
        ssid,
        bssid: text("BSSID"),
        mac_address: text("MAC"),
        rssi_dbm: int("RSSI", "")?,
        link_speed_mbps: int("Link speed", "Mbps")?,
        tx_link_speed_mbps: int("Tx Link speed", "Mbps")?,
        rx_link_speed_mbps: int("Rx Link speed", "Mbps")?,
        frequency_mhz: int("Frequency", "MHz")?,
        net_id: int("Net ID", "")?,
        supplicant_state: text("Supplicant state"),
        wifi_standard: text("Wi-Fi standard"),
        fields,
    })
}

/// Parses `cmd wifi status` output.
pub fn parse(text: &str) -> Result<WifiStatus, ParseError> {
    let (mut enabled, mut connected, mut info) = (None, None, None);
    let mut counters = BTreeMap::new();
    for (n, raw) in numbered(text) {
        let l = raw.trim();
        match l {
            "Wifi is enabled" => enabled = Some(true),
            "Wifi is disabled" => enabled = Some(false),
            "Wifi is not connected" => connected = connected.or(Some(false)),
            _ if l.starts_with("Wifi is connected to") => connected = connected.or(Some(true)),
            _ => {
                if let Some(rest) = l.strip_prefix("WifiInfo:") {
                    if info.is_none() {
                        info = Some(wifi_info(n, rest.trim())?);
                    }
                } else if let Some((k, v)) = l.split_once(": ")
                    && !k.contains(' ')
                    && let Ok(x) = v.trim().parse::<f64>()
                    && x.is_finite()
                {
                    counters.entry(k.to_string()).or_insert(x);
                }
            }
        }
    }
    if enabled.is_none() && info.is_none() {
        return Err(ParseError::at(
            end_line(text),
            "no `Wifi is enabled/disabled` or `WifiInfo:` line: not `cmd wifi status` output, or truncated",
        ));
    }
    Ok(WifiStatus { enabled, connected, info, counters })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_ssid_with_comma_and_disabled() {
        let w = parse("Wifi is enabled\nWifiInfo: SSID: \"Cafe, 2nd floor\", BSSID: aa:bb, RSSI: -70, Link speed: 72Mbps, Net ID: 3\n").unwrap();
        let i = w.info.unwrap();
        assert_eq!(i.ssid.as_deref(), Some("Cafe, 2nd floor"));
        assert_eq!((i.rssi_dbm, i.link_speed_mbps, i.net_id), (Some(-70), Some(72), Some(3)));
        let w = parse("Wifi is disabled\n").unwrap();
        assert_eq!((w.enabled, w.info), (Some(false), None));
    }

    #[test]
    fn errors() {
        assert_eq!(parse("Wifi is enabled\nWifiInfo: SSID: \"x\", RSSI: strong\n").unwrap_err().line(), Some(2));
        assert_eq!(parse("nothing here\n").unwrap_err().line(), Some(2));
    }
}
