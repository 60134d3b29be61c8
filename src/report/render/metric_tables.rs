//! The cells of the per-metric tables, shared by the terminal, Markdown and HTML
//! renderers (each picks its columns), so every format shows the same figures.

use crate::report::model::report::{ComparisonKind, MetricComparison, MetricRow, ModelReport};
use crate::report::render::format::{MISSING, StatCells, change_with_ci, decimals_for, fixed, p_value};

/// One metric of one device model: a line per variant and comparison.
pub(crate) struct MetricTable<'a> {
    pub metric: &'a str,
    pub unit: &'a str,
    pub gating: bool,
    pub lines: Vec<Line>,
}

/// One line of a metric table. A variant with two references (a config variant) has a
/// second line whose variant-level cells are empty.
#[derive(Clone, Default)]
pub(crate) struct Line {
    pub variant: String,
    pub n: String,
    pub mean_ci: String,
    pub sd: String,
    pub median_ci: String,
    pub min: String,
    pub max: String,
    /// `control`, `control (same build, default config)`, `(baseline)`.
    pub against: String,
    pub change: String,
    pub welch_p: String,
    pub p_adjusted: String,
    pub mwu_p: String,
    pub hedges_g: String,
    pub verdict: String,
    pub advice: String,
    pub outliers: String,
}

/// The tables of one model, metrics in display order.
pub(crate) fn metric_tables(model: &ModelReport) -> Vec<MetricTable<'_>> {
    let mut metrics: Vec<&str> = Vec::new();
    for r in &model.rows {
        if !metrics.contains(&r.metric.as_str()) {
            metrics.push(&r.metric);
        }
    }
    metrics
        .into_iter()
        .map(|metric| {
            let rows: Vec<&MetricRow> = model.rows.iter().filter(|r| r.metric == metric).collect();
            let unit = rows.iter().map(|r| r.unit.as_str()).find(|u| !u.is_empty()).unwrap_or("");
            let gating = rows.iter().any(|r| r.gating);
            let lines = rows.iter().flat_map(|r| lines_of(r)).collect();
            MetricTable { metric, unit, gating, lines }
        })
        .collect()
}

fn lines_of(r: &MetricRow) -> Vec<Line> {
    let cells = StatCells::new(r.stats.as_ref());
    let median_ci = match &r.stats {
        None => MISSING.to_string(),
        Some(s) => {
            let d = decimals_for(s.mean.abs().max(s.min.abs()).max(s.max.abs()));
            match (s.median_ci_low, s.median_ci_high) {
                (Some(lo), Some(hi)) => format!("{} [{}, {}]", fixed(s.median, d), fixed(lo, d), fixed(hi, d)),
                _ => fixed(s.median, d),
            }
        }
    };
    let first = Line {
        variant: r.variant.clone(),
        n: r.n.to_string(),
        mean_ci: cells.mean_ci,
        sd: cells.sd,
        median_ci,
        min: cells.min,
        max: cells.max,
        outliers: r.outliers.join(", "),
        ..Line::default()
    };
    if r.comparisons.is_empty() {
        return vec![Line { against: "(reference)".into(), ..first }];
    }
    // The variant's own cells on its first line only.
    r.comparisons
        .iter()
        .enumerate()
        .map(|(i, c)| with_comparison(if i == 0 { first.clone() } else { Line::default() }, c))
        .collect()
}

fn with_comparison(l: Line, c: &MetricComparison) -> Line {
    let against = match c.kind {
        ComparisonKind::BaselineBuild | ComparisonKind::EarlierCampaign => c.against.clone(),
        ComparisonKind::DefaultConfig => format!("{} (default config)", c.against),
    };
    let mwu = c.stats.mann_whitney.as_ref().map(|m| {
        let exact = if m.method == crate::stats::MwuMethod::Exact { "" } else { " (normal)" };
        format!("{}{exact}", p_value(Some(m.p)))
    });
    Line {
        against,
        change: change_with_ci(c.stats.change.as_ref()),
        welch_p: p_value(c.stats.welch.as_ref().map(|w| w.p)),
        p_adjusted: p_value(c.p_adjusted),
        mwu_p: mwu.unwrap_or_else(|| MISSING.into()),
        hedges_g: c.stats.hedges_g.map(|g| format!("{g:.2}")).unwrap_or_else(|| MISSING.into()),
        verdict: c.verdict.as_str().to_string(),
        advice: c.advice_trials_per_arm.map(|n| n.to_string()).unwrap_or_else(|| MISSING.into()),
        ..l
    }
}
