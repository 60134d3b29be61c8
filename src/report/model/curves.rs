//! Battery-level curves of trials for the HTML report's plots, from the `battery_pct`
//! series stored with each attempt: the store keeps them at collect time, so drawing the
//! curves opens no file (a 144 000-trial campaign used to open 144 000 raw dumps).
//!
//! Attempts recorded before the store kept series (schema 3), and backends that keep no
//! battery timeline, simply have no curve: curves are illustration, the statistics come
//! from the measurements.

use std::collections::HashMap;

use crate::report::model::input::CampaignData;
use crate::report::render::sample::{lttb, stride};
use crate::store::{CampaignColumns, Sym};

/// Valid attempts drawn per model × variant, at most: enough to see the spread.
pub const MAX_CURVES_PER_VARIANT: usize = 40;
/// Invalid attempts drawn per model, at most: the first ones, in grey.
pub const MAX_INVALID_CURVES: usize = 20;
/// Points of a drawn line, at most: more are down-sampled by largest-triangle-three-buckets
/// ([`lttb`]), which keeps the line's shape at a plot's 640 pixels.
pub const MAX_CURVE_POINTS: usize = 120;

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

/// How one model's curves were chosen, for the plot's caption.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CurveSampling {
    /// Attempts drawn, of those with a battery series.
    pub drawn: usize,
    pub total: usize,
    /// The smallest and largest stride over the model's variants (valid attempts).
    pub steps: (usize, usize),
    /// Invalid attempts drawn (the first ones), of those with a battery series.
    pub invalid_drawn: usize,
    pub invalid_total: usize,
    /// A drawn line had more than [`MAX_CURVE_POINTS`] points and was down-sampled.
    pub thinned: bool,
}

impl CurveSampling {
    /// Some attempts with a series are not drawn.
    pub fn sampled(&self) -> bool {
        self.drawn < self.total
    }
}

/// The attempts with a battery series, grouped as they are sampled.
#[derive(Default)]
struct Groups {
    /// Valid attempt rows per (model, variant), in row (trial) order.
    valid: HashMap<(Sym, Sym), Vec<u32>>,
    /// Per model: the first invalid rows, and how many there are.
    invalid: HashMap<Sym, (Vec<u32>, usize)>,
}

impl Groups {
    fn of(c: &CampaignColumns) -> Self {
        let mut g = Groups::default();
        for a in (0..c.attempts()).filter(|&a| c.a_has_battery[a]) {
            let t = c.a_trial[a] as usize;
            if c.a_valid[a] {
                g.valid.entry((c.t_model[t], c.t_variant[t])).or_default().push(a as u32);
            } else {
                let (rows, n) = g.invalid.entry(c.t_model[t]).or_default();
                if rows.len() < MAX_INVALID_CURVES {
                    rows.push(a as u32);
                }
                *n += 1;
            }
        }
        g
    }
}

/// The attempt rows whose curves are drawn, in row order: of each model × variant's
/// valid attempts with a battery series every k-th in trial order (k = ⌈n / 40⌉), and
/// each model's first 20 invalid ones. Deterministic, so the same campaign draws the same.
pub fn sample_curves(c: &CampaignColumns) -> Vec<u32> {
    let g = Groups::of(c);
    let mut out: Vec<u32> = g.invalid.into_values().flat_map(|(rows, _)| rows).collect();
    for rows in g.valid.into_values() {
        let (_, picks) = stride(rows.len(), MAX_CURVES_PER_VARIANT);
        out.extend(picks.map(|i| rows[i]));
    }
    out.sort_unstable();
    out
}

/// Per model (as pooled): how [`sample_curves`] and [`battery_curves`] chose and thinned
/// its curves.
pub fn curve_sampling(c: &CampaignColumns) -> HashMap<Sym, CurveSampling> {
    let g = Groups::of(c);
    let mut out: HashMap<Sym, CurveSampling> = HashMap::new();
    for ((model, _), rows) in &g.valid {
        let (step, picks) = stride(rows.len(), MAX_CURVES_PER_VARIANT);
        let s = out.entry(*model).or_default();
        s.steps = if s.total == 0 { (step, step) } else { (s.steps.0.min(step), s.steps.1.max(step)) };
        s.drawn += picks.count();
        s.total += rows.len();
    }
    for (model, (rows, n)) in &g.invalid {
        let s = out.entry(*model).or_default();
        s.drawn += rows.len();
        s.total += n;
        s.invalid_drawn = rows.len();
        s.invalid_total = *n;
    }
    let drawn = sample_curves(c);
    for (a, points) in &c.battery {
        if points.len() > MAX_CURVE_POINTS && drawn.binary_search(a).is_ok() {
            let model = c.t_model[c.a_trial[*a as usize] as usize];
            out.entry(model).or_default().thinned = true;
        }
    }
    out
}

/// Curves of the sampled attempts ([`sample_curves`]) with a non-empty battery series,
/// by trial then attempt, each down-sampled to [`MAX_CURVE_POINTS`].
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
                points: lttb(points, MAX_CURVE_POINTS).into_iter().map(|(t, v)| (t / 60.0, v)).collect(),
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
        let mut data = crate::testing::fixture::records("c1");
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
    fn long_series_are_drawn_in_at_most_120_points() {
        let mut data = crate::testing::fixture::records("c1");
        let long: Vec<(f64, f64)> = (0..1000).map(|i| (i as f64 * 3.6, 100.0 - i as f64 * 0.004)).collect();
        data.attempts[1].series = vec![Series::new(BATTERY_PCT, "%", "sim", long.clone())];
        data.attempts[2].series = vec![Series::new(BATTERY_PCT, "%", "sim", long[..MAX_CURVE_POINTS].to_vec())];
        let data = data.data();
        let curves = battery_curves(&data);
        let lens: Vec<usize> = curves.iter().map(|c| c.points.len()).collect();
        assert_eq!(lens, [MAX_CURVE_POINTS, MAX_CURVE_POINTS]);
        assert_eq!(curves[0].points[0], (0.0, 100.0));
        assert_eq!(*curves[0].points.last().unwrap(), (long[999].0 / 60.0, long[999].1), "last point kept");
        assert_eq!(curves[1].points[5], (long[5].0 / 60.0, long[5].1), "a short line is drawn as it is");
        let model = data.cols.names.get(crate::testing::fixture::MODEL).unwrap();
        let s = &curve_sampling(&data.cols)[&model];
        assert_eq!((s.drawn, s.total, s.steps, s.thinned, s.sampled()), (2, 2, (1, 1), true, false));
    }

    #[test]
    fn attempts_without_series_have_no_curves() {
        // As in a store from before series were kept.
        assert!(battery_curves(&crate::testing::fixture::campaign("c1")).is_empty());
    }
}
