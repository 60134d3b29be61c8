//! `lab history --format html` and `artifacts/_history/<runbook>.html`: per series a
//! trend plot, then its table. Self-contained like `report.html`: inline CSS and SVG.

use std::fmt::Write;

use crate::report::history::build_history::{History, HistorySeries, Mark};
use crate::report::history::render::{HEADERS, intro, point_cells, series_title};
use crate::report::render::html::{STYLE, esc};
use crate::report::render::plots::{self, TrendChange, TrendMark, TrendPoint};

pub fn render_history_html(h: &History) -> String {
    render_history_html_linked(h, &|_| None)
}

/// [`render_history_html`] with each point's campaign linked to `campaign_href(id)`
/// (`lab serve`'s history page links its campaign pages).
pub fn render_history_html_linked(h: &History, campaign_href: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>History: {0}</title>\n\
<style>{STYLE}</style>\n</head>\n<body>\n<h1>History: {0}</h1>\n<p>{1}</p>\n\
<p>Points are campaign means with their confidence intervals (hollow: a new build). Dashed vertical lines are \
change points: red confirmed, orange awaiting or unconfirmed, grey dismissed, blue not reviewed. Triangles are \
confirmations (red: confirmed, green: not confirmed); a red cross is an alert.</p>\n",
        esc(&h.runbook),
        esc(&intro(h))
    );
    for s in &h.series {
        series(&mut out, s, campaign_href);
    }
    if !h.warnings.is_empty() {
        out.push_str("<h2>Warnings</h2>\n<ul>\n");
        for w in &h.warnings {
            let _ = writeln!(out, "<li>{}</li>", esc(w));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</body>\n</html>\n");
    out
}

fn series(out: &mut String, s: &HistorySeries, campaign_href: &dyn Fn(&str) -> Option<String>) {
    let title = series_title(s);
    let _ = writeln!(out, "<h2>{}</h2>", esc(&title));
    let labels: Vec<String> = s.points.iter().map(|p| p.at.get(5..10).unwrap_or(&p.at).to_string()).collect();
    let points: Vec<TrendPoint> = s
        .points
        .iter()
        .enumerate()
        .map(|(i, p)| TrendPoint {
            label: &labels[i],
            mean: p.mean,
            ci: p.ci_low.zip(p.ci_high),
            new_build: i > 0 && s.points[i - 1].build_sha256 != p.build_sha256,
        })
        .collect();
    let changes: Vec<TrendChange> = s
        .change_points
        .iter()
        .map(|c| TrendChange {
            index: c.index,
            mean_before: c.point.test.mean_before,
            mean_after: c.point.test.mean_after,
            state: c.state,
        })
        .collect();
    let mut marks = Vec::new();
    for (index, p) in s.points.iter().enumerate() {
        for m in &p.marks {
            match m {
                Mark::Confirmation { state, .. } => marks.push(TrendMark::Confirmation { index, state: *state }),
                Mark::Alert { .. } => marks.push(TrendMark::Alert { index }),
                Mark::Finding { .. } => {}
            }
        }
    }
    if let Some(svg) = plots::trend(&title, &s.unit, &points, &changes, &marks) {
        let _ = writeln!(out, "<figure>{svg}</figure>");
    }
    out.push_str("<table>\n<tr>");
    for h in HEADERS {
        let _ = write!(out, "<th>{h}</th>");
    }
    out.push_str("</tr>\n");
    for i in 0..s.points.len() {
        out.push_str("<tr>");
        for (k, cell) in point_cells(s, i).iter().enumerate() {
            let class = if (3..5).contains(&k) { " class=\"num\"" } else { "" };
            // Column 2 is the point's campaign (render::HEADERS).
            match campaign_href(&s.points[i].campaign).filter(|_| k == 2) {
                Some(href) => {
                    let _ = write!(out, "<td{class}><a href=\"{}\">{}</a></td>", esc(&href), esc(cell));
                }
                None => {
                    let _ = write!(out, "<td{class}>{}</td>", esc(cell));
                }
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::history::build_history::tests::{finding, step_rows};
    use crate::report::history::build_history::{HistoryFilter, build_history};
    use crate::stats::ChangePointOptions;
    use crate::store::FindingState;

    #[test]
    fn one_figure_and_table_per_series_and_nothing_external() {
        let findings = [finding("c07", 7, "c07", FindingState::Confirmed)];
        let h = build_history(
            "rb<x>",
            &step_rows(),
            &findings,
            &[],
            &ChangePointOptions::default(),
            &HistoryFilter::default(),
        );
        let html = render_history_html(&h);
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert_eq!(html.matches("<svg").count(), 3);
        assert_eq!(html.matches("<table>").count(), 3);
        assert!(html.contains("History: rb&lt;x&gt;") && !html.contains("rb<x>"));
        assert!(html.contains("confirmation confirm-1"));
        let body = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
        for banned in ["<script", "src=", "href=", "http://", "https://", "url("] {
            assert!(!body.contains(banned), "found {banned}");
        }
        let linked = render_history_html_linked(&h, &|c| Some(format!("/campaigns/{c}")));
        assert!(linked.contains("<a href=\"/campaigns/c07\">c07</a>"), "{linked}");
        assert_eq!(linked.matches("<a href=").count(), h.series.iter().map(|s| s.points.len()).sum::<usize>());
    }
}
