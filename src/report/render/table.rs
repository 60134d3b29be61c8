//! The terminal report (`lab report`): one table per device model, then validity.

use std::fmt::Write;

use tabled::builder::Builder;
use tabled::settings::object::Columns;
use tabled::settings::{Alignment, Style};

use crate::report::model::report::{ModelReport, Report, VariantSummary};
use crate::report::render::format::percent;
use crate::report::render::metric_tables::{MetricTable, metric_tables};

/// Renders `report` for a terminal. Ends with a newline.
///
/// Per device model, one table per metric in benchstat's spirit (value ± CI per
/// variant, change with CI against the reference, adjusted p, verdict), then one
/// summary line per variant; then validity and warnings.
pub fn render_table(report: &Report) -> String {
    let mut out = String::new();
    let c = &report.campaign;
    let _ = writeln!(out, "campaign {}  runbook {}  seed {}  status {}", c.id, c.runbook, c.seed, status_text(report));
    let _ = writeln!(out, "{}", method_line(report));
    for model in &report.models {
        let _ = writeln!(out, "\n{}", model_title(model));
        if model.rows.is_empty() {
            let _ = writeln!(out, "no metrics");
            continue;
        }
        for t in metric_tables(model) {
            let _ = writeln!(out, "\n{}\n{}", table_title(&t), stats_table(&t, report.statistics.confidence));
        }
        if !model.verdicts.is_empty() {
            let _ = writeln!(out, "\nverdicts ({}):", model.model);
            for v in &model.verdicts {
                let _ = writeln!(out, "  {}", v.summary);
                if let Some(stop) = &v.sequential {
                    let _ = writeln!(out, "    {}", stop.line());
                }
            }
        }
        let flagged: Vec<String> = model
            .rows
            .iter()
            .filter(|r| !r.outliers.is_empty())
            .map(|r| format!("  {} / {}: {}", r.variant, r.metric, r.outliers.join(", ")))
            .collect();
        if !flagged.is_empty() {
            let _ = writeln!(
                out,
                "\noutliers (modified z > 3.5; flagged, kept in the statistics):\n{}",
                flagged.join("\n")
            );
        }
    }
    let _ = writeln!(out, "\nvalidity: {}", validity_headline(report));
    let width = report.variants.iter().map(|v| v.name.chars().count()).max().unwrap_or(0);
    for v in &report.variants {
        let _ = writeln!(out, "  {:<width$}  {}", v.name, validity_line(v));
    }
    if !report.invalid_attempts.is_empty() {
        let mut b = Builder::default();
        b.push_record(["trial", "device", "attempt", "reasons"]);
        for a in &report.invalid_attempts {
            b.push_record([a.trial_key.clone(), a.device.clone(), a.attempt.to_string(), a.reasons.join("; ")]);
        }
        let mut t = b.build();
        t.with(Style::rounded()).modify(Columns::new(2..3), Alignment::right());
        let _ = writeln!(out, "\ninvalid attempts (excluded from statistics)\n{t}");
    }
    for w in &report.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

pub(crate) fn status_text(report: &Report) -> String {
    let c = &report.campaign;
    match &c.note {
        Some(note) => format!("{} ({note})", c.status.as_str()),
        None => c.status.as_str().to_string(),
    }
}

pub(crate) fn model_title(model: &ModelReport) -> String {
    if model.devices.is_empty() {
        model.model.clone()
    } else {
        format!("{} ({})", model.model, model.devices.join(", "))
    }
}

pub(crate) fn validity_headline(report: &Report) -> String {
    let valid: usize = report.variants.iter().map(|v| v.valid_attempts).sum();
    let invalid: usize = report.variants.iter().map(|v| v.invalid_attempts).sum();
    let mut s = format!("{valid} valid attempt{}, {invalid} invalid", plural(valid));
    if invalid > 0 {
        s.push_str(" (excluded from statistics)");
    }
    s
}

pub(crate) fn validity_line(v: &VariantSummary) -> String {
    format!(
        "{} of {} trial{} valid, {} failed, {} pending; attempts: {} valid, {} invalid",
        v.valid_trials,
        v.planned_trials,
        plural(v.planned_trials),
        v.failed_trials,
        v.pending_trials,
        v.valid_attempts,
        v.invalid_attempts
    )
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// How the figures were computed, in one line.
pub(crate) fn method_line(report: &Report) -> String {
    let st = &report.statistics;
    format!(
        "mean ± {} CI (Student t) over valid attempts; Δ = change against the reference with its {} CI; \
p = Welch, Holm-adjusted within the gating family ({}); worse/better need p ≤ {} and the whole Δ CI beyond ±{}; \
same needs Δ's {} CI inside it (two one-sided tests)",
        percent(st.confidence),
        percent(st.confidence),
        if st.gating.is_empty() { "none".to_string() } else { st.gating.join(", ") },
        st.alpha,
        percent(st.practical_threshold),
        percent(1.0 - 2.0 * st.alpha)
    )
}

/// `cpu_pct (%) · gating`.
pub(crate) fn table_title(t: &MetricTable) -> String {
    let unit = if t.unit.is_empty() { String::new() } else { format!(" ({})", t.unit) };
    format!("{}{unit}{}", t.metric, if t.gating { " · gating" } else { "" })
}

fn stats_table(t: &MetricTable, confidence: f64) -> String {
    let mut b = Builder::default();
    let mean_header = format!("mean ± {} CI", percent(confidence));
    let change_header = format!("Δ [{} CI]", percent(confidence));
    b.push_record(["variant", "n", mean_header.as_str(), "vs", change_header.as_str(), "p (adj.)", "verdict"]);
    for l in &t.lines {
        b.push_record([
            l.variant.clone(),
            l.n.clone(),
            l.mean_ci.clone(),
            l.against.clone(),
            l.change.clone(),
            l.p_adjusted.clone(),
            l.verdict.clone(),
        ]);
    }
    let mut table = b.build();
    table
        .with(Style::rounded())
        .modify(Columns::new(1..3), Alignment::right())
        .modify(Columns::new(5..6), Alignment::right());
    table.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::build_report;
    use crate::testing::fixture;

    #[test]
    fn terminal_report() {
        let r = build_report(&fixture::campaign("20250301-090000-envoy"));
        insta::assert_snapshot!(render_table(&r));
    }

    #[test]
    fn no_invalid_table_without_invalid_attempts() {
        let mut data = fixture::records("c1");
        data.attempts.retain(|a| a.status == crate::store::AttemptStatus::Valid);
        let out = render_table(&build_report(&data.data()));
        assert!(!out.contains("invalid attempts (excluded"), "{out}");
        assert!(out.contains("validity: 6 valid attempts, 0 invalid\n"), "{out}");
    }
}
