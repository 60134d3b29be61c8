//! Model reports pooled from stored summaries: several campaigns' values of each variant ×
//! metric taken as one sample (a schedule's baseline weeks as one arm of a comparison).

use crate::report::model::report::{MetricRow, ModelReport};
use crate::stats::summarize;
use crate::store::SummaryRow;

impl ModelReport {
    /// `model`'s rows of `rows`, pooled by variant × metric in order of first appearance:
    /// values concatenated in the order given, statistics at `confidence` over them. Units
    /// and gating are the first row's; sources are all rows'. No devices, verdicts,
    /// comparisons or outliers: only what a comparison reads.
    pub fn from_summaries(model: &str, rows: &[&SummaryRow], confidence: f64) -> ModelReport {
        let mut out: Vec<MetricRow> = Vec::new();
        for r in rows.iter().filter(|r| r.model == model) {
            let at = match out.iter().position(|o| o.variant == r.variant && o.metric == r.metric) {
                Some(i) => i,
                None => {
                    out.push(MetricRow {
                        variant: r.variant.clone(),
                        metric: r.metric.clone(),
                        unit: r.unit.clone(),
                        sources: Vec::new(),
                        n: 0,
                        non_finite: 0,
                        stats: None,
                        gating: r.gating,
                        outliers: Vec::new(),
                        comparisons: Vec::new(),
                        values: Vec::new(),
                    });
                    out.len() - 1
                }
            };
            let o = &mut out[at];
            o.values.extend_from_slice(&r.values);
            o.non_finite += r.non_finite;
            o.sources.extend(r.sources.iter().cloned());
        }
        for o in &mut out {
            o.sources.sort();
            o.sources.dedup();
            o.n = o.values.len();
            o.stats = summarize(&o.values, confidence);
        }
        ModelReport { model: model.to_string(), devices: Vec::new(), rows: out, verdicts: Vec::new() }
    }
}

/// One pooled [`ModelReport`] per model of `rows`, in order of first appearance.
pub fn pooled_models(rows: &[&SummaryRow], confidence: f64) -> Vec<ModelReport> {
    let mut models: Vec<&str> = Vec::new();
    for r in rows {
        if !models.contains(&r.model.as_str()) {
            models.push(&r.model);
        }
    }
    models.into_iter().map(|m| ModelReport::from_summaries(m, rows, confidence)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{build_report, summary_rows};
    use crate::testing::fixture;

    #[test]
    fn weeks_pool_into_one_sample_per_variant_and_metric() {
        let (a, b) = (fixture::campaign("w1"), fixture::campaign("w2"));
        let (ra, rb) = (summary_rows(&build_report(&a), &a), summary_rows(&build_report(&b), &b));
        let mut other = ra[0].clone();
        other.model = "Pixel 8".into();
        let rows: Vec<&SummaryRow> = ra.iter().chain(&rb).chain([&other]).collect();
        let models = pooled_models(&rows, 0.95);
        assert_eq!(models.iter().map(|m| m.model.as_str()).collect::<Vec<_>>(), [fixture::MODEL, "Pixel 8"]);
        let m = &models[0];
        let single = &build_report(&a).models[0];
        let keys = |m: &ModelReport| m.rows.iter().map(|r| (r.variant.clone(), r.metric.clone())).collect::<Vec<_>>();
        assert_eq!(keys(m), keys(single), "one row per variant × metric, in report order");
        for (p, s) in m.rows.iter().zip(&single.rows) {
            assert_eq!(p.values, [s.values.clone(), s.values.clone()].concat(), "{} {}", p.variant, p.metric);
            assert_eq!((p.n, p.unit.as_str(), p.gating, &p.sources), (2 * s.n, s.unit.as_str(), s.gating, &s.sources));
            assert_eq!(p.stats, summarize(&p.values, 0.95));
        }
        assert!(m.devices.is_empty() && m.verdicts.is_empty());
        assert_eq!(models[1].rows.len(), 1);
    }
}
