//! The devices' state as the attempts kept it (before, during and after each soak),
//! grouped by device, moment, setting and source: so a value the app reported or an
//! operator attested is never read as the lab's own reading.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::input::CampaignData;
use super::model::StateRow;
use crate::store::{AttemptStatus, PlannedTrialRow};

/// The settings shown: (snapshot field, name shown, unit of a number).
const SETTINGS: &[(&str, &str, &str)] = &[
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

const MOMENTS: [&str; 3] = ["before", "during", "after"];

/// Values of one group: numbers as a range, switches as the set seen.
#[derive(Default)]
struct Seen {
    range: Option<(f64, f64)>,
    switches: BTreeSet<bool>,
    attempts: usize,
    valid: usize,
}

pub(super) fn state_rows(data: &CampaignData, trial_rows: &HashMap<u32, &PlannedTrialRow>) -> Vec<StateRow> {
    // (device, moment, setting, source), in that order of display.
    let mut groups: BTreeMap<(String, usize, usize, &'static str), Seen> = BTreeMap::new();
    for a in &data.attempts {
        let device = if a.device.is_empty() {
            trial_rows.get(&a.trial_idx).map(|r| r.device.clone()).unwrap_or_default()
        } else {
            a.device.clone()
        };
        for (m, state) in [&a.state_before, &a.state_soak, &a.state_after].into_iter().enumerate() {
            for (i, (field, _, _)) in SETTINGS.iter().enumerate() {
                let r = &state[*field];
                let Some(source) = source_name(&r["from"]).filter(|_| r["state"] == "known") else { continue };
                let seen = groups.entry((device.clone(), m, i, source)).or_default();
                match (r["value"].as_bool(), r["value"].as_f64()) {
                    (Some(b), _) => {
                        seen.switches.insert(b);
                    }
                    (None, Some(x)) => {
                        seen.range = Some(seen.range.map_or((x, x), |(lo, hi)| (lo.min(x), hi.max(x))));
                    }
                    (None, None) => continue,
                }
                seen.attempts += 1;
                seen.valid += usize::from(a.status == AttemptStatus::Valid);
            }
        }
    }
    groups
        .into_iter()
        .map(|((device, m, i, source), seen)| {
            let (_, setting, unit) = SETTINGS[i];
            let values = match seen.range {
                Some((lo, hi)) if (hi - lo).abs() < 0.5 => format!("{lo:.0}{unit}"),
                Some((lo, hi)) => format!("{lo:.0}–{hi:.0}{unit}"),
                None => {
                    seen.switches.iter().rev().map(|b| if *b { "on" } else { "off" }).collect::<Vec<_>>().join(", ")
                }
            };
            StateRow {
                device,
                when: MOMENTS[m],
                setting,
                values,
                source,
                attempts: seen.attempts,
                valid_attempts: seen.valid,
            }
        })
        .collect()
}

/// How a stored `Provenance` is shown (`operator` is an attestation).
fn source_name(from: &serde_json::Value) -> Option<&'static str> {
    Some(match from.as_str()? {
        "read" => "read",
        "set" => "set",
        "app" => "app",
        "operator" => "attested",
        "powerlog" => "powerlog",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::report::build_report;
    use crate::report::test_fixture;

    #[test]
    fn every_value_is_shown_with_its_source_numbers_as_a_range() {
        let mut data = test_fixture::campaign("c1");
        for a in &mut data.attempts {
            (a.state_before, a.state_soak, a.state_after) = (json!({}), json!(null), json!({}));
        }
        let nothing = build_report(&data);
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
        let rows = build_report(&data).state;
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
