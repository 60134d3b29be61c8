//! Battery-level curves of trials for the HTML report's plots, from the `battery_pct`
//! series stored with each attempt: the store keeps them at collect time, so drawing the
//! curves opens no file (a 144 000-trial campaign used to open 144 000 raw dumps).
//!
//! Attempts recorded before the store kept series (schema 3), and backends that keep no
//! battery timeline, simply have no curve: curves are illustration, the statistics come
//! from the measurements.

use std::collections::HashMap;

use super::input::CampaignData;
use crate::store::{CampaignColumns, Sym};

/// Valid attempts drawn per model × variant, at most: enough to see the spread.
pub const MAX_CURVES_PER_VARIANT: usize = 40;
/// Invalid attempts drawn per model, at most: the first ones, in grey.
pub const MAX_INVALID_CURVES: usize = 20;

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

/// The attempt rows whose curves are drawn, in row order: of each model × variant's
/// valid attempts with a battery series every k-th in trial order (k = ⌈n / 40⌉), and
/// each model's first 20 invalid ones. Deterministic, so the same campaign draws the same.
pub fn sample_curves(c: &CampaignColumns) -> Vec<u32> {
    let mut valid: HashMap<(Sym, Sym), Vec<u32>> = HashMap::new();
    let mut invalid: HashMap<Sym, Vec<u32>> = HashMap::new();
    for a in (0..c.attempts()).filter(|&a| c.a_has_battery[a]) {
        let t = c.a_trial[a] as usize;
        if c.a_valid[a] {
            valid.entry((c.t_model[t], c.t_variant[t])).or_default().push(a as u32);
        } else {
            let rows = invalid.entry(c.t_model[t]).or_default();
            if rows.len() < MAX_INVALID_CURVES {
                rows.push(a as u32);
            }
        }
    }
    let mut out: Vec<u32> = invalid.into_values().flatten().collect();
    for rows in valid.into_values() {
        let step = rows.len().div_ceil(MAX_CURVES_PER_VARIANT);
        out.extend(rows.into_iter().step_by(step.max(1)));
    }
    out.sort_unstable();
    out
}

/// Curves of the sampled attempts ([`sample_curves`]) with a non-empty battery series,
/// by trial then attempt.
pub fn battery_curves(data: &CampaignData) -> Vec<BatteryCurve> {
    let c = &data.cols;
    let drawn = sample_curves(c);
    let name = |s: Sym| c.names.name(s).to_string();
    c.battery
        .iter()
        .filter(|(a, points)| !points.is_empty() && drawn.binary_search(a).is_ok())
        .map(|(a, points)| {
            let (a, t) = (*a as usize, c.a_trial[*a as usize] as usize);
            BatteryCurve {
                trial_key: c.t_key[t].to_string(),
                device: name(c.t_device[t]),
                model: name(c.t_model[t]),
                variant: name(c.t_variant[t]),
                valid: c.a_valid[a],
                points: points.iter().map(|&(t, v)| (t / 60.0, v)).collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{BATTERY_PCT, Series};

    #[test]
    fn curves_come_from_the_stored_battery_series_in_minutes() {
        let mut data = crate::report::test_fixture::records("c1");
        let pts = vec![(0.0, 100.0), (90.0, 1711.0 / 1715.0 * 100.0)];
        // Trial 2 has an invalid attempt 0 and a valid attempt 1; trial 0 one valid attempt.
        for a in &mut data.attempts {
            match (a.trial_idx, a.attempt) {
                (2, 0) => a.series = vec![Series::new(BATTERY_PCT, "%", "sim", pts.clone())],
                (0, 0) => {
                    a.series = vec![
                        Series::new("temp_c", "°C", "sim", vec![(0.0, 25.0)]),
                        Series::new(BATTERY_PCT, "%", "sim", pts.clone()),
                    ]
                }
                // Empty, and another series only: no curve.
                (1, 0) => a.series = vec![Series::new(BATTERY_PCT, "%", "sim", Vec::new())],
                (3, 0) => a.series = vec![Series::new("temp_c", "°C", "sim", vec![(0.0, 25.0)])],
                _ => {}
            }
        }
        let curves = battery_curves(&data.data());
        let got: Vec<(&str, &str, bool)> =
            curves.iter().map(|c| (c.trial_key.as_str(), c.variant.as_str(), c.valid)).collect();
        assert_eq!(
            got,
            [
                (data.trials[0].row.key.as_str(), "control", true),
                (data.trials[2].row.key.as_str(), "envoy-poll", false)
            ]
        );
        assert_eq!(curves[0].points, [(0.0, 100.0), (1.5, 1711.0 / 1715.0 * 100.0)]);
        assert_eq!(curves[0].model, data.trials[0].row.device_model);
    }

    #[test]
    fn attempts_without_series_have_no_curves() {
        // As in a store from before series were kept.
        assert!(battery_curves(&crate::report::test_fixture::campaign("c1")).is_empty());
    }
}
