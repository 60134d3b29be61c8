//! `lab import` through the real binary: JSON and tables for real captures, errors with
//! file and line (exit 2), and attaching hand-run files as trials that `lab report` shows.

use crate::common;

use common::{TempLab, root};
use serde_json::Value;

const CHECKIN: &str = "tests/fixtures/import/checkin_v36_synthetic.txt";
const CHECKIN_REAL: &str = "tests/fixtures/devices/android/batterystats_checkin_v36_perfetto.txt";
const BATTERY: &str = "tests/fixtures/devices/android/battery_adbts_emulator.txt";
const SMART_BATTERY: &str = "tests/fixtures/devices/ios/applesmartbattery_iphonestatus.plist";
const IOPM: &str = "tests/fixtures/devices/ios/ioregistry_iopmpowersource_goios.plist";
const APP: &str = "io.envoyproxy.envoymobile.example";

fn stdout(lab: &TempLab, args: &[&str]) -> String {
    let out = lab.cmd(args).assert().success().get_output().stdout.clone();
    String::from_utf8(out).unwrap()
}

fn json(lab: &TempLab, args: &[&str]) -> Value {
    serde_json::from_str(&stdout(lab, args)).unwrap()
}

fn metric<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["metrics"].as_array().unwrap().iter().find(|m| m["metric"] == name).unwrap_or_else(|| panic!("no {name}"))
}

#[test]
fn batterystats_json_has_per_package_figures_and_the_discharge_summary() {
    let lab = TempLab::new();
    let v = json(&lab, &["import", "android-batterystats", CHECKIN, "--json"]);
    assert_eq!(v["kind"], "android-batterystats");
    let apps = v["apps"].as_array().unwrap();
    assert_eq!(apps.len(), 3);
    let envoy = &apps[0];
    assert_eq!(envoy["packages"][0], APP);
    assert_eq!(envoy["estimated_mah"], 143.6);
    assert_eq!((envoy["cpu_user_ms"].as_i64(), envoy["cpu_system_ms"].as_i64()), (Some(402133), Some(61210)));
    assert_eq!(envoy["network"]["wifi_rx_bytes"], 17920331);
    assert_eq!(envoy["network"]["wifi_tx_packets"], 9022);
    assert_eq!(envoy["wakelock_partial_ms"], 301220);
    let d = &v["parsed"]["discharge"];
    assert_eq!(
        (d["low_pct"].as_i64(), d["high_pct"].as_i64(), d["total_mah"].as_f64()),
        (Some(11), Some(12), Some(521.0))
    );
    assert_eq!(v["parsed"]["power_summary"]["computed_mah"], 431.7);
    assert_eq!(metric(&v, "charge_used_mah")["source"], "batterystats dc coulomb counter");
    insta::assert_snapshot!("batterystats_json", stdout(&lab, &["import", "android-batterystats", CHECKIN, "--json"]));
}

#[test]
fn batterystats_one_package() {
    let lab = TempLab::new();
    let v = json(&lab, &["import", "android-batterystats", CHECKIN, "--package", APP, "--json"]);
    assert_eq!(v["apps"].as_array().unwrap().len(), 1);
    let est = metric(&v, "app_estimated_mah");
    assert_eq!((est["value"].as_f64(), est["source"].as_str()), (Some(143.6), Some("batterystats pwi estimate")));
    assert_eq!(metric(&v, "cpu_time_ms")["value"], 463343.0);
    assert_eq!(metric(&v, "net_rx_bytes")["value"], 17920331.0);
    assert_eq!(metric(&v, "net_tx_packets")["value"], 9022.0);
    insta::assert_snapshot!(
        "batterystats_table",
        stdout(&lab, &["import", "android-batterystats", CHECKIN, "--package", APP])
    );
}

#[test]
fn batterystats_real_capture_history() {
    let lab = TempLab::new();
    let v = json(&lab, &["import", "android-batterystats", CHECKIN_REAL, "--json"]);
    let h = &v["parsed"]["history"];
    assert_eq!(
        (h["records"].as_u64(), h["wakelock_slices"].as_u64(), h["screen_changes"].as_u64()),
        (Some(12), Some(5), Some(1))
    );
    assert_eq!(v["parsed"]["checkin_version"]["checkin"], 36);
    insta::assert_snapshot!("batterystats_real_table", stdout(&lab, &["import", "android-batterystats", CHECKIN_REAL]));
}

#[test]
fn ios_battery_json_for_both_registry_shapes() {
    let lab = TempLab::new();
    let v = json(&lab, &["import", "ios-battery", IOPM, "--json"]);
    let p = &v["parsed"];
    assert_eq!(
        (p["status"].as_str(), p["level_pct"].as_f64(), p["temperature_c"].as_f64()),
        (Some("Success"), Some(85.0), Some(30.0))
    );
    assert_eq!(
        (p["voltage_mv"].as_i64(), p["cycle_count"].as_i64(), p["is_charging"].as_bool()),
        (Some(4269), Some(321), Some(true))
    );
    let v = json(&lab, &["import", "ios-battery", SMART_BATTERY, "--json"]);
    assert_eq!(v["parsed"]["design_capacity_mah"], 3544);
    assert_eq!(v["parsed"]["cell_id"], "TESTCELLIDVALUE1");
    let mut both = stdout(&lab, &["import", "ios-battery", IOPM, "--json"]);
    both.push_str(&stdout(&lab, &["import", "ios-battery", SMART_BATTERY, "--json"]));
    insta::assert_snapshot!("ios_battery_json", both);
    insta::assert_snapshot!("ios_battery_table", stdout(&lab, &["import", "ios-battery", IOPM]));
}

#[test]
fn bad_files_exit_2_naming_file_and_line() {
    let lab = TempLab::new();
    let cases: &[&[&str]] = &[
        &["import", "android-batterystats", BATTERY],
        &["import", "android-battery", CHECKIN],
        &["import", "ios-battery", BATTERY],
        &["import", "android-batterystats", CHECKIN, "--package", "com.nope"],
        &["import", "android-batterystats", "tests/fixtures/import/missing.txt"],
        &["import", "android-batterystats", CHECKIN, CHECKIN],
    ];
    let mut transcript = String::new();
    for args in cases {
        let out = lab.cmd(args).assert().code(2).get_output().clone();
        assert!(out.stdout.is_empty());
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.starts_with("error: "), "{err}");
        transcript.push_str(&format!("$ lab {}\n{err}\n", args.join(" ")));
    }
    // A truncated capture: the error names the line where it stops making sense.
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.txt");
    let text = std::fs::read_to_string(root().join(CHECKIN)).unwrap();
    let upto = text.find("9,10250,l,nt,").unwrap() + "9,10250,l,nt,0,0".len();
    std::fs::write(&cut, &text[..upto]).unwrap();
    let out = lab.cmd(&["import", "android-batterystats", cut.to_str().unwrap()]).assert().code(2).get_output().clone();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("cut.txt: line 25: `nt` row has 2 field(s)"), "{err}");
    transcript.push_str(&format!(
        "$ lab import android-batterystats <truncated copy>\n{}\n",
        err.replace(&dir.path().display().to_string(), "<tmp>")
    ));
    insta::assert_snapshot!("bad_files", transcript);
}

/// A `dumpsys battery` pair: before, and after a trial that used 3 % and 1.5 mAh… of an emulator.
fn battery_pair(dir: &std::path::Path, drop: (u32, u32)) -> (String, String) {
    let before = std::fs::read_to_string(root().join(BATTERY)).unwrap();
    let after = before
        .replace("level: 100", &format!("level: {}", 100 - drop.0))
        .replace("Charge counter: 10000", &format!("Charge counter: {}", 10000 - drop.1));
    let (b, a) = (dir.join(format!("before-{}.txt", drop.0)), dir.join(format!("after-{}.txt", drop.0)));
    std::fs::write(&b, before).unwrap();
    std::fs::write(&a, after).unwrap();
    (b.display().to_string(), a.display().to_string())
}

#[test]
fn attached_trials_show_in_the_report() {
    let lab = TempLab::new();
    let dir = tempfile::tempdir().unwrap();
    let runs = [("control", (2, 1500)), ("control", (3, 1700)), ("envoy", (9, 5200)), ("envoy", (8, 4900))];
    for (variant, drop) in runs {
        let (b, a) = battery_pair(dir.path(), drop);
        let v = json(
            &lab,
            &[
                "import",
                "android-battery",
                &b,
                &a,
                "--variant",
                variant,
                "--device",
                "pixel-7",
                "--model",
                "Pixel 7",
                "--campaign",
                "hand-1",
                "--json",
            ],
        );
        assert_eq!(v["attached"]["campaign"], "hand-1");
        assert_eq!(metric(&v, "charge_used_mah")["value"], drop.1 as f64 / 1000.0);
    }
    // The trials, their keys, and the copied files.
    let keys: Vec<String> = lab.sql("SELECT key FROM trials WHERE campaign = 'hand-1' ORDER BY idx");
    assert_eq!(
        keys,
        ["0000-pixel-7-control-r0", "0001-pixel-7-control-r1", "0002-pixel-7-envoy-r0", "0003-pixel-7-envoy-r1"]
    );
    let attempt = lab.artifacts().join("hand-1/0002-pixel-7-envoy-r0.attempt-0");
    for f in ["before-before-9.txt", "after-after-9.txt", "import.json"] {
        assert!(attempt.join(f).is_file(), "{f} in {}", attempt.display());
    }
    let manifest: Value = serde_json::from_str(&std::fs::read_to_string(attempt.join("import.json")).unwrap()).unwrap();
    assert_eq!(manifest["kind"], "android-battery");
    assert_eq!(manifest["parsed"]["after"]["level"], 91);

    // `lab report` shows them, with the sources.
    let r = json(&lab, &["report", "hand-1", "--format", "json"]);
    let variants: Vec<(&str, u64)> = r["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["name"].as_str().unwrap(), v["valid_trials"].as_u64().unwrap()))
        .collect();
    assert_eq!(variants, [("control", 2), ("envoy", 2)]);
    let model = &r["models"][0];
    assert_eq!(model["model"], "Pixel 7");
    let row = model["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["variant"] == "envoy" && x["metric"] == "charge_used_mah")
        .unwrap();
    assert_eq!(row["n"], 2);
    assert_eq!(row["sources"][0], "dumpsys battery charge counter");
    assert!((row["stats"]["mean"].as_f64().unwrap() - 5.05).abs() < 1e-9, "{row}");
    let table = stdout(&lab, &["report", "hand-1"]);
    assert!(table.contains("envoy") && table.contains("charge_used_mah"), "{table}");

    // Without --campaign a new import campaign is made; bad names are refused.
    let (b, a) = battery_pair(dir.path(), (1, 100));
    let v = json(&lab, &["import", "android-battery", &b, &a, "--variant", "x", "--device", "d", "--json"]);
    assert!(v["attached"]["campaign"].as_str().unwrap().starts_with("import-"));
    assert_eq!(v["attached"]["created_campaign"], true);
    let out = lab
        .cmd(&["import", "android-battery", &b, "--variant", "a/b", "--device", "d"])
        .assert()
        .code(2)
        .get_output()
        .clone();
    assert!(String::from_utf8(out.stderr).unwrap().contains("`a/b` is not a valid variant name"));
}

#[test]
fn attach_to_a_lab_run_campaign() {
    let lab = TempLab::new();
    lab.cmd(&["run", "runbooks/quickstart.toml"]).assert().success();
    let id = lab.campaigns().remove(0);
    let before: Value = json(&lab, &["report", &id, "--format", "json"]);
    let (busy_before, planned_before) = (
        before["variants"].as_array().unwrap().iter().find(|v| v["name"] == "busy").unwrap()["valid_trials"]
            .as_u64()
            .unwrap(),
        before["campaign"]["planned_trials"].as_u64().unwrap(),
    );
    let v = json(
        &lab,
        &[
            "import",
            "android-batterystats",
            CHECKIN,
            "--package",
            APP,
            "--variant",
            "busy",
            "--device",
            "sim-pixel-1",
            "--campaign",
            &id,
            "--json",
        ],
    );
    assert_eq!(v["attached"]["created_campaign"], false);
    let after: Value = json(&lab, &["report", &id, "--format", "json"]);
    let busy = after["variants"].as_array().unwrap().iter().find(|v| v["name"] == "busy").unwrap();
    assert_eq!(busy["valid_trials"].as_u64().unwrap(), busy_before + 1);
    assert_eq!(after["campaign"]["planned_trials"].as_u64().unwrap(), planned_before + 1);
    // The device's model comes from the lab; the estimate is its own series.
    let pixel = after["models"].as_array().unwrap().iter().find(|m| m["model"] == "Pixel 5").unwrap();
    let rows = pixel["rows"].as_array().unwrap();
    let est = rows.iter().find(|r| r["metric"] == "app_estimated_mah" && r["variant"] == "busy").unwrap();
    assert_eq!((est["n"].as_u64(), est["stats"]["mean"].as_f64()), (Some(1), Some(143.6)));
    let idle = rows.iter().find(|r| r["metric"] == "app_estimated_mah" && r["variant"] == "idle").unwrap();
    assert_eq!(idle["n"], 0, "the simulated trials have no estimate");
    assert_eq!(est["sources"][0], "batterystats pwi estimate");
}
