//! Battery-level curves of trials for the HTML report's plots, from the `battery_pct`
//! series stored with each attempt: the store keeps them at collect time, so drawing the
//! curves opens no file (a 144 000-trial campaign used to open 144 000 raw dumps).
//!
//! Attempts recorded before the store kept series (schema 3), and backends that keep no
//! battery timeline, simply have no curve: curves are illustration, the statistics come
//! from the measurements.

use super::input::CampaignData;
use crate::measure::BATTERY_PCT;
use crate::store::AttemptStatus;

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

/// Curves of every attempt with a non-empty battery series, by trial then attempt.
pub fn battery_curves(data: &CampaignData) -> Vec<BatteryCurve> {
    let rows: std::collections::HashMap<u32, &crate::store::PlannedTrialRow> =
        data.trials.iter().map(|t| (t.row.idx, &t.row)).collect();
    let mut attempts: Vec<_> = data.attempts.iter().collect();
    attempts.sort_by_key(|a| (a.trial_idx, a.attempt));
    attempts
        .into_iter()
        .filter_map(|a| {
            let row = rows.get(&a.trial_idx)?;
            let series = a.series.iter().find(|s| s.name == BATTERY_PCT && !s.points.is_empty())?;
            Some(BatteryCurve {
                trial_key: row.key.clone(),
                device: row.device.clone(),
                model: row.device_model.clone(),
                variant: row.variant.clone(),
                valid: a.status == AttemptStatus::Valid,
                points: series.points.iter().map(|&(t, v)| (t / 60.0, v)).collect(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::Series;

    #[test]
    fn curves_come_from_the_stored_battery_series_in_minutes() {
        let mut data = crate::report::test_fixture::campaign("c1");
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
        let curves = battery_curves(&data);
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
