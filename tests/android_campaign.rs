//! Whole campaigns on an Android phone through the real binary and Debian's real adb
//! client and server; only the phone is stood in for (examples/adb-phone).

mod common;

use common::TempLab;
use common::adb::*;

/// A lab with the phone `phone` on this machine's private adb server.
fn lab_for(adb: &Adb, phone: &Phone, tether: &str) -> TempLab {
    // Phones must be given an address they can reach: the endpoint is not started here
    // (the workload sends no requests), so a name that resolves nowhere is enough.
    TempLab::from_text(&format!(
        "[lab]\nname = \"android\"\nendpoint_bind = \"0.0.0.0:18765\"\nendpoint_url = \"http://lab-machine.invalid:18765\"\n\n\
         [[device]]\nname = \"pixel-1\"\nplatform = \"android\"\nmodel = \"Pixel 5\"\ntether = \"{tether}\"\n\
         [device.android]\nserial = \"{}\"\nadb_server = \"127.0.0.1:{}\"\n",
        phone.serial, adb.port
    ))
}

/// A runbook of two builds (APKs written next to it) and two configs, `repeats` each.
fn runbook(lab: &TempLab, repeats: u32, extra: &str) -> std::path::PathBuf {
    let dir = lab.dir.path();
    std::fs::write(dir.join("control.apk"), apk("com.example.control", None, 40_000)).unwrap();
    std::fs::write(dir.join("envoy.apk"), apk("com.example.envoy", None, 60_000)).unwrap();
    let path = dir.join("android.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"android\"\nduration = \"3s\"\nrepeats = {repeats}\ndevices = [\"pixel-1\"]\n\n\
             [builds.control]\nbaseline = true\n[builds.control.android]\napk = \"control.apk\"\npackage = \"com.example.control\"\nactivity = \".MainActivity\"\n\n\
             [builds.envoy]\n[builds.envoy.android]\napk = \"envoy.apk\"\npackage = \"com.example.envoy\"\nactivity = \".MainActivity\"\n\n\
             [configs.default]\n[configs.dns-1m]\n[configs.dns-1m.android]\nextras = {{ dns_refresh_s = 60, trace = false }}\n\n\
             [preconditions]\nbrightness = [40, 60]\nbluetooth = true\nwifi = true\nuntethered = true\napp_foreground = true\n{extra}"
        ),
    )
    .unwrap();
    path
}

#[test]
fn a_campaign_installs_once_launches_with_the_extras_and_measures_the_phone() {
    let Some((adb, phone, dir)) = setup(&["--auth", "accept"]) else { return };
    let lab = lab_for(&adb, &phone, "software");
    let rb = runbook(&lab, 2, "");
    let out = lab.cmd(&["run", "--verbose", rb.to_str().unwrap()]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));

    assert_eq!(lab.sql::<i64>("SELECT COUNT(*) FROM attempts WHERE status = 'valid'"), [8]);
    // Each build installed once; every later trial found the same hash on the phone.
    let installs: Vec<&str> = stdout.lines().filter(|l| l.contains("] installed ")).collect();
    assert_eq!(installs.len(), 2, "{installs:?}");
    // The phone's own accounting became metrics.
    let metrics: Vec<String> = lab.sql("SELECT DISTINCT metric FROM measurements ORDER BY metric");
    for m in ["cpu_pct", "memory_mb", "battery_drop_pct"] {
        assert!(metrics.iter().any(|x| x == m), "{m} missing from {metrics:?}");
    }
    // Preconditions were set, and read back before and after every trial.
    for col in ["state_before", "state_after"] {
        for s in lab.sql::<String>(&format!("SELECT {col} FROM attempts")) {
            let v: serde_json::Value = serde_json::from_str(&s).unwrap();
            let b = v["brightness_pct"]["value"].as_f64().unwrap_or(-1.0);
            assert!((40.0..=60.0).contains(&b), "{col}: brightness {b}");
            assert_eq!(v["bluetooth_on"]["value"], true, "{col}: {s}");
            assert_eq!(v["wifi_on"]["value"], true, "{col}: {s}");
        }
    }
    // Every launch carried the trial's values; the dns-1m config's carried its typed extras.
    let launches = state(&root(&dir))["launches"].as_array().unwrap().clone();
    assert_eq!(launches.len(), 8);
    assert!(launches.iter().all(|l| l["extras"]["lab_trial"]["type"] == "string"), "{launches:?}");
    let dns: Vec<_> = launches.iter().filter(|l| !l["extras"]["dns_refresh_s"].is_null()).collect();
    assert_eq!(dns.len(), 4);
    assert!(dns.iter().all(|l| l["extras"]["dns_refresh_s"] == serde_json::json!({"type": "int", "value": 60})));
    assert!(dns.iter().all(|l| l["extras"]["trace"] == serde_json::json!({"type": "bool", "value": false})));
    let envoy = launches.iter().filter(|l| l["component"] == "com.example.envoy/.MainActivity").count();
    assert_eq!(envoy, 4);
}

#[test]
fn an_unauthorized_phone_stops_the_run_before_any_trial() {
    let Some((adb, phone, _dir)) = setup(&["--auth", "never"]) else { return };
    let lab = lab_for(&adb, &phone, "software");
    let rb = runbook(&lab, 1, "");
    let out = lab.cmd(&["run", rb.to_str().unwrap()]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("unauthorized") && stderr.contains("Allow USB debugging"), "{stderr}");
    assert!(lab.campaigns().is_empty(), "nothing was recorded");
}
