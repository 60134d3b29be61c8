//! How an attempt was cut from USB power: recorded with it, because it decides what its
//! battery figures mean.

use serde::{Deserialize, Serialize};

/// How an attempt was untethered. A software unplug only makes Android *say* it is on
/// battery (the phone still charges), so such attempts are labelled and reported apart
/// from power-cut ones, never pooled with them.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum UntetherMode {
    /// Not untethered (a host, or a runbook with `untethered = false`).
    None,
    /// USB power really cut (hub port off, cable pulled by an operator, the simulator's port).
    PowerCut,
    /// The device was told it is unplugged (`dumpsys battery unplug`) and still charges.
    SoftUntethered,
    /// Charging suspended on the phone (`power.battery_input.suspended`) while the cable
    /// stays in: the battery really discharges, but the USB data line is still up.
    ChargingSuspended,
}

impl UntetherMode {
    pub fn as_str(self) -> &'static str {
        match self {
            UntetherMode::None => "none",
            UntetherMode::PowerCut => "power-cut",
            UntetherMode::SoftUntethered => "soft-untethered",
            UntetherMode::ChargingSuspended => "charging-suspended",
        }
    }

    pub fn parse(s: &str) -> Option<UntetherMode> {
        [UntetherMode::None, UntetherMode::PowerCut, UntetherMode::SoftUntethered, UntetherMode::ChargingSuspended]
            .into_iter()
            .find(|m| m.as_str() == s)
    }

    /// Every [`pool_label`](Self::pool_label), in the order reports list the pools.
    pub const POOLS: [&'static str; 2] = ["soft-untethered", "charging suspended"];

    /// The label of attempts that must be reported apart (`None`: they pool with power-cut ones).
    pub fn pool_label(self) -> Option<&'static str> {
        match self {
            UntetherMode::None | UntetherMode::PowerCut => None,
            UntetherMode::SoftUntethered => Some("soft-untethered"),
            UntetherMode::ChargingSuspended => Some("charging suspended"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip_through_their_stored_names() {
        for m in
            [UntetherMode::None, UntetherMode::PowerCut, UntetherMode::SoftUntethered, UntetherMode::ChargingSuspended]
        {
            assert_eq!(UntetherMode::parse(m.as_str()), Some(m));
            assert_eq!(serde_json::to_value(m).unwrap(), m.as_str());
        }
        assert_eq!(UntetherMode::parse("unplugged"), None);
        assert_eq!(UntetherMode::PowerCut.pool_label(), None);
        assert_eq!(UntetherMode::SoftUntethered.pool_label(), Some("soft-untethered"));
    }
}
