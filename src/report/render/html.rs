//! `report.html`: the campaign report as one self-contained page — inline CSS and SVG
//! plots, no script, no external resource — that any browser shows offline.

use std::collections::HashMap;
use std::fmt::Write;

use crate::report::model::curves::{
    BatteryCurve, CurveSampling, MAX_CURVE_POINTS, MAX_CURVES_PER_VARIANT, curve_sampling,
};
use crate::report::model::input::CampaignData;
use crate::report::model::power_bands::{BAND_STEPS, PowerBand};
use crate::report::model::report::{ModelReport, Report};
use crate::report::render::format::percent;
use crate::report::render::metric_tables::{MetricTable, metric_tables};
use crate::report::render::plots::{self, Binned, Span, Strip, StripSample};
use crate::report::render::table::{method_line, model_title, status_text, table_title, validity_headline};
use crate::stats::Verdict;
use crate::store::Sym;
use crate::text::duration::round as duration;

pub(in crate::report) const STYLE: &str = "body{font-family:sans-serif;margin:2em auto;max-width:1100px;color:#222;line-height:1.4}\
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.85em}\
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}\
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}th{background:#f3f3f3}\
.worse{color:#fff;background:#c0392b}.better{color:#fff;background:#27ae60}\
.same{background:#eee}.few{background:#f6e58d}.changed{background:#a4c8f0}\
span.badge{padding:0 .4em;border-radius:3px;font-weight:bold}\
figure{margin:0 0 1.5em}code{font-size:.9em}dt{font-weight:bold;float:left;clear:left;width:9em}dd{margin-left:10em}\
.swatch{display:inline-block;width:.9em;height:.9em;margin-right:.3em;vertical-align:middle}";

/// Rows of the invalid-attempts table, at most: results.csv lists every attempt.
pub const MAX_INVALID_ROWS: usize = 500;
/// Flagged trial keys listed in a metric table's cell, at most: report.json lists all.
pub const MAX_OUTLIER_KEYS: usize = 20;

/// Renders the page. `curves` are the attempts' stored battery series (may be empty);
/// `data` gives the attempts for the timeline and how the curves were sampled.
///
/// A huge campaign's plots are sampled (see `sample.rs`): each plot that was says how in
/// its caption and its SVG `<title>`; a plot that was not is drawn as it always was.
pub fn render_html(report: &Report, data: &CampaignData, curves: &[BatteryCurve]) -> String {
    let c = &report.campaign;
    let sampling = curve_sampling(&data.cols);
    let bands = &data.power;
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
        let model_bands: Vec<(&PowerBand, usize)> = bands
            .iter()
            .filter(|b| b.model == model.model)
            .map(|b| (b, colors.get(b.variant.as_str()).copied().unwrap_or(0)))
            .collect();
        if let Some(svg) = plots::power_bands(&format!("power from the monitor — {}", model.model), &model_bands) {
            let _ = write!(
                out,
                "<h3>Power over the soak</h3>\n<figure>{svg}<figcaption>From the power monitor that supplies the device: \
per variant the median over its valid attempts (line) and their quartiles (band), {} steps over the soak.</figcaption></figure>\n",
                BAND_STEPS
            );
        }
        if let Some(svg) = plots::battery_curves(&title, &model_curves) {
            let note = data.cols.names.get(&model.model).and_then(|m| sampling.get(&m)).and_then(curve_note);
            let _ = write!(
                out,
                "<h3>Battery level</h3>\n<figure>{}<figcaption>One line per attempt, from the fuel gauge's charge counter; \
invalid attempts in grey.{}</figcaption></figure>\n",
                titled(svg, note.as_deref()),
                after(note.as_deref())
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
    if let Some(r) = &c.rerun {
        let _ = writeln!(out, "<dt>re-run</dt><dd>{}</dd>", esc(&crate::report::model::report::rerun_text(r)));
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
        "same" => "same",
        "inconclusive" => "few",
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
            let stop =
                v.sequential.as_ref().map(|s| format!("<br><small>{}</small>", esc(&s.line()))).unwrap_or_default();
            let _ = writeln!(
                out,
                "<li><b>{}</b> vs {}: {} — {}{stop}</li>",
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
        let keys: HashMap<&str, &[String]> = model
            .rows
            .iter()
            .filter(|r| r.metric == t.metric)
            .map(|r| (r.variant.as_str(), r.outliers.as_slice()))
            .collect();
        metric_table(out, &t, &level, &keys);
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
        if let Some(plot) = plots::strip_box_plot(&title, t.unit, &strips) {
            let note = strip_note(&plot.sampled, strips.len());
            let _ = writeln!(
                out,
                "<figure>{}<figcaption>Every valid trial as a point over its variant's box (quartiles, whiskers \
within 1.5 IQR; points only up to {} per variant); ringed points are flagged outliers (modified z &gt; 3.5), kept in \
the statistics.{}</figcaption></figure>",
                titled(plot.svg, note.as_deref()),
                plots::MAX_POINTS,
                after(note.as_deref())
            );
        }
    }
}

/// `outliers`: each variant's flagged trial keys, listed up to [`MAX_OUTLIER_KEYS`].
fn metric_table(out: &mut String, t: &MetricTable, level: &str, outliers: &HashMap<&str, &[String]>) {
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
            esc(&outlier_keys(&l.outliers, outliers.get(l.variant.as_str()).copied()))
        );
    }
    out.push_str("</table>\n");
}

fn timeline(out: &mut String, data: &CampaignData, colors: &HashMap<&str, usize>) {
    let c = &data.cols;
    let mut devices: Vec<&str> = data.plan.devices.iter().map(|d| d.name.as_str()).collect();
    // Rows by device symbol, so 144 000 soaks do not each scan the device list.
    let mut rows: HashMap<Sym, usize> = HashMap::new();
    let mut soaks: Vec<(usize, f64, f64, usize, bool)> = Vec::new();
    for a in 0..c.attempts() {
        let Some(soak) = c.a_soak_s[a] else { continue };
        let t = c.a_trial[a] as usize;
        let row = *rows.entry(c.t_device[t]).or_insert_with(|| {
            let device = c.names.name(c.t_device[t]);
            devices.iter().position(|d| *d == device).unwrap_or_else(|| {
                devices.push(device);
                devices.len() - 1
            })
        });
        let color = colors.get(c.names.name(c.t_variant[t])).copied().unwrap_or(0);
        soaks.push((row, c.a_soak_start_s[a], soak, color, c.a_valid[a]));
    }
    // Each device has its own clock: hours since that device's first soak.
    let mut origins = vec![f64::INFINITY; devices.len()];
    for s in &soaks {
        origins[s.0] = origins[s.0].min(s.1);
    }
    let spans: Vec<Span> = soaks
        .iter()
        .map(|&(row, start, len, color, valid)| {
            let o = origins[row];
            Span {
                device: devices[row],
                start_h: (start - o) / 3600.0,
                end_h: (start - o + len) / 3600.0,
                color,
                valid,
            }
        })
        .collect();
    let Some(plot) = plots::timeline(&devices, &spans) else { return };
    match plot.sampled {
        None => {
            let _ = writeln!(
                out,
                "<h2>Trial timeline</h2>\n<figure>{}<figcaption>Every attempt's soak on its device's clock, colored by \
variant; invalid attempts outlined in red. Cool-downs and charging are the gaps.</figcaption></figure>",
                plot.svg
            );
        }
        Some(binned) => {
            let mut per_device = vec![0usize; devices.len()];
            for s in &soaks {
                per_device[s.0] += 1;
            }
            let note = timeline_note(binned, &per_device);
            let _ = writeln!(
                out,
                "<h2>Trial timeline</h2>\n<figure>{}<figcaption>Soaks on each device's clock. {} Cool-downs and charging \
longer than a column are the gaps.</figcaption></figure>",
                titled(plot.svg, Some(&note)),
                esc(&note)
            );
        }
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
        for a in report.invalid_attempts.iter().take(MAX_INVALID_ROWS) {
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
        let more = report.invalid_attempts.len().saturating_sub(MAX_INVALID_ROWS);
        if more > 0 {
            let _ =
                writeln!(out, "<p>… and {} more: results.csv lists every attempt (status = invalid).</p>", count(more));
        }
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

/// A metric table's list of flagged trials, cut after [`MAX_OUTLIER_KEYS`] keys.
fn outlier_keys(listed: &str, keys: Option<&[String]>) -> String {
    match keys {
        Some(keys) if keys.len() > MAX_OUTLIER_KEYS => format!(
            "{}, … and {} more (report.json lists every one)",
            keys[..MAX_OUTLIER_KEYS].join(", "),
            count(keys.len() - MAX_OUTLIER_KEYS)
        ),
        _ => listed.to_string(),
    }
}

/// The sentence of a battery plot whose curves were sampled or thinned, if they were.
fn curve_note(s: &CurveSampling) -> Option<String> {
    let lines = format!("to at most {MAX_CURVE_POINTS} points (largest-triangle-three-buckets)");
    if !s.sampled() {
        return s.thinned.then(|| format!("Each line down-sampled {lines}."));
    }
    let mut chosen = Vec::new();
    match s.steps {
        (0, _) => {}
        (1, 1) => chosen.push("every valid attempt".to_string()),
        (lo, hi) if lo == hi => {
            chosen.push(format!("every {} valid attempt of each variant in trial order", ordinal(lo)))
        }
        (lo, hi) => chosen.push(format!(
            "every k-th valid attempt of each variant in trial order, k = ⌈n / {MAX_CURVES_PER_VARIANT}⌉ ({} to {})",
            ordinal(lo),
            ordinal(hi)
        )),
    }
    if s.invalid_total > s.invalid_drawn {
        chosen.push(format!("the first {} of {} invalid ones", count(s.invalid_drawn), count(s.invalid_total)));
    } else if s.invalid_total > 0 {
        chosen.push(format!("all {} invalid ones", count(s.invalid_total)));
    }
    let thinned = if s.thinned { format!(", each line down-sampled {lines}") } else { String::new() };
    Some(format!(
        "Drawn: {} of {} attempts with a battery series ({}){thinned}.",
        count(s.drawn),
        count(s.total),
        chosen.join(", and ")
    ))
}

/// The sentence of a strip plot with sampled variants (of `variants` in the plot), if any.
fn strip_note(sampled: &[StripSample], variants: usize) -> Option<String> {
    let first = sampled.first()?;
    let same = sampled.len() == variants
        && sampled.iter().all(|s| (s.drawn, s.total, s.step) == (first.drawn, first.total, first.step));
    let values = if same {
        format!(
            "{} of {} values of each variant (every {} in trial order)",
            count(first.drawn),
            count(first.total),
            ordinal(first.step)
        )
    } else {
        let each: Vec<String> = sampled
            .iter()
            .map(|s| {
                format!("{} of {} values of {} (every {})", count(s.drawn), count(s.total), s.variant, ordinal(s.step))
            })
            .collect();
        format!("{} in trial order", each.join(", "))
    };
    let (drawn, total): (usize, usize) =
        sampled.iter().fold((0, 0), |(d, t), s| (d + s.outliers_drawn, t + s.outliers));
    let outliers = match (drawn, total) {
        (_, 0) => String::new(),
        (d, t) if d == t => format!(" and all {} flagged outliers", count(t)),
        (d, t) => format!(" and {} of {} flagged outliers (evenly spaced)", count(d), count(t)),
    };
    Some(format!("Drawn: {values}{outliers}; the box uses every value."))
}

/// The sentence of a binned timeline, with each device's number of soaks.
fn timeline_note(b: Binned, per_device: &[usize]) -> String {
    let lo = per_device.iter().copied().filter(|&n| n > 0).min().unwrap_or(0);
    let hi = per_device.iter().copied().max().unwrap_or(0);
    let soaks = if lo == hi {
        format!("each device's {} soaks", count(hi))
    } else {
        format!("each device's soaks ({} to {})", count(lo), count(hi))
    };
    format!(
        "Binned: {soaks} in {} columns of {}; a column takes the color of the variant with most soak time in it; a red \
mark above it: an invalid attempt in that column.",
        b.columns,
        // Whole minutes: a column is an approximate width.
        duration(if b.minutes >= 1.0 { b.minutes.round() * 60.0 } else { b.minutes * 60.0 })
    )
}

/// ` sentence`, to follow a caption's own text; nothing without one.
fn after(note: Option<&str>) -> String {
    note.map(|n| format!(" {}", esc(n))).unwrap_or_default()
}

/// `svg` with `note` as its `<title>` (readers and tooltips show it), if there is one.
fn titled(svg: String, note: Option<&str>) -> String {
    match (note, svg.find('>')) {
        (Some(note), Some(end)) => format!("{}<title>{}</title>{}", &svg[..=end], esc(note), &svg[end + 1..]),
        _ => svg,
    }
}

/// `36000` as `36 000` (narrow no-break spaces between groups of three digits).
fn count(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push('\u{202f}');
        }
        out.push(ch);
    }
    out
}

/// `1st`, `2nd`, `3rd`, `11th`, `180th`, `1 801st`.
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{}{suffix}", count(n))
}

/// Escapes text for HTML element content and attribute values.
pub(crate) fn esc(s: &str) -> String {
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
    use crate::measure::{BATTERY_PCT, Series};
    use crate::report::build_report;
    use crate::store::{TrialOutcome, TrialRecord};
    use crate::testing::fixture;

    fn page() -> String {
        let data = fixture::campaign("20250301-090000-envoy");
        let curve = BatteryCurve {
            trial_key: data.cols.t_key[0].to_string(),
            device: "sim-iphone-1".into(),
            model: fixture::MODEL.into(),
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

    /// A campaign of `n` one-attempt trials on 4 devices and 2 variants, soaks of 1 h
    /// every 65 min with a 10 h break after each 1 000th, every 25th attempt invalid, and
    /// a 150-point battery series on every invalid one and every `battery_every`-th.
    fn large(n: usize, battery_every: usize) -> CampaignData {
        let id = "large";
        let mut plan = fixture::plan(Vec::new());
        plan.devices.extend(plan.devices.clone().into_iter().map(|mut d| {
            d.name = d.name.replace("iphone", "ipad");
            d
        }));
        let devices: Vec<String> = plan.devices.iter().map(|d| d.name.clone()).collect();
        let campaign = fixture::campaign_record(id, &plan);
        let (mut trials, mut attempts) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for i in 0..n {
            let (device, variant) = (&devices[i % 4], ["control", "envoy-poll"][i / 4 % 2]);
            let k = (i / 4) as f64;
            let row = crate::store::PlannedTrialRow {
                idx: i as u32,
                key: format!("{i:06}-{device}-{variant}"),
                device: device.clone(),
                device_model: fixture::MODEL.into(),
                variant: variant.into(),
                build: variant.into(),
                config: "default".into(),
                repeat: (i / 8) as u32,
                block: 0,
                device_order: (i / 4) as u32,
            };
            let invalid = i % 25 == 7;
            let outcome = if invalid { TrialOutcome::Failed } else { TrialOutcome::Valid };
            trials.push(TrialRecord { row, attempts: 1, outcome });
            // Deterministic noise, and a far value now and then (flagged outliers).
            let noise = (i as f64 * 0.618_033_988_75) % 1.0;
            let drop = if i % 397 == 3 { 40.0 } else { 3.0 + noise + if variant == "control" { 0.0 } else { 6.0 } };
            let reasons: &[&str] = if invalid { &["app died during the soak"] } else { &[] };
            let mut a = fixture::attempt(
                id,
                i as u32,
                0,
                reasons,
                &[("battery_drop_pct", drop, "%"), ("cpu_pct", 10.0 + noise, "%")],
            );
            a.soak_start_s = k * 3900.0 + (k / 1000.0).floor() * 36_000.0;
            if invalid || i % battery_every == 0 {
                let points = (0..150).map(|p| (p as f64 * 24.0, 100.0 - p as f64 * drop / 150.0)).collect();
                a.series = vec![Series::new(BATTERY_PCT, "%", "sim", points)];
            }
            attempts.push(a);
        }
        CampaignData::new(campaign, trials, attempts).unwrap()
    }

    fn elements(html: &str, tag: &str) -> usize {
        html.matches(&format!("<{tag}")).count()
    }

    #[test]
    fn a_huge_campaign_draws_a_bounded_page_and_says_how() {
        let data = large(20_000, 10);
        let report = build_report(&data);
        let html = render_html(&report, &data, &crate::report::battery_curves(&data));
        let (rects, lines, circles) = (elements(&html, "rect"), elements(&html, "polyline"), elements(&html, "circle"));
        eprintln!("20 000 attempts: {} bytes, {rects} <rect>, {lines} <polyline>, {circles} <circle>", html.len());
        // Timeline: at most a bar and a red mark per column of each of 4 devices; strip
        // plots (2 metrics × 2 variants): box and outline, plus backgrounds.
        assert!(rects <= 2 * 4 * plots::TIMELINE_COLUMNS + 2 * 2 * 2 + 4, "{rects} rects");
        // Curves: 40 per variant and the first 20 invalid ones; whiskers: 5 per box; the
        // rest are the axes' black ticks, under 20 per plot.
        let ticks = html.lines().filter(|l| l.starts_with("<polyline") && l.contains("stroke=\"#000000\"")).count();
        assert!(lines - ticks <= 2 * MAX_CURVES_PER_VARIANT + 20 + 2 * 2 * 5, "{lines} polylines");
        assert!(ticks <= 20 * elements(&html, "svg"), "{ticks} ticks");
        // Per variant and metric at most 200 points and 200 outliers, each ringed.
        assert!(circles <= 2 * 2 * (plots::MAX_POINTS + 2 * plots::MAX_POINTS), "{circles} circles");
        assert!(html.matches("<tr>").count() < MAX_INVALID_ROWS + 100, "invalid table capped");

        // Each sampled plot says how, in its caption and its SVG title.
        let model = &report.models[0];
        let per_variant = model.rows.iter().find(|r| r.metric == "battery_drop_pct").unwrap().values.len();
        let (step, picks) = crate::report::render::sample::stride(per_variant, plots::MAX_POINTS);
        let strip = format!(
            "Drawn: {} of {} values of each variant (every {} in trial order)",
            count(picks.len()),
            count(per_variant),
            ordinal(step)
        );
        assert_eq!(html.matches(&strip).count(), 2 * 2, "caption and title of 2 plots: {strip}");
        let outliers: usize = model
            .rows
            .iter()
            .filter(|r| r.metric == "battery_drop_pct")
            .map(|r| crate::stats::modified_z_outliers(&r.values).len())
            .sum();
        let ringed = format!("and all {} flagged outliers; the box uses every value.", count(outliers));
        assert!(outliers > 0 && html.matches(&ringed).count() == 2, "{ringed}");
        let with_series = data.cols.a_has_battery.iter().filter(|&&b| b).count();
        let drawn = crate::report::sample_curves(&data.cols).len();
        let curves =
            format!("Drawn: {} of {} attempts with a battery series (every ", count(drawn), count(with_series));
        assert_eq!(html.matches(&curves).count(), 2, "{curves}");
        assert_eq!(html.matches(", and the first 20 of 800 invalid ones), each line").count(), 2);
        assert!(html.contains("each line down-sampled to at most 120 points (largest-triangle-three-buckets)."));
        let timeline = "Binned: each device&#39;s 5\u{202f}000 soaks in 560 columns of ";
        assert_eq!(html.matches(timeline).count(), 2, "{timeline}");
        assert_eq!(html.matches("<title>Drawn: ").count(), 3);
        assert_eq!(html.matches("<title>Binned: ").count(), 1);
        let flagged = model.rows.iter().map(|r| r.outliers.len()).max().unwrap();
        assert!(
            flagged > MAX_OUTLIER_KEYS
                && html.contains(&format!(
                    ", … and {} more (report.json lists every one)",
                    count(flagged - MAX_OUTLIER_KEYS)
                ))
        );
        let invalid = report.invalid_attempts.len();
        assert!(invalid > MAX_INVALID_ROWS);
        let more = format!("… and {} more: results.csv lists every attempt (status = invalid).", count(invalid - 500));
        assert!(html.contains(&more), "{more}");
        assert_eq!(html, render_html(&report, &data, &crate::report::battery_curves(&data)), "deterministic");
    }

    #[test]
    fn a_small_campaign_says_nothing_of_sampling() {
        // 80 trials: 40 per variant, every curve drawn, but of 150 points each.
        let data = large(80, 1);
        let thinned = render_html(&build_report(&data), &data, &crate::report::battery_curves(&data));
        for html in [page(), thinned.clone()] {
            for said in ["Drawn:", "Binned:", "<title>Drawn", "… and "] {
                assert!(!html.contains(said), "{said}");
            }
        }
        let note = "Each line down-sampled to at most 120 points (largest-triangle-three-buckets).";
        assert_eq!(thinned.matches(note).count(), 2, "caption and title");
        assert!(!page().contains(note));
    }

    #[test]
    fn a_144_000_attempt_page_stays_under_a_megabyte() {
        let data = large(144_000, 100);
        let html = render_html(&build_report(&data), &data, &crate::report::battery_curves(&data));
        eprintln!(
            "144 000 attempts: {} bytes, {} <rect>, {} <polyline>, {} <circle>",
            html.len(),
            elements(&html, "rect"),
            elements(&html, "polyline"),
            elements(&html, "circle")
        );
        assert!(html.len() < 1 << 20, "{} bytes", html.len());
    }

    #[test]
    fn counts_and_ordinals_read_as_words() {
        assert_eq!(count(7), "7");
        assert_eq!(count(144_000), "144\u{202f}000");
        assert_eq!(count(1_008_000), "1\u{202f}008\u{202f}000");
        let got: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 112, 180, 1801].into_iter().map(ordinal).collect();
        assert_eq!(
            got,
            ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "112th", "180th", "1\u{202f}801st"]
        );
    }

    #[test]
    fn escapes_text() {
        assert_eq!(esc("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
        let mut data = fixture::campaign("c1");
        data.campaign.runbook_name = "<script>alert(1)</script>".into();
        let html = render_html(&build_report(&data), &data, &[]);
        assert!(!html.contains("<script>"));
    }
}
