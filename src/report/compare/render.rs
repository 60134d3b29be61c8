//! `lab compare` output: terminal tables, Markdown, JSON.

use std::fmt::Write;

use tabled::builder::Builder;
use tabled::settings::object::Columns;
use tabled::settings::{Alignment, Style};

use crate::report::compare::build_compare::{CompareModel, CompareReport, CompareRow};
use crate::report::render::format::{MISSING, StatCells, change_with_ci, p_value, percent};

/// The cells of one compare line: variant, n A, A, n B, B, Δ, p adj, verdict.
fn cells(r: &CompareRow) -> [String; 8] {
    let n = |s: Option<&crate::stats::Summary>| s.map(|s| s.n.to_string()).unwrap_or_else(|| "0".into());
    let c = r.comparison.as_ref();
    [
        r.variant.clone(),
        n(r.before.as_ref()),
        StatCells::new(r.before.as_ref()).mean_ci,
        n(r.after.as_ref()),
        StatCells::new(r.after.as_ref()).mean_ci,
        c.map(|c| change_with_ci(c.stats.change.as_ref())).unwrap_or_else(|| MISSING.into()),
        c.map(|c| p_value(c.p_adjusted)).unwrap_or_else(|| MISSING.into()),
        c.map(|c| c.verdict.as_str().to_string()).unwrap_or_else(|| MISSING.into()),
    ]
}

fn headers(cmp: &CompareReport) -> [String; 8] {
    let level = percent(cmp.statistics.confidence);
    [
        "variant".into(),
        "n A".into(),
        format!("A: mean ± {level} CI"),
        "n B".into(),
        format!("B: mean ± {level} CI"),
        format!("Δ B vs A [{level} CI]"),
        "p (adj.)".into(),
        "verdict".into(),
    ]
}

/// Metrics of a model in row order, each with its rows.
fn by_metric(m: &CompareModel) -> Vec<(&str, &str, bool, Vec<&CompareRow>)> {
    let mut out: Vec<(&str, &str, bool, Vec<&CompareRow>)> = Vec::new();
    for r in &m.rows {
        match out.iter_mut().find(|(metric, ..)| *metric == r.metric) {
            Some(entry) => entry.3.push(r),
            None => out.push((&r.metric, &r.unit, r.gating, vec![r])),
        }
    }
    out
}

fn title(metric: &str, unit: &str, gating: bool) -> String {
    let unit = if unit.is_empty() { String::new() } else { format!(" ({unit})") };
    format!("{metric}{unit}{}", if gating { " · gating" } else { "" })
}

fn intro(cmp: &CompareReport) -> Vec<String> {
    let st = &cmp.statistics;
    let mut lines = vec![
        format!("compare runbook {}", cmp.after.runbook),
        format!("  A = {} (created {}, seed {})", cmp.before.id, cmp.before.created_at, cmp.before.seed),
        format!("  B = {} (created {}, seed {})", cmp.after.id, cmp.after.created_at, cmp.after.seed),
    ];
    if cmp.runbook_changed {
        lines.push("note: the runbook's text changed between A and B (same name)".into());
    }
    lines.push(format!(
        "Δ = B against A with its {} CI; p = Welch, Holm-adjusted within the gating family ({}); verdicts need p ≤ {} \
and the whole Δ CI beyond ±{}",
        percent(st.confidence),
        st.gating.join(", "),
        st.alpha,
        percent(st.practical_threshold)
    ));
    lines
}

/// Terminal output. Ends with a newline.
pub fn render_compare_table(cmp: &CompareReport) -> String {
    let mut out = intro(cmp).join("\n");
    out.push('\n');
    for m in &cmp.models {
        let _ = writeln!(out, "\n{}", m.model);
        for (metric, unit, gating, rows) in by_metric(m) {
            let mut b = Builder::default();
            b.push_record(headers(cmp));
            for r in rows {
                b.push_record(cells(r));
            }
            let mut t = b.build();
            t.with(Style::rounded()).modify(Columns::new(1..7), Alignment::right());
            let _ = writeln!(out, "\n{}\n{t}", title(metric, unit, gating));
        }
        if !m.verdicts.is_empty() {
            let _ = writeln!(out, "\nverdicts ({}, B against A):", m.model);
            for v in &m.verdicts {
                let _ = writeln!(out, "  {}", v.summary);
            }
        }
    }
    for w in &cmp.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

/// Markdown output. Ends with a newline.
pub fn render_compare_markdown(cmp: &CompareReport) -> String {
    let mut out = format!("# Comparison: {}\n\n", cmp.after.runbook);
    for l in intro(cmp).iter().skip(1) {
        let _ = writeln!(out, "- {}", l.trim());
    }
    for m in &cmp.models {
        let _ = writeln!(out, "\n## {}\n", m.model);
        for v in &m.verdicts {
            let _ = writeln!(out, "- {}", v.summary);
        }
        for (metric, unit, gating, rows) in by_metric(m) {
            let _ = writeln!(out, "\n### {}\n", title(metric, unit, gating));
            let _ = writeln!(out, "| {} |", headers(cmp).join(" | "));
            let _ = writeln!(out, "|{}", "---|".repeat(8));
            for r in rows {
                let _ = writeln!(out, "| {} |", cells(r).join(" | "));
            }
        }
    }
    if !cmp.warnings.is_empty() {
        out.push_str("\n## Warnings\n\n");
        for w in &cmp.warnings {
            let _ = writeln!(out, "- {w}");
        }
    }
    out
}

/// JSON output (schema in docs/report.md). Ends with a newline.
pub fn render_compare_json(cmp: &CompareReport) -> String {
    // String keys only and every f64 finite or absent: serialization cannot fail.
    let mut s = serde_json::to_string_pretty(cmp).expect("compare report serializes to JSON");
    s.push('\n');
    s
}
