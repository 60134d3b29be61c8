//! The power monitor's trace per model × variant for the HTML report: the stored
//! `monitor_power_mw` series of the valid attempts (each already a few hundred points),
//! put on one time grid and summarised per grid step by the median and the quartiles
//! across attempts — one line and a band per variant, however many trials there are.

use std::collections::{BTreeMap, HashMap};

use crate::report::model::input::CampaignData;

/// Grid steps of a band: about one per 6 pixels of a plot.
pub const BAND_STEPS: usize = 100;

/// One variant's power over the soak on one model.
#[derive(Debug, Clone, PartialEq)]
pub struct PowerBand {
    pub model: String,
    pub variant: String,
    /// Valid attempts with a trace.
    pub attempts: usize,
    /// (seconds since the soak's start, first quartile, median, third quartile), mW.
    pub points: Vec<(f64, f64, f64, f64)>,
}

/// The bands of every model × variant with a monitor trace, in model then variant order.
pub fn power_bands(data: &CampaignData) -> Vec<PowerBand> {
    let c = &data.cols;
    let rows: HashMap<(u32, u32), usize> =
        (0..c.attempts()).map(|a| ((c.t_idx[c.a_trial[a] as usize], c.a_attempt[a]), a)).collect();
    let mut groups: BTreeMap<(String, String), Vec<Trace>> = BTreeMap::new();
    for (idx, attempt, points) in &data.power {
        let Some(&a) = rows.get(&(*idx, *attempt)) else { continue };
        if !c.a_valid[a] || points.is_empty() {
            continue;
        }
        let t = c.a_trial[a] as usize;
        let key = (c.names.name(c.t_model[t]).to_string(), c.names.name(c.t_variant[t]).to_string());
        groups.entry(key).or_default().push(points);
    }
    groups.into_iter().map(|((model, variant), traces)| band(model, variant, &traces)).collect()
}

/// One attempt's stored points: (seconds since the soak's start, mW).
type Trace<'a> = &'a [(f64, f64)];

fn band(model: String, variant: String, traces: &[Trace]) -> PowerBand {
    let end = traces.iter().filter_map(|p| p.last()).map(|p| p.0).fold(0.0f64, f64::max).max(f64::MIN_POSITIVE);
    let step = end / BAND_STEPS as f64;
    // Each attempt's mean in each grid step, then the quartiles across attempts.
    let mut cells: Vec<Vec<f64>> = vec![Vec::new(); BAND_STEPS];
    for trace in traces {
        let mut sums = vec![(0.0, 0usize); BAND_STEPS];
        for &(t, mw) in *trace {
            let i = ((t / step) as usize).min(BAND_STEPS - 1);
            sums[i].0 += mw;
            sums[i].1 += 1;
        }
        for (cell, (sum, n)) in cells.iter_mut().zip(sums) {
            if n > 0 {
                cell.push(sum / n as f64);
            }
        }
    }
    let points = cells
        .iter_mut()
        .enumerate()
        .filter(|(_, v)| !v.is_empty())
        .map(|(i, v)| {
            v.sort_by(f64::total_cmp);
            ((i as f64 + 0.5) * step, quantile(v, 0.25), quantile(v, 0.5), quantile(v, 0.75))
        })
        .collect();
    PowerBand { model, variant, attempts: traces.len(), points }
}

/// The p-quantile of sorted `v` by linear interpolation (Hyndman & Fan 1996, type 7: R's
/// and NumPy's default).
fn quantile(v: &[f64], p: f64) -> f64 {
    let h = (v.len() - 1) as f64 * p;
    let (i, f) = (h.floor() as usize, h - h.floor());
    v[i] + f * (v[(i + 1).min(v.len() - 1)] - v[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_band_is_the_quartiles_across_attempts_per_step() {
        // Three flat traces at 100, 200 and 400 mW over 100 s; and a step from 1 to 2 W.
        let flat = |mw: f64| (0..200).map(|i| (i as f64 * 0.5, mw)).collect::<Vec<_>>();
        let (a, b, c) = (flat(100.0), flat(200.0), flat(400.0));
        let got = band("m".into(), "v".into(), &[&a, &b, &c]);
        assert_eq!(got.attempts, 3);
        assert_eq!(got.points.len(), BAND_STEPS);
        for &(_, q1, med, q3) in &got.points {
            assert_eq!((q1, med, q3), (150.0, 200.0, 300.0));
        }
        let step: Vec<(f64, f64)> = (0..200).map(|i| (i as f64 * 0.5, if i < 100 { 1000.0 } else { 2000.0 })).collect();
        let got = band("m".into(), "v".into(), &[&step]);
        assert_eq!(got.points.first().map(|p| p.2), Some(1000.0));
        assert_eq!(got.points.last().map(|p| p.2), Some(2000.0));
        assert!(got.points.windows(2).all(|w| w[0].0 < w[1].0), "time goes forward");
    }
}
