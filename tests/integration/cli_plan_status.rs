//! `lab plan` and `lab status` through the real binary.

use crate::common;

use common::TempLab;

#[test]
fn plan_shows_variants_devices_order_and_times() {
    let lab = TempLab::new();
    let out = lab.cmd(&["plan", "runbooks/envoy-battery-audit.toml"]).assert().success().get_output().stdout.clone();
    let text = String::from_utf8(out).unwrap();
    insta::assert_snapshot!("plan_envoy", text);
    assert!(!lab.store().exists(), "planning writes nothing");
}

#[test]
fn plan_json_balances_blocks_and_spreads_repeats_over_devices() {
    let lab = TempLab::new();
    let out = lab
        .cmd(&["plan", "runbooks/envoy-battery-audit.toml", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let plan: lab::plan::Plan = serde_json::from_slice(&out).unwrap();
    assert_eq!(plan.variants.len(), 3);
    // 6 repeats per variant on the iPhone model, spread over its two devices: 3 blocks each.
    assert_eq!(
        plan.devices.iter().map(|d| (d.name.as_str(), d.trials)).collect::<Vec<_>>(),
        [("sim-iphone-1", 9), ("sim-iphone-2", 9)]
    );
    for d in &plan.devices {
        for b in 0..3 {
            let mut vs: Vec<&str> =
                plan.trials.iter().filter(|t| t.device == d.name && t.block == b).map(|t| t.variant.as_str()).collect();
            vs.sort();
            assert_eq!(
                vs,
                ["control", "envoy-kqueue", "envoy-poll"],
                "block {b} on {} runs every variant once",
                d.name
            );
        }
    }
    let mut repeats: Vec<(String, u32)> = plan.trials.iter().map(|t| (t.variant.clone(), t.repeat)).collect();
    repeats.sort();
    repeats.dedup();
    assert_eq!(repeats.len(), 18, "each variant's repeats 0..6 appear exactly once");
    assert_eq!(plan.makespan_s(), 9.0 * (3600.0 + 300.0));
    assert_eq!(plan.total_device_time_s(), 18.0 * (3600.0 + 300.0));
}

#[test]
fn status_on_a_fresh_lab_lists_the_devices_and_no_campaigns() {
    let lab = TempLab::new();
    let out = lab.cmd(&["status"]).assert().success().get_output().stdout.clone();
    let text = String::from_utf8(out).unwrap();
    let text = text.replace(&lab.dir.path().display().to_string(), "<tmp>");
    insta::assert_snapshot!("status_fresh", text);
    assert!(!lab.store().exists(), "status creates no store");
}
