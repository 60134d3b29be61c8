//! `lab compare A B --format junit`: B's verdicts against A as JUnit XML, for CI servers.
//!
//! One `<testcase>` per variant × gating metric of each device model, named
//! `<variant>: <metric>` (the reference is always the same variant in A; campaign ids
//! stay out of names so a CI server tracks one case across weeks). Every variant has
//! cases, the baseline too: here it is compared with itself a week earlier. `worse`
//! fails, `too few trials` and a metric without values in A or B are skipped, the rest
//! pass. One `<testsuite>` per device model, for the reasons given in `junit.rs`.

use crate::report::compare::build_compare::{CompareModel, CompareReport};
use crate::report::junit::xml::{Case, Side, Subject, Suite, classname, render_suites, timestamp};

/// The comparison's verdicts as JUnit XML (junit-10.xsd). Ends with a newline.
pub fn render_compare_junit(cmp: &CompareReport) -> String {
    let suites: Vec<Suite> = cmp.models.iter().map(|m| suite(cmp, m)).collect();
    render_suites(&format!("lab compare {}", cmp.after.runbook), &suites)
}

fn suite(cmp: &CompareReport, m: &CompareModel) -> Suite {
    let class = classname(&cmp.after.runbook, &m.model);
    let (a, b) = (format!("A {}", cmp.before.id), format!("B {}", cmp.after.id));
    let cases = m
        .rows
        .iter()
        .filter(|r| r.gating)
        .map(|r| {
            let name = format!("{}: {}", r.variant, r.metric);
            match &r.comparison {
                Some(c) => Case::judged(
                    &class,
                    name,
                    &Subject { model: &m.model, metric: &r.metric, unit: &r.unit },
                    c,
                    (Side { label: &b, stats: r.after.as_ref() }, Side { label: &a, stats: r.before.as_ref() }),
                    &cmp.statistics,
                ),
                None => {
                    let empty: Vec<&str> = [(&b, r.after.is_none()), (&a, r.before.is_none())]
                        .iter()
                        .filter(|(_, e)| *e)
                        .map(|(n, _)| n.as_str())
                        .collect();
                    let message = format!(
                        "not judged: {} has no valid {} value in {} on {}",
                        r.variant,
                        r.metric,
                        empty.join(" nor in "),
                        m.model
                    );
                    Case::skipped(&class, name, message)
                }
            }
        })
        .collect();
    Suite {
        name: format!("{} on {}, B against A", cmp.after.runbook, m.model),
        timestamp: timestamp(&cmp.after.created_at),
        properties: vec![
            ("before", cmp.before.id.clone()),
            ("after", cmp.after.id.clone()),
            ("runbook_changed", cmp.runbook_changed.to_string()),
            ("gating", cmp.statistics.gating.join(", ")),
        ],
        cases,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StatsSettings;
    use crate::report::{Report, build_report, compare_reports};
    use crate::testing::fixture;

    /// A week of the fixture campaign: envoy-poll's CPU times `factor`; with `fourth`,
    /// a fourth valid trial per variant (so comparisons can reach significance).
    fn week(id: &str, factor: f64, fourth: bool) -> Report {
        let mut data = fixture::records(id);
        for a in &mut data.attempts {
            let variant = &data.trials[a.trial_idx as usize].row.variant;
            for m in a.measurements.iter_mut().filter(|m| m.metric == "cpu_pct" && variant == "envoy-poll") {
                m.value *= factor;
            }
        }
        if fourth {
            data.attempts.push(fixture::attempt(id, 7, 0, &[], &[("cpu_pct", 186.0 * factor, "%")]));
            data.attempts.push(fixture::attempt(id, 4, 2, &[], &[("cpu_pct", 12.2, "%")]));
        }
        build_report(&data.data())
    }

    #[test]
    fn a_regression_fails_and_the_unchanged_baseline_passes() {
        let settings = StatsSettings::default();
        let cmp = compare_reports(&week("week-1", 1.0, true), &week("week-2", 1.3, true), &settings);
        assert!(cmp.regression());
        let xml = render_compare_junit(&cmp);
        assert!(xml.contains("tests=\"2\" failures=\"1\" errors=\"0\" skipped=\"0\""), "{xml}");
        assert!(xml.contains("name=\"control: cpu_pct\" time=\"0\">\n      <system-out>"), "control passes: {xml}");
        assert!(xml.contains("name=\"envoy-poll: cpu_pct\" time=\"0\">\n      <failure type=\"worse\""), "{xml}");
        let cases: Vec<&str> = xml.lines().filter(|l| l.contains("<testcase ")).collect();
        assert!(cases.len() == 2 && cases.iter().all(|l| !l.contains("week-")), "campaign ids stay out of names");
        insta::assert_snapshot!(xml);
    }

    #[test]
    fn too_few_trials_are_skipped() {
        let settings = StatsSettings::default();
        let cmp = compare_reports(&week("week-1", 1.0, false), &week("week-2", 1.3, false), &settings);
        let xml = render_compare_junit(&cmp);
        assert!(xml.contains("tests=\"2\" failures=\"0\" errors=\"0\" skipped=\"2\""), "{xml}");
        assert!(xml.contains("<skipped message=\"too few trials to judge: n = 3 (B week-2) and 3 (A week-1)"), "{xml}");
        insta::assert_snapshot!(xml);
    }
}
