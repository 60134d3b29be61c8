//! `lab report --format junit` and `lab compare --format junit` through the real binary,
//! checked as a CI server reads them: tests/junit_check.py validates the XML against the
//! Jenkins xUnit plugin's junit-10.xsd (tests/fixtures/junit/) with PyPI `xmlschema` and
//! reads it back with PyPI `junitparser`. Without python3 and those packages the test is
//! ignored (`#[test_needs::needs(junitparser)]`), unless LAB_REQUIRE_JUNITPARSER=1 (set by
//! .ci/run), where it runs and fails.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::TempLab;

/// Fails a test that runs (see the module's note) without the Python packages.
fn junitparser_available() {
    let ok = Command::new("python3")
        .args(["-c", "import xmlschema, junitparser"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "needs junitparser: python3 with xmlschema and junitparser is not installed: the JUnit XML cannot be checked \
against its schema (install them with `python3 -m pip install xmlschema junitparser`)"
    );
}

const CLASS: &str = "lab.envoy-battery-audit.iPhone 6s";
const GATING: [&str; 4] = ["energy_level", "charge_used_mah", "cpu_pct", "memory_mb"];

/// `classname::name` of a case, as tests/junit_check.py names them.
fn case(name: &str) -> String {
    format!("{CLASS}::{name}")
}

/// Runs tests/junit_check.py on `xml`: schema-valid, and exactly these failed and
/// skipped cases among `tests`.
fn check(xml: &Path, tests: usize, failures: &[String], skipped: &[String]) {
    let out = run_check(xml, tests, failures, skipped);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}:\n{stdout}\n{}", xml.display(), String::from_utf8_lossy(&out.stderr));
    eprintln!("{stdout}");
}

fn run_check(xml: &Path, tests: usize, failures: &[String], skipped: &[String]) -> std::process::Output {
    let mut cmd = Command::new("python3");
    cmd.arg(common::root().join("tests/junit_check.py"))
        .arg(common::root().join("tests/fixtures/junit/junit-10.xsd"))
        .arg(xml)
        .args(["--tests", &tests.to_string()]);
    for f in failures {
        cmd.args(["--failure", f]);
    }
    for s in skipped {
        cmd.args(["--skipped", s]);
    }
    cmd.output().expect("python3 runs")
}

fn stdout_of(out: &std::process::Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test_needs::needs(junitparser)]
#[test]
fn report_and_compare_verdicts_as_junit_xml() {
    junitparser_available();
    let lab = TempLab::new();
    lab.cmd(&["run", "runbooks/envoy-battery-audit.toml"]).assert().success();
    // A week later: envoy-poll 30 % more CPU-hungry (as in cli_verdicts.rs), and
    // envoy-kqueue's app dying in every trial, so it has no valid value to judge.
    let text = std::fs::read_to_string(common::root().join("runbooks/envoy-battery-audit.toml")).unwrap();
    let later = text
        .replace("cpu_pct = 185", "cpu_pct = 240")
        .replace("cpu_pct = 4\n", "cpu_pct = 4\ncrash_probability = 1.0\n")
        .replace("repeats = 6\n", "repeats = 6\nretries = 0\n");
    assert_eq!(later.matches("crash_probability").count(), 1);
    let path = lab.dir.path().join("envoy-battery-audit.toml");
    std::fs::write(&path, later).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100)); // campaign ids carry the second
    // Exit 4: envoy-kqueue's trials failed every attempt.
    lab.cmd(&["run", path.to_str().unwrap()]).assert().code(4);
    let ids = lab.campaigns();
    let (before, after) = (&ids[1], &ids[0]);

    // The report of the later campaign: envoy-poll is worse than control on every gating
    // metric; envoy-kqueue has nothing to judge; control, the baseline, has no case.
    let report = lab.cmd(&["report", after, "--format", "junit"]).assert().success().get_output().clone();
    let xml = stdout_of(&report);
    let again = lab.cmd(&["report", after, "--format", "junit"]).assert().success().get_output().clone();
    assert_eq!(xml, stdout_of(&again), "the same store gives the same bytes");
    assert!(xml.starts_with(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"lab report envoy-battery-audit\""
    ));
    assert!(!xml.contains("name=\"control vs"), "{xml}");
    let report_failures: Vec<String> = GATING.iter().map(|m| case(&format!("envoy-poll vs control: {m}"))).collect();
    let report_skipped: Vec<String> = GATING.iter().map(|m| case(&format!("envoy-kqueue vs control: {m}"))).collect();
    assert!(
        xml.contains("<skipped message=\"not judged: no valid cpu_pct value for envoy-kqueue on iPhone 6s\"/>"),
        "{xml}"
    );
    let report_xml = lab.dir.path().join("report.xml");
    std::fs::write(&report_xml, &xml).unwrap();

    // The comparison keeps its exit code: 5, a gating metric got worse.
    let compare = lab.cmd(&["compare", before, after, "--format", "junit"]).assert().code(5).get_output().clone();
    let xml = stdout_of(&compare);
    assert!(xml.contains(&format!("<property name=\"before\" value=\"{before}\"/>")), "{xml}");
    let compare_failures: Vec<String> =
        ["energy_level", "charge_used_mah", "cpu_pct"].iter().map(|m| case(&format!("envoy-poll: {m}"))).collect();
    let compare_skipped: Vec<String> = GATING.iter().map(|m| case(&format!("envoy-kqueue: {m}"))).collect();
    assert!(
        xml.contains(
            "name=\"envoy-poll: cpu_pct\" time=\"0\">\n      <failure type=\"worse\" message=\"worse: cpu_pct "
        ),
        "{xml}"
    );
    let compare_xml = lab.dir.path().join("compare.xml");
    std::fs::write(&compare_xml, &xml).unwrap();

    check(&report_xml, 8, &report_failures, &report_skipped);
    // control (against itself a week earlier) and envoy-poll's memory pass.
    check(&compare_xml, 12, &compare_failures, &compare_skipped);

    // The check can fail: an element the schema does not know, a count that does not
    // match the cases, and an expected failure that passed are each named.
    let xml = std::fs::read_to_string(&report_xml).unwrap();
    let tampered =
        xml.replacen("skipped=\"4\"", "skipped=\"3\"", 1).replacen("<properties>", "<bogus/><properties>", 1);
    std::fs::write(&report_xml, tampered).unwrap();
    let mut wrong = report_failures.clone();
    wrong.push(case("envoy-poll vs control: battery_drop_pct"));
    let out = run_check(&report_xml, 8, &wrong, &report_skipped);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("PROBLEM: schema: "), "{text}");
    assert!(text.contains("skipped=3, its cases say 4"), "{text}");
    assert!(
        text.contains("missing ['lab.envoy-battery-audit.iPhone 6s::envoy-poll vs control: battery_drop_pct']"),
        "{text}"
    );
}
