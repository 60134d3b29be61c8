//! `[[steps]]` of a runbook: what an operator does by hand, when, and what they attest
//! that no API reads.

use serde::{Deserialize, Serialize};

use crate::config::syntax::value_error::ValueError;

/// When in a trial's life a step is asked.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum StepWhen {
    /// Once per device each time `lab run` starts (or resumes), before its first trial.
    BeforeCampaign,
    /// Before each attempt's gate (after install and the lab's own settings).
    BeforeTrial,
    /// Right after the tether cut the power, before the soak.
    Untether,
    /// Right after the power is back, before collecting.
    Retether,
    /// After collecting, before the attempt is validated.
    AfterTrial,
}

impl StepWhen {
    pub const ALL: [StepWhen; 5] =
        [StepWhen::BeforeCampaign, StepWhen::BeforeTrial, StepWhen::Untether, StepWhen::Retether, StepWhen::AfterTrial];

    /// Steps whose attestations describe the phone before the soak.
    pub const BEFORE: [StepWhen; 2] = [StepWhen::BeforeCampaign, StepWhen::BeforeTrial];
    /// … and after it.
    pub const AFTER: [StepWhen; 2] = [StepWhen::Retether, StepWhen::AfterTrial];

    pub fn as_str(self) -> &'static str {
        match self {
            StepWhen::BeforeCampaign => "before-campaign",
            StepWhen::BeforeTrial => "before-trial",
            StepWhen::Untether => "untether",
            StepWhen::Retether => "re-tether",
            StepWhen::AfterTrial => "after-trial",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|w| w.as_str() == s)
    }
}

/// What an operator can attest: the settings no host-side API reads on every platform.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum AttestKey {
    /// Screen brightness, percent (0–100).
    Brightness,
    Bluetooth,
    Wifi,
    LowPower,
    AirplaneMode,
}

impl AttestKey {
    pub const ALL: [AttestKey; 5] =
        [AttestKey::Brightness, AttestKey::Bluetooth, AttestKey::Wifi, AttestKey::LowPower, AttestKey::AirplaneMode];

    pub fn as_str(self) -> &'static str {
        match self {
            AttestKey::Brightness => "brightness",
            AttestKey::Bluetooth => "bluetooth",
            AttestKey::Wifi => "wifi",
            AttestKey::LowPower => "low_power",
            AttestKey::AirplaneMode => "airplane_mode",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// An example value, for messages.
    pub fn example(self) -> &'static str {
        match self {
            AttestKey::Brightness => "50",
            _ => "off",
        }
    }

    /// Reads an attested value as the operator typed it: brightness a percentage, the
    /// others on/off.
    pub fn value(self, text: &str) -> Result<AttestValue, ValueError> {
        let t = text.trim().trim_end_matches('%').trim();
        match self {
            AttestKey::Brightness => match t.parse::<f64>() {
                Ok(v) if (0.0..=100.0).contains(&v) => Ok(AttestValue::Percent(v)),
                _ => Err(ValueError::Brightness { text: text.into() }),
            },
            _ => match t.to_ascii_lowercase().as_str() {
                "on" | "true" | "yes" | "1" => Ok(AttestValue::Switch(true)),
                "off" | "false" | "no" | "0" => Ok(AttestValue::Switch(false)),
                _ => Err(ValueError::NotASwitch { key: self.as_str(), text: text.into() }),
            },
        }
    }
}

/// An attested value.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum AttestValue {
    Percent(f64),
    Switch(bool),
}

impl std::fmt::Display for AttestValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AttestValue::Percent(v) => write!(f, "{v} %"),
            AttestValue::Switch(true) => f.write_str("on"),
            AttestValue::Switch(false) => f.write_str("off"),
        }
    }
}

/// An answer's values as people read them, `bluetooth=off, brightness=50 %`, or
/// `confirmed` for a plain confirmation. Values that are not an [`AttestValue`] are shown
/// as stored.
pub fn attested_text(values: &serde_json::Map<String, serde_json::Value>) -> String {
    if values.is_empty() {
        return "confirmed".into();
    }
    values
        .iter()
        .map(|(k, v)| match serde_json::from_value::<AttestValue>(v.clone()) {
            Ok(a) => format!("{k}={a}"),
            Err(_) => format!("{k}={v}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// One `[[steps]]` entry.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OperatorStep {
    /// Unique in the runbook; `lab confirm --step NAME` answers it.
    pub name: String,
    /// What the operator is asked to do, as shown to them.
    pub text: String,
    pub when: StepWhen,
    /// The runner waits for an answer (`lab confirm` or the terminal); `false` only says it.
    pub confirm: bool,
    /// What the answer must attest, in the runbook's order.
    pub attest: Vec<AttestKey>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attested_values_are_read_as_typed() {
        assert_eq!(AttestKey::Brightness.value("50"), Ok(AttestValue::Percent(50.0)));
        assert_eq!(AttestKey::Brightness.value("42.5 %"), Ok(AttestValue::Percent(42.5)));
        assert!(AttestKey::Brightness.value("150").unwrap_err().to_string().contains("0 to 100"));
        assert_eq!(AttestKey::Bluetooth.value("OFF"), Ok(AttestValue::Switch(false)));
        assert_eq!(AttestKey::LowPower.value("yes"), Ok(AttestValue::Switch(true)));
        assert!(AttestKey::Wifi.value("maybe").unwrap_err().to_string().contains("`on` or `off`"));
        assert_eq!(AttestValue::Switch(true).to_string(), "on");
        assert_eq!(AttestValue::Percent(50.0).to_string(), "50 %");
    }

    #[test]
    fn when_names_round_trip() {
        for w in StepWhen::ALL {
            assert_eq!(StepWhen::parse(w.as_str()), Some(w));
        }
        assert_eq!(StepWhen::parse("retether"), None);
    }
}
