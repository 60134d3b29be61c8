//! Battery-level curves of trials, read from the raw files devices left in the
//! campaign's artifact folder, for the HTML report's plots.
//!
//! Only the simulated phone's dump (`sim-energy.log`, docs/sim.md) carries a battery
//! timeline today; a backend that keeps one in another file adds its reader here. A
//! missing or unreadable file just means no curve for that attempt: curves are
//! illustration, the statistics come from the store.

use std::path::Path;

use super::input::CampaignData;
use crate::store::AttemptStatus;

/// The sim dump's file name in an attempt's folder.
const SIM_DUMP: &str = "sim-energy.log";

/// The battery level over one attempt's measurement window.
#[derive(Debug, Clone, PartialEq)]
pub struct BatteryCurve {
    pub trial_key: String,
    pub device: String,
    pub model: String,
    pub variant: String,
    pub valid: bool,
    /// (minutes since launch, battery level in % of capacity from the charge counter).
    pub points: Vec<(f64, f64)>,
}

/// Curves of every attempt that left a readable timeline under `dir`
/// (`artifacts/<campaign>`: `<trial key>/attempt-<n>/sim-energy.log`), by trial then attempt.
pub fn load_curves(data: &CampaignData, dir: &Path) -> Vec<BatteryCurve> {
    let rows: std::collections::HashMap<u32, &crate::store::PlannedTrialRow> =
        data.trials.iter().map(|t| (t.row.idx, &t.row)).collect();
    let mut attempts: Vec<_> = data.attempts.iter().collect();
    attempts.sort_by_key(|a| (a.trial_idx, a.attempt));
    attempts
        .into_iter()
        .filter_map(|a| {
            let row = rows.get(&a.trial_idx)?;
            let path = dir.join(&row.key).join(format!("attempt-{}", a.attempt)).join(SIM_DUMP);
            let text = std::fs::read_to_string(path).ok()?;
            let points = parse_battery_timeline(&text)?;
            Some(BatteryCurve {
                trial_key: row.key.clone(),
                device: row.device.clone(),
                model: row.device_model.clone(),
                variant: row.variant.clone(),
                valid: a.status == AttemptStatus::Valid,
                points,
            })
        })
        .collect()
}

/// The `battery` lines of a sim dump as (minutes, level %), the level computed from the
/// charge counter and the `battery_mah` header (finer than the whole-percent level).
/// `None` when the header or every battery line is missing or malformed.
pub fn parse_battery_timeline(text: &str) -> Option<Vec<(f64, f64)>> {
    let capacity: f64 = text.lines().find_map(|l| l.strip_prefix("battery_mah "))?.trim().parse().ok()?;
    if capacity.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return None;
    }
    let points: Vec<(f64, f64)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("battery "))
        .filter_map(|rest| {
            let field = |key: &str| {
                rest.split_whitespace().find_map(|kv| kv.strip_prefix(key)?.strip_prefix('=')?.parse::<f64>().ok())
            };
            Some((field("t")? / 60.0, field("charge_mah")? / capacity * 100.0))
        })
        .collect();
    (!points.is_empty()).then_some(points)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DUMP: &str = "lab-sim-energy-log 1\n# comment\ndevice sim-iphone-1\nbattery_mah 1715\nvoltage_v 3.82\n\
battery t=0.000 level=100 charge_mah=1715 current_ma=-222.0 ext=0 charging=0 temp_c=25.00\n\
sample t=60.000 dt=60.000 cpu=11.49 mem_mb=6.04 wakeups=900 sent=300 cached=0 energy=1\n\
battery t=60.000 level=99 charge_mah=1711 current_ma=-222.0 ext=0 charging=0 temp_c=25.10\n\
battery t=90.000 level=99 charge_mah=lots current_ma=-222.0\n\
end t=90.000 requests_sent=450 requests_cached=0 app_alive=1\n";

    #[test]
    fn reads_the_battery_lines_in_percent_of_capacity() {
        let pts = parse_battery_timeline(DUMP).unwrap();
        assert_eq!(pts.len(), 2, "the malformed line is skipped");
        assert_eq!(pts[0], (0.0, 100.0));
        assert!((pts[1].0 - 1.0).abs() < 1e-12);
        assert!((pts[1].1 - 1711.0 / 1715.0 * 100.0).abs() < 1e-12);
        assert_eq!(parse_battery_timeline("battery t=0 charge_mah=1\n"), None);
        assert_eq!(parse_battery_timeline("battery_mah 0\nbattery t=0 charge_mah=1\n"), None);
    }

    #[test]
    fn loads_curves_of_attempts_that_left_a_dump() {
        let dir = tempfile::tempdir().unwrap();
        let data = crate::report::test_fixture::campaign("c1");
        let key = &data.trials[0].row.key;
        let attempt_dir = dir.path().join(key).join("attempt-0");
        std::fs::create_dir_all(&attempt_dir).unwrap();
        std::fs::write(attempt_dir.join(SIM_DUMP), DUMP).unwrap();
        let curves = load_curves(&data, dir.path());
        assert_eq!(curves.len(), 1);
        assert_eq!(
            (curves[0].trial_key.as_str(), curves[0].variant.as_str(), curves[0].valid),
            (key.as_str(), "control", true)
        );
    }
}
