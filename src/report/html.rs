//! `report.html`: the campaign report as one self-contained page — inline CSS and SVG
//! plots, no script, no external resource — that any browser shows offline.

use std::collections::HashMap;
use std::fmt::Write;

use super::curves::BatteryCurve;
use super::format::{duration, percent};
use super::input::CampaignData;
use super::metric_tables::{MetricTable, metric_tables};
use super::model::{ModelReport, Report};
use super::plots::{self, Span, Strip};
use super::table::{method_line, model_title, status_text, table_title, validity_headline};
use crate::stats::Verdict;

pub(super) const STYLE: &str = "body{font-family:sans-serif;margin:2em auto;max-width:1100px;color:#222;line-height:1.4}\
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.85em}\
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}\
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}th{background:#f3f3f3}\
.worse{color:#fff;background:#c0392b}.better{color:#fff;background:#27ae60}\
.same{background:#eee}.few{background:#f6e58d}.changed{background:#a4c8f0}\
span.badge{padding:0 .4em;border-radius:3px;font-weight:bold}\
figure{margin:0 0 1.5em}code{font-size:.9em}dt{font-weight:bold;float:left;clear:left;width:9em}dd{margin-left:10em}\
.swatch{display:inline-block;width:.9em;height:.9em;margin-right:.3em;vertical-align:middle}";

/// Renders the page. `curves` are the attempts' stored battery series (may be empty);
/// `data` gives the attempts for the timeline.
pub fn render_html(report: &Report, data: &CampaignData, curves: &[BatteryCurve]) -> String {
    let c = &report.campaign;
    let colors: HashMap<&str, usize> = report.variants.iter().enumerate().map(|(i, v)| (v.name.as_str(), i)).collect();
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Campaign report: {}</title>\n\
<style>{STYLE}</style>\n</head>\n<body>\n<h1>Campaign report: {}</h1>\n",
        esc(&c.runbook),
        esc(&c.runbook)
    );
    provenance(&mut out, report);
    legend(&mut out, report);
    verdicts(&mut out, report);
    for model in &report.models {
        results(&mut out, report, model, &colors);
        let model_curves: Vec<(&BatteryCurve, usize)> = curves
            .iter()
            .filter(|k| k.model == model.model)
            .map(|k| (k, colors.get(k.variant.as_str()).copied().unwrap_or(0)))
            .collect();
        let title = format!("battery level per trial — {}", model.model);
        if let Some(svg) = plots::battery_curves(&title, &model_curves) {
            let _ = write!(
                out,
                "<h3>Battery level</h3>\n<figure>{svg}<figcaption>One line per attempt, from the fuel gauge's charge counter; \
invalid attempts in grey.</figcaption></figure>\n"
            );
        }
    }
    timeline(&mut out, data, &colors);
    validity(&mut out, report);
    if !report.warnings.is_empty() {
        out.push_str("<h2>Warnings</h2>\n<ul>\n");
        for w in &report.warnings {
            let _ = writeln!(out, "<li>{}</li>", esc(w));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</body>\n</html>\n");
    out
}

fn provenance(out: &mut String, report: &Report) {
    let c = &report.campaign;
    let design = format!(
        "{} order, {} repeats, {} trials, {} cool-down, up to {} attempts per trial, {} planned trials",
        serde_json::to_value(c.order).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default(),
        c.repeats,
        duration(c.duration_s),
        duration(c.cooldown_s),
        c.max_attempts,
        c.planned_trials
    );
    let items = [
        ("campaign", format!("<code>{}</code>", esc(&c.id))),
        (
            "runbook",
            format!(
                "{} (<code>{}</code>, sha256 <code>{}</code>)",
                esc(&c.runbook),
                esc(&c.runbook_path),
                esc(&c.runbook_sha256)
            ),
        ),
        ("lab file", format!("sha256 <code>{}</code>", esc(&c.lab_sha256))),
        ("seed", c.seed.to_string()),
        ("status", esc(&status_text(report))),
        ("created", esc(&c.created_at)),
        ("finished", c.finished_at.as_deref().map(esc).unwrap_or_else(|| "–".into())),
        ("lab version", esc(&c.tool_version)),
        ("design", esc(&design)),
    ];
    out.push_str("<h2>Provenance</h2>\n<dl>\n");
    for (k, v) in items {
        let _ = writeln!(out, "<dt>{k}</dt><dd>{v}</dd>");
    }
    out.push_str("</dl>\n");
    let hashes = flatten_hashes(&c.content_hashes, "");
    if !hashes.is_empty() {
        out.push_str("<table><tr><th>content</th><th>sha256</th></tr>\n");
        for (k, v) in hashes {
            let _ = writeln!(out, "<tr><td>{}</td><td><code>{}</code></td></tr>", esc(&k), esc(&v));
        }
        out.push_str("</table>\n");
    }
    if let Some(fp) = &c.footprint {
        let pretty = serde_json::to_string_pretty(fp).unwrap_or_else(|_| fp.to_string());
        let _ = writeln!(out, "<p>Lab footprint:</p><pre>{}</pre>", esc(&pretty));
    }
}

/// `{"builds": {"a": {"sim": "ff"}}}` → `builds.a.sim = ff`, sorted.
fn flatten_hashes(v: &serde_json::Value, prefix: &str) -> Vec<(String, String)> {
    match v {
        serde_json::Value::Object(map) => map
            .iter()
            .flat_map(|(k, v)| {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten_hashes(v, &key)
            })
            .collect(),
        serde_json::Value::String(s) => vec![(prefix.to_string(), s.clone())],
        serde_json::Value::Null => Vec::new(),
        other => vec![(prefix.to_string(), other.to_string())],
    }
}

fn legend(out: &mut String, report: &Report) {
    out.push_str("<p>Variants: ");
    for (i, v) in report.variants.iter().enumerate() {
        let c = plots::color(i);
        let _ = write!(
            out,
            "<span class=\"swatch\" style=\"background:rgb({},{},{})\"></span>{}{} &nbsp; ",
            c.0,
            c.1,
            c.2,
            esc(&v.name),
            if v.baseline_build && v.default_config { " (baseline)" } else { "" }
        );
    }
    out.push_str("</p>\n");
}

fn badge(verdict: &str) -> String {
    let class = match verdict {
        "worse" => "worse",
        "better" => "better",
        "~" => "same",
        "changed" => "changed",
        "" => return String::new(),
        _ => "few",
    };
    format!("<span class=\"badge {class}\">{}</span>", esc(verdict))
}

fn verdicts(out: &mut String, report: &Report) {
    let _ = writeln!(out, "<h2>Verdicts</h2>\n<p>{}.</p>", esc(&method_line(report)));
    for model in report.models.iter().filter(|m| !m.verdicts.is_empty()) {
        let _ = writeln!(out, "<h3>{}</h3>\n<ul>", esc(&model.model));
        for v in &model.verdicts {
            let detail = v.summary.split_once(" — ").map(|(_, d)| d).unwrap_or("");
            let _ = writeln!(
                out,
                "<li><b>{}</b> vs {}: {} — {}</li>",
                esc(&v.variant),
                esc(&v.against),
                badge(v.verdict.as_str()),
                esc(detail)
            );
        }
        out.push_str("</ul>\n");
    }
    let worse = report.models.iter().flat_map(|m| &m.verdicts).any(|v| v.verdict == Verdict::Worse);
    if worse {
        out.push_str("<p>At least one variant is <b>worse</b> than its reference on a gating metric.</p>\n");
    }
}

fn results(out: &mut String, report: &Report, model: &ModelReport, colors: &HashMap<&str, usize>) {
    let level = percent(report.statistics.confidence);
    let _ = writeln!(out, "<h2>Results: {}</h2>", esc(&model_title(model)));
    if model.rows.is_empty() {
        out.push_str("<p>No metrics.</p>\n");
        return;
    }
    for t in metric_tables(model) {
        let _ = writeln!(out, "<h3>{}</h3>", esc(&table_title(&t)));
        metric_table(out, &t, &level);
        let strips: Vec<Strip> = model
            .rows
            .iter()
            .filter(|r| r.metric == t.metric && !r.values.is_empty())
            .map(|r| Strip {
                variant: &r.variant,
                color: colors.get(r.variant.as_str()).copied().unwrap_or(0),
                values: &r.values,
            })
            .collect();
        let title = format!("{} — {}", t.metric, model.model);
        if let Some(svg) = plots::strip_box_plot(&title, t.unit, &strips) {
            let _ = writeln!(
                out,
                "<figure>{svg}<figcaption>Every valid trial as a point over its variant's box (quartiles, whiskers \
within 1.5 IQR; points only up to {} per variant); ringed points are flagged outliers (modified z &gt; 3.5), kept in \
the statistics.</figcaption></figure>",
                plots::MAX_POINTS
            );
        }
    }
}

fn metric_table(out: &mut String, t: &MetricTable, level: &str) {
    let header = [
        "variant".to_string(),
        "n".into(),
        format!("mean ± {level} CI"),
        "sd".into(),
        format!("median [{level} CI]"),
        "min".into(),
        "max".into(),
        "vs".into(),
        format!("Δ [{level} CI]"),
        "Welch p".into(),
        "p (Holm)".into(),
        "Mann–Whitney p".into(),
        "Hedges g".into(),
        "verdict".into(),
        "n/arm".into(),
        "outliers".into(),
    ];
    out.push_str("<table>\n<tr>");
    for h in &header {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr>\n");
    for l in &t.lines {
        let cells = [
            (&l.variant, false),
            (&l.n, true),
            (&l.mean_ci, true),
            (&l.sd, true),
            (&l.median_ci, true),
            (&l.min, true),
            (&l.max, true),
            (&l.against, false),
            (&l.change, true),
            (&l.welch_p, true),
            (&l.p_adjusted, true),
            (&l.mwu_p, true),
            (&l.hedges_g, true),
        ];
        out.push_str("<tr>");
        for (text, num) in cells {
            let _ = write!(out, "<td{}>{}</td>", if num { " class=\"num\"" } else { "" }, esc(text));
        }
        let _ = writeln!(
            out,
            "<td>{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
            badge(&l.verdict),
            esc(&l.advice),
            esc(&l.outliers)
        );
    }
    out.push_str("</table>\n");
}

fn timeline(out: &mut String, data: &CampaignData, colors: &HashMap<&str, usize>) {
    let c = &data.cols;
    let mut devices: Vec<&str> = data.plan.devices.iter().map(|d| d.name.as_str()).collect();
    let mut soaks: Vec<(&str, f64, f64, usize, bool)> = Vec::new();
    for a in 0..c.attempts() {
        let Some(soak) = c.a_soak_s[a] else { continue };
        let t = c.a_trial[a] as usize;
        let device = c.names.name(c.t_device[t]);
        if !devices.contains(&device) {
            devices.push(device);
        }
        let color = colors.get(c.names.name(c.t_variant[t])).copied().unwrap_or(0);
        soaks.push((device, c.a_soak_start_s[a], soak, color, c.a_valid[a]));
    }
    // Each device has its own clock: hours since that device's first soak.
    let mut origins: HashMap<&str, f64> = HashMap::new();
    for s in &soaks {
        let o = origins.entry(s.0).or_insert(f64::INFINITY);
        *o = o.min(s.1);
    }
    let spans: Vec<Span> = soaks
        .iter()
        .map(|&(device, start, len, color, valid)| {
            let o = origins.get(device).copied().unwrap_or(0.0);
            Span { device, start_h: (start - o) / 3600.0, end_h: (start - o + len) / 3600.0, color, valid }
        })
        .collect();
    if let Some(svg) = plots::timeline(&devices, &spans) {
        let _ = writeln!(
            out,
            "<h2>Trial timeline</h2>\n<figure>{svg}<figcaption>Every attempt's soak on its device's clock, colored by \
variant; invalid attempts outlined in red. Cool-downs and charging are the gaps.</figcaption></figure>"
        );
    }
}

fn validity(out: &mut String, report: &Report) {
    let _ = writeln!(out, "<h2>Validity</h2>\n<p>{}.</p>", esc(&validity_headline(report)));
    out.push_str(
        "<table><tr><th>variant</th><th>planned trials</th><th>valid</th><th>failed</th><th>pending</th>\
<th>valid attempts</th><th>invalid attempts</th></tr>\n",
    );
    for v in &report.variants {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            esc(&v.name),
            v.planned_trials,
            v.valid_trials,
            v.failed_trials,
            v.pending_trials,
            v.valid_attempts,
            v.invalid_attempts
        );
    }
    out.push_str("</table>\n");
    if !report.invalid_attempts.is_empty() {
        out.push_str(
            "<h3>Invalid attempts</h3>\n<p>Kept and listed, excluded from statistics.</p>\n\
<table><tr><th>trial</th><th>device</th><th>attempt</th><th>reasons</th></tr>\n",
        );
        for a in &report.invalid_attempts {
            let _ = writeln!(
                out,
                "<tr><td><code>{}</code></td><td>{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
                esc(&a.trial_key),
                esc(&a.device),
                a.attempt,
                esc(&a.reasons.join("; "))
            );
        }
        out.push_str("</table>\n");
    }
    if !report.attested.is_empty() {
        out.push_str(
            "<h3>Attested by operators</h3>\n<p>What people answered to the runbook's steps: <em>attested</em>, never read by the lab.</p>\n\
<table><tr><th>device</th><th>step</th><th>when</th><th>asked</th><th>answer</th><th>by</th><th>attempts</th></tr>\n",
        );
        for r in &report.attested {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{} <em>(attested)</em></td><td>{}</td><td class=\"num\">{} ({} valid)</td></tr>",
                esc(&r.device),
                esc(&r.step),
                esc(&r.when),
                esc(&r.text),
                esc(&r.answer()),
                esc(&r.by),
                r.attempts,
                r.valid_attempts
            );
        }
        out.push_str("</table>\n");
    }
    if !report.state.is_empty() {
        out.push_str(
            "<h3>Device state and its sources</h3>\n<p>Each value with where it came from: <em>read</em> or <em>set</em> by the lab, reported by the <em>app</em>, <em>attested</em> by an operator, or from the device's <em>powerlog</em> (during the soak).</p>\n\
<table><tr><th>device</th><th>when</th><th>setting</th><th>value</th><th>source</th><th>attempts</th></tr>\n",
        );
        for r in &report.state {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td><em>{}</em></td><td class=\"num\">{} ({} valid)</td></tr>",
                esc(&r.device),
                esc(r.when),
                esc(r.setting),
                esc(&r.values),
                esc(r.source),
                r.attempts,
                r.valid_attempts
            );
        }
        out.push_str("</table>\n");
    }
}

/// Escapes text for HTML element content and attribute values.
pub(super) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(ch),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{build_report, test_fixture};

    fn page() -> String {
        let data = test_fixture::campaign("20250301-090000-envoy");
        let curve = BatteryCurve {
            trial_key: data.cols.t_key[0].to_string(),
            device: "sim-iphone-1".into(),
            model: test_fixture::MODEL.into(),
            variant: "control".into(),
            valid: true,
            points: vec![(0.0, 100.0), (60.0, 96.8)],
        };
        render_html(&build_report(&data), &data, &[curve])
    }

    #[test]
    fn self_contained_page_with_every_section() {
        let html = page();
        assert!(html.starts_with("<!DOCTYPE html>"));
        for section in [
            "<h2>Provenance</h2>",
            "<h2>Verdicts</h2>",
            "<h2>Results: iPhone 6s",
            "<h3>Battery level</h3>",
            "<h2>Trial timeline</h2>",
            "<h2>Validity</h2>",
            "<h3>Invalid attempts</h3>",
        ] {
            assert!(html.contains(section), "missing {section}");
        }
        // One strip plot per metric, one battery plot, one timeline.
        assert_eq!(html.matches("<svg").count(), 3 + 1 + 1);
        // Nothing is fetched: no script, no external reference.
        for banned in ["<script", "src=", "href=", "http://", "https://", "@import", "url("] {
            let found = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
            assert!(!found.contains(banned), "found {banned}");
        }
        assert!(html.contains("charged for 12 s during the soak; endpoint saw 17012 requests"));
        assert!(html.contains("<code>5f1c0de2</code>"), "runbook hash");
        assert!(html.contains("builds") || html.contains("control.ipa"), "content hashes");
    }

    #[test]
    fn escapes_text() {
        assert_eq!(esc("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
        let mut data = test_fixture::campaign("c1");
        data.campaign.runbook_name = "<script>alert(1)</script>".into();
        let html = render_html(&build_report(&data), &data, &[]);
        assert!(!html.contains("<script>"));
    }
}
