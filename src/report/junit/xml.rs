//! JUnit XML, written by hand: the few elements CI servers read, every string escaped.
//!
//! The layout is the one of the Jenkins xUnit plugin's `junit-10.xsd` (a copy is in
//! tests/fixtures/junit/), which GitLab, Jenkins and GitHub's JUnit-report actions all
//! read. A crate would add a dependency for five elements; escaping is the only hard
//! part and is done here once.
//!
//! Output is deterministic: no wall-clock time, no host name. `time` is always `0`
//! (verdicts are computed from stored figures, not timed; some readers want the
//! attribute), `timestamp` is the campaign's creation.

use std::fmt::Write as _;

use crate::report::model::report::{MetricComparison, StatisticsMeta};
use crate::report::render::format::{MISSING, StatCells, change_with_ci, decimals_for, fixed, p_value, percent};
use crate::stats::{Summary, Verdict};

/// What became of one test case.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    Passed,
    /// A `worse` verdict: `<failure type="worse" message=…>`.
    Failed {
        message: String,
    },
    /// Not judged (too few trials, no values): `<skipped message=…>`.
    Skipped {
        message: String,
    },
}

/// One `<testcase>`: a variant × model × gating metric against one reference.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Case {
    pub classname: String,
    pub name: String,
    pub outcome: Outcome,
    /// The figures behind the outcome: the failure's text, else `<system-out>`.
    pub detail: Option<String>,
}

/// One arm of a comparison as the case's text names it.
pub(crate) struct Side<'a> {
    pub label: &'a str,
    pub stats: Option<&'a Summary>,
}

/// The metric a case judges, and where.
pub(crate) struct Subject<'a> {
    pub model: &'a str,
    pub metric: &'a str,
    pub unit: &'a str,
}

impl Case {
    /// A case for a metric that could not be compared (an arm without values).
    pub fn skipped(classname: &str, name: String, message: String) -> Case {
        Case { classname: classname.to_string(), name, outcome: Outcome::Skipped { message }, detail: None }
    }

    /// A case from a comparison: `worse` fails, `too few trials` is skipped, any other
    /// verdict passes (`better`, `~`, and `changed` of a metric with no good direction).
    pub fn judged(
        classname: &str,
        name: String,
        what: &Subject,
        c: &MetricComparison,
        (treatment, reference): (Side, Side),
        st: &StatisticsMeta,
    ) -> Case {
        let change = change_with_ci(c.stats.change.as_ref());
        let level = percent(st.confidence);
        let p = p_value(c.p_adjusted);
        let outcome = match c.verdict {
            Verdict::Worse => Outcome::Failed {
                message: format!(
                    "worse: {} {} (Δ {}, {change} at {level} CI), p = {p} (Welch, Holm-adjusted)",
                    what.metric,
                    means(reference.stats, treatment.stats, what.unit),
                    difference(reference.stats, treatment.stats, what.unit),
                ),
            },
            Verdict::TooFewTrials => Outcome::Skipped {
                message: format!(
                    "too few trials to judge: n = {} ({}) and {} ({}); with so few values the rank test cannot reach \
p ≤ {}; fix: more repeats{}",
                    c.stats.n_treatment,
                    treatment.label,
                    c.stats.n_baseline,
                    reference.label,
                    st.alpha,
                    c.advice_trials_per_arm
                        .map(|n| format!(" (about {n} per arm would detect ±{})", percent(st.practical_threshold)))
                        .unwrap_or_default()
                ),
            },
            Verdict::Inconclusive => Outcome::Skipped {
                message: format!(
                    "inconclusive: {} {change} at {level} CI, p = {p}: neither a change beyond ±{} nor the same within \
it was shown; fix: more repeats{}",
                    what.metric,
                    percent(st.practical_threshold),
                    c.advice_trials_per_arm.map(|n| format!(" (about {n} per arm would decide)")).unwrap_or_default()
                ),
            },
            _ => Outcome::Passed,
        };
        let unit = if what.unit.is_empty() { String::new() } else { format!(" ({})", what.unit) };
        let arm =
            |s: &Side| format!("{}: n {}, mean {} ({level} CI)", s.label, n(s.stats), StatCells::new(s.stats).mean_ci);
        let mwu = c.stats.mann_whitney.as_ref().map(|m| m.p);
        let detail = [
            format!("{}, {}{unit}, gating", what.model, what.metric),
            arm(&treatment),
            arm(&reference),
            format!("Δ {change} ({level} CI)"),
            format!(
                "p: Welch {}, Holm-adjusted over {} gating test{} {p}, Mann–Whitney {}",
                p_value(c.stats.welch.as_ref().map(|w| w.p)),
                c.family_size,
                if c.family_size == 1 { "" } else { "s" },
                p_value(mwu)
            ),
            format!(
                "verdict: {} (worse or better needs adjusted p ≤ {} and the whole Δ CI beyond ±{})",
                c.verdict.as_str(),
                st.alpha,
                percent(st.practical_threshold)
            ),
        ]
        .join("\n");
        Case { classname: classname.to_string(), name, outcome, detail: Some(detail) }
    }
}

fn n(s: Option<&Summary>) -> usize {
    s.map_or(0, |s| s.n)
}

/// `12.00 → 185.0 %`: the reference's mean, then the treatment's, at one precision.
fn means(reference: Option<&Summary>, treatment: Option<&Summary>, unit: &str) -> String {
    let (Some(r), Some(t)) = (reference, treatment) else { return MISSING.into() };
    let d = decimals_for(r.mean.abs().max(t.mean.abs()));
    with_unit(format!("{} → {}", fixed(r.mean, d), fixed(t.mean, d)), unit)
}

/// `+173.0 %`: the difference of the means in the metric's unit.
fn difference(reference: Option<&Summary>, treatment: Option<&Summary>, unit: &str) -> String {
    let (Some(r), Some(t)) = (reference, treatment) else { return MISSING.into() };
    let d = decimals_for(r.mean.abs().max(t.mean.abs()));
    let x = fixed(t.mean - r.mean, d);
    with_unit(if x.starts_with('-') { x } else { format!("+{x}") }, unit)
}

fn with_unit(s: String, unit: &str) -> String {
    if unit.is_empty() { s } else { format!("{s} {unit}") }
}

/// One `<testsuite>`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Suite {
    pub name: String,
    /// The campaign's creation (see [`timestamp`]).
    pub timestamp: String,
    pub properties: Vec<(&'static str, String)>,
    pub cases: Vec<Case>,
}

impl Suite {
    fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.cases.iter().filter(|c| f(&c.outcome)).count()
    }
    fn failures(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Failed { .. }))
    }
    fn skipped(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Skipped { .. }))
    }
}

/// `lab.<runbook>.<model>`. Jenkins reads the last dot as package / class, so dots
/// inside the names become `_` to keep the runbook as package and the model as class.
pub(crate) fn classname(runbook: &str, model: &str) -> String {
    format!("lab.{}.{}", runbook.replace('.', "_"), model.replace('.', "_"))
}

/// An RFC 3339 time as Ant's JUnit timestamp, `2025-03-01T09:00:00` in UTC (Ant's
/// format has no zone; some readers reject one). Text that does not parse is kept.
pub(crate) fn timestamp(rfc3339: &str) -> String {
    match chrono::DateTime::parse_from_rfc3339(rfc3339) {
        Ok(t) => t.with_timezone(&chrono::Utc).format("%Y-%m-%dT%H:%M:%S").to_string(),
        Err(_) => rfc3339.to_string(),
    }
}

/// The document: `<testsuites name=…>` around `suites`. Ends with a newline.
pub(crate) fn render_suites(name: &str, suites: &[Suite]) -> String {
    let total = |f: fn(&Suite) -> usize| suites.iter().map(f).sum::<usize>();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    // junit-10.xsd has no `skipped` on <testsuites>; each <testsuite> carries it.
    let _ = writeln!(
        out,
        "<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" time=\"0\">",
        attr(name),
        total(|s| s.cases.len()),
        total(Suite::failures)
    );
    for s in suites {
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"0\" timestamp=\"{}\">",
            attr(&s.name),
            s.cases.len(),
            s.failures(),
            s.skipped(),
            attr(&s.timestamp)
        );
        if !s.properties.is_empty() {
            out.push_str("    <properties>\n");
            for (k, v) in &s.properties {
                let _ = writeln!(out, "      <property name=\"{}\" value=\"{}\"/>", attr(k), attr(v));
            }
            out.push_str("    </properties>\n");
        }
        for c in &s.cases {
            write_case(&mut out, c);
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

fn write_case(out: &mut String, c: &Case) {
    let _ = write!(out, "    <testcase classname=\"{}\" name=\"{}\" time=\"0\"", attr(&c.classname), attr(&c.name));
    let detail = c.detail.as_deref().map(text);
    match (&c.outcome, &detail) {
        (Outcome::Passed, None) => out.push_str("/>\n"),
        (Outcome::Passed, Some(d)) => {
            let _ = writeln!(out, ">\n      <system-out>{d}</system-out>\n    </testcase>");
        }
        (Outcome::Failed { message }, d) => {
            let _ = writeln!(
                out,
                ">\n      <failure type=\"worse\" message=\"{}\">{}</failure>\n    </testcase>",
                attr(message),
                d.as_deref().unwrap_or_default()
            );
        }
        (Outcome::Skipped { message }, d) => {
            let _ = writeln!(out, ">\n      <skipped message=\"{}\"/>", attr(message));
            if let Some(d) = d {
                let _ = writeln!(out, "      <system-out>{d}</system-out>");
            }
            out.push_str("    </testcase>\n");
        }
    }
}

/// Characters XML 1.0 cannot carry even as a reference (most C0 controls) become U+FFFD.
fn xml_char(c: char) -> char {
    match c {
        '\t' | '\n' | '\r' => c,
        c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => '\u{FFFD}',
        c => c,
    }
}

/// Escaped for element text.
fn text(s: &str) -> String {
    escape(s, false)
}

/// Escaped for a double-quoted attribute.
fn attr(s: &str) -> String {
    escape(s, true)
}

/// `s` with markup escaped; in an attribute also quotes, and whitespace other than a
/// space as references (a reader's attribute normalization turns them into spaces).
fn escape(s: &str, attribute: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars().map(xml_char) {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if attribute => out.push_str("&quot;"),
            '\'' if attribute => out.push_str("&apos;"),
            '\n' if attribute => out.push_str("&#10;"),
            '\r' if attribute => out.push_str("&#13;"),
            '\t' if attribute => out.push_str("&#9;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_quotes_whitespace_and_forbidden_characters() {
        assert_eq!(attr("a<b>&\"c\"'d'\n\t\r"), "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos;&#10;&#9;&#13;");
        assert_eq!(text("a<b>&\"c\"\n"), "a&lt;b&gt;&amp;\"c\"\n");
        assert_eq!(attr("bell\u{7}nul\u{0}"), "bell\u{FFFD}nul\u{FFFD}");
        assert_eq!(text("é ✓ Δ"), "é ✓ Δ");
    }

    #[test]
    fn names_and_timestamps() {
        assert_eq!(classname("envoy-battery-audit", "iPhone 6s"), "lab.envoy-battery-audit.iPhone 6s");
        assert_eq!(classname("a.b", "iOS 12.2"), "lab.a_b.iOS 12_2");
        assert_eq!(timestamp("2025-03-01T09:00:00.123Z"), "2025-03-01T09:00:00");
        assert_eq!(timestamp("2025-03-01T10:00:00+01:00"), "2025-03-01T09:00:00");
        assert_eq!(timestamp("yesterday"), "yesterday");
    }

    #[test]
    fn counts_follow_the_outcomes() {
        let case = |name: &str, outcome| Case { classname: "lab.r.m".into(), name: name.into(), outcome, detail: None };
        let suite = Suite {
            name: "r on m".into(),
            timestamp: "2025-03-01T09:00:00".into(),
            properties: vec![("campaign", "c&1".into())],
            cases: vec![
                case("a: x", Outcome::Passed),
                case("b: x", Outcome::Failed { message: "worse".into() }),
                case("c: x", Outcome::Skipped { message: "too few".into() }),
            ],
        };
        let xml = render_suites("lab report r", &[suite.clone(), suite]);
        assert!(
            xml.contains("<testsuites name=\"lab report r\" tests=\"6\" failures=\"2\" errors=\"0\" time=\"0\">"),
            "{xml}"
        );
        assert!(xml.contains("tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\""), "{xml}");
        assert!(xml.contains("<property name=\"campaign\" value=\"c&amp;1\"/>"), "{xml}");
        assert!(xml.contains("<testcase classname=\"lab.r.m\" name=\"a: x\" time=\"0\"/>"), "{xml}");
        assert!(xml.ends_with("</testsuites>\n"));
    }
}
