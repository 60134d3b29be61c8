//! The power monitor's trace per model × variant for the HTML report: the stored
//! `monitor_power_mw` series of the valid attempts (each already a few hundred points),
//! put on one time grid and summarised per grid step by the median and the quartiles
//! across attempts — one line and a band per variant, however many trials there are.
//!
//! The traces are read from the store one at a time and each reduced to its mean per grid
//! step as it comes ([`Grid`]): at 144 000 trials, held whole, they took 600 MB, where the
//! means are 100 numbers an attempt. The grid ends at the latest trace's last point, known
//! only once all are read: a group whose end moved after its first trace was put on the
//! grid is put on it again in a second pass with the end known (traces of one soak length
//! on one instrument mostly end alike, so mostly one pass).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::measure::MONITOR_POWER_MW;
use crate::store::{CampaignColumns, SeriesFold, Store, StoreError};

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

/// The bands of every model × variant of campaign `id` with a monitor trace of a valid
/// attempt in `cols`, in model then variant order.
pub fn load_power_bands(store: &Store, id: &str, cols: &CampaignColumns) -> Result<Vec<PowerBand>, StoreError> {
    let mut names: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut group_of = HashMap::new();
    for a in (0..cols.attempts()).filter(|&a| cols.a_valid[a]) {
        let t = cols.a_trial[a] as usize;
        let key = (cols.names.name(cols.t_model[t]).to_string(), cols.names.name(cols.t_variant[t]).to_string());
        let next = names.len();
        let g = *names.entry(key).or_insert(next);
        group_of.insert((cols.t_idx[t], cols.a_attempt[a]), g);
    }
    let fold = Bands { group_of: Arc::new(group_of), grids: vec![Grid::default(); names.len()], second: false };
    let mut grids = store.fold_series_named(id, MONITOR_POWER_MW, fold)?.grids;
    // In key order; a model × variant without a trace has no band.
    Ok(names
        .into_iter()
        .map(|((model, variant), g)| std::mem::take(&mut grids[g]).band(model, variant))
        .filter(|b| b.attempts > 0)
        .collect())
}

/// The grids of the model × variant groups, filled as the store reads the traces.
#[derive(Clone)]
struct Bands {
    /// (trial idx, attempt) of each valid attempt → its group.
    group_of: Arc<HashMap<(u32, u32), usize>>,
    grids: Vec<Grid>,
    /// In the second pass, only the grids whose end moved take their traces again.
    second: bool,
}

impl SeriesFold for Bands {
    fn points(&mut self, trial_idx: u32, attempt: u32, points: &[(f64, f64)]) {
        let Some(&g) = self.group_of.get(&(trial_idx, attempt)) else { return };
        let grid = &mut self.grids[g];
        if !self.second {
            grid.add(points);
        } else if grid.again {
            grid.put(points);
        }
    }

    fn again(&mut self) -> bool {
        if self.second {
            return false;
        }
        self.second = true;
        let mut any = false;
        for grid in self.grids.iter_mut().filter(|g| g.moved()) {
            grid.restart();
            any = true;
        }
        any
    }
}

/// One group's grid: each trace's mean power per grid step, the grid ending at the
/// latest trace's last point.
#[derive(Debug, Clone, Default)]
struct Grid {
    end: f64,
    /// The end when the first trace was put on the grid.
    first_end: Option<f64>,
    /// Traces added.
    traces: usize,
    /// Per grid step, the means of the traces with a point in it, in the order put.
    cells: Vec<Vec<f64>>,
    /// Its traces are to be put on the grid again, now that the end is known.
    again: bool,
}

impl Grid {
    /// Adds a trace: the end moves to its last point if later, and it is put on the grid
    /// as the grid is now.
    fn add(&mut self, points: &[(f64, f64)]) {
        if let Some(last) = points.last() {
            self.end = self.end.max(last.0);
        }
        self.traces += 1;
        self.first_end.get_or_insert(self.end);
        self.put(points);
    }

    /// Whether traces were put on the grid before its end moved.
    fn moved(&self) -> bool {
        self.first_end.is_some_and(|e| e != self.end)
    }

    /// Empties the cells for every trace to be put again at the final end.
    fn restart(&mut self) {
        self.cells.iter_mut().for_each(Vec::clear);
        self.first_end = Some(self.end);
        self.again = true;
    }

    fn step(&self) -> f64 {
        self.end.max(f64::MIN_POSITIVE) / BAND_STEPS as f64
    }

    /// Puts one trace's mean in each grid step it has points in.
    fn put(&mut self, points: &[(f64, f64)]) {
        if self.cells.is_empty() {
            self.cells = vec![Vec::new(); BAND_STEPS];
        }
        let step = self.step();
        let mut sums = [(0.0, 0usize); BAND_STEPS];
        for &(t, mw) in points {
            let i = ((t / step) as usize).min(BAND_STEPS - 1);
            sums[i].0 += mw;
            sums[i].1 += 1;
        }
        for (cell, (sum, n)) in self.cells.iter_mut().zip(sums) {
            if n > 0 {
                cell.push(sum / n as f64);
            }
        }
    }

    /// The quartiles across the traces per grid step.
    fn band(mut self, model: String, variant: String) -> PowerBand {
        let step = self.step();
        let points = self
            .cells
            .iter_mut()
            .enumerate()
            .filter(|(_, v)| !v.is_empty())
            .map(|(i, v)| ((i as f64 + 0.5) * step, quantile(v, 0.25), quantile(v, 0.5), quantile(v, 0.75)))
            .collect();
        PowerBand { model, variant, attempts: self.traces, points }
    }
}

/// The p-quantile of `v` by linear interpolation (Hyndman & Fan 1996, type 7: R's and
/// NumPy's default). `v` in any order: the two order statistics it needs are selected
/// (and `v` reordered), which gives what sorting would, in linear time.
fn quantile(v: &mut [f64], p: f64) -> f64 {
    let h = (v.len() - 1) as f64 * p;
    let (i, f) = (h.floor() as usize, h - h.floor());
    let (_, &mut lo, above) = v.select_nth_unstable_by(i, f64::total_cmp);
    let hi = above.iter().copied().min_by(f64::total_cmp).unwrap_or(lo);
    lo + f * (hi - lo)
}

/// One attempt's stored points: (seconds since the soak's start, mW).
#[cfg(test)]
type Trace<'a> = &'a [(f64, f64)];

/// The band of traces held in memory, as the store's passes put them.
#[cfg(test)]
fn band(model: String, variant: String, traces: &[Trace]) -> PowerBand {
    let mut grid = Grid::default();
    traces.iter().for_each(|t| grid.add(t));
    if grid.moved() {
        grid.restart();
        traces.iter().for_each(|t| grid.put(t));
    }
    grid.band(model, variant)
}

#[cfg(test)]
mod tests {
    use rand::RngExt;

    use super::*;
    use crate::measure::{BATTERY_PCT, Series};
    use crate::report::CampaignData;
    use crate::store::Points;
    use crate::testing::fixture;

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

    crate::testing::postgres::on_both!(streamed_bands_are_the_bands_of_the_traces_held_whole);

    /// Traces of random values on the fixture's attempts (some with none, some with two,
    /// some series of another name; valid and invalid attempts), read back from the store
    /// trace by trace: the bands are those of the traces held whole, as the report
    /// computed them before it streamed, bit for bit.
    fn streamed_bands_are_the_bands_of_the_traces_held_whole(store: &Store) {
        for seed in 0..6u64 {
            let mut records = fixture::records(&format!("c{seed}"));
            let mut rng = crate::seed::rng(seed, &["power bands"]);
            // Odd seeds: every trace on one clock and of one length, as one instrument's
            // soaks are (one pass); even: random lengths and times (the end moves, two).
            let one_clock = seed % 2 == 1;
            for a in &mut records.attempts {
                for _ in 0..rng.random_range(1..3) {
                    let n = if one_clock { 300 } else { rng.random_range(0..400) };
                    let mut t = 0.0;
                    let points: Points = (0..n)
                        .map(|_| {
                            t += if one_clock { 0.5 } else { rng.random_range(0.05..4.0) };
                            (t, rng.random_range(50.0..3000.0f64).round())
                        })
                        .collect();
                    let name = if rng.random_bool(0.8) { MONITOR_POWER_MW } else { BATTERY_PCT };
                    a.series.push(Series::new(name, "mW", "sim", points));
                }
            }
            records.store_into(store);
            let data = crate::report::load(store, &records.campaign.id).unwrap();
            let traces: Vec<(u32, u32, Points)> = records
                .attempts
                .iter()
                .flat_map(|a| a.series.iter().map(move |s| (a, s)))
                .filter(|(_, s)| s.name == MONITOR_POWER_MW)
                .map(|(a, s)| (a.trial_idx, a.attempt, s.points.clone()))
                .collect();
            let held = bands_held_whole(&data, &traces);
            assert!(held.iter().map(|b| b.attempts).sum::<usize>() > 3, "seed {seed}: a few valid traces");
            let bits = |b: &[PowerBand]| {
                b.iter()
                    .map(|b| {
                        let p: Vec<[u64; 4]> =
                            b.points.iter().map(|p| [p.0, p.1, p.2, p.3].map(f64::to_bits)).collect();
                        (b.model.clone(), b.variant.clone(), b.attempts, p)
                    })
                    .collect::<Vec<_>>()
            };
            assert_eq!(bits(&data.power), bits(&held), "seed {seed}");
        }
    }

    /// The bands as the report computed them before it streamed: every trace held, the
    /// cells of each step sorted.
    fn bands_held_whole(data: &CampaignData, power: &[(u32, u32, Points)]) -> Vec<PowerBand> {
        let c = &data.cols;
        let rows: HashMap<(u32, u32), usize> =
            (0..c.attempts()).map(|a| ((c.t_idx[c.a_trial[a] as usize], c.a_attempt[a]), a)).collect();
        let mut groups: BTreeMap<(String, String), Vec<Trace>> = BTreeMap::new();
        for (idx, attempt, points) in power {
            let Some(&a) = rows.get(&(*idx, *attempt)) else { continue };
            if !c.a_valid[a] || points.is_empty() {
                continue;
            }
            let t = c.a_trial[a] as usize;
            let key = (c.names.name(c.t_model[t]).to_string(), c.names.name(c.t_variant[t]).to_string());
            groups.entry(key).or_default().push(points);
        }
        let sorted_quantile = |v: &[f64], p: f64| {
            let h = (v.len() - 1) as f64 * p;
            let (i, f) = (h.floor() as usize, h - h.floor());
            v[i] + f * (v[(i + 1).min(v.len() - 1)] - v[i])
        };
        let mut out = Vec::new();
        for ((model, variant), traces) in groups {
            let end = traces.iter().filter_map(|p| p.last()).map(|p| p.0).fold(0.0f64, f64::max).max(f64::MIN_POSITIVE);
            let step = end / BAND_STEPS as f64;
            let mut cells: Vec<Vec<f64>> = vec![Vec::new(); BAND_STEPS];
            for trace in &traces {
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
                    let q = |p| sorted_quantile(v, p);
                    ((i as f64 + 0.5) * step, q(0.25), q(0.5), q(0.75))
                })
                .collect();
            out.push(PowerBand { model, variant, attempts: traces.len(), points });
        }
        out
    }
}
