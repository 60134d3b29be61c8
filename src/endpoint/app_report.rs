//! What the app under test says about its device, POSTed to `<endpoint_url>/state`
//! (docs/platforms/ios-app-contract.md): the state no host-side API reads on iOS.

use serde::{Deserialize, Serialize};

use super::app_report_error::AppReportError;

/// The contract's version this lab reads.
pub const CONTRACT_VERSION: u32 = 1;

/// When the app sent its report.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum ReportAt {
    /// Right after launch: fills the state *before* the soak.
    Launch,
    /// At the end of the soak: fills the state *after* it.
    End,
}

impl ReportAt {
    pub fn as_str(self) -> &'static str {
        match self {
            ReportAt::Launch => "launch",
            ReportAt::End => "end",
        }
    }
}

/// `ProcessInfo.ThermalState`, by its Swift case name.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ThermalState {
    Nominal,
    Fair,
    Serious,
    Critical,
}

impl ThermalState {
    /// Its `rawValue` in Swift (0 nominal … 3 critical): what `thermal_status` holds on iOS.
    pub fn status(self) -> u32 {
        match self {
            ThermalState::Nominal => 0,
            ThermalState::Fair => 1,
            ThermalState::Serious => 2,
            ThermalState::Critical => 3,
        }
    }
}

/// `UIDevice.BatteryState`, by its Swift case name.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum BatteryState {
    Unplugged,
    Charging,
    Full,
    Unknown,
}

impl BatteryState {
    /// (charging, on external power); `None` for `unknown`.
    pub fn power(self) -> Option<(bool, bool)> {
        match self {
            BatteryState::Unplugged => Some((false, false)),
            BatteryState::Charging => Some((true, true)),
            BatteryState::Full => Some((false, true)),
            BatteryState::Unknown => None,
        }
    }
}

/// One report. Every field but `v` and `at` may be left out: a value the app cannot
/// know is absent, never guessed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AppReport {
    pub v: u32,
    pub at: ReportAt,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brightness_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low_power: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thermal_state: Option<ThermalState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub battery_state: Option<BatteryState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub battery_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bluetooth_on: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wifi_on: Option<bool>,
}

impl AppReport {
    /// Reads a report's body; the error is the one line the endpoint answers with (400).
    /// Unknown fields are refused so a misspelt one is not silently dropped.
    pub fn parse(body: &[u8]) -> Result<AppReport, AppReportError> {
        let r: AppReport = serde_json::from_slice(body).map_err(AppReportError::NotAReport)?;
        if r.v != CONTRACT_VERSION {
            return Err(AppReportError::UnknownVersion(r.v));
        }
        for (key, pct) in [("brightness_pct", r.brightness_pct), ("battery_pct", r.battery_pct)] {
            if let Some(x) = pct.filter(|x| !(0.0..=100.0).contains(x)) {
                return Err(AppReportError::NotAPercentage { key, value: x });
            }
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_report_reads_and_a_partial_one_leaves_the_rest_out() {
        let full = br#"{"v": 1, "at": "end", "brightness_pct": 42.5, "low_power": true, "thermal_state": "serious",
            "battery_state": "full", "battery_pct": 99, "bluetooth_on": false, "wifi_on": true}"#;
        let r = AppReport::parse(full).unwrap();
        assert_eq!(r.at, ReportAt::End);
        assert_eq!(r.brightness_pct, Some(42.5));
        assert_eq!(r.thermal_state.map(ThermalState::status), Some(2));
        assert_eq!(r.battery_state.and_then(BatteryState::power), Some((false, true)));
        let partial = AppReport::parse(br#"{"v":1,"at":"launch","low_power":false}"#).unwrap();
        assert_eq!(partial.at, ReportAt::Launch);
        assert_eq!((partial.low_power, partial.brightness_pct, partial.wifi_on), (Some(false), None, None));
    }

    #[test]
    fn malformed_reports_say_why_in_one_line() {
        let why = |body: &str| AppReport::parse(body.as_bytes()).unwrap_err().to_string();
        assert_eq!(why(r#"{"v":2,"at":"end"}"#), "contract version 2 is not known here; send \"v\": 1");
        assert_eq!(
            why(r#"{"v":1,"at":"end","brightness_pct":0.5,"battery_pct":150}"#),
            "battery_pct 150 is outside 0–100 (a percentage, not a 0–1 fraction)"
        );
        assert!(why(r#"{"v":1,"at":"midway"}"#).starts_with("not a state report: unknown variant `midway`"));
        assert!(
            why(r#"{"v":1,"at":"end","brightnes":3}"#).starts_with("not a state report: unknown field `brightnes`")
        );
        assert!(why(r#"{"at":"end"}"#).starts_with("not a state report: missing field `v`"));
        assert!(why("low_power=1").starts_with("not a state report: "));
        for body in ["", "{}", r#"{"v":1,"at":"end","thermal_state":"hot"}"#] {
            assert!(!why(body).contains('\n'), "{body}");
        }
    }
}
