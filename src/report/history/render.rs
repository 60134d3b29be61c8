//! `lab history` output: one terminal table per series, and JSON. The HTML page uses the
//! same cells.

use std::fmt::Write;

use tabled::builder::Builder;
use tabled::settings::object::Columns;
use tabled::settings::{Alignment, Style};

use crate::report::history::build_history::{History, HistorySeries, Mark};
use crate::report::render::format::{MISSING, decimals_for, fixed, p_value, percent, signed_percent};

pub(in crate::report) const HEADERS: [&str; 7] = ["#", "date (UTC)", "campaign", "n", "mean ± CI", "build", "marks"];

/// `envoy-poll × iPhone 6s · cpu_pct (%) · gating`
pub(in crate::report) fn series_title(s: &HistorySeries) -> String {
    let unit = if s.unit.is_empty() { String::new() } else { format!(" ({})", s.unit) };
    format!("{} × {} · {}{unit}{}", s.variant, s.model, s.metric, if s.gating { " · gating" } else { "" })
}

/// `2026-01-05T03:00:00Z` → `2026-01-05 03:00`.
pub(in crate::report) fn short_time(at: &str) -> String {
    at.get(..16).unwrap_or(at).replacen('T', " ", 1)
}

/// The cells of point `i` of `s`, in [`HEADERS`] order. One precision per series, so the
/// means line up.
pub(in crate::report) fn point_cells(s: &HistorySeries, i: usize) -> [String; 7] {
    let scale = s.points.iter().filter_map(|p| p.mean).map(f64::abs).fold(0.0, f64::max);
    let d = decimals_for(scale);
    let p = &s.points[i];
    let mean = match (p.mean, p.ci_low, p.ci_high) {
        (Some(m), Some(lo), Some(hi)) => format!("{} ± {}", fixed(m, d), fixed((hi - lo) / 2.0, d)),
        (Some(m), ..) => fixed(m, d),
        (None, ..) => MISSING.into(),
    };
    let build: String = p.build_sha256.as_deref().map_or_else(|| MISSING.into(), |h| h.chars().take(12).collect());
    [
        i.to_string(),
        short_time(&p.at),
        p.campaign.clone(),
        p.n.to_string(),
        mean,
        format!("{} {build}", p.build),
        marks(s, i),
    ]
}

/// `▲ +10% p 2.0e-9 (confirmed) · worse: confirmed · confirmation C · alert webhook sent`
fn marks(s: &HistorySeries, i: usize) -> String {
    let mut out: Vec<String> = Vec::new();
    for c in s.change_points.iter().filter(|c| c.index == i) {
        let rel = c.point.relative_change();
        let arrow = if rel.unwrap_or(0.0) < 0.0 { "▼" } else { "▲" };
        let change = rel.map_or_else(|| MISSING.into(), signed_percent);
        let state = c.state.map(|s| format!(" ({})", s.as_str())).unwrap_or_default();
        out.push(format!("{arrow} {change} p {}{state}", p_value(Some(c.point.test.pvalue).filter(|p| !p.is_nan()))));
    }
    for m in &s.points[i].marks {
        out.push(match m {
            Mark::Finding { state, direction } => format!("{direction}: {}", state.as_str()),
            Mark::Confirmation { campaign, .. } => format!("confirmation {campaign}"),
            Mark::Alert { channel, state } => format!("alert {channel} {}", state.as_str()),
        });
    }
    out.join(" · ")
}

/// The line above the tables.
pub(in crate::report) fn intro(h: &History) -> String {
    let campaigns: std::collections::BTreeSet<&str> =
        h.series.iter().flat_map(|s| s.points.iter().map(|p| p.campaign.as_str())).collect();
    let o = &h.options;
    format!(
        "history of runbook {}: {} campaigns, {} series; CI {}; change points: window {}, max p {}, min magnitude {}",
        h.runbook,
        campaigns.len(),
        h.series.len(),
        h.series.first().and_then(|s| s.points.first()).map_or_else(|| "95%".into(), |p| percent(p.confidence)),
        o.window_len,
        o.max_pvalue,
        o.min_magnitude
    )
}

/// Terminal output. Ends with a newline.
pub fn render_history_table(h: &History) -> String {
    let mut out = intro(h);
    out.push('\n');
    for s in &h.series {
        let mut b = Builder::default();
        b.push_record(HEADERS);
        for i in 0..s.points.len() {
            b.push_record(point_cells(s, i));
        }
        let mut t = b.build();
        t.with(Style::rounded()).modify(Columns::new(3..5), Alignment::right());
        let _ = writeln!(out, "\n{}\n{t}", series_title(s));
    }
    for w in &h.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

/// JSON output (schema in docs/report.md). Ends with a newline.
pub fn render_history_json(h: &History) -> String {
    // String keys only; a NaN p-value becomes null.
    let mut s = serde_json::to_string_pretty(h).expect("history serializes to JSON");
    s.push('\n');
    s
}
