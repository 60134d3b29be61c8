//! `lab report --format junit`: a campaign's verdicts as JUnit XML, for CI servers.
//!
//! One `<testcase>` per variant × reference × gating metric of each device model, named
//! `<variant> vs <reference>: <metric>` (a config variant has two references, and a
//! name must be unique within its class); `worse` fails, `too few trials` and a metric
//! without values in an arm are skipped, the rest pass. The baseline itself has no
//! case: it is what the others are judged against, and a case that cannot fail would
//! only inflate the pass count. Non-gating metrics decide nothing, so they have none.
//!
//! One `<testsuite>` per device model, not one per campaign: Jenkins groups by
//! `classname` (`lab.<runbook>.<model>`: runbook as package, model as class) either way,
//! GitLab lists suites by job and cases by class, and GitHub's report actions show one
//! section per suite, so a suite per model puts "which phone regressed" first in each.

use crate::report::junit::xml::{Case, Side, Subject, Suite, classname, render_suites, timestamp};
use crate::report::model::report::{ModelReport, Report};
use crate::report::model::verdicts::references;

/// The report's verdicts as JUnit XML (junit-10.xsd). Ends with a newline.
pub fn render_junit(rep: &Report) -> String {
    let suites: Vec<Suite> = rep.models.iter().map(|m| suite(rep, m)).collect();
    render_suites(&format!("lab report {}", rep.campaign.runbook), &suites)
}

fn suite(rep: &Report, m: &ModelReport) -> Suite {
    let class = classname(&rep.campaign.runbook, &m.model);
    let mut cases = Vec::new();
    for v in &rep.variants {
        for (against, _) in references(v, &rep.variants) {
            for row in m.rows.iter().filter(|r| r.variant == v.name && r.gating) {
                let name = format!("{} vs {against}: {}", v.name, row.metric);
                let reference = m.rows.iter().find(|r| r.variant == against && r.metric == row.metric);
                let ref_stats = reference.and_then(|r| r.stats.as_ref());
                let case = match row.comparisons.iter().find(|c| c.against == against) {
                    Some(c) => Case::judged(
                        &class,
                        name,
                        &Subject { model: &m.model, metric: &row.metric, unit: &row.unit },
                        c,
                        (
                            Side { label: &v.name, stats: row.stats.as_ref() },
                            Side { label: &against, stats: ref_stats },
                        ),
                        &rep.statistics,
                    ),
                    None => {
                        let empty: Vec<&str> =
                            [(v.name.as_str(), row.stats.is_none()), (against.as_str(), ref_stats.is_none())]
                                .iter()
                                .filter(|(_, e)| *e)
                                .map(|(n, _)| *n)
                                .collect();
                        let message = format!(
                            "not judged: no valid {} value for {} on {}",
                            row.metric,
                            empty.join(" nor for "),
                            m.model
                        );
                        Case::skipped(&class, name, message)
                    }
                };
                cases.push(case);
            }
        }
    }
    let c = &rep.campaign;
    Suite {
        name: format!("{} on {}", c.runbook, m.model),
        timestamp: timestamp(&c.created_at),
        properties: vec![
            ("campaign", c.id.clone()),
            ("runbook_sha256", c.runbook_sha256.clone()),
            ("seed", c.seed.to_string()),
            ("status", c.status.as_str().to_string()),
            ("tool_version", c.tool_version.clone()),
            ("gating", rep.statistics.gating.join(", ")),
        ],
        cases,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::build_report;
    use crate::testing::fixture;

    /// The fixture, with a fourth valid trial per variant: envoy-poll's CPU is then
    /// significantly worse than control's.
    fn four_per_arm() -> Report {
        let id = "20250301-090000-envoy";
        let mut data = fixture::records(id);
        data.attempts.push(fixture::attempt(id, 7, 0, &[], &[("cpu_pct", 186.0, "%")]));
        data.attempts.push(fixture::attempt(id, 4, 2, &[], &[("cpu_pct", 12.2, "%")]));
        build_report(&data.data())
    }

    #[test]
    fn too_few_trials_are_skipped() {
        let rep = build_report(&fixture::campaign("20250301-090000-envoy"));
        let xml = render_junit(&rep);
        // cpu_pct is the fixture's only gating metric; 3 values per arm cannot reach p ≤ 0.05.
        assert_eq!(xml.matches("<testcase ").count(), 1, "{xml}");
        assert!(xml.contains("name=\"envoy-poll vs control: cpu_pct\""), "{xml}");
        assert!(
            xml.contains("<skipped message=\"too few trials to judge: n = 3 (envoy-poll) and 3 (control)"),
            "{xml}"
        );
        assert!(!xml.contains("control vs"), "the baseline has no case of its own");
        insta::assert_snapshot!(xml);
    }

    #[test]
    fn a_worse_verdict_is_a_failure() {
        let xml = render_junit(&four_per_arm());
        assert!(xml.contains("tests=\"1\" failures=\"1\" errors=\"0\" skipped=\"0\""), "{xml}");
        assert!(
            xml.contains("<failure type=\"worse\" message=\"worse: cpu_pct 12.1 → 185.2 % (Δ +173.2 %, +1437% ["),
            "{xml}"
        );
        insta::assert_snapshot!(xml);
    }

    #[test]
    fn deterministic_and_escaped() {
        let id = "20250301-090000-envoy";
        let mut data = fixture::records(id);
        let model = "iPhone \"6s\" <A&B>";
        for t in &mut data.trials {
            t.row.device_model = model.into();
        }
        for d in &mut data.plan.devices {
            d.model = model.into();
        }
        let xml = render_junit(&build_report(&data.data()));
        assert_eq!(xml, render_junit(&build_report(&data.data())), "same store, same bytes");
        assert!(xml.contains("classname=\"lab.envoy-battery-audit.iPhone &quot;6s&quot; &lt;A&amp;B&gt;\""), "{xml}");
        assert!(xml.contains("<system-out>iPhone \"6s\" &lt;A&amp;B&gt;, cpu_pct (%), gating"), "{xml}");
        assert!(!xml.contains("<A&B>"), "{xml}");
    }
}
