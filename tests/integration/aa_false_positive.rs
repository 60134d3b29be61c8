//! A/A check: the baseline against an identical copy (runbooks/aa-identical.toml) with
//! 20 seeds. Every `worse`/`better` verdict is a false positive; at most 5 % of the
//! seed × model × metric cases may have one. The rates are printed
//! (`cargo test --test integration aa_false_positive:: -- --nocapture`).

use crate::common;

use common::TempLab;
use serde_json::Value;

const SEEDS: u64 = 20;

#[test]
fn identical_builds_rarely_get_a_verdict() {
    let lab = TempLab::new();
    let text = std::fs::read_to_string(common::root().join("runbooks/aa-identical.toml")).unwrap();
    assert!(text.contains("\nseed = 1\n"));
    let (mut gating, mut gating_fp, mut all, mut all_fp, mut raw_significant) = (0, 0, 0, 0, 0);
    // Gating comparisons shown the same (equivalence within ±5 %); the rest inconclusive.
    let mut gating_same = 0;
    for seed in 1..=SEEDS {
        let path = lab.dir.path().join(format!("aa-{seed}.toml"));
        std::fs::write(&path, text.replace("\nseed = 1\n", &format!("\nseed = {seed}\n"))).unwrap();
        lab.cmd(&["run", path.to_str().unwrap()]).assert().success();
        let ids: Vec<String> = lab.sql(&format!("SELECT id FROM campaigns WHERE seed = {seed}"));
        let id = ids.into_iter().next().expect("the campaign of this seed");
        let report: Value =
            serde_json::from_str(&std::fs::read_to_string(lab.artifacts().join(&id).join("report.json")).unwrap())
                .unwrap();
        assert_eq!(report["campaign"]["seed"], seed);
        for model in report["models"].as_array().unwrap() {
            // The power monitor's metrics come from one of each model's two phones (only
            // sim-pixel-1 is on a monitor): 3 trials per arm, which decide nothing.
            let on_every_phone =
                |r: &&Value| !r["metric"].as_str().is_some_and(|m| m.contains("monitor_") || m.contains("per_request"));
            for row in
                model["rows"].as_array().unwrap().iter().filter(|r| r["variant"] == "a-copy").filter(on_every_phone)
            {
                let c = &row["comparisons"][0];
                assert_eq!(c["against"], "a");
                let fp = c["verdict"] == "worse" || c["verdict"] == "better";
                assert_ne!(c["verdict"], "too_few_trials", "6 trials per arm decide");
                all += 1;
                all_fp += usize::from(fp);
                if row["gating"] == true {
                    gating += 1;
                    gating_fp += usize::from(fp);
                    gating_same += usize::from(c["verdict"] == "same");
                }
                if c["welch"]["p"].as_f64().is_some_and(|p| p <= 0.05) {
                    raw_significant += 1;
                }
            }
        }
    }
    let rate = |n: usize, d: usize| n as f64 / d as f64;
    eprintln!(
        "A/A over {SEEDS} seeds: gating metrics {gating_fp}/{gating} = {:.1} % worse/better; all metrics {all_fp}/{all} = \
{:.1} %; unadjusted Welch p ≤ 0.05 in {raw_significant}/{all} = {:.1} % (what a test without threshold and \
correction would flag); gating shown the same {gating_same}/{gating} = {:.1} %",
        100.0 * rate(gating_fp, gating),
        100.0 * rate(all_fp, all),
        100.0 * rate(raw_significant, all),
        100.0 * rate(gating_same, gating)
    );
    // 20 seeds × 2 models × 4 gating metrics, and × 7 metrics in all.
    assert_eq!((gating, all), (160, 280));
    assert!(rate(gating_fp, gating) <= 0.05, "gating false-positive rate {gating_fp}/{gating}");
    assert!(rate(all_fp, all) <= 0.05, "false-positive rate {all_fp}/{all}");
}
