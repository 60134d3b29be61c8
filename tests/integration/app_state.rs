//! State the app reports to the endpoint, and what the powerlog says about the soak,
//! through the real binary: a host device whose app is a script that POSTs its reports,
//! and a simulated iPhone whose powerlog shows the screen brighter than allowed.

use crate::common;

use std::time::Duration;

use common::{TempLab, executable};

/// The app: POSTs `launch` and `end` reports to `$LAB_ENDPOINT_URL/state` (the end one
/// says Bluetooth is `bluetooth_end`), then idles until the lab stops it.
fn reporting_app(lab: &TempLab, bluetooth_end: bool) -> String {
    let path = lab.dir.path().join(format!("app-bt-{bluetooth_end}.py"));
    let bt = if bluetooth_end { "True" } else { "False" };
    executable(
        &path,
        &format!(
            r#"#!/usr/bin/env python3
import json, os, time, urllib.request
url = os.environ["LAB_ENDPOINT_URL"] + "/state"
def report(body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={{"Content-Type": "application/json"}})
    assert urllib.request.urlopen(req).status == 204
report({{"v": 1, "at": "launch", "brightness_pct": 50, "low_power": False, "bluetooth_on": False,
        "thermal_state": "nominal"}})
report({{"v": 1, "at": "end", "brightness_pct": 50, "low_power": False, "bluetooth_on": {bt},
        "thermal_state": "fair"}})
time.sleep(3600)
"#
        ),
    );
    path.display().to_string()
}

fn run(lab: &TempLab, runbook: &str) -> i32 {
    let path = lab.dir.path().join("runbook.toml");
    std::fs::write(&path, runbook).unwrap();
    let out = lab.cmd(&["run", path.to_str().unwrap()]).timeout(Duration::from_secs(120)).output().unwrap();
    assert!(out.status.code().is_some(), "lab run did not finish: {}", String::from_utf8_lossy(&out.stderr));
    out.status.code().unwrap()
}

fn report_json(lab: &TempLab) -> serde_json::Value {
    let id = &lab.campaigns()[0];
    serde_json::from_str(&std::fs::read_to_string(lab.artifacts().join(id).join("report.json")).unwrap()).unwrap()
}

fn report_md(lab: &TempLab) -> String {
    let id = &lab.campaigns()[0];
    std::fs::read_to_string(lab.artifacts().join(id).join("report.md")).unwrap()
}

/// (status, reasons JSON, state_before, state_after) of `variant`'s attempts.
fn attempts(lab: &TempLab, variant: &str) -> Vec<(String, Vec<String>, serde_json::Value, serde_json::Value)> {
    lab.sql::<String>(&format!(
        "SELECT json_array(a.status, a.reasons, a.state_before, a.state_after) FROM attempts a
         JOIN trials t ON t.campaign = a.campaign AND t.idx = a.trial_idx
         WHERE t.variant = '{variant}' ORDER BY a.trial_idx, a.attempt"
    ))
    .into_iter()
    .map(|row| {
        let v: serde_json::Value = serde_json::from_str(&row).unwrap();
        let json = |i: usize| serde_json::from_str::<serde_json::Value>(v[i].as_str().unwrap()).unwrap();
        (
            v[0].as_str().unwrap().to_string(),
            json(1).as_array().unwrap().iter().map(|r| r.as_str().unwrap().to_string()).collect(),
            json(2),
            json(3),
        )
    })
    .collect()
}

#[test]
fn what_the_app_reports_fills_the_state_is_checked_and_shown_as_the_apps() {
    let lab = TempLab::new();
    let honest = reporting_app(&lab, false);
    let drifted = reporting_app(&lab, true);
    let runbook = format!(
        r#"
name = "app-state"
duration = "2s"
repeats = 1
retries = 0
devices = ["this-host"]
[builds.honest]
baseline = true
[builds.honest.host]
command = ["{honest}"]
[builds.drifted.host]
command = ["{drifted}"]
[preconditions]
bluetooth = false
"#
    );
    assert_eq!(run(&lab, &runbook), 4, "the drifted trial fails its only attempt");

    let app = |v: serde_json::Value| serde_json::json!({"state": "known", "value": v, "from": "app"});
    let honest = attempts(&lab, "honest");
    assert_eq!(honest.len(), 1);
    let (status, reasons, before, after) = &honest[0];
    assert_eq!((status.as_str(), reasons.len()), ("valid", 0), "{reasons:?}");
    assert_eq!(before["bluetooth_on"], app(false.into()), "the host reads no Bluetooth: the app's word fills it");
    assert_eq!(before["low_power"], app(false.into()));
    assert_eq!(before["thermal_status"], app(0.into()), "nominal");
    assert_eq!(after["thermal_status"], app(1.into()), "fair, from the end report");

    let drifted = attempts(&lab, "drifted");
    let (status, reasons, _, after) = &drifted[0];
    assert_eq!(status, "invalid");
    assert_eq!(reasons, &["bluetooth on after the soak, expected off (reported by the app)"]);
    assert_eq!(after["bluetooth_on"], app(true.into()));

    // The reports are not the workload's traffic: no request was counted for it.
    let counted: Vec<f64> = lab.sql("SELECT value FROM measurements WHERE metric = 'endpoint_requests'");
    assert!(counted.is_empty(), "no workload, no request count: {counted:?}");

    let report = report_json(&lab);
    let rows = report["state"].as_array().unwrap();
    let row = |when: &str, setting: &str| {
        rows.iter()
            .filter(|r| r["when"] == when && r["setting"] == setting)
            .map(|r| format!("{} {} ×{}", r["values"].as_str().unwrap(), r["source"].as_str().unwrap(), r["attempts"]))
            .collect::<Vec<_>>()
    };
    assert_eq!(row("after", "bluetooth"), ["on, off app ×2"]);
    assert_eq!(row("before", "low_power"), ["off app ×2"]);
    let md = report_md(&lab);
    assert!(md.contains("| this-host | after | `bluetooth` | on, off | app | 2 (1 valid) |"), "{md}");
}

/// The default lab's `sim-iphone-1` alone, its screen reset to full brightness during
/// every soak when `brightness_reset` is 1.
fn iphone_lab(brightness_reset: f64) -> TempLab {
    let text = std::fs::read_to_string(common::root().join("lab.toml")).unwrap();
    let text = text.replacen(
        "emulates = \"ios\"\nseed = 101\n",
        &format!("emulates = \"ios\"\nseed = 101\n[device.sim.faults]\nbrightness_reset = {brightness_reset}\n"),
        1,
    );
    assert!(text.contains("brightness_reset"), "the default lab still has sim-iphone-1");
    TempLab::from_text(&text)
}

const IPHONE_RUNBOOK: &str = r#"
name = "bright"
duration = "10m"
repeats = 1
retries = 0
devices = ["sim-iphone-1"]
[builds.idle]
baseline = true
[builds.idle.sim]
cpu_pct = 5
wakeups_per_s = 5
memory_mb = 20
[preconditions]
brightness = [40, 60]
untethered = true
"#;

#[test]
fn a_powerlog_that_shows_the_screen_brighter_than_allowed_makes_the_soak_invalid() {
    let bright = iphone_lab(1.0);
    assert_eq!(run(&bright, IPHONE_RUNBOOK), 4);
    let reasons: Vec<String> = bright.sql("SELECT reasons FROM attempts");
    let reasons: Vec<String> = serde_json::from_str(&reasons[0]).unwrap();
    assert!(
        reasons.contains(&"brightness 100 % during the soak, outside [40, 60] % (from the powerlog)".to_string()),
        "{reasons:?}"
    );
    let soak: Vec<String> = bright.sql("SELECT state_soak FROM attempts");
    let soak: serde_json::Value = serde_json::from_str(&soak[0]).unwrap();
    assert_eq!(soak["brightness_pct"], serde_json::json!({"state": "known", "value": 100.0, "from": "powerlog"}));
    assert!(report_md(&bright).contains("| sim-iphone-1 | during | `brightness` | 100 % | powerlog | 1 (0 valid) |"));

    let calm = iphone_lab(0.0);
    assert_eq!(run(&calm, IPHONE_RUNBOOK), 0, "within range all soak long");
    let soak: Vec<String> = calm.sql("SELECT state_soak FROM attempts WHERE status = 'valid'");
    let soak: serde_json::Value = serde_json::from_str(&soak[0]).unwrap();
    assert_eq!(soak["brightness_pct"]["from"], "powerlog");
    let pct = soak["brightness_pct"]["value"].as_f64().unwrap();
    assert!((40.0..=60.0).contains(&pct), "{pct}");
    assert_eq!(soak["bluetooth_on"], serde_json::json!({"state": "known", "value": true, "from": "powerlog"}));
}
