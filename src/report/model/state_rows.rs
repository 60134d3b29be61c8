//! The devices' state as the attempts kept it (before, during and after each soak),
//! grouped by device, moment, setting and source: so a value the app reported or an
//! operator attested is never read as the lab's own reading.

use crate::report::model::report::StateRow;
use crate::store::{CampaignColumns, MOMENTS, SETTINGS, SOURCES};

/// The columns' state groups in the order of display: device, moment, setting, then
/// the source's name.
pub(in crate::report) fn state_rows(c: &CampaignColumns) -> Vec<StateRow> {
    let mut groups: Vec<_> = c.states.groups.iter().collect();
    groups.sort_by_key(|g| (c.names.name(g.device), g.moment, g.setting, SOURCES[g.source as usize].1));
    groups
        .into_iter()
        .map(|g| {
            let (_, setting, unit) = SETTINGS[g.setting as usize];
            let values = match g.range {
                Some((lo, hi)) if (hi - lo).abs() < 0.5 => format!("{lo:.0}{unit}"),
                Some((lo, hi)) => format!("{lo:.0}–{hi:.0}{unit}"),
                None => [(g.on, "on"), (g.off, "off")]
                    .iter()
                    .filter(|(seen, _)| *seen)
                    .map(|(_, s)| *s)
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            StateRow {
                device: c.names.name(g.device).to_string(),
                when: MOMENTS[g.moment as usize],
                setting,
                values,
                source: SOURCES[g.source as usize].1,
                attempts: g.attempts as usize,
                valid_attempts: g.valid as usize,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::report::build_report;
    use crate::testing::fixture;

    #[test]
    fn every_value_is_shown_with_its_source_numbers_as_a_range() {
        let mut data = fixture::records("c1");
        for a in &mut data.attempts {
            (a.state_before, a.state_soak, a.state_after) = (json!({}), json!(null), json!({}));
        }
        let nothing = build_report(&data.data());
        assert!(nothing.state.is_empty(), "nothing kept, nothing shown");
        let known = |value: serde_json::Value, from: &str| json!({"state": "known", "value": value, "from": from});
        for (n, a) in data.attempts.iter_mut().filter(|a| a.trial_idx <= 1).enumerate() {
            a.state_before = json!({
                "brightness_pct": known(json!(48.0 + 4.0 * n as f64), "set"),
                "low_power": known(json!(false), "app"),
                "wifi_on": {"state": "unknown"},
            });
            a.state_soak = json!({"brightness_pct": known(json!(55.0), "powerlog"), "bluetooth_on": known(json!(n == 0), "powerlog")});
            a.state_after = json!({"bluetooth_on": known(json!(false), "operator")});
        }
        let rows = build_report(&data.data()).state;
        let shown: Vec<String> = rows
            .iter()
            .map(|r| format!("{} {} {} = {} ({}) ×{}", r.device, r.when, r.setting, r.values, r.source, r.attempts))
            .collect();
        assert_eq!(
            shown,
            [
                "sim-iphone-1 before brightness = 48–52 % (set) ×2",
                "sim-iphone-1 before low_power = off (app) ×2",
                "sim-iphone-1 during brightness = 55 % (powerlog) ×2",
                "sim-iphone-1 during bluetooth = on, off (powerlog) ×2",
                "sim-iphone-1 after bluetooth = off (attested) ×2",
            ]
        );
    }
}
