//! `summary.csv`: every figure of the tables, one row per model × variant × metric ×
//! comparison, at full precision (values in Rust's shortest round-trip form).
//!
//! A row without a comparison (the baseline, or a variant without a reference on that
//! model) leaves the comparison columns empty. No campaign id and no time: the same
//! data give the same bytes.

use std::io;

use crate::report::model::report::{ComparisonKind, MetricComparison, MetricRow, Report};
use crate::stats::Summary;

pub const SUMMARY_CSV_HEADER: [&str; 39] = [
    "model",
    "variant",
    "metric",
    "unit",
    "gating",
    "n",
    "mean",
    "sd",
    "cv",
    "se",
    "ci_low",
    "ci_high",
    "median",
    "median_ci_low",
    "median_ci_high",
    "min",
    "max",
    "outliers",
    "against",
    "kind",
    "n_treatment",
    "n_baseline",
    "delta",
    "delta_ci_low",
    "delta_ci_high",
    "delta_scale",
    "welch_t",
    "welch_df",
    "welch_p",
    "mwu_u",
    "mwu_p",
    "mwu_method",
    "mwu_ties",
    "hedges_g",
    "p_adjusted",
    "family_size",
    "verdict",
    "advice_trials_per_arm",
    "confidence",
];

/// Writes `summary.csv` for `report` to `w`.
pub fn write_summary_csv<W: io::Write>(report: &Report, w: W) -> io::Result<()> {
    let mut out = csv::WriterBuilder::new().terminator(csv::Terminator::Any(b'\n')).from_writer(w);
    out.write_record(SUMMARY_CSV_HEADER)?;
    for model in &report.models {
        for row in &model.rows {
            let fixed = row_cells(&model.model, row);
            if row.comparisons.is_empty() {
                let mut rec = fixed.clone();
                rec.extend(std::iter::repeat_n(String::new(), 20));
                rec.push(num(report.statistics.confidence));
                out.write_record(&rec)?;
            }
            for c in &row.comparisons {
                let mut rec = fixed.clone();
                rec.extend(comparison_cells(c));
                rec.push(num(report.statistics.confidence));
                out.write_record(&rec)?;
            }
        }
    }
    out.flush()
}

fn num(x: f64) -> String {
    x.to_string()
}

fn opt(x: Option<f64>) -> String {
    x.map(num).unwrap_or_default()
}

fn row_cells(model: &str, r: &MetricRow) -> Vec<String> {
    let s: Option<&Summary> = r.stats.as_ref();
    vec![
        model.to_string(),
        r.variant.clone(),
        r.metric.clone(),
        r.unit.clone(),
        r.gating.to_string(),
        r.n.to_string(),
        opt(s.map(|s| s.mean)),
        opt(s.and_then(|s| s.sd)),
        opt(s.and_then(|s| s.cv)),
        opt(s.and_then(|s| s.se)),
        opt(s.and_then(|s| s.ci_low)),
        opt(s.and_then(|s| s.ci_high)),
        opt(s.map(|s| s.median)),
        opt(s.and_then(|s| s.median_ci_low)),
        opt(s.and_then(|s| s.median_ci_high)),
        opt(s.map(|s| s.min)),
        opt(s.map(|s| s.max)),
        r.outliers.join(" "),
    ]
}

fn comparison_cells(c: &MetricComparison) -> Vec<String> {
    let st = &c.stats;
    let kind = match c.kind {
        ComparisonKind::BaselineBuild => "baseline_build",
        ComparisonKind::DefaultConfig => "default_config",
        ComparisonKind::EarlierCampaign => "earlier_campaign",
    };
    let scale = st.change.as_ref().map(|ch| match ch.scale {
        crate::stats::ChangeScale::LogRatio => "log_ratio",
        crate::stats::ChangeScale::Difference => "difference",
    });
    let mwu = st.mann_whitney.as_ref();
    vec![
        c.against.clone(),
        kind.to_string(),
        st.n_treatment.to_string(),
        st.n_baseline.to_string(),
        opt(st.change.as_ref().map(|ch| ch.delta)),
        opt(st.change.as_ref().and_then(|ch| ch.ci_low)),
        opt(st.change.as_ref().and_then(|ch| ch.ci_high)),
        scale.unwrap_or_default().to_string(),
        opt(st.welch.as_ref().and_then(|w| w.t)),
        opt(st.welch.as_ref().and_then(|w| w.df)),
        opt(st.welch.as_ref().map(|w| w.p)),
        opt(mwu.map(|m| m.u)),
        opt(mwu.map(|m| m.p)),
        mwu.map(|m| if m.method == crate::stats::MwuMethod::Exact { "exact" } else { "normal" })
            .unwrap_or_default()
            .to_string(),
        mwu.map(|m| m.ties.to_string()).unwrap_or_default(),
        opt(st.hedges_g),
        opt(c.p_adjusted),
        c.family_size.to_string(),
        c.verdict.as_str().to_string(),
        c.advice_trials_per_arm.map(|n| n.to_string()).unwrap_or_default(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::build_report;
    use crate::testing::fixture;

    #[test]
    fn one_row_per_row_and_comparison_with_every_figure() {
        let r = build_report(&fixture::campaign("20250301-090000-envoy"));
        let mut buf = Vec::new();
        write_summary_csv(&r, &mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let mut rdr = csv::Reader::from_reader(text.as_bytes());
        assert_eq!(rdr.headers().unwrap().len(), SUMMARY_CSV_HEADER.len());
        let rows: Vec<csv::StringRecord> = rdr.records().map(|r| r.unwrap()).collect();
        // 2 variants × 3 metrics; the control rows have no comparison.
        assert_eq!(rows.len(), 6);
        assert!(rows.iter().all(|r| r.len() == SUMMARY_CSV_HEADER.len()));
        let cpu = rows.iter().find(|r| &r[1] == "envoy-poll" && &r[2] == "cpu_pct").unwrap();
        let row = r.models[0].rows.iter().find(|x| x.variant == "envoy-poll" && x.metric == "cpu_pct").unwrap();
        let c = &row.comparisons[0];
        assert_eq!(cpu[6].parse::<f64>().unwrap(), row.stats.as_ref().unwrap().mean);
        assert_eq!(cpu[28].parse::<f64>().unwrap(), c.stats.welch.as_ref().unwrap().p);
        assert_eq!(&cpu[36], "too few trials");
        assert_eq!(&cpu[18], "control");
        let control = rows.iter().find(|r| &r[1] == "control" && &r[2] == "cpu_pct").unwrap();
        assert_eq!(&control[18], "");
        insta::assert_snapshot!(text);
    }
}
