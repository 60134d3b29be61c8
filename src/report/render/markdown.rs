//! `report.md`: the campaign report as a Markdown document.

use std::fmt::Write;

use crate::report::model::report::Report;
use crate::report::render::format::percent;
use crate::report::render::metric_tables::metric_tables;
use crate::report::render::table::{method_line, model_title, status_text, table_title, validity_headline};
use crate::text::duration::round as duration;

/// Renders `report` as Markdown. Ends with a newline.
pub fn render_markdown(report: &Report) -> String {
    let c = &report.campaign;
    let mut out = String::new();
    let _ = writeln!(out, "# Campaign report: {}\n", md(&c.runbook));

    let design = format!(
        "{} order, {} repeat{}, {} trials, {} cool-down, up to {} attempt{} per trial, {} planned trials",
        serde_plain(&c.order),
        c.repeats,
        if c.repeats == 1 { "" } else { "s" },
        duration(c.duration_s),
        duration(c.cooldown_s),
        c.max_attempts,
        if c.max_attempts == 1 { "" } else { "s" },
        c.planned_trials
    );
    let meta = [
        ("campaign", code(&c.id)),
        ("runbook", format!("{} ({}, sha256 {})", md(&c.runbook), code(&c.runbook_path), code(&c.runbook_sha256))),
        ("lab file", format!("sha256 {}", code(&c.lab_sha256))),
        ("seed", c.seed.to_string()),
        ("status", md(&status_text(report))),
        ("created", md(&c.created_at)),
        ("finished", c.finished_at.as_deref().map(md).unwrap_or_else(|| "–".into())),
        ("lab version", md(&c.tool_version)),
        ("design", design),
    ];
    for (key, value) in meta {
        let _ = writeln!(out, "- **{key}**: {value}");
    }
    if let Some(r) = &c.rerun {
        let _ = writeln!(out, "- **re-run**: {}", md(&crate::report::model::report::rerun_text(r)));
    }

    let level = percent(report.statistics.confidence);
    if report.models.iter().any(|m| !m.verdicts.is_empty()) {
        let _ = writeln!(out, "\n## Verdicts\n\n{}.\n", md(&method_line(report)));
        let judged: Vec<_> = report.models.iter().filter(|m| !m.verdicts.is_empty()).collect();
        for (i, model) in judged.iter().enumerate() {
            let _ = writeln!(out, "{}**{}**\n", if i > 0 { "\n" } else { "" }, md(&model.model));
            for v in &model.verdicts {
                let _ = writeln!(out, "- {}", md(&v.summary));
                if let Some(stop) = &v.sequential {
                    let _ = writeln!(out, "  - {}", md(&stop.line()));
                }
            }
        }
    }
    for model in &report.models {
        let _ = writeln!(out, "\n## Results: {}\n", md(&model_title(model)));
        let _ = writeln!(
            out,
            "Mean ± half-width of the {level} confidence interval (Student t), from valid attempts only. \
Δ: relative change against the reference with its {level} interval; Welch p raw and Holm-adjusted within the \
metric's family; Mann–Whitney p as a check; n/arm: trials per arm that would detect ±{} at {} power.",
            percent(report.statistics.practical_threshold),
            percent(report.statistics.advice_power)
        );
        if model.rows.is_empty() {
            let _ = writeln!(out, "\nNo metrics.");
            continue;
        }
        let mean_header = format!("mean ± {level} CI");
        let median_header = format!("median [{level} CI]");
        let change_header = format!("Δ [{level} CI]");
        for t in metric_tables(model) {
            let _ = writeln!(out, "\n### {}\n", md(&table_title(&t)));
            let rows = t.lines.iter().map(|l| {
                [
                    &l.variant,
                    &l.n,
                    &l.mean_ci,
                    &l.sd,
                    &l.median_ci,
                    &l.min,
                    &l.max,
                    &l.against,
                    &l.change,
                    &l.welch_p,
                    &l.p_adjusted,
                    &l.mwu_p,
                    &l.hedges_g,
                    &l.verdict,
                    &l.advice,
                    &l.outliers,
                ]
                .iter()
                .map(|c| md(c))
                .collect()
            });
            let header = [
                "variant",
                "n",
                mean_header.as_str(),
                "sd",
                median_header.as_str(),
                "min",
                "max",
                "vs",
                change_header.as_str(),
                "Welch p",
                "p (Holm)",
                "Mann–Whitney p",
                "Hedges g",
                "verdict",
                "n/arm",
                "outliers",
            ];
            table(&mut out, &header, rows);
        }
        let sources: Vec<String> = {
            let mut v: Vec<String> = model.rows.iter().flat_map(|r| r.sources.iter().cloned()).collect();
            v.sort();
            v.dedup();
            v
        };
        if !sources.is_empty() {
            let _ = writeln!(out, "\nSources: {}.", md(&sources.join(", ")));
        }
    }

    let _ = writeln!(out, "\n## Validity\n\n{}.\n", md(&validity_headline(report)));
    let rows = report.variants.iter().map(|v| {
        vec![
            md(&v.name),
            v.planned_trials.to_string(),
            v.valid_trials.to_string(),
            v.failed_trials.to_string(),
            v.pending_trials.to_string(),
            v.valid_attempts.to_string(),
            v.invalid_attempts.to_string(),
        ]
    });
    table(
        &mut out,
        &["variant", "planned trials", "valid", "failed", "pending", "valid attempts", "invalid attempts"],
        rows,
    );
    if !report.invalid_attempts.is_empty() {
        let _ = writeln!(out, "\n### Invalid attempts\n\nKept and listed, excluded from statistics.\n");
        let rows = report
            .invalid_attempts
            .iter()
            .map(|a| vec![code(&a.trial_key), md(&a.device), a.attempt.to_string(), md(&a.reasons.join("; "))]);
        table(&mut out, &["trial", "device", "attempt", "reasons"], rows);
    }

    if !report.attested.is_empty() {
        let _ = writeln!(
            out,
            "\n### Attested by operators\n\nWhat people answered to the runbook's steps: *attested*, never read by the lab.\n"
        );
        let rows = report.attested.iter().map(|r| {
            vec![
                md(&r.device),
                code(&r.step),
                md(&r.when),
                md(&r.text),
                md(&format!("{} (attested)", r.answer())),
                md(&r.by),
                format!("{} ({} valid)", r.attempts, r.valid_attempts),
            ]
        });
        table(&mut out, &["device", "step", "when", "asked", "answer", "by", "attempts"], rows);
    }

    if !report.state.is_empty() {
        let _ = writeln!(
            out,
            "\n### Device state and its sources\n\nEach value with where it came from: *read* or *set* by the lab, reported by the *app*, *attested* by an operator, or from the device's *powerlog* (during the soak).\n"
        );
        let rows = report.state.iter().map(|r| {
            vec![
                md(&r.device),
                md(r.when),
                code(r.setting),
                md(&r.values),
                md(r.source),
                format!("{} ({} valid)", r.attempts, r.valid_attempts),
            ]
        });
        table(&mut out, &["device", "when", "setting", "value", "source", "attempts"], rows);
    }

    if let Some(obj) = c.content_hashes.as_object().filter(|o| !o.is_empty()) {
        let _ = writeln!(out, "\n## Content hashes\n");
        let rows = obj.iter().map(|(name, v)| {
            let hash = v.as_str().map(code).unwrap_or_else(|| code(&v.to_string()));
            vec![md(name), hash]
        });
        table(&mut out, &["file", "sha256"], rows);
    }
    if let Some(fp) = &c.footprint {
        let pretty = serde_json::to_string_pretty(fp).unwrap_or_else(|_| fp.to_string());
        let _ = writeln!(out, "\n## Lab footprint\n\n```json\n{pretty}\n```");
    }
    if !report.warnings.is_empty() {
        let _ = writeln!(out, "\n## Warnings\n");
        for w in &report.warnings {
            let _ = writeln!(out, "- {}", md(w));
        }
    }
    out
}

/// Writes a Markdown table; cells must already be escaped.
fn table(out: &mut String, header: &[&str], rows: impl Iterator<Item = Vec<String>>) {
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
    for r in rows {
        let _ = writeln!(out, "| {} |", r.join(" | "));
    }
}

/// Escapes text so it cannot break a table row or start Markdown formatting.
fn md(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '|' | '\\' | '*' | '`' | '<' | '>' | '[' | ']' => {
                out.push('\\');
                out.push(ch);
            }
            '\n' | '\r' => out.push(' '),
            _ => out.push(ch),
        }
    }
    out
}

/// Inline code; a backtick inside falls back to escaped text.
fn code(s: &str) -> String {
    if s.is_empty() {
        return "–".into();
    }
    if s.contains('`') || s.contains('\n') { md(s) } else { format!("`{}`", s.replace('|', "\\|")) }
}

/// A unit enum's serde name (`balanced`).
fn serde_plain<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::build_report;
    use crate::testing::fixture;

    #[test]
    fn markdown_report() {
        let r = build_report(&fixture::campaign("20250301-090000-envoy"));
        insta::assert_snapshot!(render_markdown(&r));
    }

    #[test]
    fn escapes_table_breaking_text() {
        assert_eq!(md("a|b\nc*"), "a\\|b c\\*");
        assert_eq!(code("x`y"), "x\\`y");
        assert_eq!(code("a|b"), "`a\\|b`");
    }
}
