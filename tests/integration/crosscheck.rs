//! Runs tests/crosscheck_scipy.py: every mean, sd, CI, Welch and Mann–Whitney figure of
//! a campaign's report.json recomputed with scipy from its results.csv, to 1e-9 relative.
//!
//! Campaigns: the Envoy audit (exact Mann–Whitney with ties, zero-spread arms) and the
//! quickstart with 30 repeats (normal approximation). Without python3 + scipy the tests
//! are ignored (`#[test_needs::needs(scipy)]`, decided when they are built), unless
//! LAB_REQUIRE_SCIPY=1 (set by .ci/run), where they run and fail.

use crate::common;
#[path = "../common/figures.rs"]
mod figures;

use std::process::Command;

use common::TempLab;

/// Fails a test that runs (see the module's note) without scipy.
pub(crate) fn scipy_available() {
    let ok = Command::new("python3").args(["-c", "import scipy, numpy"]).output().is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "needs scipy: python3 with scipy is not installed: the scipy cross-check cannot run \
(install it with `python3 -m pip install scipy`)"
    );
}

fn run_script(folder: &std::path::Path) -> std::process::Output {
    Command::new("python3")
        .arg(common::root().join("tests/crosscheck_scipy.py"))
        .arg(folder)
        .output()
        .expect("python3 runs")
}

fn crosscheck(lab: &TempLab) -> String {
    let id = lab.campaigns()[0].clone();
    let out = run_script(&lab.artifacts().join(&id));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "cross-check failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    eprintln!("{stdout}");
    stdout
}

#[test_needs::needs(scipy)]
#[test]
fn envoy_audit_matches_scipy() {
    scipy_available();
    let lab = TempLab::new();
    lab.cmd(&["run", "runbooks/envoy-battery-audit.toml"]).assert().success();
    let out = crosscheck(&lab);
    // envoy-poll and envoy-kqueue against control, 7 metrics each.
    assert!(out.contains("(14 comparisons)"), "{out}");

    // The check can fail: one p-value off by 1e-6 relative is caught and named.
    let folder = lab.artifacts().join(&lab.campaigns()[0]);
    let path = folder.join("report.json");
    let mut report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let rows = report["models"][0]["rows"].as_array_mut().unwrap();
    let row = rows.iter_mut().find(|r| r["variant"] == "envoy-poll" && r["metric"] == "cpu_pct").unwrap();
    let p = row["comparisons"][0]["welch"]["p"].as_f64().unwrap();
    row["comparisons"][0]["welch"]["p"] = serde_json::json!(p * (1.0 + 1e-6));
    std::fs::write(&path, serde_json::to_string(&report).unwrap()).unwrap();
    let tampered = run_script(&folder);
    let text = String::from_utf8_lossy(&tampered.stdout);
    assert!(!tampered.status.success(), "{text}");
    assert!(text.contains("iPhone 6s / envoy-poll / cpu_pct vs control: welch p"), "{text}");
}

#[test_needs::needs(scipy)]
#[test]
fn large_samples_match_scipy() {
    scipy_available();
    let lab = TempLab::new();
    let text = std::fs::read_to_string(common::root().join("runbooks/quickstart.toml")).unwrap();
    let path = lab.dir.path().join("quickstart-30.toml");
    std::fs::write(&path, text.replace("repeats = 4", "repeats = 30")).unwrap();
    lab.cmd(&["run", path.to_str().unwrap()]).assert().success();
    let id = lab.campaigns()[0].clone();
    let json = std::fs::read_to_string(lab.artifacts().join(&id).join("report.json")).unwrap();
    assert!(json.contains("\"method\": \"normal\""), "the normal approximation is exercised");
    crosscheck(&lab);
}

/// The interpreter with pandas for benches/report_pandas.py: `LAB_BENCH_PYTHON` (as the
/// bench), else python3. The test is ignored without pandas (`#[test_needs::needs(pandas)]`)
/// unless LAB_REQUIRE_PANDAS=1, where it runs and fails here.
fn pandas_python() -> String {
    let python = std::env::var("LAB_BENCH_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = Command::new(&python).args(["-c", "import pandas, scipy"]).output().is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "needs pandas: {python} has no pandas: the benchmark's pandas script cannot be checked \
(install it with `python3 -m pip install pandas scipy`)"
    );
    python
}

/// The benchmark's reference side (`cargo bench --bench report_scale` times it against
/// `lab report`) must compute what lab computes, or its times compare different work.
#[test_needs::needs(pandas)]
#[test]
fn the_benchmarks_pandas_script_computes_the_figures_of_report_json() {
    let python = pandas_python();
    let lab = TempLab::new();
    let text = std::fs::read_to_string(common::root().join("runbooks/quickstart.toml")).unwrap();
    let path = lab.dir.path().join("quickstart-30.toml");
    std::fs::write(&path, text.replace("repeats = 4", "repeats = 30")).unwrap();
    lab.cmd(&["run", path.to_str().unwrap()]).assert().success();
    let folder = lab.artifacts().join(&lab.campaigns()[0]);
    let out = Command::new(&python)
        .arg(common::root().join("benches/report_pandas.py"))
        .arg(folder.join("results.csv"))
        .output()
        .expect("the interpreter runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ours: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("report.json")).unwrap()).unwrap();
    let (diffs, checked, largest) = figures::compare_figures(&report, &ours, 1e-9);
    assert!(diffs.is_empty(), "{diffs:#?}");
    // 2 models × 2 variants × 7 metrics × 6 figures, and a comparison per busy metric.
    assert!(checked > 150, "{checked} figures compared");
    eprintln!("{checked} figures agree; largest relative difference {largest:.1e}");
}

/// lab's group-sequential crossing probabilities (recursive numerical integration) against
/// scipy's multivariate normal rectangle probabilities (Genz's algorithm), on O'Brien–Fleming
/// and Lan–DeMets bounds lab computed, equal and unequal looks, and bounds that spend more.
#[test_needs::needs(scipy)]
#[test]
fn group_sequential_crossing_probabilities_match_scipys_multivariate_normal() {
    use lab::stats::sequential::{crossing_probabilities, lan_demets_obf, obrien_fleming};
    scipy_available();
    let equal = |k: usize| (1..=k).map(|j| j as f64 / k as f64).collect::<Vec<f64>>();
    let mut cases: Vec<(Vec<f64>, Vec<f64>)> = (2..=5).map(|k| (obrien_fleming(k, 0.05), equal(k))).collect();
    cases.push((lan_demets_obf(&[0.3, 0.55, 1.0], 0.05), vec![0.3, 0.55, 1.0]));
    cases.push((lan_demets_obf(&[0.25, 0.5, 0.75, 1.0], 0.1), equal(4)));
    cases.push((vec![1.96, 1.96, 1.96], vec![0.2, 0.7, 1.0]));
    let input = serde_json::to_string(&cases).unwrap();
    let mut child = Command::new("python3")
        .arg(common::root().join("tests/group_sequential_check.py"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), input.as_bytes()).unwrap();
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let scipy: Vec<f64> = serde_json::from_slice(&out.stdout).unwrap();
    for ((bounds, t), want) in cases.iter().zip(&scipy) {
        let got: f64 = crossing_probabilities(bounds, t).iter().sum();
        assert!((got - want).abs() < 2e-4, "bounds {bounds:?} at {t:?}: lab {got}, scipy {want}");
    }
    // The designs spend what they say (0.05 on the first five, 0.1 on the sixth), and
    // three naive looks at 1.96 more than 0.08.
    assert!(scipy[..5].iter().all(|p| (p - 0.05).abs() < 2e-4), "{scipy:?}");
    assert!((scipy[5] - 0.1).abs() < 2e-4 && scipy[6] > 0.08, "{scipy:?}");
}
