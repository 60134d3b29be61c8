//! What an app does when it runs on the stand-in, shipped in its .ipa: the Info.plist key
//! `LabStandIn` (`iphone ipa --cpu-pct --footprint-mb --energy-cost`), kept with the
//! installed app and copied to each process launched from it. Sysmontap and the energy
//! gauge report from it, with a small deterministic jitter.

use serde::{Deserialize, Serialize};

/// The Info.plist key of the stand-in's own (no real app has it).
pub const INFO_KEY: &str = "LabStandIn";

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// CPU use while it runs, % of one core (sysmontap's cpuUsage).
    #[serde(rename = "CPUPercent")]
    pub cpu_pct: f64,
    /// Its memory footprint in MiB (sysmontap's physFootprint is this × 1048576 bytes).
    #[serde(rename = "FootprintMB")]
    pub footprint_mb: f64,
    /// The energy gauge's `energy.cost`.
    #[serde(rename = "EnergyCost")]
    pub energy_cost: f64,
}

impl Default for Profile {
    /// A small, idle-ish app: what an .ipa without the key (or a phone file's app) gets.
    fn default() -> Self {
        Profile { cpu_pct: 1.0, footprint_mb: 6.0, energy_cost: 1.0 }
    }
}

impl Profile {
    pub fn from_info(info: &plist::Dictionary) -> Option<Profile> {
        plist::from_value(info.get(INFO_KEY)?).ok()
    }

    pub fn to_info(self) -> plist::Value {
        plist::to_value(&self).expect("a profile serializes")
    }
}

/// A factor in [0.95, 1.05] fixed by `(pid, sample, what)`: samples vary as a real
/// gauge's do, yet a test run is repeatable (FNV-1a of the three).
pub fn jitter(pid: u64, sample: u64, what: &str) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in pid.to_le_bytes().iter().chain(&sample.to_le_bytes()).chain(what.as_bytes()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    0.95 + (h % 10_001) as f64 / 100_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_round_trips_through_info_plist_and_jitter_stays_within_five_percent() {
        let p = Profile { cpu_pct: 35.0, footprint_mb: 120.5, energy_cost: 12.0 };
        let info: plist::Dictionary = [(INFO_KEY.to_string(), p.to_info())].into_iter().collect();
        assert_eq!(Profile::from_info(&info), Some(p));
        assert_eq!(Profile::from_info(&plist::Dictionary::new()), None);
        let factors: Vec<f64> = (0..200).map(|i| jitter(1001, i, "cpu")).collect();
        assert!(factors.iter().all(|f| (0.95..=1.05).contains(f)), "{factors:?}");
        assert!(factors.windows(2).any(|w| w[0] != w[1]), "it varies");
        assert_eq!(jitter(1001, 7, "cpu"), jitter(1001, 7, "cpu"), "and repeats");
    }
}
