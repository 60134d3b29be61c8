//! `[device.android] perfetto = true` through the real binary and Debian's real adb against
//! the stand-in phone (standins/adb-phone): the phone records a Perfetto `android.power`
//! trace over each trial, the lab reads it back, deletes it and decodes it into the
//! trial's rail energies and battery curve. Expected values come from decoding the
//! fixture the stand-in's sessions are made of with the library, never from constants.

use crate::common;

use std::path::{Path, PathBuf};

use common::TempLab;
use common::adb::*;
use common::uhubctl::{Hubs, usb2_hub};
use lab::collect::android::perfetto::PowerTrace;
use lab::collect::metrics_map;
use lab::measure::Series;
use serde_json::json;

/// The real trace whose power-rail packets every stand-in session records.
const RAILS: &[u8] = include_bytes!("../fixtures/devices/android/power_rails_session_uuid_perfetto.pftrace");

/// (metric, value) of the rails the decoder finds in the fixture, sorted.
fn expected_rails() -> Vec<(String, f64)> {
    let trace = PowerTrace::parse(RAILS).unwrap();
    let mut rails: Vec<(String, f64)> = metrics_map::perfetto(&trace)
        .into_iter()
        .filter(|m| m.metric.starts_with(lab::measure::RAIL_ENERGY_PREFIX))
        .map(|m| (m.metric, m.value))
        .collect();
    rails.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(!rails.is_empty(), "the fixture has rails");
    rails
}

fn lab_for(adb: &Adb, phone: &Phone) -> TempLab {
    lab_with_tether(adb, phone, r#""software""#)
}

/// The lab with the phone's tether given as its TOML value.
fn lab_with_tether(adb: &Adb, phone: &Phone, tether: &str) -> TempLab {
    android_lab("android-perfetto", adb, phone, tether, "perfetto = true\n")
}

/// One build, `repeats` trials of 2 s; `extra` is appended.
fn runbook(lab: &TempLab, repeats: u32, extra: &str) -> PathBuf {
    let dir = lab.dir.path();
    std::fs::write(dir.join("control.apk"), apk("com.example.control", None, 20_000)).unwrap();
    let path = dir.join("perfetto.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"perfetto\"\nduration = \"2s\"\nrepeats = {repeats}\ndevices = [\"pixel-1\"]\n\n\
             [builds.control]\nbaseline = true\n[builds.control.android]\napk = \"control.apk\"\n\
             package = \"com.example.control\"\nactivity = \".MainActivity\"\n{extra}"
        ),
    )
    .unwrap();
    path
}

fn run(lab: &TempLab, rb: &Path) -> (Option<i32>, String) {
    let out = lab.cmd(&["run", "--verbose", rb.to_str().unwrap()]).output().unwrap();
    let said = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code(), said)
}

/// What the phone keeps of the lab's sessions: files in the two perfetto folders, and
/// perfetto processes.
fn left_on_phone(dir: &tempfile::TempDir) -> (Vec<String>, usize) {
    let fs = root(dir).join("fs/data/misc");
    let mut files = Vec::new();
    for sub in ["perfetto-traces", "perfetto-configs"] {
        for e in std::fs::read_dir(fs.join(sub)).unwrap() {
            files.push(format!("{sub}/{}", e.unwrap().file_name().to_string_lossy()));
        }
    }
    let state = state(&root(dir));
    let sessions = state["processes"].as_object().unwrap().values().filter(|p| p["kind"] == "perfetto").count();
    (files, sessions)
}

/// Per valid attempt: its artifact folder, its rail measurements (sorted) and its stored
/// battery series.
struct Attempt {
    dir: PathBuf,
    rails: Vec<(String, f64)>,
    battery: Vec<(f64, f64)>,
    sources: Vec<(String, String)>,
}

fn valid_attempts(lab: &TempLab) -> Vec<Attempt> {
    let conn = rusqlite::Connection::open(lab.store()).unwrap();
    let mut st = conn
        .prepare(
            "SELECT campaign, trial_idx, attempt, artifact_dir FROM attempts WHERE status = 'valid' ORDER BY trial_idx",
        )
        .unwrap();
    let rows: Vec<(String, i64, i64, String)> =
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))).unwrap().map(Result::unwrap).collect();
    rows.into_iter()
        .map(|(c, t, a, dir)| {
            let key = rusqlite::params![c, t, a];
            let mut m = conn
                .prepare(
                    "SELECT metric, value, source FROM measurements WHERE campaign = ?1 AND trial_idx = ?2 AND attempt = ?3 \
                     ORDER BY metric",
                )
                .unwrap();
            let all: Vec<(String, f64, String)> =
                m.query_map(key, |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(Result::unwrap).collect();
            let blobs: Vec<Vec<u8>> = conn
                .prepare(
                    "SELECT points FROM series WHERE campaign = ?1 AND trial_idx = ?2 AND attempt = ?3 \
                     AND name = 'battery_pct'",
                )
                .unwrap()
                .query_map(key, |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            assert_eq!(blobs.len(), 1, "one battery series for attempt {t}/{a}");
            let dir = if Path::new(&dir).is_absolute() { PathBuf::from(&dir) } else { lab.artifacts().join(&dir) };
            Attempt {
                dir,
                rails: all
                    .iter()
                    .filter(|(metric, ..)| metric.starts_with(lab::measure::RAIL_ENERGY_PREFIX))
                    .map(|(metric, v, _)| (metric.clone(), *v))
                    .collect(),
                battery: Series::points_from_blob(&blobs[0]).unwrap(),
                sources: all.into_iter().map(|(metric, _, source)| (metric, source)).collect(),
            }
        })
        .collect()
}

/// A campaign of two trials on a phone of SDK level `sdk` (Android 13: the config goes in
/// a file under /data/misc/perfetto-configs; Android 11: on stdin, as the stand-in then
/// refuses config files the way SELinux does).
fn campaign_on(sdk: &str) {
    let (adb, phone, dir) = setup(&["--auth", "accept"]);
    edit_state(&root(&dir), |v| v["props"]["ro.build.version.sdk"] = sdk.into());
    let lab = lab_for(&adb, &phone);
    let rails = expected_rails();
    // Rail metrics are named in the runbook by their prefix rule, and gate.
    let names: Vec<String> = rails.iter().map(|(m, _)| format!("{m:?}")).collect();
    let extra = format!(
        "[metrics]\ncollect = [\"battery_drop_pct\", \"charge_used_mah\", {}]\n[statistics]\ngating = [{}]\n",
        names.join(", "),
        names[0]
    );
    let rb = runbook(&lab, 2, &extra);
    let (code, said) = run(&lab, &rb);
    assert_eq!(code, Some(0), "{said}");
    let attempts = valid_attempts(&lab);
    assert_eq!(attempts.len(), 2, "{said}");
    for a in &attempts {
        assert_eq!(a.rails, rails, "{}", a.dir.display());
        // The pulled trace is the attempt's artifact, and decodes to what was stored.
        let bytes = std::fs::read(a.dir.join("power.pftrace")).unwrap();
        let trace = PowerTrace::parse(&bytes).unwrap();
        let curve = trace.battery_pct_series();
        assert!(curve.points.len() >= 2, "{:?}", trace.battery);
        assert_eq!(a.battery.len(), curve.points.len());
        // Stored since launch: the trace's own times moved by when the session started.
        let offset = a.battery[0].0 - curve.points[0].0;
        assert!((0.0..30.0).contains(&offset), "session started {offset} s after launch");
        for (stored, decoded) in a.battery.iter().zip(&curve.points) {
            assert!((stored.0 - offset - decoded.0).abs() < 1e-9 && stored.1 == decoded.1, "{stored:?} {decoded:?}");
        }
        assert!(a.dir.join("perfetto-config.pbtxt").exists());
        // The fuel gauge's reading through dumpsys keeps the measured charge and level drop.
        for metric in ["charge_used_mah", "battery_drop_pct"] {
            let sources: Vec<&str> = a.sources.iter().filter(|(m, _)| m == metric).map(|(_, s)| s.as_str()).collect();
            assert_eq!(sources.len(), 1, "{metric}: {sources:?}");
            assert!(sources[0].starts_with("dumpsys battery"), "{metric} came from {}", sources[0]);
        }
    }
    assert_eq!(left_on_phone(&dir), (Vec::new(), 0), "nothing is left tracing or stored on the phone");
}

#[test_needs::needs(adb)]
#[test]
fn on_android_13_the_trace_gives_rail_energy_and_the_battery_curve_and_leaves_nothing() {
    campaign_on("33");
}

#[test_needs::needs(adb)]
#[test]
fn on_android_11_the_config_goes_on_stdin_and_the_trace_is_the_same() {
    campaign_on("30");
}

#[test_needs::needs(adb)]
#[test]
fn a_phone_older_than_android_10_is_refused_before_any_trial() {
    let (adb, phone, dir) = setup(&["--auth", "accept"]);
    edit_state(&root(&dir), |v| v["props"]["ro.build.version.sdk"] = "28".into());
    let lab = lab_for(&adb, &phone);
    let rb = runbook(&lab, 1, "");
    let (code, said) = run(&lab, &rb);
    assert_eq!(code, Some(3), "{said}");
    assert!(said.contains("the phone runs Android SDK 28") && said.contains("set `perfetto = false`"), "{said}");
    assert!(lab.campaigns().is_empty(), "nothing was recorded");
    assert!(state(&root(&dir))["launches"].as_array().unwrap().is_empty(), "nothing was launched");
}

#[test_needs::needs(adb)]
#[test]
fn a_trace_that_does_not_decode_fails_the_attempt_with_the_byte_and_the_retry_is_valid() {
    let (adb, phone, dir) = setup(&["--auth", "accept"]);
    let lab = lab_for(&adb, &phone);
    let rb = runbook(&lab, 1, "");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_lab"))
        .current_dir(common::root())
        .arg("--lab")
        .arg(&lab.lab)
        .args(["run", "--verbose"])
        .arg(&rb)
        .env_remove("LAB_CONFIG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // As soon as the first session's file holds its first sample, it is spoiled: a packet
    // whose length runs past the end of the file. (Not while it is still empty: the
    // phone's own first write, between its create and its write, would undo the spoiling.)
    let traces = root(&dir).join("fs/data/misc/perfetto-traces");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let spoiled = loop {
        let file = std::fs::read_dir(&traces)
            .unwrap()
            .next()
            .map(|e| e.unwrap().path())
            .filter(|f| std::fs::metadata(f).is_ok_and(|m| m.len() > 0));
        if let Some(f) = file {
            std::fs::write(&f, [0x0a, 0xff, 0xff, 0x03]).unwrap();
            break f;
        }
        assert!(std::time::Instant::now() < deadline, "no session started");
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let out = child.wait_with_output().unwrap();
    let said = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "the retry is valid: {said}");
    let reasons: Vec<String> = lab.sql("SELECT reasons FROM attempts WHERE status = 'invalid'");
    assert_eq!(reasons.len(), 1, "{said}");
    let r = &reasons[0];
    assert!(
        r.contains("decoding the Perfetto trace failed: power.pftrace (kept in the attempt's folder): byte "),
        "{r}"
    );
    // The spoiled file is kept with the invalid attempt; the phone keeps none.
    let dirs: Vec<String> = lab.sql("SELECT artifact_dir FROM attempts WHERE status = 'invalid'");
    let kept = std::fs::read(lab.artifacts().join(&dirs[0]).join("power.pftrace")).unwrap();
    assert!(kept.starts_with(&[0x0a, 0xff, 0xff, 0x03]), "{spoiled:?}");
    assert_eq!(valid_attempts(&lab).len(), 1);
    assert_eq!(left_on_phone(&dir), (Vec::new(), 0));
}

#[test_needs::needs(adb)]
#[test]
fn a_trial_that_ends_before_collect_stops_and_deletes_its_session() {
    let (adb, phone, dir) = setup(&["--auth", "accept"]);
    // A hub port that keeps VBUS: the phone charges on, every attempt ends at untether, after launch.
    let lab = lab_with_tether(&adb, &phone, r#"{ uhubctl = { location = "1-1", port = 4 } }"#);
    let hubs = Hubs::new(&usb2_hub("1-1", vec![json!({}), json!({}), json!({}), json!({ "vbus_stays": true })]));
    let rb = runbook(&lab, 1, "");
    let out = lab.cmd(&["run", rb.to_str().unwrap()]).envs(hubs.env()).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{said}");
    let reasons: Vec<String> = lab.sql("SELECT reasons FROM attempts");
    assert!(reasons.len() > 1 && reasons.iter().all(|r| r.contains("still charging after untether")), "{reasons:?}");
    // Every attempt had started a session; none is left running or on the phone.
    assert_eq!(state(&root(&dir))["launches"].as_array().unwrap().len(), reasons.len());
    assert_eq!(left_on_phone(&dir), (Vec::new(), 0));
}
