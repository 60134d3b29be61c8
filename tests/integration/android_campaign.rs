//! Whole campaigns on an Android phone through the real binary and Debian's real adb
//! client and server; only the phone is stood in for (standins/adb-phone).

use crate::common;

use common::TempLab;
use common::adb::*;
use common::uhubctl::{Hubs, usb2_hub};
use serde_json::{Value, json};

/// A lab with the phone `phone` on this machine's private adb server.
fn lab_for(adb: &Adb, phone: &Phone, tether: &str) -> TempLab {
    android_lab("android", adb, phone, tether, "")
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

#[test_needs::needs(adb)]
#[test]
fn a_campaign_installs_once_launches_with_the_extras_and_measures_the_phone() {
    let (adb, phone, dir) = setup(&["--auth", "accept"]);
    let lab = lab_for(&adb, &phone, r#""software""#);
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

#[test_needs::needs(adb)]
#[test]
fn an_unauthorized_phone_stops_the_run_before_any_trial() {
    let (adb, phone, _dir) = setup(&["--auth", "never"]);
    let lab = lab_for(&adb, &phone, r#""software""#);
    let rb = runbook(&lab, 1, "");
    let out = lab.cmd(&["run", rb.to_str().unwrap()]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("unauthorized") && stderr.contains("Allow USB debugging"), "{stderr}");
    assert!(lab.campaigns().is_empty(), "nothing was recorded");
}

/// `lab run --verbose RUNBOOK` started in the background.
fn spawn_run(lab: &TempLab, rb: &std::path::Path) -> std::process::Child {
    spawn_run_with(lab, rb, &[])
}

/// `spawn_run` with `env` set (the stand-in uhubctl's `Hubs::env`).
fn spawn_run_with(lab: &TempLab, rb: &std::path::Path, env: &[(&str, String)]) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_lab"))
        .envs(env.iter().map(|(k, v)| (*k, v)))
        .current_dir(common::root())
        .arg("--lab")
        .arg(&lab.lab)
        .args(["run", "--verbose"])
        .arg(rb)
        .env_remove("LAB_CONFIG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits (up to 2 minutes) until the stand-in process has exited.
fn wait_exit(phone: &mut Phone) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while phone.child.try_wait().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "the phone never dropped off");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test_needs::needs(adb)]
#[test]
fn a_phone_lost_mid_collect_is_waited_for_and_the_step_redone() {
    let (adb, mut phone, dir) = setup(&["--auth", "accept"]);
    let lab = lab_for(&adb, &phone, r#""software""#);
    let rb = runbook(&lab, 1, "[timeouts]\nreconnect = \"2m\"\n");
    // The first batterystats checkin (in collect) kills the phone mid-command.
    std::fs::write(root(&dir).join("crash-on"), "batterystats --checkin").unwrap();
    let run = spawn_run(&lab, &rb);
    wait_exit(&mut phone);
    // Back a moment later, on the same port and folder: the same phone (its key allowed).
    std::thread::sleep(std::time::Duration::from_secs(1));
    let _back = Phone::start(&root(&dir), phone.port, &["--auth", "accept"]);
    let out = run.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("DISCONNECTED during collect"), "{stdout}");
    assert!(stdout.contains("back after"), "{stdout}");
    // Nothing was spoiled: one valid attempt per trial, none lost to the drop.
    let reasons: Vec<String> = lab.sql("SELECT reasons FROM attempts WHERE status = 'invalid'");
    assert_eq!(lab.sql::<i64>("SELECT COUNT(*) FROM attempts"), [4], "{reasons:?}\n{stdout}");
    assert_eq!(lab.sql::<i64>("SELECT COUNT(*) FROM attempts WHERE status = 'valid'"), [4]);
}

#[test_needs::needs(adb)]
#[test]
fn a_phone_that_never_comes_back_goes_offline() {
    let (adb, mut phone, dir) = setup(&["--auth", "accept"]);
    let lab = lab_for(&adb, &phone, r#""software""#);
    let rb = runbook(&lab, 1, "[timeouts]\nreconnect = \"5s\"\n");
    std::fs::write(root(&dir).join("crash-on"), "batterystats --checkin").unwrap();
    let run = spawn_run(&lab, &rb);
    wait_exit(&mut phone);
    let out = run.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert!(stdout.contains("[pixel-1] OFFLINE"), "{stdout}");
    let status: Vec<String> = lab.sql("SELECT state FROM device_status WHERE device = 'pixel-1'");
    assert_eq!(status, ["offline"]);
    // Resumable: the trial that was lost is still to run.
    assert!(stdout.contains("lab run --resume"), "{stdout}");
}

#[test_needs::needs(adb)]
#[test]
fn bluetooth_switched_off_during_the_soak_makes_the_trial_invalid() {
    let (adb, phone, dir) = setup(&["--auth", "accept"]);
    let lab = lab_for(&adb, &phone, r#""software""#);
    let rb = runbook(&lab, 1, "");
    let run = spawn_run(&lab, &rb);
    // As soon as the first app runs, someone switches Bluetooth off.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while state(&root(&dir))["launches"].as_array().is_none_or(|l| l.is_empty()) {
        assert!(std::time::Instant::now() < deadline, "nothing was launched");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    edit_state(&root(&dir), |v| v["settings"]["global"]["bluetooth_on"] = "0".into());
    let out = run.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "the retry is valid: {stdout}");
    let reasons: Vec<String> = lab.sql("SELECT reasons FROM attempts WHERE status = 'invalid'");
    assert_eq!(reasons.len(), 1, "{stdout}");
    assert!(reasons[0].contains("bluetooth off after the soak, expected on"), "{reasons:?}");
    assert_eq!(lab.sql::<i64>("SELECT COUNT(*) FROM attempts WHERE status = 'valid'"), [4]);
}

#[test_needs::needs(adb, sshd)]
#[test]
fn a_phone_on_a_lab_host_is_driven_through_that_hosts_adb_over_ssh() {
    let s = common::sshd::start();
    let (adb, phone, _dir) = setup(&["--auth", "accept"]);
    // The same phone, but on SSH host `shelf-1`: adb runs there, and the APKs are staged
    // into that host's cache first.
    let lab = TempLab::from_text(&format!(
        "[lab]\nname = \"android-ssh\"\n{}\n\n{}\n\
         [[device]]\nname = \"pixel-1\"\nhost = \"shelf-1\"\nplatform = \"android\"\nmodel = \"Pixel 5\"\ntether = \"software\"\n\
         [device.android]\nserial = \"{}\"\nadb_server = \"127.0.0.1:{}\"\n",
        endpoint_keys(),
        s.host_table(""),
        phone.serial,
        adb.port
    ));
    let rb = runbook(&lab, 1, "");
    let before = s.accepted_logins();
    let out = lab.cmd(&["run", rb.to_str().unwrap()]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(lab.sql::<i64>("SELECT COUNT(*) FROM attempts WHERE status = 'valid'"), [4]);
    assert!(s.accepted_logins() > before, "adb ran through the SSH host");
    // Both APKs went to the host's build cache (content-addressed), once each.
    let cached = std::fs::read_dir(s.dir.path().join("cache")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(cached, 2);
}

#[test_needs::needs(adb)]
#[test]
fn a_phone_left_unplugged_in_software_by_a_crashed_lab_is_reset_first() {
    let (adb, phone, _dir) = setup(&["--auth", "accept"]);
    // What a lab killed mid-soak leaves behind: BatteryService frozen, "unplugged".
    assert!(adb.sh(&phone, "dumpsys battery unplug; dumpsys battery").contains("USB powered: false"));
    let lab = lab_for(&adb, &phone, r#""none""#);
    let rb = runbook(&lab, 1, "").with_extension("toml");
    let text = std::fs::read_to_string(&rb).unwrap().replace("untethered = true", "untethered = false");
    std::fs::write(&rb, text).unwrap();
    let out = lab.cmd(&["run", rb.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    // The first reading already saw the real charger again.
    let first: Vec<String> = lab.sql("SELECT state_before FROM attempts ORDER BY started_at LIMIT 1");
    let v: serde_json::Value = serde_json::from_str(&first[0]).unwrap();
    assert_eq!(v["external_power"]["value"], true, "{v}");
    assert!(adb.sh(&phone, "dumpsys battery").contains("USB powered: true"));
}

/// A lab whose phone hangs off a hub port switched by a stand-in `uhubctl` on PATH:
/// `cuts` decides whether switching really takes the phone's charger away.
fn hub_lab(adb: &Adb, phone: &Phone, phone_root: &std::path::Path, cuts: bool) -> (TempLab, Hubs) {
    let lab = lab_for(adb, phone, r#"{ uhubctl = { location = "1-1", port = 4 } }"#);
    let port = if cuts {
        // The charger goes at the moment the port does (battery and history follow).
        let hook = json!([common::standin("adb-phone"), "power", phone_root.display().to_string()]);
        json!({ "device": phone_on_hub(json!({ "on_vbus": hook })) })
    } else {
        json!({ "vbus_stays": true, "device": phone_on_hub(json!({})) })
    };
    (lab, Hubs::new(&usb2_hub("1-1", vec![json!({}), json!({}), json!({}), port])))
}

/// The stand-in adb phone as the hub describes it (its adb serial is `IP:PORT`, so the lab
/// knows no USB serial and takes what is plugged in for it), with `hooks`.
fn phone_on_hub(hooks: Value) -> Value {
    let mut d = json!({ "id": "18d1:4ee1", "vendor": "Google", "product": "Pixel 5", "serial": "0A1B2C3D" });
    d.as_object_mut().unwrap().extend(hooks.as_object().unwrap().clone());
    d
}

#[test_needs::needs(adb)]
#[test]
fn a_hub_port_that_cuts_power_gives_valid_trials_and_one_that_does_not_is_caught() {
    let (adb, phone, dir) = setup(&["--auth", "accept"]);
    let (lab, hubs) = hub_lab(&adb, &phone, &root(&dir), true);
    let rb = runbook(&lab, 1, "");
    let out = lab.cmd(&["run", rb.to_str().unwrap()]).envs(hubs.env()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(lab.sql::<i64>("SELECT COUNT(*) FROM attempts WHERE status = 'valid'"), [4]);
    assert_eq!(state(&root(&dir))["battery"]["power"], "usb", "the port is on again");
    assert!(hubs.powered("1-1", 4));

    // A port that stays on: the phone still charges after untether.
    let (lab, hubs) = hub_lab(&adb, &phone, &root(&dir), false);
    let rb = runbook(&lab, 1, "");
    let out = lab.cmd(&["run", rb.to_str().unwrap()]).envs(hubs.env()).output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stdout));
    let reasons: Vec<String> = lab.sql("SELECT reasons FROM attempts");
    assert!(!reasons.is_empty());
    assert!(reasons.iter().all(|r| r.contains("still charging after untether (uhubctl 1-1:4)")), "{reasons:?}");
}

/// A runbook of one trial (the control build, default config) soaking `duration`: long
/// enough for the battery history to show the soak beyond its trimmed edges.
fn one_trial(lab: &TempLab, duration: &str) -> std::path::PathBuf {
    let rb = runbook(lab, 1, "");
    let text = std::fs::read_to_string(&rb).unwrap();
    // No retries: one attempt tells the whole story.
    let text = text.replace("duration = \"3s\"", &format!("duration = \"{duration}\"\nretries = 0"));
    let cut = text.find("[builds.envoy]").unwrap();
    let rest = &text[text.find("[configs.default]").unwrap()..];
    let rest = rest
        .replace("[configs.dns-1m]\n[configs.dns-1m.android]\nextras = { dns_refresh_s = 60, trace = false }\n\n", "");
    std::fs::write(&rb, format!("{}{rest}", &text[..cut])).unwrap();
    rb
}

/// The one attempt's (status, untether mode, labels, reasons).
fn the_attempt(lab: &TempLab) -> (String, String, String, String) {
    let rows: Vec<String> =
        lab.sql("SELECT status || '|' || COALESCE(untether, '') || '|' || labels || '|' || reasons FROM attempts");
    assert_eq!(rows.len(), 1, "{rows:?}");
    let p: Vec<&str> = rows[0].splitn(4, '|').collect();
    (p[0].into(), p[1].into(), p[2].into(), p[3].into())
}

#[test_needs::needs(adb)]
#[test]
fn a_phone_unplugged_in_software_charges_on_and_is_labelled_and_reported_apart() {
    let (adb, phone, _dir) = setup(&["--auth", "accept"]);
    let lab = lab_for(&adb, &phone, r#""software""#);
    let rb = one_trial(&lab, "14s");
    let out = lab.cmd(&["run", rb.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let (status, mode, labels, _) = the_attempt(&lab);
    assert_eq!((status.as_str(), mode.as_str()), ("valid", "soft-untethered"));
    // Its own battery history says it charged (status charging, "unplugged").
    assert!(labels.contains("during the soak (soft-untethered: USB power stays on)"), "{labels}");
    let campaign = &lab.campaigns()[0];
    let out = lab.cmd(&["report", campaign, "--format", "json"]).output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let models: Vec<&str> = report["models"].as_array().unwrap().iter().map(|m| m["model"].as_str().unwrap()).collect();
    assert_eq!(models, ["Pixel 5 (soft-untethered)"]);
    let said = report["warnings"].to_string();
    assert!(said.contains("never pooled with power-cut trials"), "{said}");
}

#[test_needs::needs(adb)]
#[test]
fn a_userdebug_phone_has_its_charging_suspended_for_the_soak_and_given_back() {
    let (adb, phone, dir) = setup(&["--auth", "accept"]);
    edit_state(&root(&dir), |v| v["props"]["ro.build.type"] = "userdebug".into());
    let lab = lab_for(&adb, &phone, r#""software""#);
    let rb = one_trial(&lab, "14s");
    let out = lab.cmd(&["run", rb.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let (status, mode, labels, _) = the_attempt(&lab);
    assert_eq!((status.as_str(), mode.as_str(), labels.as_str()), ("valid", "charging-suspended", "[]"));
    let s = state(&root(&dir));
    assert_eq!(s["battery"]["input_suspended"], false, "charging given back");
    assert_eq!(s["props"]["power.battery_input.suspended"], "false");
    assert!(s["battery"]["frozen"].is_null(), "the battery service reset");
}

#[test_needs::needs(adb)]
#[test]
fn a_power_cut_phone_whose_own_history_shows_charging_is_invalid() {
    let (adb, mut phone, dir) = setup(&["--auth", "accept"]);
    // A hub that drops the phone off the bus but keeps VBUS on: the phone is gone for the
    // soak (the stand-in is stopped) and charges all along (its charger stays).
    let lab = lab_for(&adb, &phone, r#"{ uhubctl = { location = "1-1", port = 4 } }"#);
    let gone = format!("[ \"$1\" = detached ] && kill {} || true", phone.child.id());
    let device = phone_on_hub(json!({ "on_bus": ["sh", "-c", gone, "hook"] }));
    let hubs = Hubs::new(&usb2_hub(
        "1-1",
        vec![json!({}), json!({}), json!({}), json!({ "vbus_stays": true, "device": device })],
    ));
    let calls = hubs.log.clone();
    let rb = one_trial(&lab, "14s");
    let text = std::fs::read_to_string(&rb).unwrap() + "[timeouts]\nreconnect = \"2m\"\n";
    std::fs::write(&rb, text).unwrap();
    let run = spawn_run_with(&lab, &rb, &hubs.env());
    wait_exit(&mut phone);
    // Port back on: the phone comes back (the same phone: its folder and port).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !std::fs::read_to_string(&calls).unwrap_or_default().contains("-a on") {
        assert!(std::time::Instant::now() < deadline, "never re-tethered");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _back = Phone::start(&root(&dir), phone.port, &["--auth", "accept"]);
    let out = run.wait_with_output().unwrap();
    let said = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(4), "{said}");
    assert!(said.contains("off USB"), "the phone's leaving was expected: {said}");
    let (status, mode, _, reasons) = the_attempt(&lab);
    assert_eq!((status.as_str(), mode.as_str()), ("invalid", "power-cut"));
    assert!(reasons.contains("the phone charged during the soak — does hub 1-1 port 4 really cut VBUS?"), "{reasons}");
}

#[test_needs::needs(adb)]
#[test]
fn a_legacy_phone_without_shell_v2_runs_a_whole_campaign() {
    let (adb, phone, _dir) = setup(&["--auth", "accept", "--legacy"]);
    assert!(!adb.run(&["-s", &phone.serial, "features"]).out.contains("shell_v2"));
    let lab = lab_for(&adb, &phone, r#""software""#);
    let rb = runbook(&lab, 1, "");
    let out = lab.cmd(&["run", rb.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(lab.sql::<i64>("SELECT COUNT(*) FROM attempts WHERE status = 'valid'"), [4]);
    let metrics: Vec<String> = lab.sql("SELECT DISTINCT metric FROM measurements ORDER BY metric");
    assert!(metrics.iter().any(|m| m == "cpu_pct") && metrics.iter().any(|m| m == "battery_drop_pct"), "{metrics:?}");
}
